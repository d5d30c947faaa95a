"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules and timings.

* A candidate takes the Lease when it is free, or when its record (holder, renewTime, ...) has
  not changed for `lease_seconds` as measured by *our* monotonic clock since we first saw it.
  Comparing the Lease's renewTime with our wall clock would let clock skew between replicas
  decide; client-go avoids that the same way.
* Every write is an update carrying the resourceVersion read, so two candidates cannot both win.
* The leader renews every `retry_period`; when it has not renewed for `renew_deadline` it stops
  leading (sets the event it gave `on_started`) and `run` returns, and the process is expected to
  exit and restart, as controller-runtime's callers do.
* **Fencing.**  Stopping the work takes time (a reconcile in flight finishes its writes), and a
  process frozen by the scheduler, a debugger or SIGSTOP notices nothing until it runs again.  So
  the leader's writes ask `fence()` before they are sent: it refuses from the moment
  `renew_deadline` has passed since the start of the last successful renewal, measured on our
  monotonic clock, which keeps counting while the process is frozen.  A standby may take over only
  `lease_seconds` after it saw that renewal, and renew_deadline < lease_seconds, so the old
  leader's last write is sent at least lease_seconds - renew_deadline (5 s by default) before the
  new leader can write.
* On a clean stop the leader releases the Lease (empty holder, 1 s duration), so the standby
  takes over within one retry period instead of a lease duration.

Defaults are client-go's: lease 15 s, renew deadline 10 s, retry 2 s.  A killed leader is
replaced after at most lease_seconds + retry_period (17 s).  Lease times are MicroTime, which the
apiserver parses only with exactly six fractional digits.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from dynamic_scoring.kube.api import Conflict, KubeAPI, KubeError, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import LEASES
from dynamic_scoring.kube.timestamps import micro_time
from dynamic_scoring.runtime.backoff import jittered

log = logging.getLogger(__name__)


class LeaderElector:
    """One candidate for the Lease `namespace/name`."""

    def __init__(
        self,
        api: KubeAPI,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_seconds: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        release_on_stop: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lease_seconds > renew_deadline > retry_period > 0:
            raise ValueError("need lease_seconds > renew_deadline > retry_period > 0")
        if not identity:
            raise ValueError("identity must not be empty")
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_stop = release_on_stop
        self._clock = clock
        self._path = LEASES.path(namespace, name)
        self._observed: JSON | None = None  # the spec last read
        self._observed_at = 0.0  # our clock when it last changed
        self._leader = threading.Event()
        self._renewed_at: float | None = None  # our clock when the last successful attempt began
        self.transitions = 0

    @property
    def is_leader(self) -> bool:
        """True while this candidate holds the Lease and has renewed it in time."""
        return self._leader.is_set()

    def fence(self) -> str | None:
        """None while this candidate may write as the leader; otherwise why not, in one line.

        Cheap and lock-free: the manager's API asks it before every write.
        """
        if not self._leader.is_set():
            return f"{self.identity} does not lead lease {self.namespace}/{self.name}"
        renewed = self._renewed_at
        age = self._clock() - renewed if renewed is not None else float("inf")
        if age >= self.renew_deadline:
            return (
                f"leadership of lease {self.namespace}/{self.name} lapsed: last renewed {age:.1f}s ago "
                f"(renew deadline {self.renew_deadline:g}s)"
            )
        return None

    def _now(self) -> str:
        return micro_time(dt.datetime.now(dt.UTC))

    def _spec(self, acquire_time: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_seconds)),
            "acquireTime": acquire_time,
            "renewTime": self._now(),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self, timeout: float | None = None) -> bool:
        """One attempt to take or keep the Lease; True if we hold it now."""
        request_timeout = timeout if timeout is not None else self.retry_period * 2
        began = self._clock()
        try:
            lease = self.api.request("GET", self._path, timeout=request_timeout)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(self._now(), 0),
            }
            try:
                created = self.api.request(
                    "POST", LEASES.path(self.namespace), body=body, timeout=request_timeout
                )
            except Conflict:
                return False
            self._observe(created.get("spec") or {})
            self._renewed_at = began
            return True
        spec = lease.get("spec") or {}
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        ours = holder == self.identity
        if holder and not ours and self._clock() < self._observed_at + duration:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = self._spec(
            str(spec["acquireTime"]) if ours and spec.get("acquireTime") else self._now(),
            transitions if ours else transitions + 1,
        )
        body = {**lease, "spec": new_spec}  # carries metadata.resourceVersion: a PUT that can lose
        try:
            updated = self.api.request("PUT", self._path, body=body, timeout=request_timeout)
        except Conflict:
            return False
        if not ours:
            self.transitions += 1
            log.info("%s took lease %s/%s from %r", self.identity, self.namespace, self.name, holder or None)
        self._observe(updated.get("spec") or {})
        self._renewed_at = began
        return True

    def _observe(self, spec: JSON) -> None:
        if spec != self._observed:
            self._observed = spec
            self._observed_at = self._clock()

    def _release(self) -> None:
        try:
            lease = self.api.request("GET", self._path, timeout=self.retry_period * 2)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            released = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": self._now()}
            self.api.request(
                "PUT", self._path, body={**lease, "spec": released}, timeout=self.retry_period * 2
            )
            log.info("%s released lease %s/%s", self.identity, self.namespace, self.name)
        except KubeError as exc:
            log.warning("%s could not release lease %s/%s: %s", self.identity, self.namespace, self.name, exc)

    def _attempt(self, timeout: float | None = None) -> bool:
        try:
            return self.try_acquire_or_renew(timeout)
        except KubeError as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return False

    def _renew(self, stop: threading.Event, leading_stop: threading.Event) -> bool:
        """Keep renewing; False once `renew_deadline` passed since the last renewal (we must stop leading).

        The deadline counts from the last successful renewal, not from when we noticed: a process
        that was frozen for longer gives up as soon as it runs again.
        """
        while not stop.wait(self.retry_period) and not leading_stop.is_set():
            deadline = (self._renewed_at or self._clock()) + self.renew_deadline
            while True:
                left = deadline - self._clock()
                if left <= 0:
                    return False
                if self._attempt(timeout=max(0.5, min(left, self.retry_period * 2))):
                    break
                if stop.wait(min(self.retry_period, max(0.0, deadline - self._clock()))):
                    return True
        return True

    def run(self, on_started: Callable[[threading.Event], None], stop: threading.Event) -> None:
        """Wait for the Lease, lead while it is ours, and return when `stop` is set or it is lost.

        `on_started(leading_stop)` runs in its own thread while we lead; it must return soon after
        `leading_stop` is set.  If it returns (or raises) on its own, leadership is given up too.
        """
        while not stop.is_set():
            if self._attempt():
                break
            stop.wait(jittered(self.retry_period, 0.2))  # client-go's jitter factor
        if stop.is_set():
            return
        self._leader.set()
        log.info("%s is now the leader of %s/%s", self.identity, self.namespace, self.name)
        leading_stop = threading.Event()

        def lead() -> None:
            try:
                on_started(leading_stop)
            except Exception:
                log.exception("the leader's work raised; giving up leadership")
            finally:
                leading_stop.set()

        worker = threading.Thread(target=lead, name=f"leading {self.name}", daemon=True)
        worker.start()
        kept = self._renew(stop, leading_stop)
        self._leader.clear()
        leading_stop.set()
        if not kept:
            log.error(
                "%s lost lease %s/%s: not renewed within %.0fs; stopping",
                self.identity,
                self.namespace,
                self.name,
                self.renew_deadline,
            )
        worker.join(self.renew_deadline)
        if kept and self.release_on_stop:
            self._release()
