"""Controllers: a work queue of keys fed by informers, drained by level-triggered reconciles.

A reconcile gets a key, reads what it needs from the informers' caches, makes the world agree
(through a `Writer`, which writes only on difference) and returns.  It is told nothing about
*what* changed, so it must be idempotent; that is what makes missed, merged and replayed events
harmless, and a periodic resync (every `resync_seconds`, all keys of the primary informer) a
safety net rather than a source of writes.

A reconcile that raises is logged with its key, counted, and retried with the queue's per-key
exponential backoff; one that returns normally resets the backoff.  Nothing a reconcile does can
end a worker thread.

`ControllerManager` owns the shared informers (one per resource and selector, however many
controllers watch it) and starts them; each controller starts as soon as the informers *it*
uses have listed (client-go's per-controller `WaitForCacheSync`), so no reconcile ever sees a
half-filled cache, and one resource that cannot be listed (its CRD not installed yet, or a list
the identity may not do) holds back only the controllers that use it.  Those wait, with no
restart, until the informer's retries succeed; `problems()` and the `running` gauge say which
controllers wait and on what.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from dynamic_scoring.kube.api import KubeAPI, KubeError
from dynamic_scoring.kube.informer import (
    DEFAULT_REMEDY_404,
    Informer,
    WatchEvent,
)
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.metrics import ControllerMetrics
from dynamic_scoring.kube.resources import Resource, object_key
from dynamic_scoring.kube.workqueue import WorkQueue
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)

DEFAULT_RESYNC_SECONDS = 600.0  # the addon-framework resyncs its informers every 10 min
#: a controller still waiting for its caches after this long gets a WARNING, then one a minute
WAITING_WARNING_AFTER = 10.0
WAITING_WARNING_EVERY = 60.0


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for besides success: to be run again after a delay."""

    requeue_after: float | None = None


Reconcile = Callable[[str], Result | None]


