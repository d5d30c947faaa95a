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
controllers watch it), starts them, waits for their first list, and only then runs the
controllers, so no reconcile ever sees a half-filled cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from dynamic_scoring.kube.api import KubeAPI, KubeError
from dynamic_scoring.kube.informer import Informer, WatchEvent
from dynamic_scoring.kube.metrics import ControllerMetrics
from dynamic_scoring.kube.resources import JSON, Resource, object_key
from dynamic_scoring.kube.workqueue import WorkQueue
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)

DEFAULT_RESYNC_SECONDS = 600.0  # the addon-framework resyncs its informers every 10 min


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
    def primary(self) -> Informer | None:
        """The first informer watched: its keys are the ones resynced."""
        return self._primary

    def watch(self, informer: Informer, keys: Callable[[JSON], Iterable[str]] | None = None) -> None:
        """Enqueue `keys(obj)` (default: the object's own key) for every change `informer` sees.

        For a MODIFIED event the keys of the old object are enqueued too, so a change that moves
        an object from one owner to another reconciles both.
        """
        mapper = keys if keys is not None else _own_key
        if self._primary is None:
            self._primary = informer
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
    ) -> None:
        self.api = api
        self.watch_unhealthy_after = watch_unhealthy_after
        self.metrics = ControllerMetrics(metrics_registry)
        self.registry = self.metrics.registry
        self._informers: dict[tuple[Resource, str | None, str | None, str | None], Informer] = {}
        self._controllers: list[Controller] = []
        self._running = threading.Event()

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

    @property
    def informers(self) -> list[Informer]:
        """All shared informers."""
        return list(self._informers.values())

    @property
    def controllers(self) -> list[Controller]:
        """All controllers."""
        return list(self._controllers)

    def run(self, stop: threading.Event) -> None:
        """Start the informers, wait for their first list, run the controllers until `stop`."""
        informers = self.informers
        for informer in informers:
            informer.start()
        try:
            waiting = list(informers)
            while waiting and not stop.is_set():
                waiting = [i for i in waiting if not i.wait_synced(min(1.0, 1.0 / len(waiting)))]
                if waiting and not all(i.healthy for i in waiting):
                    log.warning("waiting for the first list of %s", ", ".join(i.name for i in waiting))
                    stop.wait(5)
            if stop.is_set():
                return
            log.info("%d informers synced; starting %d controllers", len(informers), len(self._controllers))
            threads = [
                threading.Thread(target=c.run, args=(stop,), name=f"controller {c.name}", daemon=True)
                for c in self._controllers
            ]
            for t in threads:
                t.start()
            self._running.set()
            stop.wait()
            for t in threads:
                t.join(60)
        finally:
            self._running.clear()
            for informer in informers:
                informer.stop()

    def ready(self) -> bool:
        """True while the controllers run and every informer is synced and healthy."""
        return not self.problems()

    def problems(self) -> list[str]:
        """Why the manager is not ready, one line each (for a `/readyz` body); empty when ready."""
        out = [] if self._running.is_set() else ["controllers are not running"]
        for informer in self._informers.values():
            if not informer.synced:
                out.append(f"watch {informer.name}: not synced yet")
            elif not informer.healthy:
                out.append(f"watch {informer.name}: failing for more than {informer.unhealthy_after:.0f}s")
        return out
