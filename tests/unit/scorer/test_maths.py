"""The statistics scorers share: exact on lines, no invented numbers for empty series."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.scorer import EmptySeriesError, forecast, last, linear_fit, mean, rate, trend

pytestmark = pytest.mark.unit

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