class Controller:
    """A named reconcile function, its work queue and its workers."""

    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        *,
        workers: int = 1,
        resync_seconds: float = DEFAULT_RESYNC_SECONDS,
        metrics: ControllerMetrics | None = None,
        queue: WorkQueue | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("a controller needs at least one worker")
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.resync_seconds = resync_seconds
        self.queue = queue if queue is not None else WorkQueue()
        self.metrics = metrics if metrics is not None else ControllerMetrics()
        self._explicit_metrics = metrics is not None
        self._primary: Informer | None = None
        self._informers: list[Informer] = []
        self._metrics_bound = False

    def use_metrics(self, metrics: ControllerMetrics) -> None:
        """Report into `metrics` (the manager's registry) unless metrics were given explicitly."""
        if not self._explicit_metrics:
            self.metrics = metrics

    @property
    def informers(self) -> list[Informer]:
        """Every informer this controller watches or reads: it starts once all have listed."""
        return list(self._informers)

    def uses(self, informer: Informer) -> None:
        """Declare a cache the reconcile reads without being woken by it.

        The controller then waits for its first list too (`watch` declares its informer already).
        """
        if informer not in self._informers:
            self._informers.append(informer)

    def watch(self, informer: Informer, keys: Callable[[JSON], Iterable[str]] | None = None) -> None:
        """Enqueue `keys(obj)` (default: the object's own key) for every change `informer` sees.

        For a MODIFIED event the keys of the old object are enqueued too, so a change that moves
        an object from one owner to another reconciles both.
        """
        mapper = keys if keys is not None else _own_key
        if self._primary is None:
            self._primary = informer
        if informer not in self._informers:
            self._informers.append(informer)

        def on_event(event: WatchEvent) -> None:
            targets = set(mapper(event.obj))
            if event.old is not None and event.type == "MODIFIED":
                targets.update(mapper(event.old))
            for key in targets:
                self.queue.add(key)

        informer.add_handler(on_event)

    def enqueue(self, key: str) -> None:
        """Ask for `key` to be reconciled."""
        self.queue.add(key)

    def process_one(self, timeout: float | None = None) -> bool:
        """Take one key and reconcile it; False when the queue is shut down (or `timeout` passed)."""
        key = self.queue.get(timeout)
        if key is None:
            return False
        started = time.monotonic()
        try:
            result = self.reconcile(key)
        except Exception as exc:
            delay = self.queue.backoff(key)
            self.metrics.reconcile_total.labels(self.name, "error").inc()
            log.error(
                "reconcile %s failed (retry %d in %.3fs): %s: %s",
                key,
                self.queue.num_requeues(key) + 1,
                delay,
                type(exc).__name__,
                exc,
                extra={"controller": self.name, "key": key},
                exc_info=not _expected(exc),
            )
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)
            if result is not None and result.requeue_after is not None:
                self.metrics.reconcile_total.labels(self.name, "requeue").inc()
                self.queue.add_after(key, result.requeue_after)
            else:
                self.metrics.reconcile_total.labels(self.name, "success").inc()
        finally:
            self.metrics.reconcile_duration.labels(self.name).observe(time.monotonic() - started)
            self.queue.done(key)
        return True

    def _worker(self) -> None:
        while self.process_one():
            pass

    def _resync(self, stop: threading.Event) -> None:
        while not stop.wait(self.resync_seconds):
            if self._primary is None:
                continue
            keys = self._primary.keys()
            log.debug("resync of %s: %d keys", self.name, len(keys), extra={"controller": self.name})
            for key in keys:
                self.queue.add(key)
            # counted after the keys are queued: "N resyncs, then an idle queue" means N full passes
            # were reconciled, which is how a test proves that a resync writes nothing
            self.metrics.resyncs_total.labels(self.name).inc()

    def run(self, stop: threading.Event) -> None:
        """Run the workers and the resync timer until `stop` is set (blocking)."""
        if not self._metrics_bound:
            self.metrics.track_queue(self.name, lambda: len(self.queue), lambda: self.queue.delayed)
            self._metrics_bound = True
        threads = [
            threading.Thread(target=self._worker, name=f"{self.name} worker {i}", daemon=True)
            for i in range(self.workers)
        ]
        if self.resync_seconds > 0:
            threads.append(
                threading.Thread(target=self._resync, args=(stop,), name=f"{self.name} resync", daemon=True)
            )
        for t in threads:
            t.start()
        stop.wait()
        self.queue.shutdown()
        for t in threads:
            t.join(30)


def _own_key(obj: JSON) -> Iterable[str]:
    return (object_key(obj),)


def _expected(exc: Exception) -> bool:
    """Errors that say something about the world, not about our code: no traceback needed."""
    return isinstance(exc, KubeError)


