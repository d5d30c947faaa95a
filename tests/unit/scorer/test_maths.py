"""The statistics scorers share: exact on lines, no invented numbers for empty series."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.scorer import (
    EmptySeriesError,
    blended_forecast,
    forecast,
    last,
    linear_fit,
    mean,
    rate,
    recent_weight,
    seasonal_forecast,
    trend,
)

T0 = 1_800_000_000.0


@given(
    st.floats(-100, 100),
    st.floats(-1, 1),
    st.integers(2, 50),
    st.integers(1, 60),
    st.floats(0, 3600),
)
def test_a_line_is_fitted_and_forecast_exactly(
    intercept: float, slope: float, n: int, step: int, horizon: float
) -> None:
    points = [(T0 + step * i, intercept + slope * step * i) for i in range(n)]
    fitted_slope, at_last = linear_fit(points)
    assert fitted_slope == pytest.approx(slope, abs=1e-9)
    assert at_last == pytest.approx(points[-1][1], abs=1e-6)
    assert forecast(points, horizon) == pytest.approx(points[-1][1] + slope * horizon, abs=1e-5)
    assert trend(points) == pytest.approx(rate(points), abs=1e-9)  # on a line both are the slope


def test_one_point_is_a_flat_line_and_no_point_is_an_error() -> None:
    assert linear_fit([(T0, 3.0)]) == (0.0, 3.0)
    assert rate([(T0, 3.0)]) == 0.0
    assert mean([(T0, 1.0), (T0 + 1, 3.0)]) == 2.0 and last([(T0, 1.0), (T0 + 1, 3.0)]) == 3.0
    for stat in (mean, last, rate, trend, linear_fit):
        with pytest.raises(EmptySeriesError):
            stat([])
    with pytest.raises(ValueError, match="horizon"):
        forecast([(T0, 1.0)], -1)


# ----------------------------------------------------------------------------- seasonal_forecast

DAY = 86_400.0
STEP = 300.0


def _daily(days: float, shape: Callable[[float], float], start: float = 1.8e9) -> list[tuple[float, float]]:
    """Points every 5 minutes over ``days`` days, valued ``shape(seconds since start)``."""
    return [(start + i * STEP, shape(i * STEP)) for i in range(int(days * DAY / STEP) + 1)]


def _wave(t: float) -> float:
    return 50.0 + 30.0 * math.sin(2 * math.pi * t / DAY)


def test_a_repeating_day_is_forecast_exactly_even_where_the_line_points_the_wrong_way() -> None:
    # One day and a bit of a pure daily wave, ending just before the trough turns upward again:
    # yesterday's same hour holds the answer, the trend of the last ten minutes does not.
    points = _daily(1.25, _wave)  # ends at 06:00 of day 2, the wave's crest
    horizon = 3_600.0
    last_t = points[-1][0] - points[0][0]
    expected = sum(_wave(last_t + horizon * i / 12) for i in range(1, 13)) / 12
    got = seasonal_forecast(points, horizon)
    assert got == pytest.approx(expected, abs=0.05)
    # the straight line through the last hour overshoots the crest
    assert abs(forecast(points[-12:], horizon) - expected) > 5 * abs(got - expected)


def test_a_changed_level_shifts_yesterdays_shape() -> None:
    # Today runs 10 points above yesterday at every hour: the forecast keeps the shape, moved by 10.
    def shape(t: float) -> float:
        return _wave(t) + (10.0 if t >= DAY else 0.0)

    points = _daily(1.5, shape)
    last_t = points[-1][0] - points[0][0]
    expected = sum(shape(last_t + 3_600.0 * i / 12) for i in range(1, 13)) / 12
    assert seasonal_forecast(points, 3_600.0) == pytest.approx(expected, abs=0.1)


def test_several_seasons_are_averaged() -> None:
    # Two earlier days disagree by a spike at the forecast hour: the forecast sits halfway.
    def shape(t: float) -> float:
        return 80.0 if DAY * 0.5 < t < DAY * 0.5 + 7_200 else 20.0

    points = _daily(2.5, shape)  # a spike after 12:00 on day 0 only; ends at 12:00 of day 2
    assert seasonal_forecast(points, 3_600.0, level=1_800.0) == pytest.approx(50.0)


def test_without_a_season_of_history_it_is_the_recent_mean() -> None:
    points = [(1.8e9 + i * 60.0, float(i)) for i in range(61)]  # one hour, rising 0..60
    assert seasonal_forecast(points, 600.0, level=600.0) == pytest.approx(55.5)  # mean of 51..60
    assert seasonal_forecast(points[:1], 600.0) == 0.0


def test_bad_arguments_are_refused() -> None:
    points = _daily(0.1, _wave)
    with pytest.raises(EmptySeriesError):
        seasonal_forecast([], 60.0)
    for kwargs in ({"season": 0.0}, {"level": -1.0}, {"samples": 0}, {"season": math.inf}):
        with pytest.raises(ValueError):
            seasonal_forecast(points, 60.0, **kwargs)
    with pytest.raises(ValueError):
        seasonal_forecast(points, -1.0)


@given(
    values=st.lists(st.floats(0, 100), min_size=1, max_size=400),
    horizon=st.floats(0, 2 * DAY),
)
def test_the_forecast_stays_within_what_level_shifts_can_reach(values: list[float], horizon: float) -> None:
    # Every estimate is a point value plus a difference of two means of the same values, so the
    # forecast lies within [min - spread, max + spread] of the data.
    points = [(1.8e9 + i * STEP, v) for i, v in enumerate(values)]
    low, high = min(values), max(values)
    got = seasonal_forecast(points, horizon, season=STEP * 24, level=STEP * 3)
    assert math.isfinite(got)
    assert low - (high - low) - 1e-9 <= got <= high + (high - low) + 1e-9


def _seasonal_reference(
    points: list[tuple[float, float]], horizon: float, season: float, level: float, samples: int = 12
) -> float:
    """The method as its docstring states it, trying every earlier season that ``T`` can reach."""

    def mean(start: float, end: float) -> float | None:
        vs = [v for t, v in points if start < t <= end]
        return sum(vs) / len(vs) if vs else None

    def value_at(at: float) -> float | None:
        for (t0, v0), (t1, v1) in itertools.pairwise(points):
            if t0 <= at <= t1:
                return v0 if at == t0 else v1 if at == t1 else v0 + (v1 - v0) * (at - t0) / (t1 - t0)
        return points[0][1] if len(points) == 1 and at == points[0][0] else None

    first, last_t = points[0][0], points[-1][0]
    recent = mean(last_t - level, last_t)
    assert recent is not None
    estimates = []
    for i in range(1, samples + 1):
        at = last_t + horizon * i / samples
        seen = []
        k = 1
        while at - k * season >= first:
            then, level_then = (
                value_at(at - k * season),
                mean(last_t - k * season - level, last_t - k * season),
            )
            if then is not None and level_then is not None:
                seen.append(then + recent - level_then)
            k += 1
        if seen:
            estimates.append(sum(seen) / len(seen))
    return sum(estimates) / len(estimates) if estimates else recent


@given(
    values=st.lists(st.floats(0, 100), min_size=1, max_size=120),
    horizon=st.sampled_from([0.0, 300.0, 3_600.0, 7_000.0, 7_200.0, 20_000.0, 100_000.0]),
)
def test_only_the_seasons_the_points_cover_are_visited_and_the_answer_is_unchanged(
    values: list[float], horizon: float
) -> None:
    points = [(1.8e9 + i * STEP, v) for i, v in enumerate(values)]
    got = seasonal_forecast(points, horizon, season=STEP * 24, level=STEP * 3)
    assert got == pytest.approx(_seasonal_reference(points, horizon, STEP * 24, STEP * 3), abs=1e-9)


def test_the_work_does_not_grow_with_the_horizon(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller's ``params.horizon`` of 1e10 s once meant 115,741 seasons tried per sample.

    That was 0.7 s a series: 16 such requests made a shared scorer answer 503 to everyone.
    """
    from dynamic_scoring.scorer import maths

    calls = 0
    real = maths._value_at

    def counting(*args: object) -> float | None:
        nonlocal calls
        calls += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(maths, "_value_at", counting)
    points = _daily(3, _wave)
    for horizon in (3_600.0, 1e10):
        calls = 0
        seasonal_forecast(points, horizon)
        assert calls <= 12 * 4, (horizon, calls)  # 12 samples, at most the 3 days covered (+1)


