"""Whether several days of history make the seasonal forecast better: ``python -m bench
placement-quality-history``.

Why a run of its own.  The seasonal sample averages every earlier day its window holds, so more
history is a longer DynamicScorer range.  On the benchmark's first fleet (four shifted copies of one
trace) three days looked much better than one; this run asks the same question on independent
blocks.  The main run's fleet (``bench.placement_quality.real``) is cut into 3-day blocks so
that every trace sits in both halves of the time split, and a scorer that needs three days of warm-up
would leave nothing of such a block to judge.  Here the same traces are cut into :data:`FLEET_DAYS`-day
blocks instead (``bench.placement_quality.fleet``: Alibaba 1, Google 4, Azure 5; held-out half 6
clusters, training half 4), so about three days are judged after the warm-up.

Policies, at each life of :data:`~bench.placement_quality.policies.HISTORY_LIVES` with the horizon
matched to it: the seasonal forecast with one day (``seasonal-<life>``) and with three
(``seasonal3d-<life>``), the sample's blend at 1 h (``blend-1h``), the reactive scorer, the cpu sample,
random, round-robin and static.  Everything else is the main run's machinery: real agent cycles
against a real Prometheus and real scoring APIs registered as DynamicScorers, OCM Placement's ranking,
20 tie orders, the churn oracle, paired block bootstraps, a held-out half for the numbers and a
training half that confirms them or not.  The closed loop is not run here.  :data:`PAIRS` are printed
as rows of their own: three days against one at each life.

``--quick`` (``BENCH_QUICK=1``) replays the held-out half only, without the 12 h life's policies.
Outputs: ``placement-quality-history.csv`` and ``.json`` in the work directory.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import Row, benchmark
from bench.placement_quality import fleet as fleet_module
from bench.placement_quality import prometheus as prom
from bench.placement_quality import replay, targets
from bench.placement_quality.policies import (
    BY_NAME,
    HISTORY_DAYS,
    HISTORY_LIVES,
    HISTORY_POLICIES,
    LIVES,
    STABILIZATION,
    Policy,
)
from bench.placement_quality.real import (
    QUICK_ENV,
    Half,
    comparison_record,
    comparison_rows,
    frontier_record,
    judge_half,
    oracle_rows,
    result_rows,
    score_fleet,
    timing_rows,
)
from bench.placement_quality.targets import Pair
from bench.placement_quality.traces import STEP_SECONDS, ClusterLoads

NAME = "placement-quality-history"
FLEET_DAYS = 6
"""Days per block: three days and an hour of warm-up, about three judged days, Alibaba held-out only."""
PAIRS = [Pair(life, f"seasonal{HISTORY_DAYS}d-{life}/raw", f"seasonal-{life}/raw") for life in HISTORY_LIVES]
"""Three days of history against one, at each life."""


def _say(msg: str) -> None:
    print(f"  [{NAME}] {msg}", file=sys.stderr, flush=True)


def policies(quick: bool) -> list[Policy]:
    """The replayed policies: reactive, cpu, the blend at 1 h, the seasonal forecast on 1 and 3 days, and
    the margin recipe (the shipped forecast with the recipe's band) at each life, a second fleet cut for
    the main run's margin targets."""
    lives = [life for life in HISTORY_LIVES if not (quick and life == "12h")]
    one_day = [BY_NAME[f"seasonal-{life}"] for life in lives]
    three_days = [p for p in HISTORY_POLICIES if p.life in lives]
    recipes = [BY_NAME[f"recipe-{life}"] for life in lives]
    return [BY_NAME["reactive"], BY_NAME["cpu"], BY_NAME["blend-1h"], *one_day, *three_days, *recipes]


def _record(workdir: Path, halves: Sequence[Half], setup: dict[str, Any]) -> None:
    """Every combination as a CSV row and JSON object, with the comparisons, oracles and targets."""
    flat = [{"fleet": h.name, **r.row()} for h in halves for r in h.results]
    with (workdir / f"{NAME}.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
    record = {
        "setup": setup,
        "halves": {
            h.name: {
                "clusters": list(h.names),
                "effective_clusters": h.effective,
                "results": [r.row() for r in h.results],
                "comparisons": [comparison_record(c) for c in h.comparisons],
                "oracle": frontier_record(h.oracle),
                "targets": [t.record() for t in h.targets],
                "margins": [t.record() for t in h.margins],
            }
            for h in halves
        },
    }
    (workdir / f"{NAME}.json").write_text(json.dumps(record, indent=2))


@benchmark(NAME)
def placement_quality_history(workdir: Path) -> list[Row]:
    """Replay, decide and judge the seasonal variants on long blocks; see the module docstring."""
    quick = os.environ.get(QUICK_ENV) == "1"
    fleet = fleet_module.real_fleet(FLEET_DAYS)
    halves_rows = {"held-out": [i for i, r in enumerate(fleet.roles) if r == "test"]}
    if not quick:
        halves_rows["train"] = [i for i, r in enumerate(fleet.roles) if r == "train"]
    used = sorted({i for rows in halves_rows.values() for i in rows})
    position = {i: n for n, i in enumerate(used)}
    names = tuple(fleet.names[i] for i in used)
    chosen = policies(quick)
    lives = sorted({p.life for p in chosen if p.life}, key=list(LIVES).index)
    warmup = replay.warmup_steps([p.range for p in chosen], STEP_SECONDS, whole_days=False)
    steps = fleet.loads.shape[1]
    timeline = replay.Timeline(warmup, steps - warmup)
    assert timeline.first_scored * STEP_SECONDS >= max(p.range for p in chosen), "warm-up too short"
    all_loads = fleet.loads[used]
    times = [float(prom.step_time(s)) for s in timeline.scored]
    loads = all_loads[:, warmup:]
    scoring = score_fleet(workdir, ClusterLoads(names, STEP_SECONDS, all_loads), chosen, times, _say)
    published = replay.publish(scoring.raw, times, timeline, STABILIZATION)
    judged_days = timeline.judged * STEP_SECONDS / 86_400
    judging = time.monotonic()
    halves = [
        judge_half(half, [position[i] for i in r], names, loads, published, judged_days, chosen, pairs=PAIRS)
        for half, r in halves_rows.items()
    ]
    judge_seconds = time.monotonic() - judging
    setup = {
        "quick": quick,
        "fleet_days": FLEET_DAYS,
        "policies": [p.name for p in chosen],
        "halves": {h.name: list(h.names) for h in halves},
        "warmup_steps": warmup,
        "judged_steps": timeline.judged,
        "lives": lives,
        "cycles": scoring.cycles,
        "seconds": {"start": scoring.start_seconds, "score": scoring.score_seconds, "judge": judge_seconds},
    }
    _record(workdir, halves, setup)
    rows = [
        Row(
            NAME,
            "mode",
            f"{'quick' if quick else 'full'}: {len(names)} clusters from {FLEET_DAYS}-day trace blocks,"
            f" warm-up {warmup} steps, {timeline.judged} judged steps",
        ),
        *(
            Row(
                NAME,
                f"{h.name} fleet",
                f"{len(h.names)} clusters ({', '.join(h.names)}), {h.effective:.1f} effective",
            )
            for h in halves
        ),
        *timing_rows(NAME, scoring, judge_seconds),
    ]
    for h in halves:
        rows.extend(targets.rows(NAME, h.name, h.targets))
        rows.extend(targets.margin_rows(NAME, h.name, h.margins))
    for h in halves:
        rows.extend(_renamed(result_rows(h)))
        rows.extend(_renamed(oracle_rows(h)))
        rows.extend(_renamed(comparison_rows(h)))
    return rows


def _renamed(rows: Sequence[Row]) -> list[Row]:
    """The main run's row builders name the main run; these rows are this run's."""
    return [dataclasses.replace(r, benchmark=NAME) for r in rows]
