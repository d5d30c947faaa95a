"""The summary ConfigMap on the managed cluster, watched and turned into `apply()` calls.

The hub delivers `dynamic-scoring-config` (key `summaries`) into the install namespace through a
ManifestWork.  A list-then-watch loop in a thread follows it and hands each new payload to the
event loop; the loop relists on 410 Gone and reconnects with backoff on any other failure, so
the agent rides out apiserver restarts.  A deleted ConfigMap, or one without the key, means
"no scorers": every worker stops (upstream kept them running, A-3).  Decoding, and what a
malformed payload means, is the supervisor's business (`Supervisor.apply_payload`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable

from dynamic_scoring.kube.api import Gone, KubeAPI, KubeError

log = logging.getLogger(__name__)

CONFIGMAP_NAME = "dynamic-scoring-config"
SUMMARIES_KEY = "summaries"
_MISSING = object()

Apply = Callable[[str | None], Awaitable[object]]
"""Receives the raw `summaries` value, or None when the ConfigMap or its key is absent."""


class SummaryWatcher:
    """Follows one ConfigMap and calls `apply` with its `summaries` value whenever it changes."""

    def __init__(
        self,
        api: KubeAPI,
        namespace: str,
        apply: Apply,
        *,
        name: str = CONFIGMAP_NAME,
        key: str = SUMMARIES_KEY,
        watch_timeout: int = 300,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.key = key
        self.apply = apply
        self.watch_timeout = watch_timeout
        self.applied_once = asyncio.Event()
        self._stop = threading.Event()
        self._last: object = _MISSING

    @property
    def where(self) -> str:
        """The ConfigMap's namespace/name, for messages."""
        return f"configmap {self.namespace}/{self.name}"

    def _follow(self, deliver: Callable[[str | None], None]) -> None:
        """Blocking list+watch loop (runs in a thread until stopped)."""
        path = f"/api/v1/namespaces/{self.namespace}/configmaps"
        selector = {"fieldSelector": f"metadata.name={self.name}"}
        backoff = 1.0
        while not self._stop.is_set():
            try:
                listed = self.api.request("GET", path, query=selector)
                items = listed.get("items") or []
                deliver(self._payload(items[0]) if items else None)
                version = str(listed["metadata"]["resourceVersion"])
                backoff = 1.0
                while not self._stop.is_set():
                    query = {
                        **selector,
                        "resourceVersion": version,
                        "timeoutSeconds": str(self.watch_timeout),
                    }
                    for event in self.api.watch(path, query, self._stop):
                        obj = event.get("object") or {}
                        version = str((obj.get("metadata") or {}).get("resourceVersion", version))
                        if event["type"] in ("ADDED", "MODIFIED"):
                            deliver(self._payload(obj))
                        elif event["type"] == "DELETED":
                            deliver(None)
            except Gone:
                log.info("%s: watch expired; relisting", self.where)
            except (KubeError, OSError, ValueError) as exc:
                log.warning("%s: watch failed (%s); retrying in %.0fs", self.where, exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _payload(self, configmap: dict[str, object]) -> str | None:
        data = configmap.get("data") or {}
        assert isinstance(data, dict)
        value = data.get(self.key)
        if value is None:
            log.warning("%s has no key %r; treating it as an empty scorer list", self.where, self.key)
        return str(value) if value is not None else None

    async def _handle(self, payload: str | None) -> None:
        if payload == self._last:
            return
        if payload is None:
            log.info("%s absent or empty: stopping every scorer", self.where)
        await self.apply(payload)
        self._last = payload
        self.applied_once.set()

    async def run(self) -> None:
        """Follow the ConfigMap until cancelled."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def deliver(payload: str | None) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, payload)

        thread = threading.Thread(target=self._follow, args=(deliver,), name="summary-watch", daemon=True)
        thread.start()
        try:
            while True:
                payload = await queue.get()
                while not queue.empty():  # only the newest payload matters
                    payload = queue.get_nowait()
                try:
                    await self._handle(payload)
                except Exception:
                    log.exception("%s: applying summaries failed; will retry on the next change", self.where)
                    self._last = _MISSING
        finally:
            self._stop.set()
