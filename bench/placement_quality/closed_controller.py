"""A stretch of the closed loop driven by OCM's real placement controller, checked decision by decision.

Why.  In the closed loop a decision changes the loads every later score is computed from, so a model
that decided one step differently from OCM would send the rest of the run down another path.  The
open-loop segment (``bench.placement_quality.controller``) checks the model on fixed scores; this one lets
OCM's controller drive: at every step its decision is the one the workloads are placed on, and the model's
pick from the same scores is compared with it.

Each step of :data:`SEGMENT_STEPS`, for every loop of the segment (raw scores only: what is published
is what was scored):

1. the agent's real cycles score every cluster from the samples written so far (as in
   ``bench.placement_quality.closed_loop.run``);
2. the scores are written as AddOnPlacementScores ``c<loop>-<step>`` in every cluster's namespace,
   then a probe score that only the cluster last by name carries; a probe Placement in ``mode: Exact``
   picking 1 by it answers that cluster only once the controller's cache holds it, and one resource's
   events reach the cache in the order they were written, so every score of the step is there too;
3. each loop's Placement is re-applied pointing at its step's scores, with its decision group renamed
   ``step-<n>``; once every status names the step, the PlacementDecisions are the controller's answer
   to this step's scores (Steady, in the margin form, sees the previous step's decision, as the model
   does);
4. the loop places the step's workloads on OCM's pick and the samples are written.

The hub's ManagedClusters are named so that their order by name is the loop's tie order, so OCM breaks
ties as the model does.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.placement_quality import closed_loop
from bench.placement_quality.closed_loop import Loop, Setup
from bench.placement_quality.controller import (
    SCORE,
    STEP_TIMEOUT,
    cluster_name,
    decided,
    hub_objects,
    local_hub,
    on_group,
    score_objects,
    step_group,
    step_seen,
)
from bench.placement_quality.experiment import tie_names
from bench.placement_quality.ranking import Form, placement
from bench.placement_quality.replay import CONCURRENCY, LOOPBACK
from dynamic_scoring.agent.http import ClientPool
from dynamic_scoring.kube.jsontypes import JSON
from e2e.kube import Client
from e2e.procs import wait_until

SEGMENT_STEPS = 48
"""Four hours of trace time from the first judged step."""
GROUP = "qc"
PROBE = "closed-probe"

SETUPS = (
    Setup("reactive", "raw", "exact", 6.0, "1h"),
    Setup("seasonal-1h", "raw", "exact", 6.0, "1h"),
    Setup("cpu", "raw", "margin", 6.0, "1h"),
)
"""The loops OCM drives: the scorer that moves most, the shipped forecast, and the margin recipe
(Steady in the loop), all at the largest workload size, where placements move the loads most."""

Progress = Callable[[str], None]


@dataclass
class ClosedSegmentResult:
    """What the closed segment showed; ``mismatches`` lists at most the first few differences."""

    steps: int
    loops: int
    compared: int = 0
    matched: int = 0
    changes: int = 0
    mismatches: list[str] = field(default_factory=list)
    seconds_setup: float = 0.0
    seconds_steps: float = 0.0


def placement_name(index: int, setup: Setup) -> str:
    """The hub Placement of loop ``index``."""
    return f"loop-{index}-{setup.policy}-{setup.form}"


def resource(index: int, step: int) -> str:
    """The AddOnPlacementScore holding loop ``index``'s scores for ``step``."""
    return f"c{index:02d}-{step:04d}"


def loop_placement(index: int, setup: Setup, step: int) -> JSON:
    """Loop ``index``'s Placement at ``step``: pick 1 in its form, by that step's scores."""
    form: Form = "exact" if setup.form == "exact" else "margin"
    obj = placement(1, form, resource(index, step), SCORE, name=placement_name(index, setup))
    return step_group(on_group(obj, GROUP), GROUP, step)


def probe_placement(step: int) -> JSON:
    """The probe: Exact, pick 1 by ``step``'s probe score, which only the last cluster by name has."""
    return step_group(
        on_group(placement(1, "exact", f"q-ready-{step:04d}", SCORE, name=PROBE), GROUP), GROUP, step
    )


