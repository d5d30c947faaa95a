"""The arithmetic of both sample scorers, pure and separately tested.

Load is measured in CPU cores.  Both scorers map a load onto a score with the same headroom rule::

    score = 100 * clamp(1 - load / capacity, 0, 1)

so an idle cluster scores 100, a cluster at or above ``capacity`` cores scores 0, and the score
never rises when the load does.  Keeping the rule in [0, 100] (not [-100, 100]) means an overloaded
cluster never *loses* points against a cluster that publishes no score at all, which is what
Placement's Additive mode would otherwise do with a negative value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Point = tuple[float, float]
"""``(unix_seconds, value)``."""


def headroom_score(load: float, capacity: float) -> float:
    """Score in [0, 100] for ``load`` cores out of ``capacity``; 100 when idle, 0 at or past capacity.

    A negative load (a counter reset seen through ``rate``'s extrapolation, or a forecast that
    undershoots) counts as idle rather than as more than idle, so the score stays bounded.
    """
    if not capacity > 0 or not math.isfinite(capacity):
        raise ValueError("capacity must be a positive finite number of cores")
    if math.isnan(load):
        raise ValueError("load must be a number")
    fraction = min(max(load / capacity, 0.0), 1.0)
    return 100.0 * (1.0 - fraction)


def mean_load(points: Sequence[Point]) -> float:
    """The mean of the values: the load the simple scorer rates (every step weighs the same)."""
    if not points:
        raise ValueError("no points")
    return math.fsum(v for _, v in points) / len(points)


def linear_fit(points: Sequence[Point]) -> tuple[float, float]:
    """Ordinary least-squares line through the points: ``(slope per second, value at the last time)``.

    Times are centred on their mean before fitting, so Unix timestamps around 1.8e9 do not cost the
    sums their precision.  One point, or points all at the same time, give a flat line through
    their mean.
    """
    if not points:
        raise ValueError("no points")
    n = len(points)
    t_mean = math.fsum(t for t, _ in points) / n
    v_mean = math.fsum(v for _, v in points) / n
    sxx = math.fsum((t - t_mean) ** 2 for t, _ in points)
    if sxx == 0.0:
        return 0.0, v_mean
    sxy = math.fsum((t - t_mean) * (v - v_mean) for t, v in points)
    slope = sxy / sxx
    t_last = max(t for t, _ in points)
    return slope, v_mean + slope * (t_last - t_mean)


def forecast(points: Sequence[Point], horizon: float) -> float:
    """The fitted line's value ``horizon`` seconds after the last point (the next interval's load)."""
    if horizon < 0 or not math.isfinite(horizon):
        raise ValueError("horizon must be a non-negative number of seconds")
    slope, at_last = linear_fit(points)
    return at_last + slope * horizon


__all__ = ["Point", "forecast", "headroom_score", "linear_fit", "mean_load"]
