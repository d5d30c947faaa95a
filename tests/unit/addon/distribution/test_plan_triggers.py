"""Which MCA and ManagedCluster changes make the distribution plan the fleet again, and which do not.

Most MCA events are condition writes by us, OCM and the klusterlet; at 3,500 clusters planning on
each kept a core busy during a cold start (a third of the manager's samples).  The plan reads only
what these fingerprints hold, and a burst of such changes is planned once a second.
"""

from __future__ import annotations

import copy
from typing import Any

from dynamic_scoring.addon.controllers.distribution.controller import (
    FLEET_PLAN_DELAY_SECONDS,
    PLAN_KEY,
    _cluster_plan_inputs,
    _mca_plan_inputs,
    plan_when_changed,
)
from dynamic_scoring.kube.informer import WatchEvent
from dynamic_scoring.kube.workqueue import WorkQueue

MCA: dict[str, Any] = {
    "metadata": {"name": "dynamic-scoring", "namespace": "c1", "uid": "u1"},
    "status": {
        "namespace": "open-cluster-management-agent-addon",
        "conditions": [{"type": "Available", "status": "Unknown"}],
        "configReferences": [
            {
                "group": "addon.open-cluster-management.io",
                "resource": "addondeploymentconfigs",
                "namespace": "dynamic-scoring",
                "name": "default",
                "desiredConfig": {"namespace": "dynamic-scoring", "name": "default", "specHash": "h1"},
            }
        ],
    },
}


def changed(path: list[str], value: object) -> dict[str, Any]:
    obj = copy.deepcopy(MCA)
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


def test_condition_writes_do_not_change_what_the_plan_reads() -> None:
    conditions = [{"type": "Available", "status": "True"}, {"type": "RegistrationApplied", "status": "True"}]
    assert _mca_plan_inputs(changed(["status", "conditions"], conditions)) == _mca_plan_inputs(MCA)


def test_install_namespace_spec_hash_deletion_and_identity_do() -> None:
    refs = copy.deepcopy(MCA["status"]["configReferences"])
    refs[0]["desiredConfig"]["specHash"] = "h2"
    for other in (
        changed(["status", "namespace"], "elsewhere"),
        changed(["status", "configReferences"], refs),
        changed(["metadata", "deletionTimestamp"], "2026-11-25T00:00:00Z"),
        changed(["metadata", "uid"], "u2"),
    ):
        assert _mca_plan_inputs(other) != _mca_plan_inputs(MCA)


def test_a_cluster_matters_by_its_labels_and_its_deletion_only() -> None:
    cluster: dict[str, Any] = {
        "metadata": {"name": "c1", "uid": "k1", "labels": {"tier": "gold"}},
        "status": {},
    }
    heartbeat = copy.deepcopy(cluster)
    heartbeat["status"] = {"conditions": [{"type": "ManagedClusterConditionAvailable", "status": "True"}]}
    assert _cluster_plan_inputs(heartbeat) == _cluster_plan_inputs(cluster)
    relabelled = copy.deepcopy(cluster)
    relabelled["metadata"]["labels"] = {"tier": "silver"}
    assert _cluster_plan_inputs(relabelled) != _cluster_plan_inputs(cluster)


def test_a_burst_of_fleet_changes_costs_one_plan_a_second() -> None:
    """1,000 MCAs getting their config hash within a second: one plan, a second after the first."""
    now = [100.0]
    queue = WorkQueue(clock=lambda: now[0])
    on_event = plan_when_changed(queue, _mca_plan_inputs)
    for i in range(1000):
        old = changed(["metadata", "namespace"], f"c{i}")
        new = copy.deepcopy(old)
        new["status"]["configReferences"][0]["desiredConfig"]["specHash"] = "h2"
        on_event(WatchEvent("MODIFIED", new, old))
        now[0] += 0.0005  # the burst spans half a second
    assert queue.get(timeout=0) is None  # not yet: the plan waits for the rest of the burst
    assert queue.delayed == 1
    now[0] = 100.0 + FLEET_PLAN_DELAY_SECONDS
    assert queue.get(timeout=0) == PLAN_KEY
    queue.done(PLAN_KEY)
    assert queue.get(timeout=0) is None and queue.delayed == 0


def test_a_condition_write_asks_for_no_plan() -> None:
    queue = WorkQueue()
    conditions = [{"type": "Available", "status": "True"}]
    plan_when_changed(queue, _mca_plan_inputs)(
        WatchEvent("MODIFIED", changed(["status", "conditions"], conditions), MCA)
    )
    assert queue.delayed == 0 and len(queue) == 0
