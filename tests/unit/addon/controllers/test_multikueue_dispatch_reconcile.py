"""The dispatcher's reconcile on in-memory caches, its requests recorded instead of sent.

The integration test runs it on a real apiserver with Kueue's CRDs; here are the paths a real
apiserver makes awkward to reach: a write refused as stale, and the Warning recorded once.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from dynamic_scoring.addon.controllers.multikueue.dispatch import MultiKueueDispatch
from dynamic_scoring.addon.dispatch import FIELD_MANAGER, MULTIKUEUE_CONTROLLER
from dynamic_scoring.addon.multikueue import desired_config
from dynamic_scoring.kube.api import Conflict
from dynamic_scoring.kube.jsontypes import JSON
from tests.unit.addon.controllers.fakes import Cache, Recorder

NOW = dt.datetime(2026, 12, 4, 12, 1, 0, tzinfo=dt.UTC)
WL_PATH = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads/job-1"


class Hub(Recorder):
    """A recorder that answers a GET of the Workload with the object it holds (managedFields and all)."""

    def __init__(self, workload: JSON, **kw: Any) -> None:
        super().__init__(**kw)
        self.workload = workload

    def request(self, method: str, path: str, **kw: Any) -> JSON:
        if method == "GET" and path == WL_PATH:
            self.requests.append((method, path, None))
            return copy.deepcopy(self.workload)
        return super().request(method, path, **kw)


def workload(*nominated: str, written: str = "2026-12-04T12:00:00Z") -> JSON:
    status: JSON = {
        "conditions": [{"type": "QuotaReserved", "status": "True"}],
        "admissionChecks": [{"name": "mk", "state": "Pending"}],
    }
    managed = []
    if nominated:
        status["nominatedClusterNames"] = list(nominated)
        managed.append(
            {
                "manager": FIELD_MANAGER,
                "operation": "Update",
                "subresource": "status",
                "time": written,
                "fieldsV1": {"f:status": {"f:nominatedClusterNames": {}}},
            }
        )
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-1",
            "namespace": "team",
            "uid": "w1",
            "resourceVersion": "7",
            "managedFields": managed,
        },
        "status": status,
    }


def dispatcher(hub: Hub) -> MultiKueueDispatch:
    check = {
        "metadata": {"name": "mk"},
        "spec": {
            "controllerName": MULTIKUEUE_CONTROLLER,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "spill-over"},
        },
    }
    return MultiKueueDispatch(
        hub.writer("multikueue-dispatch"),
        workloads=Cache(hub.workload),
        checks=Cache(check),
        configs=Cache(desired_config("spill-over", "kueue-system/spill-over", ["c3", "c4"])),
        delay=10,
        clock=lambda: NOW,
    )


def test_a_nomination_is_a_status_merge_patch_as_our_field_manager_on_the_version_read() -> None:
    hub = Hub(workload())
    result = dispatcher(hub).reconcile("team/job-1")
    assert result is not None and result.requeue_after == 10
    nomination, applied = [b for m, p, b in hub.requests if m == "PATCH"]
    assert nomination == {
        "status": {"nominatedClusterNames": ["c3"]},
        "metadata": {"uid": "w1", "resourceVersion": "7"},
    }
    # then our condition, applied on its own (a merge patch would replace Kueue's conditions)
    (condition,) = applied["status"]["conditions"]
    assert applied["kind"] == "Workload" and applied["metadata"] == {"name": "job-1", "namespace": "team"}
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "MultiKueueNominated",
        "True",
        "Nominated",
    )
    assert condition["message"].startswith("nominated c3 of MultiKueueConfig spill-over, best-scored first")
    (event,) = hub.events()
    assert event["reason"] == "MultiKueueNominated" and "nominated c3, the best-scored" in event["message"]


def test_the_field_manager_is_named_on_the_request() -> None:
    seen: list[Any] = []

    class Spy(Hub):
        def request(self, method: str, path: str, **kw: Any) -> JSON:
            if method == "PATCH":
                seen.append(kw.get("query"))
            return super().request(method, path, **kw)

    dispatcher(Spy(workload())).reconcile("team/job-1")
    assert seen == [{"fieldManager": FIELD_MANAGER}] * 2  # the nominations, then the condition


def test_a_workload_changed_under_us_is_read_again_and_the_reconcile_comes_back() -> None:
    hub = Hub(
        workload(), refuse={("PATCH", WL_PATH): Conflict(409, "Conflict", "the object has been modified")}
    )
    result = dispatcher(hub).reconcile("team/job-1")
    assert result is not None and result.requeue_after == 0.5
    # five attempts, each on a fresh read; no Event for a nomination that was not written
    assert [m for m, p, _ in hub.requests if p.startswith(WL_PATH)] == ["GET", "PATCH"] * 5
    assert hub.events() == []


def test_every_cluster_left_waiting_is_one_warning_however_often_it_is_reconciled() -> None:
    hub = Hub(workload("c3", "c4"))
    reconcile = dispatcher(hub)
    for _ in range(3):
        assert reconcile.reconcile("team/job-1") is None
    (event,) = hub.events()
    assert event["type"] == "Warning" and event["reason"] == "MultiKueueNoClusterAdmitted"
    # no nomination written; the condition says so (the recorder does not keep it, so each pass
    # applies it again: the real apiserver's object then reads so and the next pass writes nothing)
    applied = [b for m, _, b in hub.requests if m == "PATCH"]
    assert applied and all("nominatedClusterNames" not in b["status"] for b in applied)
    assert applied[0]["status"]["conditions"][0]["reason"] == "AllClustersNominated"


def test_a_wake_before_the_next_nomination_is_due_reads_nothing() -> None:
    """A config reorder wakes every waiting Workload; one not due is answered from the cache."""
    hub = Hub(workload())
    now = [NOW]
    reconcile = dispatcher(hub)
    reconcile._clock = lambda: now[0]
    reconcile.reconcile("team/job-1")
    assert [m for m, p, _ in hub.requests if p == WL_PATH] == ["GET"]
    # the informer delivers our write; 4 s later a reorder wakes it: no read, back in 6 s
    hub.workload = workload("c3", written="2026-12-04T12:01:00Z")
    reconcile._workloads = Cache(hub.workload)
    now[0] = NOW + dt.timedelta(seconds=4)
    result = reconcile.reconcile("team/job-1")
    assert result is not None and result.requeue_after == 6
    assert [m for m, p, _ in hub.requests if p == WL_PATH] == ["GET"]
    # a cluster leaves the config: read at once (to withdraw it), due or not
    reconcile._configs = Cache(desired_config("spill-over", "kueue-system/spill-over", ["c4"]))
    reconcile.reconcile("team/job-1")
    assert [m for m, p, _ in hub.requests if p == WL_PATH] == ["GET", "GET"]
    # a new process has no memory of that: it reads
    fresh = dispatcher(hub)
    fresh._clock = lambda: now[0]
    fresh.reconcile("team/job-1")
    assert [m for m, p, _ in hub.requests if p == WL_PATH] == ["GET", "GET", "GET"]
