"""The multikueue-order reconcile when its MultiKueueConfig is replaced between its read and its write.

Another writer (kueue-addon, a person) deletes our config and creates its own of the same name
just before our patch or delete.  The reconcile must leave that config exactly as it is: not
relabelled as ours, not re-ordered, not deleted, and no Event claiming it was.
"""

from __future__ import annotations

import copy
from typing import cast

from dynamic_scoring.addon.controllers.multikueue import MultiKueueOrder
from dynamic_scoring.addon.multikueue import desired_config
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import EVENTS, MULTIKUEUE_CONFIGS
from dynamic_scoring.kube.writes import Writer
from tests.unit.addon.controllers.fakes import Cache
from tests.unit.addon.controllers.test_multikueue_order_reconcile import NOW, NS, decision, placement, score
from tests.unit.shared.fake_apiserver import FakeApiserver

KEY = f"{NS}/gpu"
PATH = MULTIKUEUE_CONFIGS.path(None, "gpu")
FOREIGN: JSON = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "MultiKueueConfig",
    "metadata": {"name": "gpu", "labels": {"app.kubernetes.io/managed-by": "kueue-addon"}},
    "spec": {"clusters": ["x"]},
}


def running(*clusters: str) -> tuple[FakeApiserver, MultiKueueOrder, JSON]:
    """The apiserver holding our config for `gpu` (listing a, b), and a reconcile whose cache has it."""
    api = FakeApiserver()
    ours = api.put(PATH, desired_config("gpu", KEY, ["a", "b"]))
    order = MultiKueueOrder(
        Writer(cast(KubeAPI, api), "multikueue-order"),
        placements=Cache(placement()),
        decisions=Cache(decision("gpu", *clusters)),
        configs=Cache(ours),
        scores=[Cache(score("a", 10), score("b", 90))],
        clock=lambda: NOW,
    )
    return api, order, ours


def reasons(api: FakeApiserver) -> list[str]:
    return [str(b["reason"]) for m, p, b in api.requests if m == "POST" and p.startswith(EVENTS.path(NS))]


def test_a_new_order_is_not_written_onto_a_config_that_replaced_ours() -> None:
    api, order, _ = running("a", "b")  # b scores higher: the order changes to b, a
    api.before("PATCH", lambda: api.replace(PATH, copy.deepcopy(FOREIGN)))
    result = order.reconcile(KEY)
    assert result is not None and result.requeue_after == 1.0  # the next pass warns MultiKueueConfigNotOurs
    stored = api.objects[PATH]
    assert stored["metadata"]["labels"] == FOREIGN["metadata"]["labels"]
    assert "annotations" not in stored["metadata"]
    assert stored["spec"] == {"clusters": ["x"]}
    assert api.refused == [("PATCH", PATH)] and api.sent("PATCH") == [PATH]
    assert reasons(api) == []  # no MultiKueueOrderChanged for a write that did not happen


def test_our_config_is_still_reordered_when_nobody_replaced_it() -> None:
    api, order, _ = running("a", "b")
    assert order.reconcile(KEY) is None
    assert api.objects[PATH]["spec"]["clusters"] == ["b", "a"]
    assert reasons(api) == ["MultiKueueOrderChanged"]


def test_a_config_that_replaced_ours_is_not_deleted_when_no_cluster_is_decided() -> None:
    api, order, _ = running()  # no cluster decided: our config is to go
    api.before("DELETE", lambda: api.replace(PATH, copy.deepcopy(FOREIGN)))
    assert order.reconcile(KEY) is None
    assert api.objects[PATH]["spec"] == {"clusters": ["x"]}  # still there
    assert reasons(api) == []  # no MultiKueueConfigDeleted either


def test_our_config_is_deleted_when_no_cluster_is_decided() -> None:
    api, order, ours = running()
    assert order.reconcile(KEY) is None
    assert PATH not in api.objects
    [(_, _, body)] = [r for r in api.requests if r[0] == "DELETE"]
    assert body["preconditions"]["uid"] == ours["metadata"]["uid"]
    assert reasons(api) == ["MultiKueueConfigDeleted"]
