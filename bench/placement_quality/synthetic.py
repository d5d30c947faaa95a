"""The placement-quality benchmark on a synthetic fleet of 54 clusters:
``python -m bench placement-quality-synthetic``.

Why a second fleet.  The real fleet (``bench.placement_quality.real``) is honest but small: 11 held-out
clusters that amount to about 6 independent ones.  Fleets of 50 and more are where herding and scale
show, and there are not enough real blocks for one.  The trace package ships, per trace, 1,000
synthetic one-day samples its authors generated from the real traces; :func:`bench.placement_quality.fleet.
synthetic_fleet` takes 18 per trace from the held-out half of the samples (indices 500..999), refusing
near copies (correlation above 0.99), and every name, row and table here says "synthetic".

What differs from the real run, and why:

* **One day a cluster.**  A sample is one day; joined samples are not a longer series (see
  ``bench.placement_quality.fleet``).  So the seasonal scorer, which needs the day before, cannot run: the
  policies are the reactive scorer, the cpu sample and the predict sample with its horizon matched to each
  life (:data:`POLICY_NAMES`).  The warm-up is the longest of their windows at the largest lag (23 steps),
  so 265 steps are judged, and a 12 h life fits only the first 122 of them: read its row with that in
  mind.
* **Sizes.**  Every cluster has a capacity, log-uniform over 50 to 2,000 cores
  (``bench.placement_quality.fleet.capacities``), stored in Prometheus beside its load.  Every decision is
  judged on idle cores as well as on utilisation (idle cores short of the most idle cluster's, over the
  life), and a ``free-cores`` scorer that reads the capacity (``bench.placement_quality.policies``) runs
  beside the utilisation scorers.
* **One half.**  No parameter is tuned here, so there is nothing to confirm on a training half.
* **More Placements in the closed loop.**  :data:`PLACEMENTS` Placements place work instead of 2, so
  the offered load per cluster is the same as on the real fleet's 11 held-out clusters (about 2.2
  workloads alive per cluster).  All Placements that read the same scores make the same pick, so a
  scored setup puts 10 workloads a step on one cluster: the herd of many Placements at scale.
* **Agreement with the real fleet.**  When the real run's JSON is in the same work directory
  (``python -m bench placement-quality placement-quality-synthetic --workdir DIR``), every comparison
  the two runs share (open and closed loop) is set side by side and counted: both clear and the same
  way, both clear and opposite, or clear in one only.

Everything else is the real run's machinery: real agent cycles against a real Prometheus and real
scoring APIs, OCM Placement's ranking, 20 tie orders, the churn oracle, paired block bootstraps.
``--quick`` (``BENCH_QUICK=1``) runs 9 clusters, 4 policies and a 2-Placement closed loop of 2 (about
2.3 minutes; the full run about 21).  Outputs in the work directory:
``placement-quality-synthetic.csv`` and ``.json`` (``python -m bench.placement_quality.report DIR`` prints its
tables).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import Row, benchmark
from bench.placement_quality import closed_loop, replay
from bench.placement_quality import fleet as fleet_module
from bench.placement_quality import prometheus as prom
from bench.placement_quality.agreement import Agreement, agree
from bench.placement_quality.policies import BY_NAME, STABILIZATION, Policy
from bench.placement_quality.real import NAME as REAL_NAME
from bench.placement_quality.real import (
    QUICK_ENV,
    Half,
    anticipation_rows,
    closed_setup_rows,
    comparison_record,
    comparison_rows,
    frontier_record,
    judge_half,
    oracle_rows,
    result_rows,
    score_fleet,
    timing_rows,
)
from bench.placement_quality.traces import STEP_SECONDS, ClusterLoads

NAME = "placement-quality-synthetic"
CLUSTERS = 54
"""18 clusters of each trace: at 0.99 correlation the held-out samples hold 22 to 27 distinct Azure days."""
QUICK_CLUSTERS = 9
SEED = 0
POLICY_NAMES = ("reactive", "cpu", "predict-15m", "predict-1h", "predict-4h", "predict-12h", "free-cores")
QUICK_POLICY_NAMES = ("reactive", "cpu", "predict-1h", "free-cores")
CLOSED_POLICIES = ("reactive", "cpu", "predict-1h")
QUICK_CLOSED_POLICIES = ("reactive", "cpu")
"""The closed loop adds load in percent of a cluster, with no capacities: ``free-cores`` stays out."""
CLOSED_SIZES = (3.0,)
"""The closed loop at 1 h: each scored setup is 14,000 cycles (about 2 minutes), so one size."""
PLACEMENTS = 10
"""Placements in the closed loop: 10 x 12 workloads alive / 54 clusters = 2.2 a cluster, as the real
fleet's 2 x 12 / 11."""
HALF = "synthetic"


