"""The summary ConfigMap on the managed cluster, watched and turned into `apply()` calls.

The hub delivers `dynamic-scoring-config` (key `summaries`) into the install namespace through a
ManifestWork.  The agent follows it with the same `Informer` the hub's controllers use (one
list+watch loop in the code base, with one set of robustness rules), narrowed by a field selector
to that one ConfigMap:

* every failure, expected or not (an unmapped urllib3 `ProtocolError` once ended a hand-written
  loop here), is logged and followed by a relist after a jittered backoff (0.8 s doubling to
  30 s), so a fleet of agents that lost their apiserver together does not return in step;
* a watch that ends at once with no event (a proxy that accepts and closes) counts as a failure
  and backs off, instead of re-watching in a tight loop;
* a full relist at least every `resync_seconds`, whatever the stream says;
* how long it has been unable to follow (`down_for`), which the agent's health turns into an
  unhealthy `/healthz` and a Lease that stops being renewed.

The informer's thread only pokes the event loop; the loop then reads the cached ConfigMap, so it
always applies the newest payload (level-triggered), however many changes came in between.

A deleted ConfigMap, or one without the key, means "no scorers": every worker stops (upstream kept
them running).  Decoding, and what a malformed payload means, is the supervisor's business
(`Supervisor.apply_payload`); an `apply` that raises is retried with backoff, not only at the
ConfigMap's next change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.informer import Informer, WatchEvent
from dynamic_scoring.kube.resources import CONFIGMAPS
from dynamic_scoring.runtime.backoff import Backoff

log = logging.getLogger(__name__)

CONFIGMAP_NAME = "dynamic-scoring-config"
SUMMARIES_KEY = "summaries"
_MISSING = object()

APPLY_BACKOFF_MIN = 1.0
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
        watch_timeout: seconds the apiserver keeps one watch request open (at least; the informer
            spreads it up to twice that).
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
        self.namespace = namespace
        self.name = name
        self.key = key
        self.apply = apply
        self.applied_once = asyncio.Event()
        self.informer = Informer(
            api,
            CONFIGMAPS,
            namespace=namespace,
            field_selector=f"metadata.name={name}",
            watch_timeout=watch_timeout,
            relist_seconds=resync_seconds,
        )
        self._last: object = _MISSING
        self._force = asyncio.Event()

    @property
    def where(self) -> str:
        """The ConfigMap's namespace/name, for messages."""
        return f"configmap {self.namespace}/{self.name}"

    @property
    def relists(self) -> int:
        """Relists after the first list (410 Gone, a failure, or the resync period); for tests."""
        return self.informer.relists

    def down_for(self) -> float:
        """Seconds since following the ConfigMap started failing (0 while it follows)."""
        return self.informer.failing_for()

    @property
    def thread_alive(self) -> bool:
        """False once the watch thread has ended (it only should when stopped)."""
        return self.informer.running

    def _payload(self) -> str | None:
        """The `key` value of the cached ConfigMap; None when it or the key is absent."""
        configmap = self.informer.get(f"{self.namespace}/{self.name}")
        if configmap is None:
            return None
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
        changed = asyncio.Event()

        def poke(_: WatchEvent | None = None) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(changed.set)

        self.informer.add_handler(poke)
        self.informer.start()
        synced = False
        failed = False  # the last apply raised: try again at retry_at, with the newest payload
        retry_at = 0.0
        # a local re-apply, nothing shared to spread the load of: exact doubling, no jitter
        backoff = Backoff(APPLY_BACKOFF_MIN, APPLY_BACKOFF_MAX, jitter=False)
        try:
            while True:
                wait = 1.0 if not failed else min(1.0, max(0.01, retry_at - time.monotonic()))
                try:
                    await asyncio.wait_for(changed.wait(), timeout=wait)
                except TimeoutError:
                    if not self.informer.running:
                        raise RuntimeError(f"{self.where}: the watch thread ended") from None
                due = changed.is_set()
                changed.clear()
                if not self.informer.synced:
                    continue
                if not synced:  # the first list: apply what it found, nothing included
                    synced = due = True
                force = self._force.is_set()
                self._force.clear()
                if not (due or force or (failed and time.monotonic() >= retry_at)):
                    continue
                try:
                    await self._handle(self._payload(), force or failed)
                    failed = False
                    backoff.reset()
                except Exception:
                    delay = backoff.next()
                    log.exception("%s: applying summaries failed; retrying in %.0fs", self.where, delay)
                    self._last = _MISSING
                    failed, retry_at = True, time.monotonic() + delay
        finally:
            self.informer.stop(timeout=0)
