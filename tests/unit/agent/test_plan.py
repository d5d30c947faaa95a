from __future__ import annotations

import pytest

from agent.plan import InvalidSummary, plan_summary
from agent.settings import AgentSettings
from dynamic_scoring.wire import ScorerSummary

pytestmark = pytest.mark.unit


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
        ({"scoringInterval": -5}, "scoringInterval"),
        ({"scoringEndpoint": "scorer:8000/scoring"}, "scoringEndpoint"),
        ({"scoringEndpoint": "ftp://x/y"}, "scoringEndpoint"),
        ({"sourceEndpoint": ""}, "sourceEndpoint"),
        ({"sourceQuery": " ; "}, "sourceQuery"),
        ({"sourceStep": 0}, "sourceStep"),
        ({"sourceRange": -1}, "sourceRange"),
        ({"sourceType": "OpenTelemetry"}, "sourceType"),
        ({"scoreDestination": "ConfigMap"}, "scoreDestination"),
    ],
)
def test_rejections_name_the_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSummary, match=f"^{field}:"):
        plan_summary(make(**fields))
