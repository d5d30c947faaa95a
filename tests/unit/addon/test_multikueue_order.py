"""The ordered MultiKueueConfig's pure parts: its name, the decided clusters, the ranking, the object."""

from __future__ import annotations

import datetime as dt

import pytest

from dynamic_scoring.addon.multikueue import (
    MANAGED_BY,
    MAX_CLUSTERS,
    PLACEMENT_ANNOTATION,
    Ranked,
    ScoreLookup,
    choose,
    config_name,
    decided_clusters,
    desired_config,
    listed,
    order_message,
    placement_of,
    rank,
)
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm.placement_policy import PLACEMENT_LABEL, Misconfigured

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
LATER = "2026-11-29T13:00:00Z"
EARLIER = "2026-11-29T11:00:00Z"


def placement(*configurations: JSON, mode: str = "Exact") -> JSON:
    return {"spec": {"prioritizerPolicy": {"mode": mode, "configurations": list(configurations)}}}


def addon(resource: str, score: str, weight: int | None = 1) -> JSON:
    config: JSON = {
        "scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": resource, "scoreName": score}}
    }
    if weight is not None:
        config["weight"] = weight
    return config


def aps(*items: tuple[str, int], valid_until: str | None = LATER) -> JSON:
    status: JSON = {"scores": [{"name": n, "value": v} for n, v in items]}
    if valid_until:
        status["validUntil"] = valid_until
    return {"status": status}


def lookup(table: dict[tuple[str, str], JSON]) -> ScoreLookup:
    return lambda cluster, name: table.get((cluster, name))


def test_the_name_is_the_placements_when_an_admission_check_can_name_it() -> None:
    assert config_name("spill-over") == "spill-over"
    assert config_name("p" * 63) == "p" * 63
    # an AdmissionCheck's parameters.name must be a DNS label: no dots, at most 63 characters
    for bad in ("p" * 64, "gpu.east", "-gpu", "gpu-", "GPU"):
        assert config_name(bad) is None, bad


def test_decided_clusters_are_the_union_of_the_placements_own_decisions() -> None:
    def pd(namespace: str, placement_name: str, *clusters: str) -> JSON:
        return {
            "metadata": {"namespace": namespace, "labels": {PLACEMENT_LABEL: placement_name}},
            "status": {"decisions": [{"clusterName": c, "reason": ""} for c in clusters]},
        }

    decisions = [pd("ns", "p", "c2", "c1"), pd("ns", "p", "c3"), pd("ns", "other", "c9"), pd("x", "p", "c8")]
    assert decided_clusters(decisions, "ns", "p") == ["c1", "c2", "c3"]
    assert decided_clusters([pd("ns", "p")], "ns", "p") == []


def test_rank_orders_by_the_weighted_addon_scores_best_first() -> None:
    table = {
        ("a", "load"): aps(("cpu", 30), ("gpu", 90)),
        ("b", "load"): aps(("cpu", 90), ("gpu", 10)),
        ("c", "load"): aps(("cpu", 60), ("gpu", 60)),
    }
    ranked = rank(placement(addon("load", "cpu")), ["a", "b", "c"], lookup(table), NOW)
    assert [r.cluster for r in ranked] == ["b", "c", "a"]
    assert [r.total for r in ranked] == [90, 60, 30]
    weighted = placement(addon("load", "cpu", 1), addon("load", "gpu", 2))
    ranked = rank(weighted, ["a", "b", "c"], lookup(table), NOW)
    assert [(r.cluster, r.total) for r in ranked] == [("a", 210), ("c", 180), ("b", 110)]
    assert ranked[0].parts == ("AddOn/load/cpu x1 = 30", "AddOn/load/gpu x2 = 90")


def test_missing_expired_and_absent_items_count_zero_and_ties_go_by_name() -> None:
    table = {
        ("a", "load"): aps(("cpu", 50), valid_until=EARLIER),  # expired: 0
        ("b", "load"): aps(("mem", 70)),  # no cpu item: 0
        ("d", "load"): aps(("cpu", -10)),
        # c has no AddOnPlacementScore at all: 0
    }
    ranked = rank(placement(addon("load", "cpu")), ["d", "c", "b", "a"], lookup(table), NOW)
    assert [(r.cluster, r.total) for r in ranked] == [("a", 0), ("b", 0), ("c", 0), ("d", -10)]
    assert "expired" in ranked[0].parts[0] and "no score item cpu" in ranked[1].parts[0]
    assert "no AddOnPlacementScore load" in ranked[2].parts[0]


def test_builtin_prioritizers_do_not_order_and_an_omitted_weight_is_one() -> None:
    table = {("a", "load"): aps(("cpu", 10)), ("b", "load"): aps(("cpu", 20))}
    additive = placement(
        addon("load", "cpu", None),
        {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}},
        mode="Additive",
    )
    ranked = rank(additive, ["a", "b"], lookup(table), NOW)
    assert [(r.cluster, r.total) for r in ranked] == [("b", 20), ("a", 10)]
    # no AddOn prioritizer at all: every total is 0, so the order is by name
    assert [r.cluster for r in rank({"spec": {}}, ["b", "a"], lookup(table), NOW)] == ["a", "b"]


