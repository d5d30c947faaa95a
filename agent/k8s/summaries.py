"""The summary ConfigMap on the managed cluster, watched and turned into `apply()` calls.

The hub delivers `dynamic-scoring-config` (key `summaries`) into the install namespace through a
ManifestWork.  A list-then-watch loop in a thread follows it and hands each new payload to the
event loop.  The thread must outlive anything the network or a bug throws at it: a scorer list
that silently stops following its ConfigMap looks healthy while it is not (an unmapped urllib3
`ProtocolError` once ended it that way).  So every failure, expected or not, is logged and
followed by a backoff and a relist; the loop also relists every `resync_seconds` even when the
stream looks fine, and reports since when it has been unable to list (`down_for`), which the
agent's health turns into an unhealthy `/healthz` and a Lease that stops being renewed.

A deleted ConfigMap, or one without the key, means "no scorers": every worker stops (upstream kept
them running).  Decoding, and what a malformed payload means, is the supervisor's business
(`Supervisor.apply_payload`); an `apply` that raises is retried with backoff, not only at the
ConfigMap's next change.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from agent.k8s.paths import namespaced
from dynamic_scoring.kube.api import Gone, KubeAPI

log = logging.getLogger(__name__)

CONFIGMAP_NAME = "dynamic-scoring-config"
SUMMARIES_KEY = "summaries"
_MISSING = object()

BACKOFF_MIN = 1.0
BACKOFF_MAX = 30.0
APPLY_BACKOFF_MAX = 60.0

Apply = Callable[[str | None], Awaitable[object]]
"""Receives the raw `summaries` value, or None when the ConfigMap or its key is absent."""


class SummaryWatcher:
    """Follows one ConfigMap and calls `apply` with its `summaries` value whenever it changes.

    Args:
        api: the managed cluster's API.
        namespace: the install namespace.
        apply: receives each new payload (`Supervisor.apply_payload`).
        name: the ConfigMap's name.
        key: the data key holding the summary list.
        watch_timeout: seconds the apiserver keeps one watch request open.
        resync_seconds: a full relist at least this often, whatever the stream says.
    """

    def __init__(
        self,
        api: KubeAPI,
        namespace: str,
        apply: Apply,
        *,
        name: str = CONFIGMAP_NAME,
        key: str = SUMMARIES_KEY,
        watch_timeout: int = 300,
        resync_seconds: float = 300.0,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.key = key
        self.apply = apply
        self.watch_timeout = watch_timeout
        self.resync_seconds = resync_seconds
        self.applied_once = asyncio.Event()
        self.relists = 0
        """Successful lists so far (the first one included); for status and tests."""
        self._stop = threading.Event()
        self._last: object = _MISSING
        self._down_since: float | None = None
        self._thread: threading.Thread | None = None
        self._force = asyncio.Event()

    @property
    def where(self) -> str:
        """The ConfigMap's namespace/name, for messages."""
        return f"configmap {self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        """The collection path the watch lists (namespace URL-quoted)."""
        return namespaced("/api/v1", self.namespace, "configmaps")

    def down_for(self) -> float:
        """Seconds since the watch last failed without a successful list since; 0 while it follows."""
        since = self._down_since
        return 0.0 if since is None else time.monotonic() - since

    @property
    def thread_alive(self) -> bool:
        """False once the watch thread has ended (it only should when stopped)."""
        return self._thread is not None and self._thread.is_alive()

    def _failed(self) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()

    def _follow(self, deliver: Callable[[str | None], None]) -> None:
        """Blocking list+watch loop (runs in a thread until stopped); nothing it raises ends it."""
        backoff = BACKOFF_MIN
        while not self._stop.is_set():
            try:
                self._list_and_watch(deliver)
                backoff = BACKOFF_MIN
            except Gone:
                log.info("%s: watch expired; relisting", self.where)
            except Exception as exc:  # every failure, mapped or not, ends in a relist
                self._failed()
                log.warning(
                    "%s: watch failed (%s: %s); relisting in %.0fs",
                    self.where,
                    type(exc).__name__,
                    exc,
                    backoff,
                )
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _list_and_watch(self, deliver: Callable[[str | None], None]) -> None:
        """One list, then watches from its version until the resync period is over."""
        selector = {"fieldSelector": f"metadata.name={self.name}"}
        listed = self.api.request("GET", self.path, query=selector)
        items = listed.get("items") or []
        version = str(listed["metadata"]["resourceVersion"])
        self._down_since = None
        self.relists += 1
        deliver(self._payload(items[0]) if items else None)
        resync_at = time.monotonic() + self.resync_seconds
        while not self._stop.is_set():
            left = resync_at - time.monotonic()
            if left <= 0:
                return
            query = {
                **selector,
                "resourceVersion": version,
                "timeoutSeconds": str(max(1, min(self.watch_timeout, int(left) + 1))),
            }
            for event in self.api.watch(self.path, query, self._stop):
                obj = event.get("object") or {}
                version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                if event["type"] in ("ADDED", "MODIFIED"):
                    deliver(self._payload(obj))
                elif event["type"] == "DELETED":
                    deliver(None)

    def _payload(self, configmap: dict[str, Any]) -> str | None:
        data = configmap.get("data") or {}
        value = data.get(self.key) if isinstance(data, dict) else None
        if value is None:
            log.warning("%s has no key %r; treating it as an empty scorer list", self.where, self.key)
        return str(value) if value is not None else None

    async def _handle(self, payload: str | None, force: bool = False) -> None:
        if payload == self._last and not force:
            return
        if payload is None:
            log.info("%s absent or empty: stopping every scorer", self.where)
        await self.apply(payload)
        self._last = payload
        self.applied_once.set()

    def request_resync(self) -> None:
        """Re-apply the current payload at once, even if unchanged (SIGHUP)."""
        self._force.set()

    async def run(self) -> None:
        """Follow the ConfigMap until cancelled.

        Raises:
            RuntimeError: the watch thread ended on its own, which it never should: the caller
                ends the process so that it is restarted, instead of running on a dead watch.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def deliver(payload: str | None) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(queue.put_nowait, payload)

        self._thread = threading.Thread(
            target=self._follow, args=(deliver,), name="summary-watch", daemon=True
        )
        self._thread.start()
        pending: object = _MISSING  # the payload whose apply failed, retried with backoff
        retry_at = 0.0
        backoff = BACKOFF_MIN
        force = False
        try:
            while True:
                payload: object = _MISSING
                wait = 1.0 if pending is _MISSING else min(1.0, max(0.01, retry_at - time.monotonic()))
                try:
                    payload = await asyncio.wait_for(queue.get(), timeout=wait)
                except TimeoutError:
                    if not self._thread.is_alive():
                        raise RuntimeError(f"{self.where}: the watch thread ended") from None
                while not queue.empty():  # only the newest payload matters
                    payload = queue.get_nowait()
                if self._force.is_set():
                    self._force.clear()
                    force = True
                    if payload is _MISSING:  # a failed payload first, else the applied one again
                        payload = pending if pending is not _MISSING else self._last
                if payload is _MISSING:
                    if pending is _MISSING or time.monotonic() < retry_at:
                        continue
                    payload = pending
                try:
                    await self._handle(cast("str | None", payload), force)
                    pending, backoff, force = _MISSING, BACKOFF_MIN, False
                except Exception:
                    log.exception("%s: applying summaries failed; retrying in %.0fs", self.where, backoff)
                    self._last = _MISSING
                    pending, retry_at = payload, time.monotonic() + backoff
                    backoff = min(backoff * 2, APPLY_BACKOFF_MAX)
        finally:
            self._stop.set()
