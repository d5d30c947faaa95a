"""Stabilization's cost at the security review's sizes: memory and time per cycle stay flat.

    python -m bench stabilization            # 2,000 items x 600 cycles, 20,000 items x 120 cycles
    python -m bench stabilization --quick    # a tenth of the cycles

A scorer chooses both its stabilization windows (up to a day) and its interval (down to a second),
and every scorer on a cluster shares the agent's memory and event loop.  The review fed
``interval: 1`` and 86,400 s windows with random scores: keeping every observation took 75 MiB for
2,000 items after 600 cycles and 156 MiB for 20,000 items after two minutes, at 3.7 s a cycle by
then.  Each case here runs the agent's own ``Stabilizer`` in a child process (so its memory is its
own) on the same input, one cycle per simulated second, and reports the child's resident memory
growth from the end of the first tenth of the cycles to the end, and the time of the first and
last tenth's cycles.  Targets: growth under 5 MiB and the last tenth no slower than 1.5x the first
(flat, whatever the window); a 20,000-item cycle under 0.5 s on two cores.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import Row, benchmark, verdict

MIB = 1024 * 1024
CASES = ((2_000, 600), (20_000, 120))
"""(items, cycles): the review's two measurements."""


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(items: int, cycles: int) -> dict[str, float]:
    """Run the stabilizer on random scores, one cycle per simulated second; measure as it goes."""
    from dynamic_scoring.agent.items.stabilization import Stabilization, Stabilizer

    stabilizer = Stabilizer(
        Stabilization(tolerance=1, rise_window_seconds=86_400, fall_window_seconds=86_400)
    )
    names = [f"node-{k:05d}" for k in range(items)]
    rng = random.Random(11)
    tenth = max(1, cycles // 10)
    times: list[float] = []
    rss_early = 0
    for t in range(cycles):
        raw = [(n, rng.randint(-100, 100)) for n in names]
        start = time.perf_counter()
        stabilizer.apply(1_700_000_000.0 + t, raw)
        times.append(time.perf_counter() - start)
        if t == tenth - 1:
            rss_early = _rss()
    return {
        "first": statistics.median(times[:tenth]),
        "last": statistics.median(times[-tenth:]),
        "growth": _rss() - rss_early,
        "kept": stabilizer.kept(),
    }


@benchmark("stabilization")
def stabilization(workdir: Path) -> list[Row]:
    quick = os.environ.get("BENCH_QUICK") == "1"
    rows: list[Row] = []
    for items, cycles in CASES:
        cycles = cycles // 10 if quick else cycles
        out = subprocess.run(
            [sys.executable, "-m", "bench.stabilization", str(items), str(cycles)],
            check=True,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        r = json.loads(out.stdout)
        name = f"stabilization {items:,} items x {cycles} cycles"
        rows.append(
            Row(
                name,
                "resident growth after the first tenth",
                f"{r['growth'] / MIB:.1f} MiB",
                "< 5 MiB",
                verdict(r["growth"] < 5 * MIB),
            )
        )
        ratio = r["last"] / r["first"]
        rows.append(
            Row(
                name,
                "cycle, last tenth / first tenth",
                f"{r['last'] * 1000:.0f} / {r['first'] * 1000:.0f} ms = {ratio:.2f}x",
                "<= 1.5x",
                verdict(ratio <= 1.5),
            )
        )
        rows.append(Row(name, "window entries kept", f"{r['kept']:,.0f} ({r['kept'] / items:.1f} per item)"))
        if items == 20_000:
            rows.append(Row(name, "cycle time", f"{r['last']:.3f} s", "< 0.5 s", verdict(r["last"] < 0.5)))
    return rows


if __name__ == "__main__":
    print(json.dumps(child(int(sys.argv[1]), int(sys.argv[2]))))
