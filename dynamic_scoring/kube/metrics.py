"""The controllers' and watches' Prometheus metrics, on a registry the process chooses.

One `ControllerMetrics` per registry holds every family; controllers, writers and informers label
their samples with their own name.  A registry is injected (rather than the global one) so that
tests and several managers in one process do not collide on metric names.  No label ever
carries an object name or a credential: only controller names, verbs and resource plurals.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_PREFIX = "dynamic_scoring"


class ControllerMetrics:
    """Reconcile counts and durations, queue depth, writes, watch errors and relists."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            f"{_PREFIX}_controller_reconcile_total",
            "Reconciles by outcome (success, error, requeue).",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            f"{_PREFIX}_controller_reconcile_duration_seconds",
            "Time spent in one reconcile.",
            ["controller"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.resyncs_total = Counter(
            f"{_PREFIX}_controller_resyncs_total",
            "Periodic resyncs, each after it queued every key of the primary informer.",
            ["controller"],
            registry=r,
        )
        self.queue_depth = Gauge(
            f"{_PREFIX}_controller_queue_depth",
            "Keys waiting to be reconciled (ready now; delayed and in-flight keys not counted).",
            ["controller"],
            registry=r,
        )
        self.queue_delayed = Gauge(
            f"{_PREFIX}_controller_queue_delayed",
            "Keys waiting for a backoff or a requeue delay.",
            ["controller"],
            registry=r,
        )
        self.writes_total = Counter(
            f"{_PREFIX}_controller_writes_total",
            "Writes to the apiserver by verb (create, patch, delete, status, event) and resource.",
            ["controller", "verb", "resource"],
            registry=r,
        )
        self.write_errors_total = Counter(
            f"{_PREFIX}_controller_write_errors_total",
            "Writes the apiserver refused or that failed in transport (409 retries included).",
            ["controller", "verb", "resource"],
            registry=r,
        )
        self.watch_errors_total = Counter(
            f"{_PREFIX}_watch_errors_total",
            "Failed lists and watches (each is retried with backoff).",
            ["resource"],
            registry=r,
        )
        self.watch_relists_total = Counter(
            f"{_PREFIX}_watch_relists_total",
            "Full relists after the first (410 Gone, or a restarted watch with no usable version).",
            ["resource"],
            registry=r,
        )
        self.watch_healthy = Gauge(
            f"{_PREFIX}_watch_healthy",
            "1 while the watch is synced and not failing for longer than its bound, else 0.",
            ["resource"],
            registry=r,
        )
        self.watch_objects = Gauge(
            f"{_PREFIX}_watch_objects",
            "Objects in the watch cache.",
            ["resource"],
            registry=r,
        )
        self.watch_synced = Gauge(
            f"{_PREFIX}_watch_synced",
            "1 once the watch's first list has filled its cache (a 404 or 403 list keeps it 0).",
            ["resource"],
            registry=r,
        )
        self.controller_running = Gauge(
            f"{_PREFIX}_controller_running",
            "1 while the controller's workers run, 0 while it waits for the first list of its watches.",
            ["controller"],
            registry=r,
        )

    def track_queue(self, controller: str, depth: Callable[[], int], delayed: Callable[[], int]) -> None:
        """Report a queue's depth at scrape time (no bookkeeping on the hot path)."""
        self.queue_depth.labels(controller).set_function(lambda: float(depth()))
        self.queue_delayed.labels(controller).set_function(lambda: float(delayed()))

    def track_watch(
        self,
        resource: str,
        healthy: Callable[[], bool],
        synced: Callable[[], bool],
        size: Callable[[], int],
    ) -> None:
        """Report a watch cache's health, first sync and size at scrape time."""
        self.watch_healthy.labels(resource).set_function(lambda: 1.0 if healthy() else 0.0)
        self.watch_synced.labels(resource).set_function(lambda: 1.0 if synced() else 0.0)
        self.watch_objects.labels(resource).set_function(lambda: float(size()))

    def set_running(self, controller: str, running: bool) -> None:
        """Whether ``controller``'s workers run (0 while it waits for its watches' first lists)."""
        self.controller_running.labels(controller).set(1 if running else 0)

    def wrote(self, controller: str, verb: str, resource: str) -> None:
        """Count one write the apiserver accepted."""
        self.writes_total.labels(controller, verb, resource).inc()

    def write_failed(self, controller: str, verb: str, resource: str) -> None:
        """Count one write that failed."""
        self.write_errors_total.labels(controller, verb, resource).inc()
