"""Arithmetic over a series' points that scorers keep rewriting: mean, last value, rate, trend, forecasts.

Everything here takes finite ``(unix_seconds, value)`` points, oldest first (what ``Series.points``
holds), and raises ``EmptySeriesError`` for no points instead of inventing a number: a score made up for
a series without data would look like a real measurement on the hub.
"""

from __future__ import annotations

import bisect
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


def _window_mean(points: Sequence[Point], times: Sequence[float], start: float, end: float) -> float | None:
    """Mean of the values with ``start < t <= end``; None when the window holds no point."""
    lo, hi = bisect.bisect_right(times, start), bisect.bisect_right(times, end)
    if lo >= hi:
        return None
    return math.fsum(v for _, v in points[lo:hi]) / (hi - lo)


def _value_at(points: Sequence[Point], times: Sequence[float], at: float) -> float | None:
    """The value at time ``at``, linear between the two points around it; None outside the points."""
    if not times[0] <= at <= times[-1]:
        return None
    i = bisect.bisect_left(times, at)
    if times[i] == at:
        return points[i][1]
    (t0, v0), (t1, v1) = points[i - 1], points[i]
    return v0 + (v1 - v0) * (at - t0) / (t1 - t0)


def seasonal_forecast(
    points: Sequence[Point],
    horizon: float,
    *,
    season: float = 86_400.0,
    level: float = 3_600.0,
    samples: int = 12,
) -> float:
    """The mean value expected over the next ``horizon`` seconds, from earlier seasons and today's level.

    Data-centre load repeats daily: a peak at 14:00 yesterday says more about 14:00 today than any
    straight line through the last ten minutes does.  For each of ``samples`` times ``T`` spread over
    ``(last, last + horizon]`` and each earlier season ``k`` the points cover, the estimate is the
    value one ``k`` seasons before ``T`` shifted by how much the recent level differs from the level
    then: ``v(T - k·season) + mean(last level window) - mean(that window k seasons earlier)`` (the
    seasonal naive forecast with a level correction).  The estimates of all covered seasons are averaged,
    then the ``samples`` times.  This is a deliberately small method: it needs no fitting, costs a
    few microseconds per point, and explains itself; see docs/samples.md for why no library model.

    Points that do not reach one season back (a fresh Prometheus, a new cluster) give the mean of the
    last ``level`` seconds: the reactive answer, until history exists.

    Raises:
        EmptySeriesError: no points.
        ValueError: ``horizon`` negative, ``season``, ``level`` or ``samples`` not positive.
    """
    _check_seasonal(points, horizon, season, level, samples)
    times = [t for t, _ in points]
    recent = _recent(points, times, level)
    found = _seasonal(points, times, recent, horizon, season, level, samples)
    return recent if found is None else found


BLEND_FULL_UNTIL = 3_600.0
"""Horizons up to this many seconds blend the seasonal forecast and the recent level half and half."""
BLEND_NONE_FROM = 14_400.0
"""From this horizon on the seasonal forecast stands alone; between the two the recent level's weight
falls linearly from ½ to 0."""


def recent_weight(horizon: float) -> float:
    """The recent level's default weight in :func:`blended_forecast` for a forecast ``horizon`` s ahead.

    ½ up to an hour ahead, 0 from four hours on, linear between.  The rule was chosen on the training
    halves of the placement-quality benchmark's public traces, not fitted to a series: an even blend
    beat the seasonal forecast alone at 15 minutes and an hour in every half and fleet, and lost at
    12 hours in every one; at 4 hours the halves disagreed, and the simpler forecast was kept.
    docs/placement-quality.md has the numbers, on the held-out halves too.
    """
    if not (math.isfinite(horizon) and horizon >= 0):
        raise ValueError("horizon must be a non-negative number of seconds")
    if horizon <= BLEND_FULL_UNTIL:
        return 0.5
    if horizon >= BLEND_NONE_FROM:
        return 0.0
    return 0.5 * (BLEND_NONE_FROM - horizon) / (BLEND_NONE_FROM - BLEND_FULL_UNTIL)