# ----------------------------------------------------------------------------- blended_forecast


def test_the_recent_levels_weight_is_half_close_ahead_and_none_far_ahead() -> None:
    assert recent_weight(0.0) == recent_weight(900.0) == recent_weight(3_600.0) == 0.5
    assert recent_weight(14_400.0) == recent_weight(43_200.0) == recent_weight(1e10) == 0.0
    assert recent_weight(3_600.0 + 10_800.0 / 2) == pytest.approx(0.25)  # linear between
    weights = [recent_weight(h) for h in range(0, 20_000, 500)]
    assert weights == sorted(weights, reverse=True)
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="horizon"):
            recent_weight(bad)


def test_an_hour_ahead_is_half_the_seasonal_forecast_and_half_the_last_hour() -> None:
    points = _daily(2, _wave)
    seasonal, recent = seasonal_forecast(points, 3_600.0), mean(points[-12:])
    assert abs(seasonal - recent) > 1  # the two differ, so the blend can be told from either
    assert blended_forecast(points, 3_600.0) == pytest.approx((seasonal + recent) / 2)


def test_half_a_day_ahead_is_the_seasonal_forecast_alone() -> None:
    points = _daily(2, _wave)
    assert blended_forecast(points, 43_200.0) == pytest.approx(seasonal_forecast(points, 43_200.0))


def test_a_given_weight_wins_over_the_horizons() -> None:
    points = _daily(2, _wave)
    seasonal, recent = seasonal_forecast(points, 43_200.0), mean(points[-12:])
    assert blended_forecast(points, 43_200.0, weight=1.0) == pytest.approx(recent)
    assert blended_forecast(points, 43_200.0, weight=0.25) == pytest.approx(0.25 * recent + 0.75 * seasonal)
    with pytest.raises(ValueError, match="weight"):
        blended_forecast(points, 3_600.0, weight=1.5)


def test_without_a_season_the_blend_is_the_recent_level() -> None:
    short = _daily(0.5, _wave)
    assert blended_forecast(short, 3_600.0) == pytest.approx(mean(short[-12:]))


@given(st.lists(st.floats(0, 100), min_size=1, max_size=200), st.floats(0, 2 * DAY))
def test_the_blend_lies_between_its_parts(values: list[float], horizon: float) -> None:
    points = [(T0 + STEP * i, v) for i, v in enumerate(values)]
    season, level = STEP * 24, STEP * 3
    got = blended_forecast(points, horizon, season=season, level=level)
    seasonal = seasonal_forecast(points, horizon, season=season, level=level)
    recent = mean([p for p in points if p[0] > points[-1][0] - level])
    assert min(seasonal, recent) - 1e-9 <= got <= max(seasonal, recent) + 1e-9


def test_the_blend_refuses_what_the_seasonal_forecast_refuses() -> None:
    with pytest.raises(EmptySeriesError):
        blended_forecast([], 60.0)
    with pytest.raises(ValueError, match="horizon"):
        blended_forecast([(T0, 1.0)], -1.0)
