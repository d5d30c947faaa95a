"""Health transitions of a DynamicScorer and the probe schedule, as pure functions.

A probe *round* is one ``/healthz`` request plus, in Full mode, one ``/config`` fetch; the round passes
only when both do.  The state machine:

* a new scorer is ``Unknown`` until its first round (upstream wrote an empty status the enum rejects);
* one passing round makes it ``Active`` (from any state);
* ``failure_threshold`` consecutive failed rounds (default 3) make it ``Inactive``; fewer keep the
  current state, so a scorer that misses one probe is not withdrawn from every cluster and then
  redistributed a period later;
* an Event is due only when the state changes, never for a round that changes nothing.

With period ``P``, jitter ``j`` and timeout ``T``, a scorer that stops answering is ``Inactive`` at the
latest ``failure_threshold * P * (1 + j) + T`` seconds after its last passing round
(``worst_case_detection``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from dynamic_scoring.addon.registry.models import HealthStatus

DEFAULT_PERIOD = 30.0
DEFAULT_JITTER = 0.1
DEFAULT_FAILURE_THRESHOLD = 3


@dataclass(frozen=True)
class HealthSettings:
    """The controller's probe settings (flags of the manager)."""

    period: float = DEFAULT_PERIOD
    jitter: float = DEFAULT_JITTER
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD

    def __post_init__(self) -> None:
        if self.period <= 0:
            raise ValueError(f"probe period must be positive, got {self.period}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"probe jitter must be in [0, 1), got {self.jitter}")
        if self.failure_threshold < 1:
            raise ValueError(f"failure threshold must be at least 1, got {self.failure_threshold}")


@dataclass(frozen=True)
class HealthState:
    """What ``status`` records between rounds."""

    status: HealthStatus = "Unknown"
    consecutive_failures: int = 0


@dataclass(frozen=True)
class HealthEvent:
    """A core/v1 Event to record for a transition."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Transition:
    """The state after a round, and the Event to record if the state changed."""

    state: HealthState
    event: HealthEvent | None

    @property
    def changed(self) -> bool:
        """Whether the health status changed (exactly when an Event is due)."""
        return self.event is not None


def next_state(prev: HealthState, passed: bool, message: str, *, failure_threshold: int) -> Transition:
    """Apply one round's outcome to ``prev``; ``message`` explains the round (it goes into the Event)."""
    if passed:
        state = HealthState("Active", 0)
        if prev.status == "Active":
            return Transition(state, None)
        return Transition(state, HealthEvent("Normal", "ScorerActive", f"scorer is Active: {message}"))
    failures = prev.consecutive_failures + 1
    if failures >= failure_threshold and prev.status != "Inactive":
        return Transition(
            HealthState("Inactive", failures),
            HealthEvent(
                "Warning",
                "ScorerInactive",
                f"scorer is Inactive after {failures} failed probe(s) in a row: {message}",
            ),
        )
    return Transition(HealthState(prev.status, failures), None)


def next_delay(settings: HealthSettings, rng: random.Random | None = None) -> float:
    """Seconds until a scorer's next round: the period, stretched or shrunk by up to ``jitter``.

    Without jitter, scorers registered together are probed together forever, and a hub restart lines
    every scorer up on the same tick.
    """
    r = rng or random
    return settings.period * (1.0 + r.uniform(-settings.jitter, settings.jitter))


def first_delay(settings: HealthSettings, rng: random.Random | None = None) -> float:
    """Seconds until a new (or newly changed) scorer's first round: at once, spread over one second.

    Upstream's first probe came a whole period after start, so a new scorer stayed undistributed
    for 30 s.
    """
    r = rng or random
    return r.uniform(0.0, min(1.0, settings.period))


def worst_case_detection(settings: HealthSettings, timeout: float) -> float:
    """The longest time from a scorer's death to ``Inactive`` (documented, and used by tests)."""
    return settings.failure_threshold * settings.period * (1.0 + settings.jitter) + timeout


__all__ = [
    "DEFAULT_FAILURE_THRESHOLD",
    "DEFAULT_JITTER",
    "DEFAULT_PERIOD",
    "HealthEvent",
    "HealthSettings",
    "HealthState",
    "Transition",
    "first_delay",
    "next_delay",
    "next_state",
    "worst_case_detection",
]
