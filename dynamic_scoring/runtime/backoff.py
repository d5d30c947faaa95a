"""Backoff and jitter, written once for every retry loop of hub and agent.

Five loops wait before trying again: the informer's relist (client-go's reflector), the work
queue's per-key rate limit, the agent's retries of a scoring or Prometheus call, the agent's
re-apply of its summaries, and the leader's renew/acquire period.  They differ only in their
numbers and in whether the wait is spread: many clusters retrying one endpoint need spreading
("equal jitter": half fixed, half random, so each still waits long enough to help), a per-key
queue delay or a local re-apply does not.
"""

from __future__ import annotations

import random

REFLECTOR_INITIAL = 0.8
"""client-go's reflector: the first relist backoff, 800 ms."""
REFLECTOR_MAX = 30.0
"""client-go's reflector: the relist backoff stops doubling at 30 s."""


def capped_exponential(base: float, maximum: float, failures: int) -> float:
    """``base * 2**failures``, never above ``maximum``; ``failures`` counts from 0."""
    if failures >= 64:  # the cap was reached long before; skip the huge power
        return float(maximum)
    return float(min(maximum, base * 2.0**failures))


def equal_jitter(step: float, rng: random.Random | None = None) -> float:
    """A delay in ``[step/2, step]``: half of ``step`` fixed, half drawn at random."""
    draw: float = (rng or random).random()
    return step / 2 + draw * step / 2


def jittered(period: float, factor: float, rng: random.Random | None = None) -> float:
    """client-go's ``wait.Jitter``: ``period`` stretched by up to ``factor`` of itself, at random."""
    draw: float = (rng or random).random()
    return period * (1 + factor * draw)


class Backoff:
    """Exponential backoff for one loop: the n-th delay is ``initial * 2**n`` capped (jittered by default).

    With ``jitter`` the delay lies in ``[d/2, d]`` (``equal_jitter``); ``reset`` after a success
    starts again from ``initial``.  The defaults are client-go's reflector bounds.
    """

    def __init__(
        self, initial: float = REFLECTOR_INITIAL, maximum: float = REFLECTOR_MAX, *, jitter: bool = True
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self.failures = 0

    def next(self) -> float:
        """The delay before the next attempt; each call doubles the next one, up to ``maximum``."""
        step = capped_exponential(self.initial, self.maximum, self.failures)
        self.failures += 1
        return equal_jitter(step) if self.jitter else step

    def reset(self) -> None:
        """Start again from ``initial`` (after a success)."""
        self.failures = 0


__all__ = ["REFLECTOR_INITIAL", "REFLECTOR_MAX", "Backoff", "capped_exponential", "equal_jitter", "jittered"]