class ControllerManager:
    """Shared informers and the controllers that use them, in one process."""

    def __init__(
        self,
        api: KubeAPI,
        *,
        metrics_registry: CollectorRegistry | None = None,
        watch_unhealthy_after: float = 60.0,
        remedy_404: Callable[[Resource], str] | None = None,
    ) -> None:
        """Shared informers and controllers on `api`.

        `remedy_404(resource)` says how to install a CRD the apiserver does not serve (for logs
        and `problems()`.
        """
        self.api = api
        self.watch_unhealthy_after = watch_unhealthy_after
        self.remedy_404 = remedy_404
        self.metrics = ControllerMetrics(metrics_registry)
        self.registry = self.metrics.registry
        self._informers: dict[tuple[Resource, str | None, str | None, str | None], Informer] = {}
        self._controllers: list[Controller] = []
        self._running = threading.Event()
        self._started: set[str] = set()
        self._lock = threading.Lock()

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Informer:
        """The shared informer for these arguments (created on first use, before `run`)."""
        key = (resource, namespace, label_selector, field_selector)
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.api,
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                metrics=self.metrics,
                unhealthy_after=self.watch_unhealthy_after,
                remedy_404=self.remedy_404(resource) if self.remedy_404 else DEFAULT_REMEDY_404,
            )
            self._informers[key] = informer
        return informer

    def writer(self, controller: str) -> Writer:
        """A `Writer` counting into this manager's metrics under `controller`."""
        return Writer(self.api, controller, self.metrics)

    def add(self, controller: Controller) -> None:
        """Run `controller` with the others; it reports into this manager's registry."""
        if any(c.name == controller.name for c in self._controllers):
            raise ValueError(f"a controller named {controller.name!r} is already added")
        controller.use_metrics(self.metrics)
        self._controllers.append(controller)
        self.metrics.set_running(controller.name, False)

    @property
    def informers(self) -> list[Informer]:
        """All shared informers."""
        return list(self._informers.values())

    @property
    def controllers(self) -> list[Controller]:
        """All controllers."""
        return list(self._controllers)

    def run(self, stop: threading.Event) -> None:
        """Start the informers, start each controller once its own informers have listed, run until `stop`.

        A controller whose informers cannot list (404: CRD missing; 403: not allowed) waits while
        the others run; it starts, with no restart, when a retry of that list succeeds.
        """
        informers = self.informers
        for informer in informers:
            informer.start()
        threads = [
            threading.Thread(
                target=self._run_when_synced, args=(c, stop), name=f"controller {c.name}", daemon=True
            )
            for c in self._controllers
        ]
        try:
            for t in threads:
                t.start()
            self._running.set()
            stop.wait()
            for t in threads:
                t.join(60)
        finally:
            self._running.clear()
            with self._lock:
                self._started.clear()
            for c in self._controllers:
                self.metrics.set_running(c.name, False)
            for informer in informers:
                informer.stop()

    def _run_when_synced(self, controller: Controller, stop: threading.Event) -> None:
        """Wait for the first list of `controller`'s informers (warning while it takes long), then run it."""
        began = time.monotonic()
        warn_at = began + WAITING_WARNING_AFTER
        while not stop.is_set():
            pending = [i for i in controller.informers if not i.synced]
            if not pending:
                break
            if time.monotonic() >= warn_at:
                warn_at = time.monotonic() + WAITING_WARNING_EVERY
                log.warning(
                    "controller %s has waited %.0fs for %s; the controllers that do not need it run",
                    controller.name,
                    time.monotonic() - began,
                    "; ".join(f"{i.name} ({i.problem})" for i in pending),
                    extra={"controller": controller.name},
                )
            pending[0].wait_synced(0.5)
        if stop.is_set():
            return
        log.info(
            "controller %s: %d informers synced after %.1fs; starting",
            controller.name,
            len(controller.informers),
            time.monotonic() - began,
            extra={"controller": controller.name},
        )
        with self._lock:
            self._started.add(controller.name)
        self.metrics.set_running(controller.name, True)
        controller.run(stop)

    def running(self, name: str) -> bool:
        """True once controller `name` has started (its informers listed) and until `run` ends."""
        with self._lock:
            return name in self._started

    def waiting(self) -> dict[str, list[Informer]]:
        """The controllers not started yet, each with the informers it still waits for."""
        with self._lock:
            started = set(self._started)
        return {
            c.name: [i for i in c.informers if not i.synced]
            for c in self._controllers
            if c.name not in started
        }

    def ready(self) -> bool:
        """True while every controller runs and every informer is synced and healthy.

        A manager with *some* controllers waiting is deliberately not ready: the ones waiting do
        nothing, and readiness is where `kubectl get pods` and a rollout show that.
        """
        return not self.problems()

    def problems(self) -> list[str]:
        """Why the manager is not ready, one line each (for a `/readyz` body); empty when ready.

        One line per waiting controller naming what it waits for, then one per informer that is
        not synced or failing, with the cause and what to do for a 404 or 403.
        """
        if not self._running.is_set():
            out = ["controllers are not running"]
        else:
            out = [
                f"controller {name}: waiting for {', '.join(i.name for i in pending)}"
                if pending
                else f"controller {name}: starting"
                for name, pending in self.waiting().items()
            ]
        for informer in self._informers.values():
            problem = informer.problem
            if problem is not None:
                out.append(f"watch {informer.name}: {problem}")
        return out
