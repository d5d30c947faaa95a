"""The placement-quality replay end to end on loopback: a real Prometheus, real scorers, the agent's cycle.

Two clusters, four hours at 300 s, with loads chosen so every score and decision can be computed by
hand: ``east`` climbs 2 points a step from 10 %, ``west`` falls 2 points a step from 90 %, so they
cross at step 20.  Replaying steps 20..27 with the cycle's clock set to each step must give the
reactive policy ``100 - load[j]`` and the cpu sample ``100 - mean(load[j-10..j])`` (its 3000 s window
is 11 points), which also proves the window ends at the injected time and not at "now".
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from bench.quality import prometheus as prom
from bench.quality.policies import POLICIES, serving
from bench.quality.replay import decide, score_steps
from bench.quality.traces import ClusterLoads

STEPS = 48
REPLAYED = range(20, 28)
NAMES = ("east", "west")


def test_replay_scores_and_decisions_match_the_hand_computed_ones(tmp_path: Path) -> None:
    j = np.arange(STEPS, dtype=np.float64)
    loads = np.vstack([10.0 + 2.0 * j, 90.0 - 2.0 * j])
    clusters = ClusterLoads(NAMES, 300, loads)
    policies = [p for p in POLICIES if p.name in ("reactive", "cpu")]
    times = [float(prom.step_time(s)) for s in REPLAYED]
    server = prom.serve_clusters(tmp_path / "prometheus", clusters)
    try:
        with serving(policies, server.url) as plans:
            raw = asyncio.run(score_steps(plans, NAMES, times, concurrency=4))
    finally:
        server.stop()

    steps = np.array(list(REPLAYED))
    # Reactive: headroom of the sample at the step itself.
    assert raw["reactive"].tolist() == [(90 - 2 * steps).tolist(), (10 + 2 * steps).tolist()]
    # cpu sample: headroom of the mean of the 11 samples ending at the step (east's mean is 2j).
    assert raw["cpu"].tolist() == [(100 - 2 * steps).tolist(), (2 * steps).tolist()]

    east, west = (0,), (1,)
    cpu_plan, reactive_plan = plans["cpu"], plans["reactive"]
    # Exact mode: the higher score wins, a tie goes to the name first in order (east at step 20).
    reactive = decide(raw["reactive"], NAMES, 1, "exact", reactive_plan.aps_name, reactive_plan.score_name)
    assert reactive == [east] + [west] * 7
    cpu = decide(raw["cpu"], NAMES, 1, "exact", cpu_plan.aps_name, cpu_plan.score_name)
    assert cpu == [east] * 6 + [west] * 2  # 60..50 against 40..50: tied at step 25, behind after
    # Additive mode: Steady keeps east although west leads by up to 8 points.
    assert decide(raw["cpu"], NAMES, 1, "additive", cpu_plan.aps_name, cpu_plan.score_name) == [east] * 8
    # k = 3 of 2 clusters: both, best first.
    assert decide(raw["cpu"], NAMES, 3, "exact", cpu_plan.aps_name, cpu_plan.score_name)[-1] == (1, 0)
