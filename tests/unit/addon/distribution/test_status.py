"""DynamicScoringConfig and per-scorer Distributed conditions from a plan."""

from __future__ import annotations

from dynamic_scoring.addon.distribution.plan import ClusterInput, ScorerInput, plan
from dynamic_scoring.addon.distribution.status import (
    accepted_condition,
    cluster_entries,
    distributed_condition,
    scorer_distributed_condition,
)
from dynamic_scoring.addon.distribution.target import config_target_problem
from dynamic_scoring.addon.registry.models import Mask, SpecProblem
from dynamic_scoring.addon.registry.reports import ClusterReport
from dynamic_scoring.agent.items.naming import aps_name
from dynamic_scoring.contract.wire import ScorerSummary

S = ScorerSummary(name="a", score_name="cpu", scoring_endpoint="http://s:1/scoring", scoring_interval=30)
CLUSTERS = [ClusterInput("c2", {}, "ns"), ClusterInput("c1", {}, "")]


def test_accepted_reports_name_namespace_spec_and_mask_problems() -> None:
    wrong = config_target_problem("x", "hub", "hub")
    assert accepted_condition(wrong, None, None).reason == "WrongName"
    assert (
        accepted_condition(None, SpecProblem("d", "hub", "spec.masks[0].clusterName: too short"), None).status
        == "False"
    )
    p = plan(
        [ScorerInput("a", "t", S, True)],
        [Mask(cluster_name="c9", score_name="cpu")],
        CLUSTERS,
        aps_name=aps_name,
    )
    c = accepted_condition(None, None, p, ["spec.mask: read as spec.masks"])
    assert (c.status, c.reason) == ("True", "AcceptedWithWarnings")
    assert "spec.masks[0].clusterName" in c.message and "spec.mask: read as" in c.message
    ok = plan([ScorerInput("a", "t", S, True)], [], CLUSTERS, aps_name=aps_name)
    assert accepted_condition(None, None, ok).reason == "Accepted"


def test_cluster_entries_and_distributed() -> None:
    p = plan([ScorerInput("a", "t", S, True)], [], CLUSTERS, aps_name=aps_name)
    entries = cluster_entries(CLUSTERS, p, {"c2": "True"})
    assert entries == [
        {
            "clusterName": "c1",
            "namespace": "",
            "scorers": 1,
            "applied": "Unknown",
            "message": "the ManagedClusterAddOn reports no install namespace yet",
        },
        {"clusterName": "c2", "namespace": "ns", "scorers": 1, "applied": "True"},
    ]
    c = distributed_condition(entries)
    assert (c.status, c.reason) == ("Unknown", "Applying") and "c1" in c.message
    assert distributed_condition(cluster_entries(CLUSTERS, p, {"c1": "True", "c2": "True"})).status == "True"
    assert distributed_condition(cluster_entries(CLUSTERS, p, {"c1": "False"})).reason == "NotApplied"
    assert distributed_condition([]).reason == "NoEnabledClusters"


def test_scorer_distributed_mentions_failing_agents() -> None:
    p = plan([ScorerInput("a", "t", S, True)], [], CLUSTERS, aps_name=aps_name)
    reports = [
        ClusterReport("c1", "True", "Scored", "ok"),
        ClusterReport("c2", "False", "PrometheusQueryError", "bad query"),
    ]
    c = scorer_distributed_condition(p.scorers["a"], reports)
    assert (c.status, c.reason) == ("True", "AgentsReportFailures")
    assert "c2: PrometheusQueryError: bad query" in c.message
    inactive = plan([ScorerInput("a", "t", S, False)], [], CLUSTERS, aps_name=aps_name).scorers["a"]
    assert scorer_distributed_condition(inactive).reason == "Inactive"


def test_a_taken_score_name_is_the_reason_of_the_scorers_condition() -> None:
    p = plan([ScorerInput("a", "t", S, True)], [], CLUSTERS, aps_name=aps_name)
    reports = [
        ClusterReport("c1", "False", "PrometheusQueryError", "bad query"),
        ClusterReport("c2", "False", "ScoreNameTaken", "AddOnPlacementScore c2/t exists"),
    ]
    c = scorer_distributed_condition(p.scorers["a"], reports)
    assert (c.status, c.reason) == ("True", "ScoreNameTaken")
    assert "c2: ScoreNameTaken" in c.message