def _say(msg: str) -> None:
    print(f"  [{NAME}] {msg}", file=sys.stderr, flush=True)


def policies(quick: bool) -> list[Policy]:
    """The policies replayed: those whose windows fit a one-day sample (the seasonal scorer does not)."""
    return [BY_NAME[n] for n in (QUICK_POLICY_NAMES if quick else POLICY_NAMES)]


def _real_comparisons(workdir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """The real run's held-out and closed-loop comparisons, when its JSON sits beside this run's."""
    path = workdir.parent / REAL_NAME / f"{REAL_NAME}.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    return record["halves"]["held-out"]["comparisons"], record.get("closed_loop", {}).get("comparisons", [])


@benchmark(NAME)
def placement_quality_synthetic(workdir: Path) -> list[Row]:
    """Replay, decide and judge the synthetic fleet, open and closed loop; see the module docstring."""
    quick = os.environ.get(QUICK_ENV) == "1"
    fleet = fleet_module.synthetic_fleet(QUICK_CLUSTERS if quick else CLUSTERS, seed=SEED, role="test")
    chosen = policies(quick)
    warmup = replay.warmup_steps([p.range for p in chosen], STEP_SECONDS, whole_days=False)
    steps = fleet.loads.shape[1]
    timeline = replay.Timeline(warmup, steps - warmup)
    assert timeline.first_scored * STEP_SECONDS >= max(p.range for p in chosen), "warm-up too short"
    names = fleet.names
    times = [float(prom.step_time(s)) for s in timeline.scored]
    loads = fleet.loads[:, warmup:]
    clusters = ClusterLoads(names, STEP_SECONDS, fleet.loads)
    scoring = score_fleet(workdir, clusters, chosen, times, _say, fleet.capacities)
    raw = scoring.raw
    published = replay.publish(raw, times, timeline, STABILIZATION)
    judged_days = timeline.judged * STEP_SECONDS / 86_400
    free = fleet.free_cores[:, warmup:]
    judging = time.monotonic()
    half = judge_half(HALF, range(len(names)), names, loads, published, judged_days, chosen, free)
    judge_seconds = time.monotonic() - judging
    setups = closed_loop.setups_for(QUICK_CLOSED_POLICIES if quick else CLOSED_POLICIES, CLOSED_SIZES, ["1h"])
    placements = closed_loop.PLACEMENTS if quick else PLACEMENTS
    closed = closed_loop.simulate(
        workdir / "closed-loop",
        names,
        fleet.loads,
        warmup,
        setups,
        step_seconds=STEP_SECONDS,
        placements=placements,
        progress=_say,
    )
    real = _real_comparisons(workdir)
    open_records = [comparison_record(c) for c in half.comparisons]
    closed_records = [comparison_record(c) for c in closed.comparisons]
    open_agreement = None if real is None else agree(open_records, real[0])
    closed_agreement = None if real is None else agree(closed_records, real[1])
    summary = fleet_module.fleet_summary(fleet)
    per_trace = ", ".join(
        f"{fleet_module.SHORT_NAME[family]} {len([f for f in fleet.family if f == family])}"
        for family in fleet_module.FAMILIES
    )
    setup = {
        "quick": quick,
        "synthetic": True,
        "clusters": list(names),
        "capacities": fleet.capacities.tolist(),
        "samples": [o.sample for o in fleet.origins],
        "policies": [p.name for p in chosen],
        "warmup_steps": warmup,
        "judged_steps": timeline.judged,
        "effective_clusters": half.effective,
        "fleet_summary": summary,
        "seconds": {"start": scoring.start_seconds, "score": scoring.score_seconds, "judge": judge_seconds},
        "closed_loop": {"placements": placements, "cycles": closed.cycles, "seconds": closed.seconds},
    }
    _record(workdir, half, setup, closed, open_records, closed_records, open_agreement, closed_agreement)
    rows = [
        Row(
            NAME,
            "mode",
            f"{'quick' if quick else 'full'}: {len(names)} synthetic one-day clusters, warm-up {warmup}"
            f" steps, {timeline.judged} judged steps, policies {', '.join(p.name for p in chosen)}",
        ),
        Row(
            NAME,
            "synthetic fleet",
            f"{len(names)} clusters ({per_trace}), {half.effective:.1f} effective (correlation eigenvalues)",
        ),
        *timing_rows(NAME, scoring, judge_seconds, ("closed loop", closed.seconds)),
    ]
    rows.extend(_renamed(result_rows(half)))
    rows.extend(_renamed(oracle_rows(half)))
    rows.extend(_renamed(comparison_rows(half)))
    rows.extend(_renamed(anticipation_rows(half)))
    rows.extend(_closed_rows(closed, placements))
    rows.extend(_agreement_rows("open loop", open_agreement))
    rows.extend(_agreement_rows("closed loop", closed_agreement))
    return rows


def _renamed(rows: Sequence[Row]) -> list[Row]:
    """The real run's row helpers name their benchmark; these rows are this one's."""
    return [dataclasses.replace(r, benchmark=NAME) for r in rows]


def _closed_rows(closed: closed_loop.Simulated, placements: int) -> list[Row]:
    rows = [
        Row(
            NAME,
            "synthetic closed loop: simulations / real cycles / seconds",
            f"{len(closed.results)} ({sum(r.setup.scored for r in closed.results)} scored)"
            f" / {closed.cycles} / {closed.seconds:.1f}, {placements} Placements",
        )
    ]
    return rows + _renamed(closed_setup_rows(closed, "synthetic ", changes=False))


def _agreement_rows(what: str, agreement: Agreement | None) -> list[Row]:
    metric = f"agreement with the real fleet, {what}"
    if agreement is None:
        return [Row(NAME, metric, f"not compared: run {REAL_NAME} with the same --workdir first")]
    return [
        Row(
            NAME,
            metric,
            f"{agreement.shared} shared comparisons: {agreement.same} clear in both and the same way,"
            f" {agreement.opposite} clear in both and opposite, {agreement.synthetic_only} clear on the"
            f" synthetic fleet only, {agreement.real_only} on the real fleet only",
        ),
        *(Row(NAME, f"{metric}: opposite", line) for line in agreement.opposites),
    ]


def _record(
    workdir: Path,
    half: Half,
    setup: Mapping[str, Any],
    closed: closed_loop.Simulated,
    open_records: Sequence[Mapping[str, Any]],
    closed_records: Sequence[Mapping[str, Any]],
    open_agreement: Agreement | None,
    closed_agreement: Agreement | None,
) -> None:
    """Every combination as a CSV row and JSON object (``fleet``: synthetic), with the comparisons,
    the oracle frontier, the closed loop and the agreement with the real fleet."""
    flat = [{"fleet": HALF, **r.row()} for r in half.results]
    with (workdir / f"{NAME}.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
    record = {
        "setup": setup,
        "halves": {
            HALF: {
                "clusters": list(half.names),
                "effective_clusters": half.effective,
                "results": [r.row() for r in half.results],
                "comparisons": list(open_records),
                "oracle": frontier_record(half.oracle),
                "oracle_k3": frontier_record(half.oracle_k3),
                "anticipation": [a.record() for a in half.anticipation],
            }
        },
        "closed_loop": {"results": [r.row() for r in closed.results], "comparisons": list(closed_records)},
        "agreement": {
            "open_loop": None if open_agreement is None else dataclasses.asdict(open_agreement),
            "closed_loop": None if closed_agreement is None else dataclasses.asdict(closed_agreement),
        },
    }
    (workdir / f"{NAME}.json").write_text(json.dumps(record, indent=2))
