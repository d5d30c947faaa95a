"""The scorer controller: probes every DynamicScorer and keeps its health and synced /config in status.

Keyed by DynamicScorer (in the manager's namespace).  A reconcile is either *not due* (it only makes
sure a wake-up is pending) or a *probe round*: read the hub-side probe Secret when the CR names one,
``GET /healthz`` and, in Full mode, ``GET configURL``, then ``evaluate_round`` and write the status
patch only when it changed, plus one Event on a health transition.

Why the schedule lives here rather than in a timer thread: the work queue already bounds how many
reconciles run at once, so ``probe_concurrency`` workers are exactly the bound on probes in flight,
and a hung scorer holds one worker for at most its timeout.  Our own status writes wake the key too;
those wake-ups see that the round is not due and do nothing, so a steady scorer costs one round per
period and no writes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import random
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from dynamic_scoring.addon.controllers import HubContext
from dynamic_scoring.addon.registry.health import first_delay, next_delay
from dynamic_scoring.addon.registry.models import DynamicScorer, SpecProblem, parse_scorer
from dynamic_scoring.addon.registry.probe import (
    DEFAULT_TIMEOUT,
    ConfigResult,
    ProbeResult,
    fetch_config,
    health_url,
    probe_health,
)
from dynamic_scoring.addon.registry.probe_settings import ProbeSettings
from dynamic_scoring.addon.registry.round import evaluate_round
from dynamic_scoring.contract.wire import SecretKeyRef
from dynamic_scoring.kube.api import Forbidden, KubeAPI, NotFound
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import DYNAMIC_SCORERS, SECRETS
from dynamic_scoring.kube.writes import Writer
from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy
from dynamic_scoring.outbound.guarded_transport import guarded_transport
from dynamic_scoring.outbound.secret_binding import binding_refusal

log = logging.getLogger(__name__)

NAME = "scorer"
_EARLY = 0.05  # a wake-up this close to the due time counts as due (the queue's clock is not ours)


@dataclass
class _Schedule:
    generation: int
    due: float


class _Clients:
    """One ``httpx.Client`` per trust store: the system one, and one per distinct ``caSecretRef`` PEM.

    Verification is always on; keep-alive connections make a steady probe cost about a millisecond.
    Every client connects through the address check (``dynamic_scoring.addon.registry.transport``) and ignores
    proxy variables, so the check applies to the scorer itself.
    """

    def __init__(self, concurrency: int, addresses: AddressPolicy | None = None) -> None:
        self._limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
        self._addresses = addresses or STRICT
        self._lock = threading.Lock()
        self._clients: dict[str, httpx.Client] = {}

    def get(self, ca_pem: str | None) -> httpx.Client:
        digest = hashlib.sha256(ca_pem.encode()).hexdigest() if ca_pem else ""
        with self._lock:
            client = self._clients.get(digest)
            if client is None:
                verify: ssl.SSLContext | bool = True
                if ca_pem:
                    verify = ssl.create_default_context(cadata=ca_pem)
                transport = guarded_transport(verify=verify, limits=self._limits, policy=self._addresses)
                client = httpx.Client(transport=transport, trust_env=False)
                self._clients[digest] = client
            return client

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


def _read_secret(
    api: KubeAPI,
    namespace: str,
    ref: SecretKeyRef,
    where: str,
    *,
    send_to: Sequence[str] = (),
    scorer: str = "",
) -> tuple[str | None, ProbeResult | None]:
    """The decoded value of a hub-side Secret key, or the failed result naming the field.

    ``send_to`` are the URLs the value will be sent to.  The DynamicScorer's author names both the
    Secret and those URLs, and the manager may read every Secret in its namespace; so the value is
    used only when the Secret's own ``allowed-hosts`` annotation lists each URL's host and port
    (``dynamic_scoring.outbound.secret_binding``, the rule the agents apply too).  Otherwise the result is
    ``SecretNotBound`` and no request is made.  An allowed-scorers annotation on the Secret, when
    present, must also name ``scorer``.
    """
    try:
        secret = api.request("GET", SECRETS.path(namespace, ref.name))
    except NotFound:
        return None, ProbeResult(False, "SecretNotFound", f"{where}: Secret {namespace}/{ref.name} not found")
    except Forbidden:
        return None, ProbeResult(
            False, "SecretForbidden", f"{where}: the manager may not read Secret {namespace}/{ref.name}"
        )
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    for url in send_to:
        refusal = binding_refusal(annotations, url, secret=ref.name, namespace=namespace, scorer=scorer)
        if refusal is not None:
            return None, ProbeResult(False, "SecretNotBound", f"{where}: {refusal}")
    raw = (secret.get("data") or {}).get(ref.key)
    if raw is None:
        return None, ProbeResult(
            False, "SecretKeyNotFound", f"{where}: Secret {namespace}/{ref.name} has no key {ref.key!r}"
        )
    try:
        return base64.b64decode(raw, validate=True).decode(), None
    except (binascii.Error, UnicodeDecodeError):
        return None, ProbeResult(
            False,
            "InvalidSecret",
            f"{where}: key {ref.key!r} of Secret {namespace}/{ref.name} is not UTF-8 text",
        )


class ScorerProber:
    """The reconcile of the scorer controller, with its schedule and HTTP clients."""

    def __init__(
        self,
        api: KubeAPI,
        writer: Writer,
        cache_get: Callable[[str], JSON | None],
        settings: ProbeSettings,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.writer = writer
        self._get = cache_get
        self.settings = settings
        self.clients = _Clients(settings.concurrency, settings.addresses)
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._schedule: dict[str, _Schedule] = {}

    def _round(self, scorer: DynamicScorer) -> tuple[ProbeResult | None, ConfigResult | None]:
        """One round's I/O; every failure becomes a result, never an exception."""
        spec = scorer.spec
        probe = spec.probe
        timeout = probe.timeout_seconds if probe and probe.timeout_seconds else DEFAULT_TIMEOUT
        token: str | None = None
        ca_pem: str | None = None
        url = health_url(spec)
        full = spec.config_sync_mode == "Full" and bool(spec.config_url)
        if probe and probe.token_secret_ref and url is not None:
            # Every URL the token would go to this round; none is asked when one is not bound.
            send_to = [url, spec.config_url] if full and spec.config_url else [url]
            token, bad = _read_secret(
                self.api,
                scorer.namespace,
                probe.token_secret_ref,
                "spec.probe.tokenSecretRef",
                send_to=send_to,
                scorer=scorer.name,
            )
            if bad is not None:
                return bad, None
        if probe and probe.ca_secret_ref:
            ca_pem, bad = _read_secret(
                self.api, scorer.namespace, probe.ca_secret_ref, "spec.probe.caSecretRef"
            )
            if bad is not None:
                return bad, None
        try:
            client = self.clients.get(ca_pem)
        except ssl.SSLError:
            return ProbeResult(False, "InvalidCA", "spec.probe.caSecretRef: not a PEM CA bundle"), None
        if url is None:
            return None, None
        health = probe_health(client, url, token=token, timeout=timeout)
        config = None
        if health.ok and full and spec.config_url:
            config = fetch_config(client, spec.config_url, token=token, timeout=timeout)
        return health, config

    def _probe(self, obj: JSON) -> None:
        parsed = parse_scorer(obj)
        health: ProbeResult | None = None
        config: ConfigResult | None = None
        if not isinstance(parsed, SpecProblem):
            health, config = self._round(parsed)
        threshold = self.settings.health.failure_threshold
        outcome = evaluate_round(obj, health, config, failure_threshold=threshold, now=datetime.now(UTC))
        meta = obj["metadata"]
        if outcome.changed:

            def compute(fresh: JSON) -> JSON | None:
                again = evaluate_round(
                    fresh, health, config, failure_threshold=threshold, now=datetime.now(UTC)
                )
                return again.status if again.changed else None

            self.writer.patch_status(DYNAMIC_SCORERS, meta["namespace"], meta["name"], compute)
        if outcome.event is not None:
            self.writer.event(obj, outcome.event.type, outcome.event.reason, outcome.event.message)

    def reconcile(self, key: str) -> Result | None:
        """Probe ``key`` when its round is due (or its spec changed); otherwise keep a wake-up pending."""
        obj = self._get(key)
        now = time.monotonic()
        if obj is None:
            with self._lock:
                self._schedule.pop(key, None)
            return None
        generation = int(obj.get("metadata", {}).get("generation") or 0)
        with self._lock:
            entry = self._schedule.get(key)
            if entry is None or entry.generation != generation:
                # new or edited: probe within a second, spread so a burst of scorers does not align
                entry = self._schedule[key] = _Schedule(
                    generation, now + first_delay(self.settings.health, self._rng)
                )
            due = entry.due <= now + _EARLY
        if due:
            try:
                self._probe(obj)
            finally:
                with self._lock:
                    entry.due = time.monotonic() + next_delay(self.settings.health, self._rng)
        return self._wake_at(key, entry.due)

    def _wake_at(self, key: str, due: float) -> Result | None:
        """One wake-up at ``due``: asking again on every event is free, the queue keeps the earliest."""
        return Result(requeue_after=max(0.0, due - time.monotonic()))


def scorer_controller(ctx: HubContext) -> list[Controller]:
    """The scorer controller on the manager's shared DynamicScorer informer (a ``ControllerFactory``)."""
    settings = ctx.probe
    log.info(settings.addresses.describe())
    scorers = ctx.manager.informer(DYNAMIC_SCORERS, namespace=ctx.namespace)
    prober = ScorerProber(ctx.api, ctx.manager.writer(NAME), scorers.get, settings)
    controller = Controller(
        NAME, prober.reconcile, workers=settings.concurrency, resync_seconds=ctx.resync_seconds
    )
    controller.watch(scorers)

    def close_when_stopped() -> None:
        ctx.stop.wait()
        prober.clients.close()

    threading.Thread(target=close_when_stopped, name="scorer clients closer", daemon=True).start()
    return [controller]


__all__ = ["NAME", "ScorerProber", "scorer_controller"]
