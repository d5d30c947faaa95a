"""The multikueue-order reconcile on in-memory caches, its requests recorded instead of sent.

The integration test runs it on a real apiserver and OCM's placement controller; here are the paths
that are awkward to reach there: a name no AdmissionCheck could take, a policy the placement
controller refuses, more clusters than Kueue lists, and the races with another writer.
"""

from __future__ import annotations

import datetime as dt

from dynamic_scoring.addon.controllers.multikueue import MultiKueueOrder
from dynamic_scoring.addon.multikueue import ORDER_LABEL, desired_config
from dynamic_scoring.kube.api import Conflict
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm.placement_policy import PLACEMENT_LABEL
from tests.unit.addon.controllers.fakes import Cache, Recorder

NS = "kueue-system"
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
LATER = "2026-11-29T13:00:00Z"
MKC_PATH = "/apis/kueue.x-k8s.io/v1beta2/multikueueconfigs"


def placement(name: str = "gpu", *configurations: JSON) -> JSON:
    coordinate = {"type": "AddOn", "addOn": {"resourceName": "load", "scoreName": "cpu"}}
    configs = list(configurations) or [{"scoreCoordinate": coordinate, "weight": 1}]
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": NS, "uid": "u1", "labels": {ORDER_LABEL: "score"}},
        "spec": {"prioritizerPolicy": {"mode": "Exact", "configurations": configs}},
    }


def decision(placement_name: str, *clusters: str) -> JSON:
    return {
        "metadata": {
            "name": f"{placement_name}-decision-1",
            "namespace": NS,
            "labels": {PLACEMENT_LABEL: placement_name},
        },
        "status": {"decisions": [{"clusterName": c, "reason": ""} for c in clusters]},
    }


def score(cluster: str, value: int) -> JSON:
    return {
        "metadata": {"name": "load", "namespace": cluster},
        "status": {"validUntil": LATER, "scores": [{"name": "cpu", "value": value}]},
    }


def reconciler(
    api: Recorder, placements: Cache, decisions: Cache, configs: Cache, scores: Cache | None = None
) -> MultiKueueOrder:
    return MultiKueueOrder(
        api.writer("multikueue-order"),
        placements=placements,
        decisions=decisions,
        configs=configs,
        scores=[scores or Cache()],
        clock=lambda: NOW,
    )


def test_it_creates_the_config_in_score_order_and_says_so_on_the_placement() -> None:
    api = Recorder()
    scores = Cache(score("a", 10), score("b", 90), score("c", 50))
    order = reconciler(api, Cache(placement()), Cache(decision("gpu", "a", "b", "c")), Cache(), scores)
    assert order.reconcile(f"{NS}/gpu") is None
    [(method, body)] = api.writes(MKC_PATH)
    assert method == "POST" and body["spec"]["clusters"] == ["b", "c", "a"]
    [event] = api.events()
    assert event["reason"] == "MultiKueueOrderChanged" and event["type"] == "Normal"
    assert event["message"] == "MultiKueueConfig gpu: order b (90), c (50), a (10)"


def test_an_unchanged_order_sends_nothing() -> None:
    api = Recorder()
    current = desired_config("gpu", f"{NS}/gpu", ["b", "a"])
    scores = Cache(score("a", 10), score("b", 90))
    order = reconciler(api, Cache(placement()), Cache(decision("gpu", "a", "b")), Cache(current), scores)
    order.reconcile(f"{NS}/gpu")
    assert api.requests == []


def test_a_name_no_admission_check_could_take_is_reported_and_nothing_written() -> None:
    api = Recorder()
    name = "gpu.east"
    order = reconciler(api, Cache(placement(name)), Cache(decision(name, "a")), Cache())
    order.reconcile(f"{NS}/{name}")
    assert api.writes(MKC_PATH) == []
    [event] = api.events()
    assert event["reason"] == "MultiKueueConfigNameInvalid" and "DNS label" in event["message"]
    order.reconcile(f"{NS}/{name}")  # the same problem is recorded once, not on every reconcile
    assert len(api.events()) == 1


def test_a_refused_policy_keeps_the_last_order_and_warns() -> None:
    api = Recorder()
    bad = placement("gpu", {"scoreCoordinate": {"type": "AddOn"}})
    current = desired_config("gpu", f"{NS}/gpu", ["a"])
    order = reconciler(api, Cache(bad), Cache(decision("gpu", "a", "b")), Cache(current))
    order.reconcile(f"{NS}/gpu")
    assert api.writes(MKC_PATH) == []
    [event] = api.events()
    assert event["reason"] == "PrioritizerPolicyInvalid" and "keeps its order" in event["message"]


def test_more_than_twenty_clusters_lists_the_best_twenty_and_names_the_rest_in_a_warning() -> None:
    api = Recorder()
    clusters = [f"c{i:02d}" for i in range(22)]
    scores = Cache(*(score(c, i) for i, c in enumerate(clusters)))
    order = reconciler(api, Cache(placement()), Cache(decision("gpu", *clusters)), Cache(), scores)
    order.reconcile(f"{NS}/gpu")
    [(_, body)] = api.writes(MKC_PATH)
    assert body["spec"]["clusters"] == list(reversed(clusters))[:20]
    [event] = api.events()
    assert event["type"] == "Warning" and "not listed (Kueue allows 20): c01 (1), c00 (0)" in event["message"]


def test_a_config_created_meanwhile_by_someone_else_is_not_overwritten() -> None:
    api = Recorder(
        {("POST", MKC_PATH): Conflict(409, "AlreadyExists", 'multikueueconfigs "gpu" already exists')}
    )
    order = reconciler(api, Cache(placement()), Cache(decision("gpu", "a")), Cache())
    result = order.reconcile(f"{NS}/gpu")
    assert result is not None and result.requeue_after == 1.0  # the next pass reads who holds it
    assert [m for m, _ in api.writes(MKC_PATH)] == ["POST"]  # no GET-and-patch of the other writer's object
    assert api.events() == []


def test_no_decision_deletes_only_our_own_config() -> None:
    api = Recorder()
    ours = desired_config("gpu", f"{NS}/gpu", ["a"])
    order = reconciler(api, Cache(placement()), Cache(decision("gpu")), Cache(ours))
    order.reconcile(f"{NS}/gpu")
    assert [m for m, _ in api.writes(MKC_PATH)] == ["DELETE"]
    assert [e["reason"] for e in api.events()] == ["MultiKueueConfigDeleted"]
    # another Placement's config of that name (someone else's) stays, whatever happens to ours
    api = Recorder()
    theirs = desired_config("gpu", "other/gpu", ["a"])
    order = reconciler(api, Cache(), Cache(), Cache(theirs))
    order.reconcile(f"{NS}/gpu")
    assert api.requests == []
