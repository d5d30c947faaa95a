from __future__ import annotations

import asyncio
import random

import pytest

from dynamic_scoring.agent.errors import ScorerHTTPError, ScorerResponseInvalid, ScorerUnavailable
from dynamic_scoring.agent.retry import backoff_delay, retrying
from dynamic_scoring.agent.settings import RetryPolicy

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_backoff_grows_is_capped_and_jittered() -> None:
    policy = RetryPolicy(base_delay=1, max_delay=4)
    rng = random.Random(1)
    for n, step in [(1, 1), (2, 2), (3, 4), (4, 4), (9, 4)]:
        d = backoff_delay(policy, n, rng)
        assert step / 2 <= d <= step


def test_transient_statuses() -> None:
    assert ScorerHTTPError("x", status=503).transient and ScorerHTTPError("x", status=429).transient
    assert not ScorerHTTPError("x", status=404).transient


async def test_retries_stop_at_the_deadline_and_on_permanent_errors() -> None:
    now = [0.0]
    calls: list[float] = []

    async def attempt(timeout: float) -> int:
        calls.append(timeout)
        now[0] += 1
        raise ScorerUnavailable("down")

    policy = RetryPolicy(base_delay=0.001, max_delay=0.001, max_attempts=10, min_attempt_seconds=0.5)
    with pytest.raises(ScorerUnavailable):
        await retrying(attempt, deadline=3.0, timeout=30, policy=policy, clock=lambda: now[0])
    assert calls[0] == 3.0 and len(calls) == 3  # each timeout is bounded by what is left

    async def invalid(timeout: float) -> int:
        calls.append(timeout)
        raise ScorerResponseInvalid("bad")

    calls.clear()
    with pytest.raises(ScorerResponseInvalid):
        await retrying(invalid, deadline=100.0, timeout=1, policy=policy, clock=lambda: 0.0)
    assert len(calls) == 1


async def test_retry_after_sets_the_least_pause_and_is_never_shortened_past_the_budget() -> None:
    now = [0.0]
    calls: list[float] = []

    async def busy(timeout: float) -> int:
        calls.append(now[0])
        if len(calls) == 1:
            error = ScorerHTTPError("busy", status=429)
            error.retry_after = 0.05
            raise error
        return 7

    policy = RetryPolicy(base_delay=0.001, max_delay=0.001, max_attempts=3, min_attempt_seconds=0.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await retrying(busy, deadline=10.0, timeout=1, policy=policy, clock=lambda: now[0]) == 7
    assert loop.time() - started >= 0.05

    async def far(timeout: float) -> int:
        calls.append(timeout)
        error = ScorerHTTPError("busy", status=503)
        error.retry_after = 60.0
        raise error

    calls.clear()
    with pytest.raises(ScorerHTTPError):
        await retrying(far, deadline=10.0, timeout=1, policy=policy, clock=lambda: 0.0)
    assert len(calls) == 1  # waiting 60 s would not fit in the 10 s budget: no retry
