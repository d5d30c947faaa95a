"""How good the policies' placements are on public data-center traces: ``python -m bench placement-quality``.

Every scored policy (``bench.quality.policies``) runs as a real scoring API on loopback, registered
as a DynamicScorer; the agent's own scoring cycle queries a real Prometheus holding several days of
12 trace clusters (``bench.quality.prometheus``) with its clock set to each past step, and OCM
Placement's ranking (the project's placement model, ``bench.quality.ranking``) picks 1 and 3
clusters at every step (``bench.quality.replay``).  The decisions are judged in hindsight by
``bench.quality.metrics``: lifetime regret over a 1 h life, exposure to each cluster's own 90th
percentile, lead times at overload crossings, decision changes and APS writes per day.

The model is checked against OCM itself: a 4-hour segment (the one where the reactive policy's
decision moves most) of two score series is replayed through OCM's real placement controller on the
local control plane (``bench.quality.controller``), in every form and k, and each decision it writes
is compared with the model's.  ``BENCH_QUALITY_CONTROLLER=0`` leaves the segment out (it needs the
control plane's tools, which a new machine builds first: about 35 minutes on 2 cores); the table
then says it was not run.

``--quick`` (or ``BENCH_QUICK=1``) replays 8 clusters x 2 days (1 judged) instead of 12 x 7 (6 judged).
The raw per-combination results go to ``placement-quality.csv`` and ``.json`` in the work directory,
the raw score of every policy, cluster and judged step to ``placement-quality-scores.npz``, and
two plots (``bench.quality.plots``) to ``placement-quality-day.png`` and ``-churn.png``.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import Row, benchmark, verdict
from bench.quality import controller, replay
from bench.quality import prometheus as prom
from bench.quality.plots import plot_all
from bench.quality.policies import POLICIES, STABILIZATION, serving
from bench.quality.ranking import FORMS
from bench.quality.traces import STEP_SECONDS, STEPS_PER_DAY

NAME = "placement-quality"
KS = (1, 3)
QUICK_ENV = "BENCH_QUICK"
CONTROLLER_ENV = "BENCH_QUALITY_CONTROLLER"


def _say(msg: str) -> None:
    print(f"  [{NAME}] {msg}", file=sys.stderr, flush=True)


def _fmt(value: float | None, spec: str = ".2f", scale: float = 1.0) -> str:
    return "n/a" if value is None else format(value * scale, spec)


def _rows(outcome: replay.Outcome) -> list[Row]:
    """The printed rows of one combination, named ``<form> k=<k> <policy>/<variant>: <measure>``."""
    o = outcome
    label = f"{o.form} k={o.k} {o.policy}" + ("" if o.variant == "-" else f"/{o.variant}")
    lead = o.leads
    shares = "/".join(
        _fmt(s, ".0f", 100) for s in (lead.before, lead.at, lead.after, lead.stayed, lead.not_held)
    )
    measures = [
        ("regret mean / p95 (points)", f"{_fmt(o.regret_mean)} / {_fmt(o.regret_p95)}"),
        ("overload exposure", f"{_fmt(o.exposure, '.1f', 100)} %"),
        (
            "crossings left before/at/after, stayed, not held (%)",
            f"{shares} of {lead.crossings}, median lead {_fmt(lead.median_lead, '.0f')} steps",
        ),
        ("decision changes per day", _fmt(o.changes_per_day, ".1f")),
        ("APS writes per cluster-day (score changes)", _fmt(o.writes_per_cluster_day, ".1f")),
    ]
    return [Row(NAME, f"{label}: {m}", v) for m, v in measures]


def _record(workdir: Path, outcomes: list[replay.Outcome], setup: dict[str, Any]) -> None:
    """The raw results, one CSV row and one JSON object per combination, plus the setup."""
    flat = []
    for o in outcomes:
        row = dataclasses.asdict(o)
        leads = row.pop("leads")
        flat.append({**row, **{f"lead_{k}": v for k, v in leads.items()}})
    with (workdir / f"{NAME}.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
    (workdir / f"{NAME}.json").write_text(json.dumps({"setup": setup, "results": flat}, indent=2))


@benchmark(NAME)
def placement_quality(workdir: Path) -> list[Row]:
    """Replay, decide and judge every policy x variant x Placement form x k; see the module docstring."""
    quick = os.environ.get(QUICK_ENV) == "1"
    days = prom.QUICK_DAYS if quick else prom.FULL_DAYS
    clusters = prom.build_clusters(prom.QUICK_CLUSTERS if quick else None, days)
    names = clusters.names
    warmup = replay.WARMUP_DAYS * STEPS_PER_DAY
    steps = clusters.loads.shape[1] - warmup
    times = [float(prom.step_time(warmup + j)) for j in range(steps)]
    loads = clusters.loads[:, warmup:]
    began = time.monotonic()
    server = prom.serve_clusters(workdir / "prometheus", clusters)
    try:
        with serving(POLICIES, server.url) as plans:
            ready = time.monotonic()
            raw = asyncio.run(replay.score_steps(plans, names, times))
            scored = time.monotonic()
    finally:
        server.stop()
    outcomes: list[replay.Outcome] = []
    series: dict[str, replay.Scores] = {}
    for policy, values in raw.items():
        series[f"{policy}/raw"] = values
        series[f"{policy}/stabilized"] = replay.stabilize(values, times, STABILIZATION)
    decided: dict[tuple[str, str, int], list[tuple[int, ...]]] = {}
    for form in FORMS:
        for k in KS:
            static = replay.decide_static(steps, names, k, form)
            outcomes.append(replay.judge("static", "-", form, k, loads, static, clusters.step_seconds, None))
            for policy in raw:
                plan = plans[policy]
                for variant in ("raw", "stabilized"):
                    published = series[f"{policy}/{variant}"]
                    decisions = replay.decide(published, names, k, form, plan.aps_name, plan.score_name)
                    decided[(f"{policy}/{variant}", form, k)] = decisions
                    outcomes.append(
                        replay.judge(
                            policy, variant, form, k, loads, decisions, clusters.step_seconds, published
                        )
                    )
    judged = time.monotonic()
    segment = _segment(workdir, names, series, decided[("reactive/raw", "exact", 1)])
    cycles = sum(v.size for v in raw.values())
    setup = {
        "quick": quick,
        "clusters": list(names),
        "days": days,
        "judged_steps": steps,
        "stabilization": dataclasses.asdict(STABILIZATION),
        "raw_score_mean": {p: float(np.mean(v)) for p, v in raw.items()},
        "seconds": {"start": ready - began, "score": scored - ready, "judge": judged - scored},
        "controller_segment": None if segment is None else dataclasses.asdict(segment),
    }
    _record(workdir, outcomes, setup)
    # The cached raw scores, for re-judging (another Placement form, a later policy) without a replay.
    arrays: dict[str, Any] = {"loads": clusters.loads, "warmup_steps": np.asarray(warmup), **raw}
    np.savez_compressed(workdir / f"{NAME}-scores.npz", **arrays)
    pngs = plot_all(workdir)
    rows = [
        Row(
            NAME,
            "mode",
            f"{'quick' if quick else 'full'}: {len(names)} clusters x {days} days, {steps} judged steps",
        ),
        Row(NAME, "real cycles run (policy x cluster x step)", str(cycles)),
        Row(
            NAME,
            "seconds: Prometheus + scorers up / replay / decide+judge",
            f"{ready - began:.1f} / {scored - ready:.1f} / {judged - scored:.1f}",
        ),
        Row(NAME, "cycles per second", f"{cycles / max(scored - ready, 1e-9):.0f}"),
        Row(
            NAME, "note", "additive: Steady's 100 outweighs any AddOn lead at weight 1: the first pick stays"
        ),
        Row(NAME, "note", "crossing shares are of all upward crossings of each cluster's own p90 (sum 100)"),
    ]
    rows.append(Row(NAME, "plots", ", ".join(str(p) for p in pngs)))
    rows.extend(_segment_rows(segment))
    for outcome in outcomes:
        rows.extend(_rows(outcome))
    return rows


def _segment(
    workdir: Path,
    names: tuple[str, ...],
    series: dict[str, replay.Scores],
    busiest: list[tuple[int, ...]],
) -> controller.SegmentResult | None:
    """The real-controller segment (``bench.quality.controller``), or None when it is switched off."""
    if os.environ.get(CONTROLLER_ENV, "1") == "0":
        _say(f"{CONTROLLER_ENV}=0: the real placement controller segment is not run")
        return None
    length = controller.SEGMENT_STEPS
    start = controller.busiest_window(busiest, length)
    _say(f"replaying steps {start}..{start + length - 1} through OCM's placement controller")
    return controller.run_segment(workdir / "ocm", names, series, start, length, _say)


def _segment_rows(segment: controller.SegmentResult | None) -> list[Row]:
    """The segment's rows: what was replayed, how many decisions matched, and the first mismatches."""
    metric = "real placement controller"
    if segment is None:
        return [Row(NAME, metric, f"not run ({CONTROLLER_ENV}=0): the decisions below are the model's alone")]
    s = segment
    day, step = divmod(s.start, STEPS_PER_DAY)
    minutes = step * STEP_SECONDS // 60
    at = f"judged day {day + 1} {minutes // 60:02d}:{minutes % 60:02d} UTC"
    rows = [
        Row(
            NAME,
            f"{metric}: segment",
            f"{s.steps} steps from {at}, {s.placements} Placements, {s.model_changes} changes in all",
        ),
        Row(
            NAME,
            f"{metric}: decisions equal to the model's",
            f"{s.matched} / {s.compared}",
            "all",
            verdict(s.compared > 0 and s.matched == s.compared),
        ),
        Row(NAME, f"{metric}: seconds setup / steps", f"{s.seconds_setup:.1f} / {s.seconds_steps:.1f}"),
    ]
    rows.extend(Row(NAME, f"{metric}: mismatch", m) for m in s.mismatches)
    return rows
