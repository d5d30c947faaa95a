"""Score stabilization in the running agent: a real scorer answering over loopback, cycles 1 s apart.

The scorer's answer is switched while the agent runs; what the agent publishes shows the rule: a
rise waits for its window, a fall goes out in the next cycle, a change inside the tolerance never.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher, StoredScore
from dynamic_scoring.agent.ports import CONDITION_TYPE, CycleCondition, PublishRequest, ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from tests.component.harness import ScorerProcess, eventually, published, summary

pytestmark = pytest.mark.anyio


def value(request: PublishRequest) -> int:
    (item,) = request.items or []
    return item.value


async def test_a_rise_waits_for_its_window_a_fall_is_published_at_once_and_noise_not_at_all(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex

    def answer(score: float) -> None:
        scorer.respond(key, {"results": [{"metric": {}, "score": score}]})

    answer(50)
    stabilization = {"tolerance": 3, "riseWindowSeconds": 3, "fallWindowSeconds": 0}
    await supervisor.apply(
        [
            summary(
                "steady", scorer.url(f"/fixed/{key}/scoring"), scoringInterval=1, stabilization=stabilization
            )
        ]
    )
    assert (
        value((await published(publisher, "steady"))[0]) == 50
    )  # the first value: nothing to hold it against

    answer(80)
    seen = len(publisher.requests_for("steady"))
    rise = await eventually(
        lambda: next((r for r in publisher.requests_for("steady")[seen:] if value(r) == 80), None),
        what="the rise to 80 published",
        timeout=20,
    )
    during = publisher.requests_for("steady")[seen : publisher.requests_for("steady").index(rise)]
    held = [r for r in during if "held by stabilization" in r.condition.message]
    # 3 s of window at one cycle a second: at least two cycles saw 80 and still published 50
    assert len(held) >= 2, [r.condition.message for r in during]
    assert all(value(r) == 50 for r in during)
    assert "rising, held" in held[-1].condition.message
    assert (held[-1].condition.status, held[-1].condition.reason) == ("True", "Stabilized")
    answer(20)
    seen = publisher.requests_for("steady").index(rise) + 1
    fall = await eventually(
        lambda: next((r for r in publisher.requests_for("steady")[seen:] if value(r) != 80), None),
        what="the fall published",
        timeout=20,
    )
    assert value(fall) == 20  # the first cycle that saw 20 published it
    assert "held by stabilization" not in fall.condition.message and fall.condition.reason == "Scored"

    answer(22)  # inside the tolerance of 3: never published
    seen = len(publisher.requests_for("steady"))
    later = await published(publisher, "steady", seen + 3)
    assert [value(r) for r in later[seen:]] == [20, 20, 20]
    assert "within tolerance (raw 22, published 20)" in later[-1].condition.message
    registry = supervisor.metrics.registry
    assert (
        registry.get_sample_value(
            "dynamic_scoring_unstabilized_score", {"score_name": "steady", "item": "steady"}
        )
        == 22
    )
    trend = {"score_name": "steady", "trend": "within-tolerance"}
    assert registry.get_sample_value("dynamic_scoring_stabilized_items", trend) == 1


async def test_a_restarted_agent_holds_a_rise_against_the_score_on_the_hub(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    """The hub shows 40 from before the restart; the scorer now answers 90: the rise is held."""
    key = uuid.uuid4().hex
    scorer.respond(key, {"results": [{"metric": {}, "score": 90}]})
    condition = CycleCondition(CONDITION_TYPE, "True", "Scored", "from before the restart")
    valid = datetime.now(UTC) + timedelta(minutes=5)
    publisher.scores["restarted"] = StoredScore([ScoreItem("restarted", 40)], valid, condition)
    publisher.scores["expired"] = StoredScore([ScoreItem("expired", 40)], datetime.now(UTC), condition)
    stabilization = {"riseWindowSeconds": 3}
    url = scorer.url(f"/fixed/{key}/scoring")
    await supervisor.apply(
        [
            summary("restarted", url, scoringInterval=1, stabilization=stabilization),
            summary("expired", url, scoringInterval=1, stabilization=stabilization),
        ]
    )
    first = (await published(publisher, "restarted"))[0]
    assert value(first) == 40 and "rising, held 0 of 3 s" in first.condition.message
    await eventually(
        lambda: any(value(r) == 90 for r in publisher.requests_for("restarted")), what="the rise after 3 s"
    )
    held = [r for r in publisher.requests_for("restarted") if value(r) == 40]
    assert len(held) >= 2  # cycles 1 s apart: the first, and at least one more inside the window
    # an expired score on the hub is no starting point: the new value goes out at once
    assert value((await published(publisher, "expired"))[0]) == 90
