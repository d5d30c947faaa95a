"""Agent reports (AddOnPlacementScore conditions) folded into a DynamicScorer's status per cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dynamic_scoring.addon.registry.reports import cluster_reports, reports_message

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def aps(
    status: str, reason: str, message: str, until: str = "2026-01-01T12:05:00Z", owner: str = "cpu"
) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {"dynamic-scoring.open-cluster-management.io/score-name": owner}},
        "status": {
            "validUntil": until,
            "conditions": [
                {
                    "type": "ScoresUpToDate",
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": "2026-01-01T11:00:00Z",
                }
            ],
        },
    }


def test_each_cluster_gets_its_agents_condition() -> None:
    reports = cluster_reports(
        "cpu",
        ["c2", "c1", "c3", "c4", "c5"],
        {
            "c1": aps("True", "Scored", "12 scores"),
            "c2": aps("False", "PrometheusQueryError", "query #1 `sum(` rejected by Prometheus (HTTP 400)"),
            "c4": aps("True", "Scored", "old", until="2026-01-01T11:59:00Z"),
            "c5": aps("True", "Scored", "x", owner="c_p_u"),
        },
        NOW,
    )
    got = [(r.cluster, r.status, r.reason) for r in reports]
    assert got == [
        ("c1", "True", "Scored"),
        ("c2", "False", "PrometheusQueryError"),
        ("c3", "Unknown", "NoReportYet"),
        ("c4", "False", "ScoresExpired"),
        ("c5", "Unknown", "NotOurs"),
    ]
    assert reports[1].to_status() == {
        "clusterName": "c2",
        "status": "False",
        "reason": "PrometheusQueryError",
        "message": "query #1 `sum(` rejected by Prometheus (HTTP 400)",
        "lastUpdateTime": "2026-01-01T11:00:00Z",
    }


def test_message_names_failing_clusters_and_reasons() -> None:
    reports = cluster_reports(
        "cpu",
        ["a", "b"],
        {"a": aps("True", "Scored", "ok"), "b": aps("False", "SecretNotFound", "secret tok not found")},
        NOW,
    )
    failing, message = reports_message(reports)
    assert failing and message == "failing on 1 of 2 cluster(s): b: SecretNotFound: secret tok not found"
    assert reports_message(reports[:1]) == (False, "scoring on 1 of 1 cluster(s)")


def test_scores_without_a_condition_count_as_scoring() -> None:
    # What the upstream Go agent writes: scores only, on an object the hub labelled for it.
    upstream = {"metadata": {}, "status": {"scores": [{"name": "cpu", "value": 30}]}}
    empty: dict[str, Any] = {"metadata": {}, "status": {}}
    reports = cluster_reports("cpu", ["go", "new"], {"go": upstream, "new": empty}, NOW)
    assert [(r.cluster, r.status, r.reason) for r in reports] == [
        ("go", "True", "ScoresWithoutCondition"),
        ("new", "Unknown", "NoReportYet"),
    ]
    assert "1 score(s)" in reports[0].message
    assert reports_message(reports) == (False, "scoring on 1 of 2 cluster(s)")


def test_a_name_another_owner_holds_is_reported_as_taken_and_fails_the_scorer() -> None:
    other = {
        "metadata": {
            "name": "resource-usage-score",
            "ownerReferences": [{"kind": "ManagedClusterAddOn", "name": "resource-usage-collect"}],
        }
    }
    upstream = {"metadata": {"name": "resource-usage-score"}}
    reports = cluster_reports(
        "resource_usage_score",
        ["c1", "c2", "c3"],
        {"c3": aps("True", "Scored", "1 score", owner="resource_usage_score")},
        NOW,
        {"c1": other, "c2": upstream},
    )
    c1, c2, c3 = reports
    assert (c1.status, c1.reason) == ("False", "ScoreNameTaken")
    assert (
        "c1/resource-usage-score" in c1.message and "ManagedClusterAddOn/resource-usage-collect" in c1.message
    )
    assert (c2.reason, "owner: none" in c2.message) == ("ScoreNameTaken", True)
    assert (c3.status, c3.reason) == ("True", "Scored")  # ours there: the other map is not consulted
    failing, message = reports_message(reports)
    assert failing and "c1: ScoreNameTaken" in message
