"""The closed loop on loopback: a real Prometheus fed by remote write, real scorers, the agent's cycle.

What is proven: every sample the loop writes comes back from Prometheus exactly; the scores each
decision used are the ones the agent computes from the *final* history up to the sample before the
decision (so the scorers read what the judge judges, placed load included, and nothing after it); and
the placed load moved the scores (a loop whose writes were lost or ignored would fail here).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from bench.placement_quality import closed_loop as cl
from bench.placement_quality import prometheus as prom
from bench.placement_quality.policies import BY_NAME, serving
from bench.placement_quality.remote_write import RemoteWriter
from bench.placement_quality.replay import score_steps
from bench.placement_quality.traces import ClusterLoads
from e2e.prometheus import PrometheusServer

NAMES = ("east", "north", "west")
WARMUP = 12  # the cpu sample's 3000 s window (11 points) and the sample before the first decision
STEPS = WARMUP + 20


def test_remote_write_appends_after_backfilled_blocks_and_reads_back_exactly(tmp_path: Path) -> None:
    loads = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    server = PrometheusServer(tmp_path / "p", remote_write_receiver=True)
    server.backfill(prom.openmetrics(ClusterLoads(("a", "b"), 300, loads)))
    server.start()
    try:
        with RemoteWriter(server.url) as writer:
            for s in range(3, 6):
                writer.write(
                    [
                        ({"__name__": prom.METRIC, "cluster": c}, [(prom.step_time(s) * 1000, s + i / 3)])
                        for i, c in enumerate("ab")
                    ]
                )
        got = server.query(f'{prom.METRIC}{{cluster="b"}}[30m]', at=prom.step_time(5))
    finally:
        server.stop()
    assert [float(v) for _, v in got[0]["values"]] == [4.0, 5.0, 6.0, 3 + 1 / 3, 4 + 1 / 3, 5 + 1 / 3]


def test_the_loop_scores_what_it_wrote_and_the_placed_load_moves_the_scores(tmp_path: Path) -> None:
    j = np.arange(STEPS, dtype=np.float64)
    base = np.vstack([20.0 + j, np.full(STEPS, 40.0), 60.0 - j])
    setups = [cl.Setup(p, "raw", "exact", 2.0, "15m") for p in ("reactive", "cpu")]
    sim = cl.simulate(tmp_path / "loop", NAMES, base, WARMUP, setups, step_seconds=300)
    assert sim.cycles == len(setups) * len(NAMES) * (STEPS - WARMUP)

    # Replay the final history (trace plus every placed workload) through the same scorers, open loop.
    final = ClusterLoads(
        tuple(cl.loop_name(n, c) for n in range(len(sim.loops)) for c in NAMES),
        300,
        np.vstack([loop.base + loop.added for loop in sim.loops]),
    )
    times = [float(prom.step_time(s - 1)) for s in range(WARMUP, STEPS)]
    server = prom.serve_clusters(tmp_path / "final", final)
    try:
        with serving([BY_NAME["reactive"], BY_NAME["cpu"]], server.url) as plans:
            replayed = asyncio.run(score_steps(plans, final.names, times, concurrency=4))
    finally:
        server.stop()
    for n, loop in enumerate(sim.loops):
        used = np.stack(loop.raw, axis=1)  # clusters x judged steps
        mine = replayed[loop.setup.policy][n * len(NAMES) : (n + 1) * len(NAMES)]
        assert used.tolist() == mine.tolist(), loop.setup.label

    reactive = sim.loops[0]
    total = reactive.base + reactive.added
    # The reactive score is the headroom of the sample before (placed load included), 0 when overloaded.
    headroom = np.clip(np.rint(100 - total[:, WARMUP - 1 : STEPS - 1]), 0, 100)
    assert np.stack(reactive.raw, axis=1).tolist() == headroom.tolist()
    assert reactive.added[:, WARMUP:].sum() > 0
    untouched = np.rint(100 - base[:, WARMUP - 1 : STEPS - 1])
    assert np.stack(reactive.raw, axis=1).tolist() != untouched.tolist()
    assert {r.setup.label for r in sim.results} == {"reactive/raw", "cpu/raw"}