def test_a_policy_the_placement_controller_refuses_is_refused() -> None:
    with pytest.raises(Misconfigured):
        rank(placement(mode="Sometimes"), ["a"], lambda _c, _n: None, NOW)
    with pytest.raises(Misconfigured):
        rank(placement({"scoreCoordinate": {"type": "AddOn"}}), ["a"], lambda _c, _n: None, NOW)


def test_the_desired_object_is_marked_ours_and_only_ours_is_recognised() -> None:
    desired = desired_config("ns.p", "ns/p", ["b", "a"])
    assert listed(desired) == ["b", "a"] and listed(None) == []
    assert placement_of(desired) == "ns/p"
    assert desired["metadata"]["labels"]["app.kubernetes.io/managed-by"] == MANAGED_BY
    # kueue-addon's config, a hand-made one, or one with our annotation but not our label: not ours
    assert placement_of({"metadata": {"name": "ns.p"}, "spec": {"clusters": ["a"]}}) is None
    assert placement_of({"metadata": {"annotations": {PLACEMENT_ANNOTATION: "ns/p"}}}) is None


def test_the_event_gives_totals_the_old_order_and_what_did_not_fit() -> None:
    ranked = [Ranked("b", 90, ()), Ranked("a", 30, ())]
    assert order_message(ranked, [], {}) == "order b (90), a (30)"
    assert order_message(ranked, ["a", "b"], {"z": 1}) == (
        "order b (90), a (30); was a, b; not listed (Kueue allows 20): z (1)"
    )


def ranked_by(**totals: int) -> list[Ranked]:
    """Clusters with these totals, in `rank`'s order (best first, ties by name)."""
    return sorted((Ranked(c, t, ()) for c, t in totals.items()), key=lambda r: (-r.total, r.cluster))


def names(items: list[Ranked]) -> list[str]:
    return [r.cluster for r in items]


def test_under_the_limit_every_decided_cluster_is_listed_in_score_order() -> None:
    ranked = ranked_by(a=10, b=90, c=50)
    for now_listed in ([], ["a", "b"], ["x", "a", "c", "b"]):
        chosen, left_out = choose(ranked, now_listed, limit=3)
        assert names(chosen) == ["b", "c", "a"] and left_out == [], now_listed


def test_a_full_list_keeps_its_clusters_when_an_unlisted_one_outscores_them() -> None:
    # a, b, c were the best three; d, unlisted, now beats all of them (its admin raised its score)
    ranked = ranked_by(a=10, b=20, c=30, d=99)
    chosen, left_out = choose(ranked, ["c", "b", "a"], limit=3)
    assert names(chosen) == ["c", "b", "a"]
    assert [(r.cluster, r.total) for r in left_out] == [("d", 99)]


def test_the_listed_clusters_follow_their_scores_among_themselves() -> None:
    # reordering moves nothing that Kueue admitted, so the listed ones still go best first
    ranked = ranked_by(a=80, b=20, c=30, d=99)
    chosen, _ = choose(ranked, ["c", "b", "a"], limit=3)
    assert names(chosen) == ["a", "c", "b"]


def test_a_listed_cluster_no_longer_decided_leaves_and_the_best_unlisted_enters() -> None:
    # c is no longer decided (not in ranked); d and e wait, e scores better
    ranked = ranked_by(a=10, b=20, d=40, e=50)
    chosen, left_out = choose(ranked, ["c", "b", "a"], limit=3)
    assert names(chosen) == ["e", "b", "a"]
    assert names(left_out) == ["d"]
    # two places free: both newcomers enter, best first among everyone listed
    chosen, left_out = choose(ranked_by(a=10, d=40, e=50), ["c", "b", "a"], limit=3)
    assert names(chosen) == ["e", "d", "a"] and left_out == []


def test_a_limit_below_the_listed_count_keeps_the_best_of_the_listed() -> None:
    # only when the limit itself shrinks; no newcomer ever displaces a listed cluster
    ranked = ranked_by(a=10, b=20, c=30, d=99)
    chosen, left_out = choose(ranked, ["a", "b", "c"], limit=2)
    assert names(chosen) == ["c", "b"]
    assert names(left_out) == ["d", "a"]


def test_the_default_limit_is_kueues() -> None:
    ranked = ranked_by(**{f"c{i:02d}": i for i in range(MAX_CLUSTERS + 1)})
    full = [f"c{i:02d}" for i in range(1, MAX_CLUSTERS + 1)]
    risen = [Ranked("c00", 100, ()), *ranked[:-1]]  # c00, unlisted, now the best
    chosen, left_out = choose(risen, full)
    assert sorted(names(chosen)) == full and names(left_out) == ["c00"]
