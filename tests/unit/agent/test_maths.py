from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.agent.items.maths import (
    NonFiniteScore,
    clamp,
    expiry_window,
    normalise,
    round_half_away,
    score_value,
    valid_until,
)
from dynamic_scoring.contract.wire import ScoreNormalization

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(finite)
def test_clamp_stays_in_range_and_is_idempotent(x: float) -> None:
    once = clamp(x)
    assert -100.0 <= once <= 100.0
    assert clamp(once) == once
    if -100 <= x <= 100:
        assert once == x


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0.5, 1),
        (-0.5, -1),
        (1.5, 2),
        (2.5, 3),
        (-2.5, -3),
        (0.49999999999999994, 0),
        (85.7, 86),
        (-0.4, 0),
        (100.0, 100),
    ],
)
def test_round_half_away_from_zero(x: float, expected: int) -> None:
    assert round_half_away(x) == expected


@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False))
def test_rounding_is_nearest_and_symmetric(x: float) -> None:
    r = round_half_away(x)
    assert abs(r - x) <= 0.5
    assert round_half_away(-x) == -r
    if abs(r - x) == 0.5:
        assert abs(r) > abs(x)


@given(finite)
def test_score_value_is_always_a_valid_placement_score(x: float) -> None:
    value, clamped = score_value(x)
    assert -100 <= value <= 100
    assert clamped == (not -100 <= x <= 100)


def test_normalisation_maps_linearly_and_can_invert() -> None:
    spec = ScoreNormalization(min=0, max=2)
    assert normalise(0.5, spec) == 25
    assert normalise(3, spec) == 150  # clamping comes later
    assert score_value(3, spec) == (100, True)
    inverted = ScoreNormalization(min=10, max=0, target_min=-100, target_max=100)
    assert normalise(10, inverted) == -100 and normalise(0, inverted) == 100
    assert normalise(7.0, None) == 7.0


def test_expiry_window() -> None:
    assert expiry_window(30) == timedelta(seconds=90)
    assert expiry_window(10) == timedelta(seconds=70)
    assert expiry_window(300) == timedelta(seconds=900)
    assert expiry_window(300, 60) == timedelta(seconds=60)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert valid_until(at, 30) == at + timedelta(seconds=90)


def test_normalisation_rejects_degenerate_bounds() -> None:
    with pytest.raises(ValueError, match="differ"):
        ScoreNormalization(min=1, max=1)
    with pytest.raises(ValueError):
        ScoreNormalization(min=0, max=math.inf)


@given(finite)
def test_a_score_value_is_never_nan_or_the_result_of_one(x: float) -> None:
    spec = ScoreNormalization(min=0, max=1e-300)
    try:
        value, _ = score_value(x, spec)
    except NonFiniteScore:
        assert not math.isfinite(normalise(x, spec))
    else:
        assert -100 <= value <= 100 and math.isfinite(normalise(x, spec))


def test_nan_from_normalisation_is_an_error_not_the_best_score() -> None:
    # Bounds the wire now refuses, built directly: targetMax - targetMin overflows to inf, 0 * inf is NaN.
    spec = ScoreNormalization.model_construct(min=0, max=1, target_min=-1.7e308, target_max=1.7e308)
    assert math.isnan(normalise(0.0, spec))
    with pytest.raises(NonFiniteScore):
        score_value(0.0, spec)
