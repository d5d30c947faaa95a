"""What `/healthz` and the health Lease say: the list of things that are wrong right now.

Health is recomputed from what runs at every question, never set once: a check returns a
sentence naming a problem, or None.  The agent is healthy while no check has a problem, and turns
healthy again by itself when the problem goes away (a watch that reconnects, for instance).  Checks
are called from the health server's thread, so they only read state, never change it.
"""

from __future__ import annotations

import logging
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


__all__ = ["Check", "Health"]
