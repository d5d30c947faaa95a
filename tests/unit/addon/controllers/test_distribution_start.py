"""Ordering inside the distribution reconcile: a work key that runs before the first plan.

A new leader's informers deliver every existing config work before its first plan has run; the
reconcile must then plan, not read the empty "desired" as "withdraw everything".  The apiserver
behaviour is covered in tests/integration/test_registry_controllers.py; this pins the ordering,
which a real apiserver only shows under load.
"""

from __future__ import annotations

from typing import Any, cast

from addon.controllers.distribution import PLAN_KEY, WORK_KEY_PREFIX, WORK_NAME, Caches, Distribution
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.writes import Writer

JSON = dict[str, Any]


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

    def delete(self, resource: Any, namespace: str | None, name: str) -> bool:
        self.calls.append(("delete", f"{namespace}/{name}"))
        return True

    def ensure(self, resource: Any, desired: JSON, current: JSON | None) -> JSON:
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
    )
    writes = _Writes()
    logic = Distribution(caches, cast(Writer, writes), "dynamic-scoring")
    queued: list[str] = []
    logic.enqueue = queued.append

    logic.reconcile(WORK_KEY_PREFIX + "cluster1")

    assert writes.calls == []
    assert queued == [PLAN_KEY]
