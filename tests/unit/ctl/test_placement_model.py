"""The placement model against hand-built hub objects: each OCM v1.2.1 rule, and properties of the ranking."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.ctl import placement_model as pm
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm import placement_policy as pp

NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)


def ts(delta_s: float) -> str:
    return (NOW + dt.timedelta(seconds=delta_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster(
    name: str, labels: dict[str, str] | None = None, taints: list[JSON] | None = None, **status: Any
) -> JSON:
    return {
        "metadata": {
            "name": name,
            "labels": {"cluster.open-cluster-management.io/clusterset": "default", **(labels or {})},
        },
        "spec": {"taints": taints or []},
        "status": status,
    }


def aps(ns: str, name: str, until: str | None = None, **items: int) -> JSON:
    status: JSON = {"scores": [{"name": k, "value": v} for k, v in items.items()]}
    if until is not None:
        status["validUntil"] = until
    return {"metadata": {"namespace": ns, "name": name}, "status": status}


def placement(spec: JSON, name: str = "p", ns: str = "team") -> JSON:
    return {"metadata": {"namespace": ns, "name": name}, "spec": spec}


def decision(
    placement_name: str, *clusters: str, ns: str = "team", page: int = 1, group: tuple[int, str] = (0, "")
) -> JSON:
    return {
        "metadata": {
            "namespace": ns,
            "name": f"{placement_name}-decision-{page}",
            "labels": {
                pp.PLACEMENT_LABEL: placement_name,
                pm.GROUP_INDEX_LABEL: str(group[0]),
                pm.GROUP_NAME_LABEL: group[1],
            },
        },
        "status": {"decisions": [{"clusterName": c, "reason": ""} for c in clusters]},
    }


GLOBAL = {
    "metadata": {"name": "global"},
    "spec": {"clusterSelector": {"selectorType": "LabelSelector", "labelSelector": {}}},
}
DEFAULT = {
    "metadata": {"name": "default"},
    "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}},
}


def state(
    p: JSON,
    clusters: list[JSON],
    scores: Sequence[JSON] = (),
    decisions: Sequence[JSON] = (),
    bindings: tuple[str, ...] = ("global",),
) -> pm.HubState:
    return pm.HubState(
        placement=p,
        clusters=clusters,
        cluster_sets=[GLOBAL, DEFAULT],
        bindings=[{"metadata": {"namespace": "team", "name": b}} for b in bindings],
        scores={(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in scores},
        decisions=list(decisions),
    )


def addon(resource: str, score: str, weight: int) -> JSON:
    return {
        "scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": resource, "scoreName": score}},
        "weight": weight,
    }


def exact(*configs: JSON, n: int | None = None, **extra: Any) -> JSON:
    spec: JSON = {"prioritizerPolicy": {"mode": "Exact", "configurations": list(configs)}, **extra}
    if n is not None:
        spec["numberOfClusters"] = n
    return placement(spec)


# ----------------------------------------------------------------------------- AddOn scores


def test_addon_score_missing_expired_missing_item_and_present_each_say_which() -> None:
    coord = pp.Coordinate(resource="load", score="cpu")
    assert pm.addon_score(None, coord, NOW) == (0, "no AddOnPlacementScore load: counts 0")
    value, note = pm.addon_score(aps("c", "load", ts(-1), cpu=90), coord, NOW)
    assert value == 0 and note.startswith("expired at")
    value, note = pm.addon_score(aps("c", "load", ts(60), mem=90), coord, NOW)
    assert value == 0 and "no score item cpu" in note
    assert pm.addon_score(aps("c", "load", ts(60), cpu=-42), coord, NOW)[0] == -42
    assert pm.addon_score(aps("c", "load", None, cpu=7), coord, NOW)[0] == 7  # no validUntil: never expires


def test_addon_score_says_when_the_agent_holds_values_back_by_stabilization() -> None:
    coord = pp.Coordinate(resource="load", score="cpu")
    stabilized = aps("c", "load", ts(60), cpu=40)
    stabilized["status"]["conditions"] = [
        {"type": "ScoresUpToDate", "status": "True", "reason": "Stabilized", "message": "1 of 1 held"}
    ]
    value, note = pm.addon_score(stabilized, coord, NOW)
    assert value == 40 and note.endswith("held back by stabilization (the score's condition says which)")
    assert "stabilization" not in pm.addon_score(aps("c", "load", ts(60), cpu=40), coord, NOW)[1]


def test_addon_score_at_exactly_valid_until_still_counts() -> None:
    """OCM drops a score only when now is *after* validUntil."""
    coord = pp.Coordinate(resource="load", score="cpu")
    assert pm.addon_score(aps("c", "load", ts(0), cpu=5), coord, NOW)[0] == 5


# ----------------------------------------------------------------------------- weights


def test_additive_mode_adds_balance_and_steady_and_exact_does_not() -> None:
    additive = placement({"prioritizerPolicy": {"configurations": [addon("r", "s", 2)]}})
    names = [(c.name, w) for c, w in pp.prioritizer_weights(additive)]
    assert names == [("Balance", 1), ("Steady", 1), ("AddOn/r/s", 2)]
    assert [(c.name, w) for c, w in pp.prioritizer_weights(exact(addon("r", "s", 2)))] == [("AddOn/r/s", 2)]


def test_weight_zero_disables_a_default_and_builtins_take_the_last_weight() -> None:
    p = placement(
        {
            "prioritizerPolicy": {
                "mode": "Additive",
                "configurations": [
                    {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Balance"}, "weight": 0},
                    {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 3},
                    {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 2},
                ],
            }
        }
    )
    assert [(c.name, w) for c, w in pp.prioritizer_weights(p)] == [("Steady", 2)]


def test_the_same_addon_score_twice_counts_twice_as_in_ocm() -> None:
    p = exact(addon("r", "s", 1), addon("r", "s", 2), n=1)
    e = pm.explain(state(p, [cluster("a")], [aps("a", "r", ts(60), s=10)]), NOW)
    assert e.cluster("a").total == 30  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"mode": "Sometimes"}, "incorrect prioritizer policy mode"),
        ({"configurations": [{"weight": 1}]}, "scoreCoordinate field is required"),
        (
            {"configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Fastest"}, "weight": 1}]},
            "incorrect builtin",
        ),
        (
            {"configurations": [{"scoreCoordinate": {"type": "AddOn"}, "weight": 1}]},
            "addOn should not be empty",
        ),
    ],
)
def test_a_misconfigured_policy_decides_nothing_and_says_why(policy: JSON, message: str) -> None:
    p = placement({"prioritizerPolicy": policy})
    e = pm.explain(state(p, [cluster("a")], decisions=[decision("p", "a")]), NOW)
    assert message in e.misconfigured
    assert not e.cluster("a").expected  # type: ignore[union-attr]
    assert [v.name for v in e.disagreements] == ["a"]  # the decision still names it: stale


# ----------------------------------------------------------------------------- built-in prioritizers


def test_balance_scores_follow_the_other_placements_decisions() -> None:
    others = [decision("x", "a", "b"), decision("y", "a", ns="other")]
    scores = pm.balance_scores(["a", "b", "c"], others)
    assert {n: s for n, (s, _) in scores.items()} == {"a": -100, "b": 0, "c": 100}


def test_balance_truncates_toward_zero_like_go() -> None:
    others = [decision("x", "a", "b"), decision("y", "a"), decision("z", "a")]
    # b: usage 1/3 -> 100 * (0.5 - 0.333..) = 16.66 -> 16 -> 32
    assert pm.balance_scores(["b"], others)["b"][0] == 32


@given(st.lists(st.sampled_from("abcde"), max_size=30))
def test_balance_is_always_in_range_and_unchosen_clusters_score_highest(chosen: list[str]) -> None:
    others = [decision(f"p{i}", c) for i, c in enumerate(chosen)]
    scores = pm.balance_scores("abcdef", others)
    assert all(-100 <= s <= 100 for s, _ in scores.values())
    assert scores["f"][0] == 100
    assert all(scores[c][0] <= scores["f"][0] for c in "abcde")


def test_steady_gives_100_to_the_placements_own_current_clusters() -> None:
    assert pm.steady_scores(["a", "b"], {"a"}) == {"a": (100, "already decided"), "b": (0, "not decided now")}


def test_resource_allocatable_scales_between_min_and_max() -> None:
    clusters = [
        cluster("a", allocatable={"cpu": "2"}, capacity={"cpu": "4"}),
        cluster("b", allocatable={"cpu": "4000m"}, capacity={"cpu": "4"}),
        cluster("c", allocatable={"cpu": "6"}, capacity={"cpu": "8"}),
        cluster("d", allocatable={"cpu": "6"}),  # no capacity: OCM skips it
    ]
    got = {n: s for n, (s, _) in pm.resource_scores(clusters, "cpu").items()}
    assert got == {"a": -100, "b": 0, "c": 100, "d": 0}
    same = [cluster("a", allocatable={"memory": "1Gi"}, capacity={"memory": "2Gi"})]
    assert pm.resource_scores(same, "memory")["a"][0] == 100


# ----------------------------------------------------------------------------- filters


def test_label_predicate_names_the_label_that_failed() -> None:
    p = exact(predicates=[{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}])
    e = pm.explain(state(p, [cluster("a", {"env": "dev"}), cluster("b", {"env": "prod"})]), NOW)
    a = e.cluster("a")
    assert a is not None and "label env=dev, want prod" in a.filtered and not a.expected
    assert e.cluster("b").expected  # type: ignore[union-attr]


def test_any_predicate_is_enough_and_claims_come_from_status() -> None:
    preds = [
        {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}},
        {
            "requiredClusterSelector": {
                "claimSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]}
            }
        },
    ]
    eu = cluster("eu", clusterClaims=[{"name": "region", "value": "eu"}])
    us = cluster("us", clusterClaims=[{"name": "region", "value": "us"}])
    e = pm.explain(state(exact(predicates=preds), [eu, us]), NOW)
    assert e.cluster("eu").expected  # type: ignore[union-attr]
    assert "claim region=us, want In ['eu']" in e.cluster("us").filtered  # type: ignore[union-attr]


def test_a_bad_selector_operator_is_a_misconfiguration() -> None:
    preds = [
        {"requiredClusterSelector": {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}}
    ]
    e = pm.explain(state(exact(predicates=preds), [cluster("a")]), NOW)
    assert "needs at least one value" in e.misconfigured


def test_cel_selectors_are_not_guessed() -> None:
    preds = [{"requiredClusterSelector": {"celSelector": {"celExpressions": ["true"]}}}]
    e = pm.explain(
        state(exact(predicates=preds), [cluster("a"), cluster("b")], decisions=[decision("p", "a")]), NOW
    )
    assert all(v.undetermined for v in e.clusters) and not e.disagreements and e.warnings


def noselect(key: str = "maint", effect: str = "NoSelect", added: float = -60) -> JSON:
    return {"key": key, "value": "yes", "effect": effect, "timeAdded": ts(added)}


def test_a_taint_without_toleration_filters_and_a_matching_toleration_lets_through() -> None:
    clusters = [cluster("a", taints=[noselect()]), cluster("b")]
    e = pm.explain(state(exact(), clusters), NOW)
    assert e.cluster("a").filtered == "taint maint=yes:NoSelect not tolerated"  # type: ignore[union-attr]
    tolerating = exact(tolerations=[{"key": "maint", "operator": "Exists"}])
    e = pm.explain(state(tolerating, clusters), NOW)
    a = e.cluster("a")
    assert a is not None and not a.filtered and a.expected and "tolerated by toleration 0" in a.notes[0]
    wrong_value = exact(tolerations=[{"key": "maint", "operator": "Equal", "value": "no"}])
    assert pm.explain(state(wrong_value, clusters), NOW).cluster("a").filtered  # type: ignore[union-attr]


def test_toleration_seconds_count_from_the_taints_time_added() -> None:
    clusters = [cluster("a", taints=[noselect(added=-60)])]
    short = exact(tolerations=[{"key": "maint", "operator": "Exists", "tolerationSeconds": 30}])
    filtered = pm.explain(state(short, clusters), NOW).cluster("a").filtered  # type: ignore[union-attr]
    assert "not tolerated (toleration 0 ran out at" in filtered
    long = exact(tolerations=[{"key": "maint", "operator": "Exists", "tolerationSeconds": 120}])
    assert not pm.explain(state(long, clusters), NOW).cluster("a").filtered  # type: ignore[union-attr]


def test_prefer_no_select_never_filters_and_no_select_if_new_spares_decided_clusters() -> None:
    clusters = [
        cluster("a", taints=[noselect(effect="PreferNoSelect")]),
        cluster("b", taints=[noselect(effect="NoSelectIfNew")]),
        cluster("c", taints=[noselect(effect="NoSelectIfNew")]),
    ]
    e = pm.explain(state(exact(), clusters, decisions=[decision("p", "b")]), NOW)
    assert not e.cluster("a").filtered and not e.cluster("b").filtered  # type: ignore[union-attr]
    assert "NoSelectIfNew not tolerated" in e.cluster("c").filtered  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "toleration", [{"operator": "Equal", "value": "x"}, {"key": "k", "operator": "Exists", "value": "x"}]
)
def test_invalid_tolerations_are_a_misconfiguration(toleration: JSON) -> None:
    assert pm.explain(state(exact(tolerations=[toleration]), [cluster("a")]), NOW).misconfigured


# ----------------------------------------------------------------------------- candidates, ranking, decisions


def test_cluster_sets_are_the_bound_ones_intersected_with_the_spec() -> None:
    p = exact(clusterSets=["default", "unbound"])
    e = pm.explain(
        state(
            p,
            [cluster("a"), cluster("z", {"cluster.open-cluster-management.io/clusterset": "x"})],
            bindings=("global", "default"),
        ),
        NOW,
    )
    assert e.cluster_sets == ["default"]
    assert [v.name for v in e.clusters] == ["a"]
    unbound = pm.explain(state(exact(), [cluster("a")], bindings=()), NOW)
    assert unbound.clusters == [] and unbound.cluster_sets == []


def test_number_of_clusters_cuts_ties_break_by_name_and_negative_weights_invert() -> None:
    clusters = [cluster("a"), cluster("b"), cluster("c")]
    scores = [aps("a", "r", ts(60), s=80), aps("b", "r", ts(60), s=20), aps("c", "r", ts(60), s=20)]
    e = pm.explain(state(exact(addon("r", "s", -1), n=2), clusters, scores), NOW)
    assert [(v.name, v.total, v.rank, v.expected) for v in e.clusters] == [
        ("a", -80, 3, False),
        ("b", -20, 1, True),
        ("c", -20, 2, True),
    ]
    assert "below the numberOfClusters cut" in e.cluster("a").verdict()  # type: ignore[union-attr]


def test_a_decision_that_differs_from_the_model_is_a_disagreement() -> None:
    clusters = [cluster("a"), cluster("b")]
    scores = [aps("a", "r", ts(60), s=80), aps("b", "r", ts(60), s=20)]
    p = exact(addon("r", "s", 1), n=1)
    assert not pm.explain(state(p, clusters, scores, [decision("p", "a")]), NOW).disagreements
    wrong = pm.explain(state(p, clusters, scores, [decision("p", "b")]), NOW)
    assert sorted(v.name for v in wrong.disagreements) == ["a", "b"]
    assert "DISAGREES" in wrong.cluster("b").verdict()  # type: ignore[union-attr]


def test_a_decided_cluster_outside_the_cluster_sets_is_reported() -> None:
    e = pm.explain(state(exact(), [cluster("a")], decisions=[decision("p", "a", "gone")]), NOW)
    gone = e.cluster("gone")
    assert gone is not None and not gone.candidate and not gone.agrees


def test_every_decision_page_is_read() -> None:
    names = [f"c{i:03d}" for i in range(150)]
    pages = [decision("p", *names[:100], page=1), decision("p", *names[100:], page=2)]
    e = pm.explain(state(exact(), [cluster(n) for n in names], decisions=pages), NOW)
    assert e.decision_pages == ["p-decision-1", "p-decision-2"]
    assert not e.disagreements and all(v.decided for v in e.clusters)


def test_decision_groups_by_selector_then_the_rest_in_chunks() -> None:
    clusters = [cluster("a", {"canary": "1"}), cluster("b"), cluster("c"), cluster("d")]
    p = exact(
        decisionStrategy={
            "groupStrategy": {
                "clustersPerDecisionGroup": "50%",
                "decisionGroups": [
                    {
                        "groupName": "canary",
                        "groupClusterSelector": {"labelSelector": {"matchLabels": {"canary": "1"}}},
                    }
                ],
            }
        }
    )
    e = pm.explain(state(p, clusters), NOW)
    assert {v.name: v.group for v in e.clusters} == {
        "a": (0, "canary"),
        "b": (1, ""),
        "c": (1, ""),
        "d": (2, ""),
    }
    groups = [
        decision("p", "a", page=1, group=(0, "canary")),
        decision("p", "b", "c", page=2, group=(1, "")),
        decision("p", "d", page=3, group=(2, "")),
    ]
    assert not pm.explain(state(p, clusters, decisions=groups), NOW).disagreements
    wrong = [decision("p", "a", "b", "c", "d", page=1, group=(0, ""))]
    assert pm.explain(state(p, clusters, decisions=wrong), NOW).disagreements


@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.integers(-100, 100), min_size=1),
    st.integers(-10, 10).filter(bool),
    st.one_of(st.none(), st.integers(0, 9)),
)
def test_the_chosen_clusters_are_the_top_n_by_total_then_name(
    values: dict[str, int], weight: int, n: int | None
) -> None:
    clusters = [cluster(c) for c in values]
    scores = [aps(c, "r", ts(60), s=v) for c, v in values.items()]
    e = pm.explain(state(exact(addon("r", "s", weight), n=n), clusters, scores), NOW)
    order = sorted(values, key=lambda c: (-values[c] * weight, c))
    keep = len(order) if n is None else n
    assert [v.name for v in sorted(e.clusters, key=lambda v: v.rank or 0)] == order
    assert {v.name for v in e.clusters if v.expected} == set(order[:keep])
    assert all(v.total == values[v.name] * weight for v in e.clusters)


taints = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["a", "b", "c"]),
            "value": st.sampled_from(["", "x", "y"]),
            "effect": st.sampled_from(["NoSelect", "PreferNoSelect", "NoSelectIfNew"]),
            "timeAdded": st.just(ts(-60)),
        }
    ),
    max_size=4,
)


@given(taints, st.booleans())
def test_exists_without_key_tolerates_every_taint_and_only_hard_taints_can_filter(
    cluster_taints: list[JSON], in_decision: bool
) -> None:
    c = cluster("a", taints=cluster_taints)
    assert pm.taint_failure(c, [{"operator": "Exists"}], in_decision, NOW)[0] == ""
    failure, _ = pm.taint_failure(c, [], in_decision, NOW)
    hard = [
        t
        for t in cluster_taints
        if t["effect"] == "NoSelect" or (t["effect"] == "NoSelectIfNew" and not in_decision)
    ]
    assert bool(failure) == bool(hard)


def test_an_omitted_weight_is_1_as_the_crd_defaults_it() -> None:
    p = exact({"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "r", "scoreName": "s"}}})
    assert [(c.name, w) for c, w in pp.prioritizer_weights(p)] == [("AddOn/r/s", 1)]
