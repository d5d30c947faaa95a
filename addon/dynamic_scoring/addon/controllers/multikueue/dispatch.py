"""The External MultiKueue dispatcher: waiting Workloads nominated to clusters in score order.

Runs only when the hub admin starts the manager with `--multikueue-dispatch` (besides
`--multikueue-order`, whose MultiKueueConfigs hold the order) and sets Kueue's
`multiKueue.dispatcherName` to `dispatch.DISPATCHER_NAME` (docs/multikueue-order.md).  Keyed by
Workload (`namespace/name`).  It reads, on the whole hub:

* Workloads (Kueue's, every namespace: a Job may be queued anywhere);
* AdmissionChecks (which `kueue.x-k8s.io/multikueue` check names which MultiKueueConfig);
* MultiKueueConfigs, of which only those the order controller wrote count.

A reconcile of a Workload that `dispatch.waiting` finds ours reads it once more from the apiserver
(the cache drops managedFields, which say who nominated and when) and writes
`status.nominatedClusterNames` with a merge patch under our own field manager
(`Writer.patch_status`), conditional on the resourceVersion it read: a Workload Kueue changed
meanwhile (admitted, evicted) is read again and judged again, never overwritten.  Each nomination
is a Normal Event on the Workload; a Workload every cluster left waiting gets one Warning.  The
next look is a requeue after the delay, so no timer outlives the process: a new leader finds the
same state in the Workloads.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dynamic_scoring.addon.controllers import HubContext
from dynamic_scoring.addon.controllers.multikueue import Cache
from dynamic_scoring.addon.controllers.notices import Notices
from dynamic_scoring.addon.dispatch import (
    FIELD_MANAGER,
    Decision,
    Waiting,
    check_config,
    condition,
    decide,
    exhausted_message,
    nominated,
    nomination_message,
    waiting,
)
from dynamic_scoring.addon.multikueue import listed, placement_of
from dynamic_scoring.kube.api import Conflict, NotFound
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import ADMISSION_CHECKS, MULTIKUEUE_CONFIGS, WORKLOADS, split_key
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)

NAME = "multikueue-dispatch"


@dataclass(frozen=True)
class _Looked:
    """What the last read of a Workload showed, and until when nothing of it can be due.

    A hint that saves reads, never a record: the scores reorder a config often, which wakes every
    waiting Workload, and each would be read again (its managedFields) only to learn that its next
    nomination is not due.  While its nominations and its config's set of clusters are the same as
    at that read, and `until` has not passed, the cache says all there is to say.  `until` None:
    nothing is due while they stay the same (every cluster nominated, or another writer's).  A new
    process starts with none and reads.
    """

    nominated: tuple[str, ...]
    clusters: frozenset[str]
    until: dt.datetime | None


class MultiKueueDispatch:
    """The reconcile of one Workload's nominations."""

    def __init__(
        self,
        writer: Writer,
        *,
        workloads: Cache,
        checks: Cache,
        configs: Cache,
        delay: float,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.writer = writer
        self.notices = Notices(writer)
        self._workloads = workloads
        self._checks = checks
        self._configs = configs
        self.delay = delay
        self._clock = clock
        self._looked: dict[str, _Looked] = {}
        self._lock = threading.Lock()

    def _orders(self) -> tuple[dict[str, str], dict[str, list[str]]]:
        """(AdmissionCheck -> the config it names, our configs -> their order), from the caches."""
        checks = {}
        for check in self._checks.list():
            config = check_config(check)
            if config is not None:
                checks[str(check["metadata"]["name"])] = config
        orders = {
            str(c["metadata"]["name"]): listed(c) for c in self._configs.list() if placement_of(c) is not None
        }
        return checks, orders

    def reconcile(self, key: str) -> Result | None:
        """Nominate the Workload's next cluster when it is due; None or a requeue for the next look."""
        namespace, name = split_key(key)
        cached = self._workloads.get(key)
        checks, orders = self._orders()
        why_cached = None if namespace is None or cached is None else waiting(cached, checks, orders)
        if namespace is None or cached is None or why_cached is None:  # gone, or not waiting on ours
            self.notices.clear(key)
            with self._lock:
                self._looked.pop(key, None)
            return None
        now = self._clock()
        with self._lock:
            hint = self._looked.get(key)
        if (
            hint is not None
            and hint.nominated == tuple(nominated(cached))
            and hint.clusters == frozenset(why_cached.order)
        ):
            if hint.until is None:
                return None
            if now < hint.until:
                return Result(requeue_after=max((hint.until - now).total_seconds(), 0.5))
        seen: list[tuple[JSON, Waiting, Decision]] = []

        def compute(workload: JSON) -> JSON | None:
            # every attempt works on a fresh GET: the cache drops managedFields, which say who
            # nominated and when, and a Workload Kueue changed meanwhile is judged again
            seen.clear()
            why = waiting(workload, checks, orders)
            if why is None:
                return None
            decision = decide(workload, why.order, self._clock(), self.delay)
            seen.append((workload, why, decision))
            if decision.foreign or decision.nominate is None:
                return None
            return {"nominatedClusterNames": decision.nominate}

        with self._lock:
            self._looked.pop(key, None)
        try:
            wrote = self.writer.patch_status(WORKLOADS, namespace, name, compute, field_manager=FIELD_MANAGER)
        except (Conflict, NotFound):
            return Result(requeue_after=0.5)  # changed five times over, or gone: look again
        if not seen:
            return None  # no longer waiting on one of ours
        workload, why, decision = seen[0]
        # what the Workload names now: the list written, or the one read when nothing was
        after = decision.nominate if wrote and decision.nominate is not None else nominated(workload)
        until = None if decision.wake_in is None else now + dt.timedelta(seconds=decision.wake_in)
        with self._lock:
            self._looked[key] = _Looked(tuple(after), frozenset(why.order), until)
        if decision.foreign:
            log.debug(
                "Workload %s: nominations are %s's; left alone",
                key,
                ", ".join(decision.foreign),
                extra={"controller": NAME, "key": key},
            )
            return None
        if wrote:
            message = nomination_message(why.config, decision, nominated(workload), self.delay)
            log.info("Workload %s: %s", key, message, extra={"controller": NAME, "key": key})
            self.writer.event(workload, "Normal", "MultiKueueNominated", message)
        if decision.exhausted:
            self.notices.warn(
                key,
                workload,
                "MultiKueueNoClusterAdmitted",
                exhausted_message(why.config, nominated(workload), self.delay),
            )
        if wrote or decision.exhausted:
            self._condition(workload, condition(workload, why.config, after, decision, self.delay, now))
        return None if decision.wake_in is None else Result(requeue_after=decision.wake_in)

    def _condition(self, workload: JSON, wanted: JSON) -> None:
        """Apply our condition on the Workload, unless it already reads so (a repeat writes nothing)."""
        for existing in (workload.get("status") or {}).get("conditions") or []:
            if existing.get("type") == wanted["type"] and all(
                existing.get(k) == wanted[k] for k in ("status", "reason", "message")
            ):
                return
        meta = workload["metadata"]
        try:
            self.writer.apply_status(
                WORKLOADS,
                meta["namespace"],
                meta["name"],
                {"conditions": [wanted]},
                field_manager=FIELD_MANAGER,
            )
        except (Conflict, NotFound) as exc:  # gone, or another writer holds that condition: its own
            log.info(
                "Workload %s/%s: condition %s not written: %s",
                meta["namespace"],
                meta["name"],
                wanted["type"],
                exc,
                extra={"controller": NAME},
            )


def _every(workloads: Cache) -> Callable[[JSON], Iterable[str]]:
    """All Workload keys: a changed check or config may change what any of them waits on."""
    return lambda _obj: [f"{w['metadata']['namespace']}/{w['metadata']['name']}" for w in workloads.list()]


def multikueue_dispatch_controller(ctx: HubContext) -> list[Controller]:
    """The controller, when the manager runs with `--multikueue-dispatch` (a ``ControllerFactory``)."""
    if not (ctx.multikueue_order and ctx.multikueue_dispatch):
        return []
    manager = ctx.manager
    workloads = manager.informer(WORKLOADS)
    checks = manager.informer(ADMISSION_CHECKS)
    configs = manager.informer(MULTIKUEUE_CONFIGS)
    dispatch = MultiKueueDispatch(
        manager.writer(NAME),
        workloads=workloads,
        checks=checks,
        configs=configs,
        delay=ctx.multikueue_dispatch_delay,
    )
    controller = Controller(NAME, dispatch.reconcile, resync_seconds=ctx.resync_seconds)
    controller.watch(workloads)
    controller.watch(checks, _every(workloads))
    controller.watch(configs, _every(workloads))
    return [controller]


__all__ = ["NAME", "MultiKueueDispatch", "multikueue_dispatch_controller"]