def blended_forecast(
    points: Sequence[Point],
    horizon: float,
    *,
    season: float = 86_400.0,
    level: float = 3_600.0,
    samples: int = 12,
    weight: float | None = None,
) -> float:
    """The seasonal forecast blended with the recent level: ``w · recent + (1 - w) · seasonal``.

    The two are wrong in different ways.  The seasonal forecast (:func:`seasonal_forecast`) carries
    the noise of the day it copies; the mean of the last ``level`` seconds carries none of that but
    cannot see a daily peak coming.  Over the next hour little changes, and averaging the two cancels
    part of each one's error; over half a day the recent level is mostly wrong, and averaging it in
    only pulls a good forecast towards today's trough.  So the recent level's weight ``w`` depends on
    the horizon: :func:`recent_weight` unless ``weight`` gives it (0 is the seasonal forecast alone, 1
    the recent level alone).  Without a season of history the answer is the recent level, as for
    :func:`seasonal_forecast`.

    Raises:
        EmptySeriesError: no points.
        ValueError: ``horizon`` negative, ``season``, ``level`` or ``samples`` not positive, ``weight``
            outside [0, 1].
    """
    _check_seasonal(points, horizon, season, level, samples)
    w = recent_weight(horizon) if weight is None else weight
    if not 0.0 <= w <= 1.0:
        raise ValueError("weight must be from 0 to 1")
    times = [t for t, _ in points]
    recent = _recent(points, times, level)
    seasonal = _seasonal(points, times, recent, horizon, season, level, samples)
    return recent if seasonal is None else w * recent + (1.0 - w) * seasonal


def _check_seasonal(
    points: Sequence[Point], horizon: float, season: float, level: float, samples: int
) -> None:
    _need(points)
    if not (math.isfinite(horizon) and horizon >= 0):
        raise ValueError("horizon must be a non-negative number of seconds")
    if not (math.isfinite(season) and season > 0 and math.isfinite(level) and level > 0 and samples >= 1):
        raise ValueError("season and level must be positive seconds, samples at least 1")


def _recent(points: Sequence[Point], times: Sequence[float], level: float) -> float:
    """The mean of the last ``level`` seconds (never empty: the window holds the last point)."""
    recent = _window_mean(points, times, times[-1] - level, times[-1])
    assert recent is not None  # the window ends at the last point, which it holds
    return recent


def _seasonal(
    points: Sequence[Point],
    times: Sequence[float],
    recent: float,
    horizon: float,
    season: float,
    level: float,
    samples: int,
) -> float | None:
    """:func:`seasonal_forecast`'s estimate, or None when the points do not reach a season back.

    ``recent`` is the mean of the last ``level`` seconds, which the caller has already computed.
    """
    last_t = times[-1]
    estimates: list[float] = []
    # Only seasons the points cover can give an estimate: k such that T - k·season is at or before
    # the last point, and the level window k seasons back ends at or after the first.  Looping over
    # just those keeps the work to the history's length, whatever the horizon (a caller's number).
    last_k = math.floor((last_t - times[0]) / season) + 1
    for i in range(1, samples + 1):
        at = last_t + horizon * i / samples
        seen: list[float] = []
        for k in range(max(1, math.floor((at - last_t) / season)), last_k + 1):
            before = at - k * season
            if before < times[0]:
                break
            then = _value_at(points, times, before)
            level_then = _window_mean(points, times, last_t - k * season - level, last_t - k * season)
            if then is not None and level_then is not None:
                seen.append(then + recent - level_then)
        if seen:
            estimates.append(math.fsum(seen) / len(seen))
    return math.fsum(estimates) / len(estimates) if estimates else None


__all__ = [
    "BLEND_FULL_UNTIL",
    "BLEND_NONE_FROM",
    "EmptySeriesError",
    "Point",
    "blended_forecast",
    "forecast",
    "last",
    "linear_fit",
    "mean",
    "rate",
    "recent_weight",
    "seasonal_forecast",
    "trend",
]
