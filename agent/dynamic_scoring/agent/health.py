"""What `/healthz` and the health Lease say: the list of things that are wrong right now.

Health is recomputed from what runs at every question, never set once: a check returns a
sentence naming a problem, or None.  The agent is healthy while no check has a problem, and turns
healthy again by itself when the problem goes away (a watch that reconnects, for instance).  Checks
are called from the health server's thread, so they only read state, never change it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)

Check = Callable[[], str | None]


class Health:
    """A set of named checks; `problems()` asks each one."""

    def __init__(self, checks: Sequence[Check] = ()) -> None:
        self._checks = list(checks)
        self._reported: tuple[str, ...] = ()

    def add(self, check: Check) -> None:
        """Ask `check` too from now on."""
        self._checks.append(check)

    def problems(self) -> list[str]:
        """Every current problem; a check that raises is itself a problem."""
        found: list[str] = []
        for check in self._checks:
            try:
                problem = check()
            except Exception as exc:  # a broken check must not make a broken agent look fine
                problem = f"health check {getattr(check, '__name__', check)!r} failed: {type(exc).__name__}"
            if problem:
                found.append(problem)
        reported = tuple(found)
        if reported != self._reported:  # log transitions, not every probe
            self._reported = reported
            if found:
                log.error("agent unhealthy: %s", "; ".join(found))
            else:
                log.info("agent healthy again")
        return found

    def healthy(self) -> bool:
        """True while no check reports a problem."""
        return not self.problems()


class Heartbeat:
    """Proof that the event loop still turns, for the kubelet's liveness probe (`/livez`).

    Liveness must not follow `/healthz`: while the managed cluster's apiserver is down the watch
    is unhealthy, and a kubelet restart then would only lose the summaries the agent still scores
    with.  A restart helps only when the process itself is stuck, which is what a loop that has
    stopped beating shows (dead loops and dead workers already end the process with exit code 1).
    """

    def __init__(
        self, stall_limit_seconds: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stall_limit_seconds = stall_limit_seconds
        self._clock = clock
        self._last = clock()

    def beat(self) -> None:
        """Called from the event loop at a short period."""
        self._last = self._clock()

    def problems(self) -> list[str]:
        """A sentence when the loop has not beaten within the limit, else nothing."""
        stalled = self._clock() - self._last
        if stalled > self.stall_limit_seconds:
            return [f"event loop stalled for {stalled:.0f}s (limit {self.stall_limit_seconds:.0f}s)"]
        return []


__all__ = ["Check", "Health", "Heartbeat"]
