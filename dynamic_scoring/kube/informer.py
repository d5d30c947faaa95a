"""One watch cache per (resource, namespace, selectors), fed by list+watch: the hub's informer.

The loop is client-go's reflector, on plain JSON:

1. list (paged, 500 a page), replace the cache and emit the difference against what was cached:
   ADDED for new keys, MODIFIED for a changed resourceVersion, DELETED for keys that are gone;
2. watch from the list's resourceVersion with bookmarks, so a quiet watch still advances its
   version and a reconnect resumes without a relist;
3. when the stream ends (the server's timeoutSeconds), watch again from the last version;
4. on 410 Gone (the version was compacted away) relist and emit the difference, which is what
   happened while we were not looking;
5. on any other failure (apiserver down, connection cut, 5xx, 403) wait with exponential backoff
   and jitter (0.8 s doubling to 30 s), then resume; the error is logged and counted, never raised.

`healthy` turns False when failures have lasted longer than `unhealthy_after` seconds (default
60), so a readiness probe tells an operator the cache is stale instead of looking fine.

`relist_seconds` (off by default, as in client-go) also relists at least that often, whatever the
stream says, emitting only the difference: the agent, which follows one ConfigMap and has no
resync of its own, uses it as a guard against a watch that misses a change.

A list answered 404 (nobody serves the resource: its CRD is not installed, or not established
yet) or 403 (the identity may not list it) is retried like any failure, so a CRD installed later
or a permission granted later is picked up with no restart; but those two say what to do, so the
log line and `problem` name the remedy (`remedy_404`, set by whoever knows how the CRD is
installed, and the list/watch grant).

Cached objects are shared, not copied (thousands of ManagedClusters are read on every resync):
treat what `get` and `list` return as read-only.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dynamic_scoring.kube.api import Forbidden, Gone, KubeAPI, KubeError, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.metrics import ControllerMetrics
from dynamic_scoring.kube.resources import Resource, object_key
from dynamic_scoring.runtime.backoff import Backoff

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Objects = list[JSON]  # `list` is shadowed inside Informer by its method
Keys = list[str]

PAGE_SIZE = 500
WATCH_TIMEOUT_MIN = 300  # client-go: a random 5 to 10 min per watch, spreading reconnects
#: a watch that ends this quickly with no event counts as a failure, so a proxy that accepts and
#: closes at once cannot spin the loop
WATCH_MIN_HEALTHY_SECONDS = 1.0
#: what a 404 list asks for when the owner of the informer knows no better
DEFAULT_REMEDY_404 = "install its CustomResourceDefinition"


@dataclass(frozen=True)
class WatchEvent:
    """A change to one cached object; `old` is the cached object before it (None if new)."""

    type: EventType
    obj: JSON
    old: JSON | None


class Informer:
    """A list+watch cache of one resource kind, with change handlers."""

    def __init__(
        self,
        api: KubeAPI,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metrics: ControllerMetrics | None = None,
        unhealthy_after: float = 60.0,
        backoff: Backoff | None = None,
        watch_timeout: int = WATCH_TIMEOUT_MIN,
        remedy_404: str = DEFAULT_REMEDY_404,
        relist_seconds: float | None = None,
    ) -> None:
        self.api = api
        self.relist_seconds = relist_seconds
        self.remedy_404 = remedy_404
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.unhealthy_after = unhealthy_after
        self.watch_timeout = watch_timeout
        self._backoff = backoff or Backoff()
        self.name = resource.name + "".join(
            f" {k}={v}"
            for k, v in (("ns", namespace), ("labels", label_selector), ("fields", field_selector))
            if v is not None
        )
        self.metrics = metrics if metrics is not None else ControllerMetrics()
        self._lock = threading.RLock()
        self._by_ns: dict[str, dict[str, JSON]] = {}  # namespace ("" if cluster-scoped) -> key -> obj
        self._size = 0
        self._handlers: list[Callable[[WatchEvent], None]] = []
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._cancel: Callable[[], None] | None = None
        self._failing_since: float | None = None
        self._opened_at: float | None = None  # when the current watch was accepted
        self._last_error: str | None = None
        self.resource_version: str | None = None
        self._listed_at = 0.0
        self.relists = 0
        self.errors = 0
        self.metrics.track_watch(
            self.name, lambda: self.healthy and self.synced, lambda: self.synced, lambda: self._size
        )

    # -- the cache ------------------------------------------------------------------------------

    def add_handler(self, handler: Callable[[WatchEvent], None]) -> None:
        """Call `handler` for every change, from the informer's thread; add before `start`."""
        with self._lock:
            self._handlers.append(handler)

    def get(self, key: str) -> JSON | None:
        """The cached object of `key` (as `object_key` makes it), or None."""
        namespace, _, _ = key.rpartition("/")
        with self._lock:
            return self._by_ns.get(namespace, {}).get(key)

    def list(self, namespace: str | None = None) -> Objects:
        """Cached objects, of one namespace or of all."""
        with self._lock:
            if namespace is not None:
                return list(self._by_ns.get(namespace, {}).values())
            return [obj for objs in self._by_ns.values() for obj in objs.values()]

    def keys(self) -> Keys:
        """Keys of all cached objects."""
        with self._lock:
            return [key for objs in self._by_ns.values() for key in objs]

    def __len__(self) -> int:
        """Number of cached objects."""
        return self._size

    def _put(self, key: str, obj: JSON) -> JSON | None:
        # managedFields repeat the shape of every field an object has (for a ManifestWork, of every
        # manifest in it); no controller reads them from a cache, so they are not kept, as
        # client-go users do with a transform.  Direct GETs still return them.
        obj.get("metadata", {}).pop("managedFields", None)
        namespace = obj.get("metadata", {}).get("namespace") or ""
        bucket = self._by_ns.setdefault(namespace, {})
        old = bucket.get(key)
        bucket[key] = obj
        if old is None:
            self._size += 1
        return old

    def _pop(self, key: str) -> JSON | None:
        namespace, _, _ = key.rpartition("/")
        bucket = self._by_ns.get(namespace)
        old = bucket.pop(key, None) if bucket is not None else None
        if old is not None:
            self._size -= 1
            if not bucket:
                del self._by_ns[namespace]
        return old

    # -- state ----------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """True once the first list has filled the cache."""
        return self._synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        """Block until the first list has filled the cache; False on timeout."""
        return self._synced.wait(timeout)

    @property
    def running(self) -> bool:
        """True while the list+watch thread runs (from `start` until `stop`; it never ends on its own)."""
        return self._thread is not None and self._thread.is_alive()

    def _failure_start(self) -> float | None:
        """When the current run of failures began; None once a list succeeded or a watch proved itself.

        A watch proves itself with an event or by staying open `WATCH_MIN_HEALTHY_SECONDS`: being
        accepted is not enough, or a proxy that accepts and closes at once would look healthy while
        nothing is followed.
        """
        since, opened = self._failing_since, self._opened_at
        proven = opened is not None and time.monotonic() - opened >= WATCH_MIN_HEALTHY_SECONDS
        return None if proven else since

    def failing_for(self) -> float:
        """Seconds since lists or watches started failing with no success since; 0 while it follows."""
        since = self._failure_start()
        return 0.0 if since is None else time.monotonic() - since

    @property
    def healthy(self) -> bool:
        """False while lists or watches have been failing for longer than `unhealthy_after`."""
        since = self._failure_start()
        return since is None or time.monotonic() - since < self.unhealthy_after

    @property
    def problem(self) -> str | None:
        """Why the cache is not usable, in one line with what to do; None while synced and healthy.

        Before the first list this says whether the list is still in flight or failing, and how
        (a 404 or 403 with its remedy); after it, only a failure past `unhealthy_after` counts.
        """
        error = self._last_error
        if not self.synced:
            return f"not synced: {error}" if error else "not synced: first list in progress"
        if not self.healthy:
            return f"failing for more than {self.unhealthy_after:.0f}s: {error or 'unknown error'}"
        return None

    def explain(self, exc: BaseException) -> str:
        """`exc` in one line, with the remedy when the answer was 404 or 403."""
        scope = f"in namespace {self.namespace}" if self.namespace else "cluster-wide"
        if isinstance(exc, NotFound):
            return (
                f"the apiserver does not serve {self.resource.api_version} {self.resource.plural} "
                f"(404: its CRD is missing or not yet established); {self.remedy_404}"
            )
        if isinstance(exc, Forbidden) and exc.status == 401:
            return "401 unauthorized: the apiserver refused this identity's credentials"
        if isinstance(exc, Forbidden):
            return (
                f"{exc.status} forbidden; grant list and watch on {self.resource.name} {scope} "
                "to this identity"
            )
        return str(exc)

    def start(self) -> None:
        """Start the list+watch thread; after a `stop`, resume from the last resourceVersion.

        A resumed watch whose version has expired meanwhile gets 410 and relists, emitting what
        changed while the informer was stopped.
        """
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"informer {self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread, interrupting an idle watch, and wait for it."""
        self._stop.set()
        cancel = self._cancel
        if cancel is not None:
            cancel()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the loop -------------------------------------------------------------------------------

    def _emit(self, event: WatchEvent) -> None:
        for handler in list(self._handlers):
            try:
                handler(event)
            except Exception:
                log.exception("handler of %s failed on %s", self.name, object_key(event.obj))

    def _query(self) -> dict[str, str]:
        query: dict[str, str] = {}
        if self.label_selector is not None:
            query["labelSelector"] = self.label_selector
        if self.field_selector is not None:
            query["fieldSelector"] = self.field_selector
        return query

    def _list_all(self) -> tuple[Objects, str]:
        return self.api.list_all(self.resource.path(self.namespace), self._query(), page_size=PAGE_SIZE)

    def _relist(self) -> str:
        items, rv = self._list_all()
        fresh: dict[str, JSON] = {}
        for obj in items:
            # list items carry no apiVersion/kind; watch events do: make them alike
            obj.setdefault("apiVersion", self.resource.api_version)
            obj.setdefault("kind", self.resource.kind)
            fresh[object_key(obj)] = obj
        events: list[WatchEvent] = []
        with self._lock:
            for key in self.keys():
                if key not in fresh:
                    old = self._pop(key)
                    if old is not None:
                        events.append(WatchEvent("DELETED", old, old))
            for key, obj in fresh.items():
                old = self._put(key, obj)
                if old is None:
                    events.append(WatchEvent("ADDED", obj, None))
                elif old.get("metadata", {}).get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                    events.append(WatchEvent("MODIFIED", obj, old))
            self.resource_version = rv
        for event in events:
            self._emit(event)
        return rv

    def _apply(self, event: JSON) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        rv = obj.get("metadata", {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("watch of %s: ignoring event type %r", self.name, kind)
            return
        key = object_key(obj)
        with self._lock:
            if kind == "DELETED":
                old = self._pop(key)
                out = WatchEvent("DELETED", obj, old)
            else:
                old = self._put(key, obj)
                if old is not None and old.get("metadata", {}).get("resourceVersion") == rv:
                    self.resource_version = rv
                    return  # a replay of what we have
                out = WatchEvent("ADDED" if old is None else "MODIFIED", obj, old)
            self.resource_version = rv or self.resource_version
        self._emit(out)

    def _watch(self, rv: str) -> tuple[str, int]:
        """Watch from `rv` until the stream ends; return the last version and the event count."""
        timeout = self.watch_timeout + random.randrange(self.watch_timeout + 1)
        if self.relist_seconds is not None:  # end the watch when the next relist is due
            left = self._listed_at + self.relist_seconds - time.monotonic()
            timeout = max(1, min(timeout, int(left) + 1))
        query = {**self._query(), "resourceVersion": rv, "timeoutSeconds": str(timeout)}

        def opened(cancel: Callable[[], None]) -> None:
            self._cancel = cancel
            self._opened_at = time.monotonic()
            if self._stop.is_set():
                cancel()

        count = 0
        try:
            for event in self.api.watch(
                self.resource.path(self.namespace), query, self._stop, on_open=opened
            ):
                if count == 0:
                    self._recovered()
                self._apply(event)
                count += 1
        finally:
            self._cancel = None
            self._opened_at = None
        return self.resource_version or rv, count

    def _recovered(self) -> None:
        """A list succeeded or a watch proved itself: failures are over, the backoff starts again."""
        self._failing_since = None
        self._last_error = None
        self._backoff.reset()

    def _failed(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        self.metrics.watch_errors_total.labels(self.name).inc()
        if self._failing_since is None:
            self._failing_since = time.monotonic()
        detail = self.explain(exc)
        self._last_error = f"{what} failed: {detail}"
        delay = self._backoff.next()
        log.warning("%s of %s failed (retry in %.1fs): %s", what, self.name, delay, detail)
        self._stop.wait(delay)

    def _run(self) -> None:
        rv = self.resource_version if self._synced.is_set() else None
        while not self._stop.is_set():
            if rv is None:
                try:
                    rv = self._relist()
                except KubeError as exc:
                    self._failed("list", exc)
                    continue
                except Exception as exc:  # a bug must not end the cache silently
                    log.exception("list of %s raised", self.name)
                    self._failed("list", exc)
                    continue
                self._recovered()
                self._listed_at = time.monotonic()
                if self._synced.is_set():
                    self.relists += 1
                    self.metrics.watch_relists_total.labels(self.name).inc()
                self._synced.set()
            if self.relist_seconds is not None and time.monotonic() - self._listed_at >= self.relist_seconds:
                rv = None
                continue
            started = time.monotonic()
            try:
                rv, count = self._watch(rv)
            except Gone as exc:
                log.info("watch of %s expired (%s); relisting", self.name, exc.message[:200])
                rv = None
                continue
            except KubeError as exc:
                if not self._stop.is_set():
                    self._failed("watch", exc)
                continue
            except Exception as exc:
                log.exception("watch of %s raised", self.name)
                self._failed("watch", exc)
                continue
            if count == 0 and not self._stop.is_set():
                if time.monotonic() - started < WATCH_MIN_HEALTHY_SECONDS:
                    self._failed("watch", KubeError(0, "Closed", "the stream ended at once with no event"))
                else:
                    self._recovered()  # a quiet watch that ran its course
