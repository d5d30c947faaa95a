"""The informer's reconnect backoff: exponential, jittered within [d/2, d], capped, reset on success."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.kube.informer import Backoff


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
