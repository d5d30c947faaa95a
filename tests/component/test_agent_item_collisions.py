"""Results that render to one item name fail the cycle with ``ItemNameCollision``; none is dropped silently.

A real scoring API on loopback answers per-node results; the summary keeps the default format
``${scoreName}``, so every result names the same item.  The agent must neither publish one of them
as the cluster's score nor say ``Scored``: the condition names the format and the labels, the last
good scores stay until they expire, the failure is counted and logged with the scorer's name.
"""

from __future__ import annotations

import logging
import uuid

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from tests.component.harness import ScorerProcess, eventually, published, summary

pytestmark = pytest.mark.anyio

PER_NODE = {
    "results": [
        {"metric": {"node": "n1", "instance": "10.0.0.1:9100"}, "score": 80},
        {"metric": {"node": "n2", "instance": "10.0.0.2:9100"}, "score": -20},
    ]
}


def failures(sup: Supervisor, score_name: str) -> float | None:
    labels = {"score_name": score_name, "stage": "score", "reason": "ItemNameCollision"}
    value: float | None = sup.metrics.registry.get_sample_value("dynamic_scoring_failures_total", labels)
    return value


async def test_colliding_results_fail_the_cycle_naming_format_and_labels(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    scorer: ScorerProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dynamic_scoring.agent.worker")
    key = uuid.uuid4().hex
    scorer.respond(key, PER_NODE)
    await supervisor.apply([summary("cpu_headroom", scorer.url(f"/fixed/{key}/scoring"))])

    first = (await published(publisher, "cpu_headroom"))[0]
    assert first.items is None, "one of the colliding results was published"
    assert (first.condition.status, first.condition.reason) == ("False", "ItemNameCollision")
    assert first.condition.message == (
        "score failed for scorer cpu_headroom-scorer: 2 results render to item "
        '"cpu_headroom" under format "${scoreName}": they differ in node=n1, node=n2; '
        "instance=10.0.0.1:9100, instance=10.0.0.2:9100 (labels the format does not use); "
        'set scoreDimensionFormat, e.g. "${scoreName}-${node}"'
    )
    assert failures(supervisor, "cpu_headroom") == 1
    line = next(r.getMessage() for r in caplog.records if "ItemNameCollision" in r.getMessage())
    assert "scorer=cpu_headroom-scorer score=cpu_headroom" in line and "node=n1, node=n2" in line


async def test_the_last_good_scores_stay_and_a_separating_format_publishes_every_result(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    scorer.respond(key, {"results": [{"metric": {"node": "n1"}, "score": 80}]})
    url = scorer.url(f"/fixed/{key}/scoring")
    await supervisor.apply([summary("node_free", url, scoringInterval=1)])
    good = (await published(publisher, "node_free"))[0]
    assert good.items == [ScoreItem("node_free", 80)] and good.condition.reason == "Scored"

    scorer.respond(key, PER_NODE)  # a second node appears: both results name "node_free"

    def collided() -> bool:
        return any(r.condition.reason == "ItemNameCollision" for r in publisher.requests_for("node_free"))

    await eventually(collided, what="a cycle that meets the collision")
    bad = next(r for r in publisher.requests_for("node_free") if r.condition.reason == "ItemNameCollision")
    assert bad.items is None and bad.valid_until == good.valid_until
    assert publisher.scores["node-free"].items == [ScoreItem("node_free", 80)]  # kept, not overwritten

    await supervisor.apply(
        [summary("node_free", url, scoringInterval=1, scoreDimensionFormat="${scoreName}-${node}")]
    )

    def separated() -> bool:
        return publisher.scores["node-free"].items == [
            ScoreItem("node_free-n1", 80),
            ScoreItem("node_free-n2", -20),
        ]

    await eventually(separated, what="both nodes published under the new format")
    assert publisher.scores["node-free"].condition.reason == "Scored"


async def test_without_a_destination_nothing_is_named_so_nothing_collides(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    scorer.respond(key, PER_NODE)
    await supervisor.apply(
        [summary("metrics_only", scorer.url(f"/fixed/{key}/scoring"), scoreDestination="None")]
    )

    def scored() -> bool:
        labels = {"score_name": "metrics_only", "status": "success"}
        return bool(supervisor.metrics.registry.get_sample_value("dynamic_scoring_requests_total", labels))

    await eventually(scored, what="a successful cycle without a destination")
    assert failures(supervisor, "metrics_only") is None
    assert publisher.requests_for("metrics_only") == []
