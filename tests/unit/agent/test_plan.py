from __future__ import annotations

import pytest

from dynamic_scoring.agent.plan import InvalidSummary, plan_summaries, plan_summary
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.contract.wire import ScorerSummary


def make(**fields: object) -> ScorerSummary:
    data: dict[str, object] = {
        "scoreName": "s",
        "scoringEndpoint": "http://scorer:8000/scoring",
        "scoringInterval": 30,
        "sourceType": "Prometheus",
        "sourceEndpoint": "http://prom:9090/api/v1/query_range",
        "sourceQuery": "up; rate(x[1m])",
        "sourceStep": 60,
        "sourceRange": 3600,
    }
    data.update(fields)
    return ScorerSummary.model_validate(data)


def test_derived_plan() -> None:
    plan = plan_summary(make(scoreDestination="AddOnPlacementScore", timeoutSeconds=120))
    assert plan.queries == ("up", "rate(x[1m])")
    assert plan.publish and plan.aps_name == "s" and plan.dimension_format == "${scoreName}"
    assert plan.timeout_seconds == 30  # never longer than the interval
    assert plan_summary(make(), AgentSettings(default_timeout_seconds=5)).timeout_seconds == 5
    assert plan_summary(make(sourceType="None", sourceQuery="")).queries == ()
    assert not plan_summary(make(scoreDestination="none")).publish


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"scoreName": ""}, "scoreName"),
        ({"scoringInterval": 0}, "scoringInterval"),
        ({"scoringEndpoint": "scorer:8000/scoring"}, "scoringEndpoint"),
        ({"scoringEndpoint": "ftp://x/y"}, "scoringEndpoint"),
        ({"sourceEndpoint": ""}, "sourceEndpoint"),
        ({"sourceQuery": " ; "}, "sourceQuery"),
        ({"sourceStep": 0}, "sourceStep"),
        ({"sourceType": "Graphite"}, "sourceType"),  # OpenTelemetry is a source type now (issue 11)
        ({"scoreDestination": "ConfigMap"}, "scoreDestination"),
    ],
)
def test_rejections_name_the_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSummary, match=f"^{field}:"):
        plan_summary(make(**fields))


def test_names_that_collide_after_sanitising_are_rejected_like_duplicates() -> None:
    planned = plan_summaries(
        [
            make(scoreName="col_a", scoreDestination="AddOnPlacementScore"),
            make(scoreName="col-a", scoreDestination="AddOnPlacementScore"),
            make(scoreName="COL-A-", scoreDestination="AddOnPlacementScore"),
            make(scoreName="col_a", scoreDestination="AddOnPlacementScore"),
            make(scoreName="col:a", scoreDestination="None"),  # writes no APS: no collision
        ]
    )
    assert list(planned.plans) == ["col_a", "col:a"]
    reasons = {r.index: r.reason for r in planned.rejected}
    assert set(reasons) == {1, 2, 3}
    assert reasons[1] == (
        "scoreName 'col-a' becomes AddOnPlacementScore 'col-a', already written for scoreName 'col_a': "
        "the first entry is used"
    )
    assert "COL-A-" in reasons[2]
    assert reasons[3] == "duplicate scoreName 'col_a': the first entry is used"


def test_a_duplicate_of_an_invalid_entry_is_still_a_duplicate() -> None:
    planned = plan_summaries([make(scoreName="x", scoringInterval=0), make(scoreName="x")])
    assert planned.plans == {}
    assert [r.reason.split(":")[0] for r in planned.rejected] == [
        "scoringInterval",
        "duplicate scoreName 'x'",
    ]


def test_rejection_messages_do_not_repeat_the_url() -> None:
    with pytest.raises(InvalidSummary) as exc:
        plan_summary(make(scoringEndpoint="ftp://user:pw@host/x"))
    assert "pw" not in str(exc.value) and "scheme: ftp" in str(exc.value)
