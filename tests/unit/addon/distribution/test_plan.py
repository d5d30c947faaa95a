"""Per-cluster summary lists: order, masks, selectors, conflicts and what gets reported."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from dynamic_scoring.addon.distribution.configmap import summaries_configmap
from dynamic_scoring.addon.distribution.plan import ClusterInput, ScorerInput, plan
from dynamic_scoring.addon.registry.models import LabelSelector, Mask
from dynamic_scoring.agent.items.naming import (
    aps_name,  # tests may import the agent; the hub passes the rule in
)
from dynamic_scoring.contract.wire import ScorerSummary, parse_summaries


def summary(name: str, score: str) -> ScorerSummary:
    return ScorerSummary(
        name=name,
        score_name=score,
        source_type="None",
        scoring_endpoint="http://s:1/scoring",
        scoring_interval=30,
    )


def scorer(
    name: str, score: str, *, active: bool = True, created: str = "2026-01-01T00:00:00Z", **kw: object
) -> ScorerInput:
    return ScorerInput(name, created, summary(name, score), active, **kw)  # type: ignore[arg-type]


CLUSTERS = [
    ClusterInput("c1", {"gpu": "yes"}, "ns"),
    ClusterInput("c2", {}, "ns"),
    ClusterInput("c3", {"gpu": "no"}, "ns"),
]


def names(p: object, cluster: str) -> list[str]:
    return [s.score_name for s in p.clusters[cluster]]  # type: ignore[attr-defined]


def test_active_scorers_reach_every_enabled_cluster_sorted() -> None:
    p = plan([scorer("b", "zeta"), scorer("a", "alpha")], [], CLUSTERS, aps_name=aps_name)
    assert {c: names(p, c) for c in p.clusters} == {c.name: ["alpha", "zeta"] for c in CLUSTERS}
    assert p.scorers["a"].reason == "Distributed" and p.scorers["a"].clusters == ("c1", "c2", "c3")
    assert p.problems == ()


def test_inactive_and_unresolved_scorers_go_nowhere() -> None:
    p = plan(
        [scorer("a", "x", active=False), ScorerInput("b", "t", None, True)], [], CLUSTERS, aps_name=aps_name
    )
    assert all(v == () for v in p.clusters.values())
    assert (p.scorers["a"].reason, p.scorers["b"].reason) == ("Inactive", "NotResolved")


def test_masks_and_selectors_exclude_exactly_what_they_name() -> None:
    gpu = LabelSelector.model_validate({"matchLabels": {"gpu": "yes"}})
    p = plan(
        [scorer("a", "cpu"), scorer("g", "gpu", selector=gpu)],
        [Mask(cluster_name="c2", score_name="cpu")],
        CLUSTERS,
        aps_name=aps_name,
    )
    assert names(p, "c1") == ["cpu", "gpu"]
    assert names(p, "c2") == []
    assert names(p, "c3") == ["cpu"]
    assert "masked on c2" in p.scorers["a"].message
    assert "clusterSelector excludes c2, c3" in p.scorers["g"].message


def test_duplicate_score_names_keep_the_oldest_and_report() -> None:
    p = plan(
        [
            scorer("new", "s", created="2026-02-01T00:00:00Z"),
            scorer("old", "s", created="2026-01-01T00:00:00Z"),
        ],
        [],
        CLUSTERS,
        aps_name=aps_name,
    )
    assert [s.name for s in p.clusters["c1"]] == ["old"]
    assert p.scorers["new"].reason == "Conflict" and "'old'" in p.scorers["new"].message
    assert len(p.problems) == 1 and "spec.scoring.params.name" in p.problems[0].field


def test_names_that_sanitise_to_the_same_aps_are_a_conflict() -> None:
    p = plan([scorer("one", "a_b"), scorer("two", "A-B")], [], CLUSTERS, aps_name=aps_name)
    assert [s.name for s in p.clusters["c1"]] == ["one"]
    assert "AddOnPlacementScore 'a-b'" in p.scorers["two"].message


def test_an_inactive_owner_keeps_its_name() -> None:
    # ownership must not flip each time the older scorer flaps
    p = plan(
        [scorer("old", "s", active=False, created="1"), scorer("new", "s", created="2")],
        [],
        CLUSTERS,
        aps_name=aps_name,
    )
    assert p.scorers["new"].reason == "Conflict" and p.clusters["c1"] == ()


def test_masks_naming_unknown_clusters_or_scores_are_reported() -> None:
    p = plan(
        [scorer("a", "cpu")],
        [Mask(cluster_name="c9", score_name="cpu"), Mask(cluster_name="c1", score_name="gpu")],
        CLUSTERS,
        aps_name=aps_name,
    )
    fields = [pr.field for pr in p.problems]
    assert fields == ["spec.masks[0].clusterName", "spec.masks[1].scoreName"]
    assert "'c9'" in p.problems[0].message and "'gpu'" in p.problems[1].message


# --- properties ------------------------------------------------------------------------------------

score_names = st.sampled_from(["cpu", "gpu", "mem", "net", "a_b", "a-b"])
scorer_st = st.builds(
    scorer,
    name=st.sampled_from(["s1", "s2", "s3", "s4", "s5"]),
    score=score_names,
    active=st.booleans(),
    created=st.sampled_from(["1", "2", "3"]),
)
scorers_st = st.lists(scorer_st, max_size=6, unique_by=lambda s: s.name)
cluster_names = ["c1", "c2", "c3", "c4"]
clusters_st = st.lists(
    st.builds(ClusterInput, name=st.sampled_from(cluster_names), namespace=st.just("ns")),
    unique_by=lambda c: c.name,
    max_size=4,
)
masks_st = st.lists(
    st.builds(lambda c, s: Mask(cluster_name=c, score_name=s), st.sampled_from(cluster_names), score_names),
    max_size=6,
)


@settings(max_examples=200)
@given(scorers_st, masks_st, clusters_st, st.randoms())
def test_plan_does_not_depend_on_input_order(scorers, masks, clusters, rnd) -> None:  # type: ignore[no-untyped-def]
    first = plan(scorers, masks, clusters, aps_name=aps_name)
    shuffled = [list(x) for x in (scorers, masks, clusters)]
    for x in shuffled:
        rnd.shuffle(x)
    second = plan(shuffled[0], shuffled[1], shuffled[2], aps_name=aps_name)
    assert (first.clusters, first.scorers) == (second.clusters, second.scorers)
    # a mask problem names the mask by its index, which moves with it; the messages do not
    assert sorted(p.message for p in first.problems) == sorted(p.message for p in second.problems)
    for c in clusters:
        assert summaries_configmap("ns", first.clusters[c.name]) == summaries_configmap(
            "ns", second.clusters[c.name]
        )


@settings(max_examples=200)
@given(scorers_st, masks_st, clusters_st)
def test_a_cluster_gets_exactly_the_unmasked_active_winners(scorers, masks, clusters) -> None:  # type: ignore[no-untyped-def]
    p = plan(scorers, masks, clusters, aps_name=aps_name)
    masked = {(m.cluster_name, m.score_name) for m in masks}
    winners = [s for s in scorers if p.scorers[s.name].reason != "Conflict"]
    owned_aps = [aps_name(s.summary.score_name) for s in winners]
    assert len(owned_aps) == len(set(owned_aps))  # no two distributed scorers share an APS
    for c in clusters:
        expected = sorted(
            (s.summary.score_name, s.name)
            for s in winners
            if s.active and (c.name, s.summary.score_name) not in masked
        )
        assert [(x.score_name, x.name) for x in p.clusters[c.name]] == expected


def test_configmap_round_trips_through_the_agents_decoder() -> None:
    p = plan([scorer("a", "cpu"), scorer("b", "gpu")], [], CLUSTERS, aps_name=aps_name)
    cm = summaries_configmap("open-cluster-management-agent-addon", p.clusters["c1"])
    assert cm["metadata"] == {
        "name": "dynamic-scoring-config",
        "namespace": "open-cluster-management-agent-addon",
        "labels": {"app.kubernetes.io/managed-by": "dynamic-scoring"},
    }
    decoded, errors = parse_summaries(cm["data"]["summaries"])
    assert errors == [] and decoded == list(p.clusters["c1"])
    assert list(json.loads(cm["data"]["summaries"])[0])[:2] == ["name", "scoreName"]
    assert json.loads(summaries_configmap("ns", ())["data"]["summaries"]) == []
