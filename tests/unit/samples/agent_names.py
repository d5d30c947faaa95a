"""The sample names the agent really exports, read from a live ``AgentMetrics`` exposition."""

from __future__ import annotations

import functools

from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.contract.wire import ScoreResult


@functools.cache
def agent_metric_names() -> frozenset[str]:
    """Every sample name (with ``_total``, ``_bucket``, ... suffixes) after each metric was touched."""
    m = AgentMetrics(process_collectors=False, clock=lambda: 1000.0)
    m.set_scores("c1", "s", [ScoreResult(metric={"pod": "p"}, score=1.0)])
    m.count_cycle("s", success=True)
    m.add_stage_seconds("s", "fetch", 0.1, success=True)
    m.add_stage_seconds("s", "score", 0.1, success=True)
    m.add_stage_seconds("s", "write", 0.1, success=True)
    m.count_failure("s", "score", "ScorerTimeout")
    m.count_retry("s", "score")
    m.count_items("s", rejected=1, clamped=1)
    m.set_freshness("s", 990.0, 1090.0)
    names = set()
    for line in m.exposition().decode().splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return frozenset(names)
