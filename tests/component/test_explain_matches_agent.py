"""explain's cycle and a real agent worker, on the same summary, arrive at the same AddOnPlacementScore.

explain composes the agent's stage functions itself (one attempt, nothing published); this test is
what keeps that composition honest as the worker grows: each summary is run by a Supervisor (the
agent's own workers, publishing into memory) and by ``run_cycle``, and the items must be equal.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.memory import MemoryPublisher, MemorySecrets
from agent.supervisor import Supervisor
from ctl.explain_cycle import FileTokens, run_cycle
from tests.component.conftest import GAUGE, PromFixture
from tests.component.harness import ScorerProcess, published, summary

pytestmark = [pytest.mark.component, pytest.mark.anyio]


def cases(prometheus: PromFixture, scorer: ScorerProcess) -> dict[str, dict[str, Any]]:
    endpoint = prometheus.query_range_url
    return {
        # Two named sources, ${cluster} in a query, normalisation and two item-name formats.
        "multi": {
            "sources": [
                {
                    "name": "a",
                    "endpoint": endpoint,
                    "queries": [f'{GAUGE}{{namespace="team-a"}}'],
                    "range": 600,
                    "step": 60,
                },
                {
                    "name": "b",
                    "endpoint": endpoint,
                    "queries": [f'{GAUGE}{{pod!="${{cluster}}"}}'],
                    "range": 600,
                    "step": 60,
                },
            ],
            "sourceType": "Prometheus",
            "scoringEndpoint": scorer.url("/mean/scoring"),
            "scoreNormalization": {"min": 0, "max": 2},
            "scoreDimensionFormats": ["${pod}", "${cluster}-${namespace}"],
        },
        # Clamping, rounding half away from zero and a three-way name collision.
        "outofrange": {"scoringEndpoint": scorer.url("/outofrange/scoring")},
        # No series and a stated default: the scorer is not called.
        "nodata": {
            "sourceType": "Prometheus",
            "sourceEndpoint": endpoint,
            "sourceQuery": f'{GAUGE}{{pod="none"}}',
            "sourceRange": 600,
            "sourceStep": 60,
            "scoringEndpoint": scorer.url("/status/500/scoring"),
            "missingDataScore": -20,
        },
    }


async def test_explain_and_the_agent_write_the_same_items(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    secrets: MemorySecrets,
    prometheus: PromFixture,
    scorer: ScorerProcess,
) -> None:
    summaries = [
        summary(name, fields.pop("scoringEndpoint"), **fields)
        for name, fields in cases(prometheus, scorer).items()
    ]
    report = await supervisor.apply(summaries)
    assert sorted(report.started) == sorted(s.score_name for s in summaries)
    for s in summaries:
        [agent] = (await published(publisher, s.score_name))[:1]
        trace = await run_cycle(s, "cluster1", FileTokens({}))
        assert trace.failure is None, trace.failure
        assert agent.items is not None and agent.condition.status == "True", agent.condition
        assert trace.published == [(i.name, i.value) for i in agent.items], s.score_name
        assert trace.published, s.score_name
