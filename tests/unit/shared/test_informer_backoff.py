"""The informer's reconnect backoff: exponential, jittered within [d/2, d], capped, reset on success."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.runtime.backoff import Backoff, capped_exponential, equal_jitter, jittered


@given(st.floats(0.01, 5), st.floats(5, 60), st.integers(1, 40))
def test_property_each_delay_lies_in_its_jitter_window_and_under_the_cap(
    initial: float, maximum: float, failures: int
) -> None:
    backoff = Backoff(initial, maximum)
    for n in range(failures):
        ceiling = min(maximum, initial * 2**n)
        delay = backoff.next()
        assert ceiling / 2 <= delay <= ceiling


def test_defaults_are_client_go_reflector_bounds_and_reset_starts_over() -> None:
    backoff = Backoff()
    delays = [backoff.next() for _ in range(10)]
    assert 0.4 <= delays[0] <= 0.8
    assert all(15 <= d <= 30 for d in delays[6:])
    backoff.reset()
    assert backoff.next() <= 0.8


def test_without_jitter_the_delays_double_exactly_up_to_the_cap() -> None:
    backoff = Backoff(1.0, 60.0, jitter=False)
    assert [backoff.next() for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_the_helpers_every_loop_uses() -> None:
    assert capped_exponential(0.5, 8.0, 0) == 0.5
    assert capped_exponential(0.5, 8.0, 10) == 8.0
    assert capped_exponential(0.5, 8.0, 10_000) == 8.0  # no overflow
    assert equal_jitter(4.0, random.Random(1)) == pytest.approx(2 + 2 * random.Random(1).random())
    assert 2.0 <= jittered(2.0, 0.2) <= 2.4
