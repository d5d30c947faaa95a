"""Ordering inside the distribution reconcile: a work key that runs before the first plan, and a
first plan that waits for the first probe of scorers nobody has probed yet.

A new leader's informers deliver every existing config work before its first plan has run; the
reconcile must then plan, not read the empty "desired" as "withdraw everything".  The apiserver
behaviour is covered in tests/integration/test_registry_controllers.py; this pins the ordering,
which a real apiserver only shows under load.
"""

from __future__ import annotations

from typing import Any, cast

from dynamic_scoring.addon.controllers.distribution.controller import (
    FIRST_PLAN_PROBE_WAIT_SECONDS,
    PLAN_KEY,
    WORK_KEY_PREFIX,
    WORK_NAME,
    Caches,
    Distribution,
)
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.writes import Writer


class _Cache:
    """What the reconcile reads from an Informer: get by key and list."""

    def __init__(self, *objects: JSON) -> None:
        self.objects = {
            f"{o['metadata'].get('namespace')}/{o['metadata']['name']}"
            if o["metadata"].get("namespace")
            else o["metadata"]["name"]: o
            for o in objects
        }

    def get(self, key: str) -> JSON | None:
        return self.objects.get(key)

    def list(self, namespace: str | None = None) -> list[JSON]:
        return [o for o in self.objects.values() if namespace in (None, o["metadata"].get("namespace"))]


class _Writes:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def delete(self, resource: Any, namespace: str | None, name: str, **_: Any) -> bool:
        self.calls.append(("delete", f"{namespace}/{name}"))
        return True

    def ensure(self, resource: Any, desired: JSON, current: JSON | None, **_: Any) -> JSON:
        self.calls.append(("ensure", f"{desired['metadata']['namespace']}/{desired['metadata']['name']}"))
        return current or desired


def test_a_work_key_before_the_first_plan_asks_for_a_plan_and_writes_nothing() -> None:
    work = {"metadata": {"name": WORK_NAME, "namespace": "cluster1", "resourceVersion": "5"}}
    empty = cast(Informer, _Cache())
    caches = Caches(
        scorers=empty,
        configs=empty,
        addons=empty,
        clusters=empty,
        works=cast(Informer, _Cache(work)),
        scores=empty,
        foreign=empty,
    )
    writes = _Writes()
    logic = Distribution(caches, cast(Writer, writes), "dynamic-scoring")
    queued: list[str] = []
    logic.enqueue = queued.append

    logic.reconcile(WORK_KEY_PREFIX + "cluster1")

    assert writes.calls == []
    assert queued == [PLAN_KEY]


def _first_plan_setup(*scorers: JSON) -> tuple[Distribution, _Writes, list[str], list[tuple[str, float]]]:
    namespace = "dynamic-scoring"
    config = {"metadata": {"name": "dynamic-scoring-config", "namespace": namespace}, "spec": {}}
    mca = {
        "metadata": {"name": "dynamic-scoring", "namespace": "cluster1", "uid": "u1"},
        "status": {"namespace": "open-cluster-management-agent-addon"},
    }
    cluster = {"metadata": {"name": "cluster1", "labels": {}}}
    caches = Caches(
        scorers=cast(Informer, _Cache(*scorers)),
        configs=cast(Informer, _Cache(config)),
        addons=cast(Informer, _Cache(mca)),
        clusters=cast(Informer, _Cache(cluster)),
        works=cast(Informer, _Cache()),
        scores=cast(Informer, _Cache()),
        foreign=cast(Informer, _Cache()),
    )
    writes = _Writes()
    logic = Distribution(caches, cast(Writer, writes), namespace)
    queued: list[str] = []
    later: list[tuple[str, float]] = []
    logic.enqueue = queued.append
    logic.enqueue_after = lambda key, delay: later.append((key, delay))
    return logic, writes, queued, later


