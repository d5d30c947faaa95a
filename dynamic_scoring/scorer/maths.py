"""Arithmetic over a series' points that scorers keep rewriting: mean, last value, rate, trend, forecast.

Everything here takes finite ``(unix_seconds, value)`` points, oldest first (what ``Series.points``
holds), and raises ``EmptySeriesError`` for no points instead of inventing a number: a score made up for
a series without data would look like a real measurement on the hub.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Point = tuple[float, float]
"""``(unix_seconds, value)``."""


class EmptySeriesError(ValueError):
    """A statistic was asked of a series without finite points."""


def _need(points: Sequence[Point]) -> None:
    if not points:
        raise EmptySeriesError("no finite points")


def mean(points: Sequence[Point]) -> float:
    """The mean of the values (every step weighs the same)."""
    _need(points)
    return math.fsum(v for _, v in points) / len(points)


def last(points: Sequence[Point]) -> float:
    """The value of the newest point."""
    _need(points)
    return points[-1][1]


def rate(points: Sequence[Point]) -> float:
    """Change per second between the first and the last point; 0 for one point.

    This is the plain difference quotient of a gauge, not PromQL's ``rate`` (which also handles
    counter resets): ask Prometheus for ``rate(...)`` when the series is a counter.
    """
    _need(points)
    (t0, v0), (t1, v1) = points[0], points[-1]
    return 0.0 if t1 == t0 else (v1 - v0) / (t1 - t0)


def linear_fit(points: Sequence[Point]) -> tuple[float, float]:
    """Ordinary least-squares line through the points: ``(slope per second, value at the last time)``.

    Times are centred on their mean before fitting, so Unix timestamps around 1.8e9 do not cost the
    sums their precision.  One point, or points all at the same time, give a flat line through
    their mean.
    """
    _need(points)
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


def trend(points: Sequence[Point]) -> float:
    """The least-squares slope, per second: robust to one noisy end point, unlike ``rate``."""
    return linear_fit(points)[0]


def forecast(points: Sequence[Point], horizon: float) -> float:
    """The fitted line's value ``horizon`` seconds after the last point."""
    if horizon < 0 or not math.isfinite(horizon):
        raise ValueError("horizon must be a non-negative number of seconds")
    slope, at_last = linear_fit(points)
    return at_last + slope * horizon


__all__ = ["EmptySeriesError", "Point", "forecast", "last", "linear_fit", "mean", "rate", "trend"]
