"""Retrying transient failures with exponential backoff and jitter, never past a deadline.

A scorer's cycle has a budget of one interval.  Retrying past it would start the next cycle late and
stack load on a struggling endpoint, so every pause and every attempt must fit in what is left;
when it does not, the last error is raised and the cycle reports it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from dynamic_scoring.agent.errors import AgentError
from dynamic_scoring.agent.settings import RetryPolicy
from dynamic_scoring.runtime.backoff import capped_exponential, equal_jitter

T = TypeVar("T")


def backoff_delay(policy: RetryPolicy, retry_number: int, rng: random.Random | None = None) -> float:
    """The pause before retry ``retry_number`` (1-based): exponential, capped, with "equal jitter".

    Half of the exponential step is fixed and half random, so retries from many clusters spread out
    while each still waits long enough to help the endpoint recover.
    """
    return equal_jitter(capped_exponential(policy.base_delay, policy.max_delay, retry_number - 1), rng)


async def retrying(
    attempt: Callable[[float], Awaitable[T]],
    *,
    deadline: float,
    timeout: float,
    policy: RetryPolicy,
    on_retry: Callable[[AgentError, float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``attempt(per_request_timeout)`` until it succeeds, fails permanently, or time is up.

    Args:
        attempt: one try; receives the timeout to use, which is ``timeout`` or the time left before
            ``deadline``, whichever is smaller.
        deadline: a ``clock()`` value after which no attempt starts.
        timeout: the per-request timeout wanted.
        policy: pauses and the maximum number of attempts.
        on_retry: called with the error and the pause before each retry (metrics, logs).
        clock: monotonic seconds; injectable for tests.

    Raises:
        AgentError: the last error, when it is not transient, attempts are exhausted, or the next
            attempt would not fit before ``deadline`` (after a pause of at least the error's
            ``retry_after``, when the peer sent ``Retry-After``).
    """
    retries = 0
    while True:
        left = deadline - clock()
        try:
            return await attempt(max(0.001, min(timeout, left)))
        except AgentError as exc:
            if not exc.transient:
                raise
            retries += 1
            pause = backoff_delay(policy, retries)
            if exc.retry_after is not None:
                # The peer said when it can take the next request (429/503): never sooner.  If that
                # is past the budget, the cycle reports the error instead of retrying too early.
                pause = max(pause, exc.retry_after)
            if retries >= policy.max_attempts or clock() + pause + policy.min_attempt_seconds > deadline:
                raise
            if on_retry is not None:
                on_retry(exc, pause)
            await asyncio.sleep(pause)


__all__ = ["backoff_delay", "retrying"]