def _ask_ocm(
    hub: Client,
    pool: ThreadPoolExecutor,
    loops: Sequence[Loop],
    hub_names: Sequence[str],
    step: int,
    scores: dict[int, NDArray[np.int64]],
) -> dict[int, int]:
    """Write the step's scores, wait until the controller holds them, and return each loop's pick."""

    def write(pair: tuple[JSON, JSON]) -> None:
        hub.apply(pair[0])
        hub.patch_status(pair[0], pair[1])

    writes = [
        score_objects(resource(n, step), hub_names[c], int(values[c]))
        for n, values in scores.items()
        for c in range(len(hub_names))
    ]
    list(pool.map(write, writes))
    last = sorted(hub_names)[-1]
    write(score_objects(f"q-ready-{step:04d}", last, 100))
    hub.apply(probe_placement(step))
    wait_until(
        lambda: step_seen(hub, step, [PROBE]) and decided(hub).get(PROBE) == (last,),
        timeout=STEP_TIMEOUT,
        what=f"the placement controller to see step {step}'s scores ({PROBE} picks {last})",
        interval=0.05,
    )
    names = [placement_name(n, loops[n].setup) for n in scores]
    for n in scores:
        hub.apply(loop_placement(n, loops[n].setup, step))
    wait_until(
        partial(step_seen, hub, step, names),
        timeout=STEP_TIMEOUT,
        what=f"every loop Placement's status to name step-{step}",
        interval=0.05,
    )
    got = decided(hub)
    index = {name: c for c, name in enumerate(hub_names)}
    picks: dict[int, int] = {}
    for n in scores:
        chosen = got.get(placement_name(n, loops[n].setup), ())
        if len(chosen) != 1:
            raise RuntimeError(f"step {step}: {placement_name(n, loops[n].setup)} decided {list(chosen)}")
        picks[n] = index[chosen[0]]
    return picks


def _given(pick: int, _published: NDArray[np.int64]) -> int:
    """A decider that answers what OCM's controller already decided."""
    return pick


def run_closed_segment(
    run_dir: Path,
    names: Sequence[str],
    base: NDArray[np.float64],
    warmup: int,
    progress: Progress,
    *,
    setups: Sequence[Setup] = SETUPS,
    steps: int = SEGMENT_STEPS,
) -> ClosedSegmentResult:
    """Run ``setups``' loops for ``steps`` steps from ``warmup`` with OCM's controller deciding."""
    if any(s.variant != "raw" for s in setups) or len({s.size for s in setups}) != 1:
        raise ValueError("the closed segment drives raw-score setups of one size (one tie order)")
    began = time.monotonic()
    series = base[:, : warmup + steps]
    loops = closed_loop.make_loops(setups, series, warmup)
    plain = tie_names(names, loops[0].order)
    hub_names = [cluster_name(GROUP, n) for n in plain]
    result = ClosedSegmentResult(steps=steps, loops=len(loops))
    with (
        closed_loop.backend(run_dir / "loop", names, loops, warmup, setups) as (plans, writer),
        local_hub(run_dir / "ocm", progress) as hub,
        ThreadPoolExecutor(8) as pool,
    ):
        for obj in hub_objects(plain, (GROUP,)):
            hub.apply(obj)
        result.seconds_setup = time.monotonic() - began
        progress(f"closed segment: {steps} steps x {len(loops)} loops decided by OCM's placement controller")
        stepped = time.monotonic()

        async def drive() -> None:
            clients = ClientPool(policy=LOOPBACK)
            gate = asyncio.Semaphore(CONCURRENCY)
            try:
                for step in range(warmup, warmup + steps):
                    scores = await closed_loop.score_loops(loops, names, plans, clients, gate, step)
                    picks = await asyncio.to_thread(_ask_ocm, hub, pool, loops, hub_names, step, scores)
                    for n, loop in enumerate(loops):
                        loop.step(step, scores[n], decider=partial(_given, picks[n]))
                    await asyncio.to_thread(writer.write, closed_loop.series_at(loops, names, step))
            finally:
                await clients.aclose()

        asyncio.run(drive())
        result.seconds_steps = time.monotonic() - stepped
    for n, loop in enumerate(loops):
        for j, (model, used) in enumerate(loop.picks):
            result.compared += 1
            if model == used:
                result.matched += 1
            elif len(result.mismatches) < 10:
                name = placement_name(n, loop.setup)
                result.mismatches.append(f"step {j} {name}: model {names[model]}, controller {names[used]}")
        result.changes += sum(a[1] != b[1] for a, b in itertools.pairwise(loop.picks))
    return result


__all__ = [
    "SEGMENT_STEPS",
    "SETUPS",
    "ClosedSegmentResult",
    "loop_placement",
    "probe_placement",
    "run_closed_segment",
]
