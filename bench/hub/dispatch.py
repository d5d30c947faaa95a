"""The External MultiKueue dispatcher's cost on a busy hub: reconciles and requests per config reorder.

    python -m bench multikueue-dispatch              # 10,000 Workloads, 1,000 of them waiting
    DS_BENCH_DISPATCH=2000,200 python -m bench multikueue-dispatch

A reorder of an ordered MultiKueueConfig (the scores crossed) wakes every Workload on the hub,
because any may wait on it.  Each reconcile of a Workload that does not wait reads only caches; one
that waits needs its managedFields (who nominated, and when), which the cache drops, so without a
hint it is read from the apiserver once per reorder.  This runs the controller's own reconcile on
in-memory caches and an in-memory API that counts requests:

* **first pass**: every Workload reconciled once (the waiting ones read, nominated, their
  condition applied);
* **a reorder, 4 s later**: every Workload reconciled again.  With the read hint (what the
  controller keeps of its last read), requests per reorder should be 0: nothing is due for 6 s;
* **the same reorder in a new process** (no hint, as after a restart): one read per waiting
  Workload, the number the hint saves on every reorder.

Reported per size: reconciles per second of one worker (Python time only: the API answers from
memory, so this is the controller's own CPU cost, not the apiserver's) and requests per reorder.
Target: 0 requests for a reorder with nothing due.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import time
from pathlib import Path
from typing import Any, cast

from bench import Row, benchmark, verdict
from dynamic_scoring.addon.controllers.multikueue.dispatch import MultiKueueDispatch
from dynamic_scoring.addon.dispatch import FIELD_MANAGER, MULTIKUEUE_CONTROLLER
from dynamic_scoring.addon.multikueue import desired_config
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.writes import Writer

START = dt.datetime(2026, 12, 4, 12, 0, 0, tzinfo=dt.UTC)
CLUSTERS = ["c3", "c4", "c2", "c1"]


class Store:
    """The informers' caches and the apiserver in one dict, counting the requests made to it."""

    def __init__(self, objects: list[JSON]) -> None:
        self.objects = {
            "/".join(filter(None, (o["metadata"].get("namespace"), o["metadata"]["name"]))): o
            for o in objects
        }
        self.requests: dict[str, int] = {}
        self.now = START

    # the cache side
    def get(self, key: str) -> JSON | None:
        return self.objects.get(key)

    def list(self, namespace: str | None = None) -> list[JSON]:
        return list(self.objects.values())

    # the API side
    def request(self, method: str, path: str, **kw: Any) -> JSON:
        self.requests[method] = self.requests.get(method, 0) + 1
        parts = path.split("/")
        if "workloads" not in parts:
            return {}
        key = f"{parts[parts.index('namespaces') + 1]}/{parts[parts.index('workloads') + 1]}"
        obj = self.objects[key]
        if method == "GET":
            return copy.deepcopy(obj)
        status = (kw.get("body") or {}).get("status") or {}
        if "nominatedClusterNames" in status:  # our merge patch: the field, and our managedFields entry
            obj["status"]["nominatedClusterNames"] = status["nominatedClusterNames"]
            obj["metadata"]["managedFields"] = [
                {
                    "manager": FIELD_MANAGER,
                    "operation": "Update",
                    "subresource": "status",
                    "time": self.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "fieldsV1": {"f:status": {"f:nominatedClusterNames": {}}},
                }
            ]
        elif "conditions" in status:
            obj["status"]["conditions"] = [
                *[c for c in obj["status"]["conditions"] if c["type"] != status["conditions"][0]["type"]],
                *status["conditions"],
            ]
        return copy.deepcopy(obj)


def workload(i: int, waiting: bool) -> JSON:
    state = "Pending" if waiting else "Ready"
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{i}",
            "namespace": f"team-{i % 50}",
            "uid": f"u{i}",
            "resourceVersion": "1",
        },
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admissionChecks": [{"name": "mk", "state": state}],
            **({} if waiting else {"clusterName": "c3"}),
        },
    }


def _sizes() -> list[tuple[int, int]]:
    raw = os.environ.get("DS_BENCH_DISPATCH", "10000,1000")
    total, waiting = (int(x) for x in raw.split(","))
    return [(total, waiting)]


def _dispatcher(store: Store, checks: Store, configs: Store) -> MultiKueueDispatch:
    return MultiKueueDispatch(
        Writer(cast(KubeAPI, store), "multikueue-dispatch"),
        workloads=store,
        checks=checks,
        configs=configs,
        delay=10,
        clock=lambda: store.now,
    )


def _pass(dispatch: MultiKueueDispatch, store: Store) -> tuple[float, int]:
    """Reconcile every Workload once: (seconds, requests made)."""
    before = sum(store.requests.values())
    started = time.perf_counter()
    for key in list(store.objects):
        dispatch.reconcile(key)
    return time.perf_counter() - started, sum(store.requests.values()) - before


@benchmark("multikueue-dispatch")
def multikueue_dispatch(_workdir: Path) -> list[Row]:
    rows = []
    check = {
        "metadata": {"name": "mk"},
        "spec": {
            "controllerName": MULTIKUEUE_CONTROLLER,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "spill-over"},
        },
    }
    for total, waiting in _sizes():
        store = Store([workload(i, i < waiting) for i in range(total)])
        checks = Store([check])
        configs = Store([desired_config("spill-over", "kueue-system/spill-over", CLUSTERS)])
        dispatch = _dispatcher(store, checks, configs)
        first, first_requests = _pass(dispatch, store)
        store.now = START + dt.timedelta(seconds=4)
        configs.objects["spill-over"]["spec"]["clusters"] = list(reversed(CLUSTERS))  # the scores crossed
        hinted, hinted_requests = _pass(dispatch, store)
        _, unhinted_requests = _pass(_dispatcher(store, checks, configs), store)
        name = f"multikueue-dispatch {total:,}/{waiting:,} waiting"
        rows += [
            Row(name, "first pass: reconciles/s", f"{total / first:,.0f}"),
            Row(name, "first pass: requests", f"{first_requests:,}"),
            Row(name, "reorder, nothing due: reconciles/s", f"{total / hinted:,.0f}"),
            Row(
                name,
                "reorder, nothing due: requests",
                f"{hinted_requests:,}",
                "0",
                verdict(hinted_requests == 0),
            ),
            Row(name, "same reorder, new process: requests", f"{unhinted_requests:,}"),
        ]
    return rows
