"""The sample scorers' arithmetic: headroom score, mean, least-squares forecast."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.samples.scorers.formulas import forecast, headroom_score, linear_fit, mean_load

loads = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
capacities = st.floats(min_value=1e-3, max_value=1e4)
values = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)
NOW = 1_800_000_000.0


def test_headroom_score_fixed_points() -> None:
    assert headroom_score(0.0, 4.0) == 100.0
    assert headroom_score(1.0, 4.0) == 75.0
    assert headroom_score(4.0, 4.0) == 0.0
    assert headroom_score(9.0, 4.0) == 0.0
    assert headroom_score(-1.0, 4.0) == 100.0


@given(loads, capacities)
def test_headroom_score_is_bounded(load: float, capacity: float) -> None:
    assert 0.0 <= headroom_score(load, capacity) <= 100.0


@given(loads, loads, capacities)
def test_headroom_score_never_rises_with_load(a: float, b: float, capacity: float) -> None:
    low, high = sorted((a, b))
    assert headroom_score(high, capacity) <= headroom_score(low, capacity)


@pytest.mark.parametrize("capacity", [0.0, -1.0, math.inf, math.nan])
def test_headroom_score_rejects_unusable_capacity(capacity: float) -> None:
    with pytest.raises(ValueError, match="capacity"):
        headroom_score(1.0, capacity)


def test_headroom_score_rejects_nan_load() -> None:
    with pytest.raises(ValueError, match="load"):
        headroom_score(math.nan, 4.0)


def test_mean_load_weighs_every_point_the_same() -> None:
    assert mean_load([(0, 1.0), (15, 2.0), (30, 6.0)]) == 3.0
    with pytest.raises(ValueError):
        mean_load([])


@given(
    st.floats(min_value=-1.0, max_value=1.0),
    st.floats(min_value=-100.0, max_value=100.0),
    st.integers(min_value=2, max_value=60),
    st.floats(min_value=0.0, max_value=600.0),
)
def test_forecast_is_exact_on_a_line(slope: float, intercept: float, n: int, horizon: float) -> None:
    points = [(NOW + 15 * i, intercept + slope * 15 * i) for i in range(n)]
    expected = intercept + slope * (15 * (n - 1) + horizon)
    assert forecast(points, horizon) == pytest.approx(expected, rel=1e-9, abs=1e-6)


def test_forecast_of_a_known_noisy_window() -> None:
    # Points 1, 3, 2, 4 at t = 0, 1, 2, 3: slope 0.8, fitted value at t=3 is 3.7, one step on 4.5.
    points = [(NOW + 0, 1.0), (NOW + 1, 3.0), (NOW + 2, 2.0), (NOW + 3, 4.0)]
    slope, at_last = linear_fit(points)
    assert slope == pytest.approx(0.8)
    assert at_last == pytest.approx(3.7)
    assert forecast(points, 1.0) == pytest.approx(4.5)


@given(st.lists(values, min_size=1, max_size=30), st.floats(min_value=0, max_value=3600))
def test_flat_window_forecasts_its_level(levels: list[float], horizon: float) -> None:
    level = levels[0]
    points = [(NOW + 15 * i, level) for i in range(len(levels))]
    assert forecast(points, horizon) == pytest.approx(level, abs=1e-9)


@given(st.lists(values, min_size=1, max_size=30), values, st.floats(min_value=0, max_value=3600))
def test_forecast_shifts_with_the_load_and_is_deterministic(
    vs: list[float], shift: float, horizon: float
) -> None:
    points = [(NOW + 15 * i, v) for i, v in enumerate(vs)]
    shifted = [(t, v + shift) for t, v in points]
    base = forecast(points, horizon)
    assert forecast(list(points), horizon) == base
    assert forecast(shifted, horizon) == pytest.approx(base + shift, abs=1e-6 * (1 + abs(base) + abs(shift)))


def test_single_point_and_same_time_points_are_flat() -> None:
    assert linear_fit([(NOW, 2.0)]) == (0.0, 2.0)
    assert linear_fit([(NOW, 1.0), (NOW, 3.0)]) == (0.0, 2.0)


def test_forecast_rejects_a_negative_horizon() -> None:
    with pytest.raises(ValueError, match="horizon"):
        forecast([(NOW, 1.0)], -1.0)
