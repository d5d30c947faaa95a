"""Health transitions: N failures to Inactive, one success to Active, Events only on transitions."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.addon.registry.health import (
    HealthSettings,
    HealthState,
    first_delay,
    next_delay,
    next_state,
    worst_case_detection,
)


def run(outcomes: list[bool], threshold: int = 3) -> tuple[HealthState, list[str]]:
    state = HealthState()
    events = []
    for ok in outcomes:
        t = next_state(state, ok, "probe said so", failure_threshold=threshold)
        state = t.state
        if t.event is not None:
            events.append(t.event.reason)
    return state, events


def test_new_scorer_becomes_active_on_first_success() -> None:
    assert run([True]) == (HealthState("Active", 0), ["ScorerActive"])


def test_inactive_only_after_threshold_consecutive_failures() -> None:
    assert run([True, False, False]) == (HealthState("Active", 2), ["ScorerActive"])
    assert run([True, False, False, False]) == (
        HealthState("Inactive", 3),
        ["ScorerActive", "ScorerInactive"],
    )


def test_a_flap_does_not_withdraw_the_scorer() -> None:
    state, events = run([True, False, True, False, False, True, False])
    assert state.status == "Active" and events == ["ScorerActive"]


def test_unknown_scorer_that_never_answers_becomes_inactive() -> None:
    assert run([False, False]) == (HealthState("Unknown", 2), [])
    assert run([False] * 3)[0].status == "Inactive"


@given(st.lists(st.booleans(), max_size=40), st.integers(1, 5))
def test_events_are_exactly_the_status_changes(outcomes: list[bool], threshold: int) -> None:
    state = HealthState()
    for ok in outcomes:
        t = next_state(state, ok, "m", failure_threshold=threshold)
        assert t.changed == (t.state.status != state.status)
        if not ok:
            assert t.state.consecutive_failures == state.consecutive_failures + 1
        state = t.state
    # Inactive iff the last `threshold` rounds all failed
    tail = outcomes[-threshold:]
    assert (state.status == "Inactive") == (len(tail) == threshold and not any(tail))


def test_delays_stay_within_jitter_and_detection_bound() -> None:
    settings = HealthSettings(period=30, jitter=0.2, failure_threshold=3)
    rng = random.Random(7)
    delays = [next_delay(settings, rng) for _ in range(1000)]
    assert min(delays) >= 24 and max(delays) <= 36
    assert max(delays) - min(delays) > 10  # it really spreads
    assert all(0 <= first_delay(settings, rng) <= 1 for _ in range(100))
    assert worst_case_detection(settings, timeout=5) == pytest.approx(3 * 36 + 5)


@pytest.mark.parametrize("kwargs", [{"period": 0}, {"jitter": 1.0}, {"failure_threshold": 0}])
def test_bad_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        HealthSettings(**kwargs)  # type: ignore[arg-type]