def _scorer(name: str, status: JSON | None = None) -> JSON:
    obj: JSON = {
        "metadata": {
            "name": name,
            "namespace": "dynamic-scoring",
            "creationTimestamp": "2026-11-25T00:00:00Z",
        },
        "spec": {
            "source": {"type": "none"},
            "scoring": {"host": "http://127.0.0.1:8080", "path": "/scoring"},
            "configURL": "http://127.0.0.1:8080/config",
        },
    }
    if status is not None:
        obj["status"] = status
    return obj


def test_the_first_plan_waits_for_scorers_never_probed_then_plans_once_they_are() -> None:
    logic, _, queued, later = _first_plan_setup(_scorer("new"))
    now = [1000.0]
    logic.clock = lambda: now[0]

    logic.reconcile(PLAN_KEY)
    assert queued == [] and logic.plans == 0  # no work queued: nothing written without the scorer
    assert (PLAN_KEY, FIRST_PLAN_PROBE_WAIT_SECONDS) in later

    logic.caches.scorers.get("dynamic-scoring/new")["status"] = {"healthStatus": "Inactive"}  # type: ignore[index]
    logic.reconcile(PLAN_KEY)  # the scorer's status write wakes the plan
    assert logic.plans == 1 and queued == [WORK_KEY_PREFIX + "cluster1"]


def test_the_first_plan_waits_no_longer_than_its_bound_and_later_plans_do_not_wait() -> None:
    logic, _, queued, _ = _first_plan_setup(_scorer("never"))
    now = [1000.0]
    logic.clock = lambda: now[0]
    logic.reconcile(PLAN_KEY)
    assert logic.plans == 0
    now[0] += FIRST_PLAN_PROBE_WAIT_SECONDS
    logic.reconcile(PLAN_KEY)
    assert logic.plans == 1 and queued == [WORK_KEY_PREFIX + "cluster1"]
    logic.reconcile(PLAN_KEY)  # planned once: an unprobed scorer no longer holds anything
    assert logic.plans == 2


def test_probed_scorers_do_not_hold_the_first_plan() -> None:
    logic, _, queued, _ = _first_plan_setup(_scorer("known", {"healthStatus": "Active"}))
    logic.reconcile(PLAN_KEY)
    assert logic.plans == 1 and queued == [WORK_KEY_PREFIX + "cluster1"]


def test_a_work_withdrawn_by_ocm_before_the_delayed_plan_is_not_written_again() -> None:
    """Disable: the MCA turns deleting, OCM deletes the addon's labelled works, and the plan that
    would withdraw ours runs only FLEET_PLAN_DELAY_SECONDS later.  A work key in between (the work's
    delete event) must not re-create the work from the older plan: a work deleted before the work
    agent adds its finalizer leaves its ConfigMap on the cluster."""
    logic, writes, queued, _ = _first_plan_setup(_scorer("ready", {"healthStatus": "Active"}))
    logic.reconcile(PLAN_KEY)
    assert queued == [WORK_KEY_PREFIX + "cluster1"]
    logic.reconcile(queued.pop())
    assert writes.calls == [("ensure", f"cluster1/{WORK_NAME}")]  # written while the MCA is there

    mca = logic.caches.addons.get("cluster1/dynamic-scoring")
    assert mca is not None
    mca["metadata"]["deletionTimestamp"] = "2026-11-25T00:00:01Z"  # the MCA event; its plan waits
    logic.reconcile(WORK_KEY_PREFIX + "cluster1")  # OCM deleted the work: the cache has none
    assert writes.calls == [("ensure", f"cluster1/{WORK_NAME}")]  # nothing more

    del logic.caches.addons.objects["cluster1/dynamic-scoring"]  # type: ignore[attr-defined]
    logic.reconcile(WORK_KEY_PREFIX + "cluster1")  # the MCA is gone before the plan ran
    assert writes.calls == [("ensure", f"cluster1/{WORK_NAME}")]
