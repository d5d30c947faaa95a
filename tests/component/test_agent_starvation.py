"""Health reflects starved workers: a scorer that finishes no cycle while its scores expire.

Real scorer processes on loopback; one concurrency slot shared by three scorers whose cycles each
take 1.8 s of a 2 s interval, so each of them finishes a cycle only every ~5.4 s while its scores
stay valid for 3 s.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.supervisor import Supervisor
from tests.component.conftest import FAST
from tests.component.harness import ScorerProcess, eventually, summary

pytestmark = pytest.mark.anyio


async def test_workers_starved_of_slots_are_reported_until_they_catch_up(scorer: ScorerProcess) -> None:
    settings = dataclasses.replace(FAST, max_concurrent_cycles=1)
    sup = Supervisor(
        cluster_name="c", secrets=MemorySecrets(), publisher=MemoryPublisher(), settings=settings
    )
    slow = [
        summary(f"slow_{i}", scorer.url("/sleep/1.8/scoring"), scoringInterval=2, validForSeconds=3)
        for i in range(3)
    ]

    async def watchdog() -> None:  # what the agent's watchdog does every 0.5 s
        while True:
            sup.note_progress()
            await asyncio.sleep(0.2)

    ticking = asyncio.create_task(watchdog())
    try:
        await sup.apply(slow)
        starved = await eventually(lambda: sup.starved_workers() or None, timeout=30, what="a starved worker")
        since, bound = next(iter(starved.values()))
        assert bound == pytest.approx(3 + FAST.initial_jitter_seconds) and since > bound
        # Slow, not dead: every worker finishes cycles, yet they keep falling past their bound.
        # Waited for rather than read once: which worker is past its bound at a given instant
        # (the margin is ~0.4 s of a 5.4 s rotation) is up to the scheduler.  A report that only
        # names workers that never finished a cycle (dead, not slow) never shows one here: fails.
        await eventually(
            lambda: all(w.cycles >= 2 for w in sup.workers.values()), timeout=30, what="two cycles each"
        )

        def starved_after_cycles() -> list[str]:
            workers = sup.workers
            return [name for name in sup.starved_workers() if workers[name].cycles >= 2]

        await eventually(starved_after_cycles, timeout=30, what="a starved worker that finishes cycles")

        # alone, the first scorer gets the slot at every interval: healthy again without a restart
        await sup.apply(slow[:1])
        await eventually(lambda: not sup.starved_workers(), timeout=15, what="no starved worker")
        cycles = sup.workers["slow_0"].cycles
        await eventually(
            lambda: sup.workers["slow_0"].cycles >= cycles + 2, timeout=30, what="two more cycles"
        )
        # Still not starved after two more cycles: its progress keeps being noted.  Waited for, not
        # read once: a cycle (2 s) against the 3.2 s bound leaves only ~1.2 s for scheduling delay
        # at one instant; a worker whose progress stopped being noted stays starved and fails.
        await eventually(lambda: not sup.starved_workers(), timeout=15, what="no starved worker after")
    finally:
        ticking.cancel()
        await sup.close()
