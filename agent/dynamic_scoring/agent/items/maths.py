"""Score arithmetic: optional normalisation, clamping to [-100, 100], rounding, and expiry.

The order is fixed and documented in ``docs/agent.md``: normalise (if the summary asks), clamp to
the AddOnPlacementScore range, then round half away from zero.  Rounding after clamping keeps the
result inside [-100, 100]; rounding half away from zero is what people expect from "85.5 → 86" and
treats positive and negative scores symmetrically (upstream truncated toward zero, so every score in
(-1, 1), such as raw CPU cores, became 0).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from dynamic_scoring.contract.wire import ScoreNormalization

SCORE_MIN = -100.0
SCORE_MAX = 100.0


def normalise(value: float, spec: ScoreNormalization | None) -> float:
    """Map ``value`` linearly from ``[spec.min, spec.max]`` onto ``[spec.target_min, spec.target_max]``.

    Values outside the source range map outside the target range; clamping happens afterwards.
    Without a spec the value is returned unchanged.
    """
    if spec is None:
        return value
    fraction = (value - spec.min) / (spec.max - spec.min)
    return spec.target_min + fraction * (spec.target_max - spec.target_min)


def clamp(value: float, low: float = SCORE_MIN, high: float = SCORE_MAX) -> float:
    """Limit ``value`` to ``[low, high]``."""
    return max(low, min(high, value))


def round_half_away(value: float) -> int:
    """Round to the nearest integer; exact halves go away from zero (2.5 → 3, -2.5 → -3).

    Computed from the exact fractional part, so values just below a half (0.49999999999999994) are
    not pushed up by floating-point addition.
    """
    magnitude = abs(value)
    whole = math.floor(magnitude)
    if magnitude - whole >= 0.5:
        whole += 1
    return int(whole) if value >= 0 else -int(whole)


class NonFiniteScore(ValueError):  # noqa: N818 - reads better at the raise site
    """Normalisation produced NaN or an infinity; such a value is an error, never a score."""


def score_value(raw: float, spec: ScoreNormalization | None = None) -> tuple[int, bool]:
    """The AddOnPlacementScore value of a raw score, and whether clamping changed it.

    Raises:
        NonFiniteScore: the normalised value is NaN or infinite (``clamp`` would otherwise map NaN to
            100, the best score there is, and an overflow to a bound nobody asked for).
    """
    normalised = raw if spec is None else normalise(raw, spec)
    if not math.isfinite(normalised):
        raise NonFiniteScore(f"not a finite number after normalisation ({normalised})")
    # clamp() and round_half_away() inlined: this runs once per result, 10,000 times a cycle
    clamped = SCORE_MIN if normalised < SCORE_MIN else SCORE_MAX if normalised > SCORE_MAX else normalised
    magnitude = abs(clamped)
    whole = math.floor(magnitude)
    if magnitude - whole >= 0.5:
        whole += 1
    return (whole if clamped >= 0 else -whole), clamped != normalised


def expiry_window(interval_seconds: int, valid_for_seconds: int | None = None) -> timedelta:
    """How long a successful cycle's scores stay valid.

    ``validForSeconds`` when the summary sets it, else ``max(3 * interval, interval + 60 s)``: three
    missed cycles for long intervals, and at least a minute of slack for short ones so that one slow
    cycle does not make the scores flap out of Placement.
    """
    if valid_for_seconds is not None:
        return timedelta(seconds=valid_for_seconds)
    return timedelta(seconds=max(3 * interval_seconds, interval_seconds + 60))


def valid_until(
    last_success: datetime, interval_seconds: int, valid_for_seconds: int | None = None
) -> datetime:
    """The ``validUntil`` to publish after a success at ``last_success`` (timezone-aware UTC)."""
    return last_success + expiry_window(interval_seconds, valid_for_seconds)


__all__ = [
    "SCORE_MAX",
    "SCORE_MIN",
    "NonFiniteScore",
    "clamp",
    "expiry_window",
    "normalise",
    "round_half_away",
    "score_value",
    "valid_until",
]
