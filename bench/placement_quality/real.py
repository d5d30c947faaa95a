"""How good the policies' placements are on public data-center traces: ``python -m bench placement-quality``.

Every scored policy (``bench.placement_quality.policies``) runs as a real scoring API on loopback, registered
as a DynamicScorer; the agent's own scoring cycle queries a real Prometheus holding several days of
12 trace clusters (``bench.placement_quality.prometheus``) with its clock set to each past step, and OCM
Placement's ranking picks 1 and 3 clusters at every step.  The benchmark is built so that each of its
comparative sentences can fail:

* **Causal.**  A decision at judged step ``j`` uses the scores of the sample before it, and its workload
  lives from ``j`` on (``bench.placement_quality.replay.Timeline``); the same run with 1 and 2 steps of extra
  staleness is reported too.  The warm-up covers the longest window at the largest lag, and a scorer
  query that is not scoped to its own cluster is refused.
* **Tie-neutral.**  Every combination is decided under 20 random cluster-name orders
  (``bench.placement_quality.experiment``); each measure is the median with the lowest and highest.
* **Confident.**  Every comparison carries a paired block-bootstrap 95 % interval
  (``bench.placement_quality.confidence``); only those excluding 0 say which policy is better.
* **Per life.**  Workloads live 15 min, 1 h, 4 h or 12 h; each forecast runs with its horizon matched
  to the life, beside random, round-robin and static, and the churn-constrained hindsight oracle
  (``bench.placement_quality.oracle``) gives the best regret reachable at each number of changes a day.

* **Anticipation.**  Around every ramp (a sustained climb out of a quiet spell), each policy's live
  placements on the ramping cluster are set against its own base rate there, with a bootstrap
  interval over ramps and the count (``bench.placement_quality.anticipation``); fewer than 200 ramps are
  reported as too few.

* **Closed loop.**  Placed work adds load and the scores see it only through the metrics, one sample
  late (``bench.placement_quality.closed_loop``): each step's samples are pushed into Prometheus after the
  step's decisions, workloads of 1, 3 and 6 % of a cluster arrive at a steady rate from two Placements, and
  the experienced load, time above 80 % and an M/M/1 slowdown are compared with random, round-robin,
  power-of-two choices and least-loaded placement (:data:`CLOSED` says which policies at which life).

The model is checked against OCM itself: a 4-hour segment (the one where the reactive policy's
decision moves most) of two score series is replayed through OCM's real placement controller on the
local control plane (``bench.placement_quality.controller``), in every form and k, and each decision it writes
is compared with the model's.  ``BENCH_QUALITY_CONTROLLER=0`` leaves the segment out (it needs the
control plane's tools, which a new machine builds first: about 35 minutes on 2 cores); the table
then says it was not run.

The full run replays the 11 held-out clusters with about 2 judged days; ``BENCH_QUALITY_TRAIN=1`` adds
the 10 clusters of the training half (:data:`TRAIN_ENV`).  ``--quick`` (or ``BENCH_QUICK=1``) replays 5
held-out clusters with 1 judged day, runs the closed loop at one size and leaves out the closed loop's
controller segment (a second control plane would take it past 5 minutes).
Every combination's measures go to ``placement-quality.csv`` and ``.json`` in the work directory (the
JSON also holds the setup, every comparison's interval and the oracle frontier), the raw score of every
policy, cluster and scored sample to ``placement-quality-scores.npz``, and two plots
(``bench.placement_quality.plots``) to ``placement-quality-day.png`` and ``-churn.png``.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench import Row, benchmark, verdict
from bench.placement_quality import (
    anticipation,
    closed_controller,
    closed_loop,
    controller,
    metrics,
    replay,
    targets,
)
from bench.placement_quality import fleet as fleet_module
from bench.placement_quality import prometheus as prom
from bench.placement_quality.confidence import Band, Interval, effective_clusters, paired_block_bootstrap
from bench.placement_quality.experiment import BASELINES, ORDERS, LifeTable, Result, evaluate
from bench.placement_quality.fleet import Fleet
from bench.placement_quality.oracle import OraclePoint, frontier
from bench.placement_quality.plots import plot_all
from bench.placement_quality.policies import (
    BY_NAME,
    CAPACITY_POLICIES,
    DEFAULT_FORECAST,
    LIVES,
    POLICIES,
    STABILIZATION,
    Policy,
    judged_at,
    serving,
)
from bench.placement_quality.ranking import FORMS
from bench.placement_quality.traces import STEP_SECONDS, STEPS_PER_DAY, ClusterLoads
from dynamic_scoring.agent.plan import ScorerPlan

NAME = "placement-quality"
KS = (1, 3)
QUICK_ENV = "BENCH_QUICK"
CONTROLLER_ENV = "BENCH_QUALITY_CONTROLLER"
TRAIN_ENV = "BENCH_QUALITY_TRAIN"
"""``1`` replays the training half too (10 more clusters, about 9 more minutes): for tuning a parameter,
and to see whether the held-out half's clear comparisons hold there.  Nothing is tuned yet, so the
default full run replays the held-out half alone, which keeps it under 30 minutes on 2 cores."""
FLEET_DAYS = 3
"""Each real cluster is a 3-day block of one trace (``bench.placement_quality.fleet``): Alibaba in both
halves."""
QUICK_PER_FAMILY = 2
REPLAYED: list[Policy] = [*POLICIES, *CAPACITY_POLICIES]
"""Every policy the real run replays: the utilisation policies and the free-cores scorer, which reads
each cluster's capacity from the same Prometheus."""

CLOSED: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "1h": (("reactive", "cpu", "seasonal-1h", "recipe-1h+balance-3"), closed_loop.SIZES),
    "4h": (("reactive", "seasonal-4h", "recipe-4h+balance-3-steady7"), (3.0,)),
    "12h": (("reactive", "seasonal-12h", "recipe-12h+balance-3-steady7"), (3.0,)),
}
"""The closed loop's scored policies and workload sizes per life (every loop baseline runs beside them).
Each scored setup is a whole simulation (a cycle per cluster and step, 6,171 on the held-out half, about
48 s), so the set is what keeps the full run under 30 minutes: at 1 h the reactive scorer, the cpu
sample and the shipped seasonal forecast (predict herds like the other forecasts, and a closed loop of
it at three sizes would cost 2.4 minutes more), at the longer lives the reactive scorer and the
forecast matched to them at one size.  Beside them, at every life, the shipped forecast with the
recipe's band placed by one Placement per workload with OCM's ``Balance`` at weight 3 beside the score
at 10 (``bench.placement_quality.spread``), and ``Steady`` at 7 for work that stays (4 and 12 h), whose
Placements decide again at every step: the recipe against the herd."""
TARGET_GAIN = 0.30
"""The forecast matched to the life must have a mean regret at least 30 % below random's and reactive's."""


def default_pairs() -> list[targets.Pair]:
    """Each life's matched forecast against random, reactive, the sample as shipped before
    (``seasonal-1h``) and, where the blend differs from it, the seasonal forecast alone; where it does
    not, an even blend against the seasonal forecast alone.  No pair twice."""
    out: list[targets.Pair] = []
    for life, new in DEFAULT_FORECAST.items():
        gain = None if life == "15m" else TARGET_GAIN
        label = f"{new}/raw"
        # dict.fromkeys keeps the order and drops the repeat (at 1 h the last two are one policy)
        for other in dict.fromkeys(("random", "reactive/raw", "seasonal-1h/raw", f"seasonal-{life}/raw")):
            if other != label:
                target = gain if other in ("random", "reactive/raw") else None
                out.append(targets.Pair(life, label, other, target))
        if not new.startswith("blend"):  # what blending would have cost where the sample does not blend
            out.append(targets.Pair(life, f"even-{life}/raw", f"seasonal-{life}/raw"))
    return out


PAIRS = default_pairs()
"""The named comparisons behind the sample's defaults, at each life: the matched forecast against
random and the reactive scorer (with the target), against the sample as shipped before, and the blend
against the seasonal forecast alone where it differs."""


def default_margin_pairs() -> list[targets.MarginPair]:
    """The margin recipe at each life: the shipped forecast with the recipe's band in the margin form
    (raw and stabilized) against its plain score in Exact, beside the recipe before (the plain score in
    the margin form); and the cpu sample's, at 1 h, the README's example."""
    out: list[targets.MarginPair] = []
    for life, plain in DEFAULT_FORECAST.items():
        for variant in ("raw", "stabilized"):
            out.append(
                targets.MarginPair(life, f"recipe-{life}/{variant}", f"{plain}/raw", f"{plain}/{variant}")
            )
    out += [targets.MarginPair("1h", f"cpu-recipe/{v}", "cpu/raw", f"cpu/{v}") for v in ("raw", "stabilized")]
    return out


MARGIN_PAIRS = default_margin_pairs()
"""The margin recipe's targets: within 10 % of Exact's regret at no more than a third of its changes."""

QUICK_CLOSED: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "1h": (("reactive", "cpu", "seasonal-1h"), (3.0,)),
}


def _say(msg: str) -> None:
    print(f"  [{NAME}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Scored:
    """A fleet replayed through the agent's cycle: each policy's plan and raw scores, and the time to
    start Prometheus and the scorers and the time the replay took."""

    plans: Mapping[str, ScorerPlan]
    raw: dict[str, replay.Scores]
    start_seconds: float
    score_seconds: float

    @property
    def cycles(self) -> int:
        """Real agent cycles run: policy x cluster x scored sample."""
        return sum(v.size for v in self.raw.values())


def score_fleet(
    workdir: Path,
    clusters: ClusterLoads,
    policies: Sequence[Policy],
    times: Sequence[float],
    say: Callable[[str], None],
    capacities: NDArray[np.float64] | None = None,
) -> Scored:
    """Serve ``clusters`` from a real Prometheus under ``workdir``, serve ``policies`` as scoring APIs,
    and run the agent's cycle for every policy, cluster and time; both are stopped before returning.
    Every run of this benchmark (real, synthetic, history) replays its fleet this one way."""
    began = time.monotonic()
    server = prom.serve_clusters(workdir / "prometheus", clusters, capacities=capacities)
    try:
        with serving(policies, server.url) as plans:
            ready = time.monotonic()
            say(f"scoring {len(plans)} policies x {len(clusters.names)} clusters x {len(times)} samples")
            raw = asyncio.run(replay.score_steps(plans, clusters.names, times, progress=say))
            scored = time.monotonic()
    finally:
        server.stop()
    return Scored(plans, raw, ready - began, scored - ready)


def timing_rows(
    name: str, scored: Scored, judge_seconds: float, extra: tuple[str, float] | None = None
) -> list[Row]:
    """The replay's cost: cycles run, seconds per phase (``extra`` adds one more phase) and cycles/s."""
    phases = ["Prometheus + scorers up", "replay", "decide+judge"]
    seconds = [scored.start_seconds, scored.score_seconds, judge_seconds]
    if extra is not None:
        phases.append(extra[0])
        seconds.append(extra[1])
    return [
        Row(name, "real cycles run (policy x cluster x sample)", str(scored.cycles)),
        Row(name, "seconds: " + " / ".join(phases), " / ".join(f"{v:.1f}" for v in seconds)),
        Row(name, "cycles per second", f"{scored.cycles / max(scored.score_seconds, 1e-9):.0f}"),
    ]


def _band(band: Band | None, spec: str = ".2f", scale: float = 1.0) -> str:
    """``median [low-high]`` of a band, or n/a."""
    if band is None:
        return "n/a"
    median, low, high = (format(v * scale, spec) for v in (band.median, band.low, band.high))
    return median if low == high else f"{median} [{low}-{high}]"


def _interval(i: Interval) -> str:
    return f"{i.difference:+.2f} [{i.low:+.2f}, {i.high:+.2f}]"


def _reported(result: Result, life: str) -> bool:
    """Whether ``result`` appears at ``life``: a baseline, or a policy judged there (matched horizon)."""
    policy = BY_NAME.get(result.policy)
    return policy is None or judged_at(policy, life)


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b`` in one (life, form, k, lag): the paired bootstrap of their regret difference."""

    life: str
    form: str
    k: int
    lag: int
    a: str
    b: str
    interval: Interval
    measure: str = "regret"  # or "core_regret": idle cores short of the best cluster's

    @property
    def verdict(self) -> str:
        """What may be said: which one has lower regret, or that the interval includes 0."""
        return self.interval.verdict(self.a, self.b)


def compare(results: Sequence[Result], policies: Sequence[Policy] = REPLAYED) -> list[Comparison]:
    """Every pair worth a sentence, per (life, form, k) at lag 0, with its bootstrap interval.

    At each life: every pair among random and the raw scored ``policies`` judged there, and each
    policy's stabilized variant against its raw one.  Baselines are paired with each form.  When the
    results were also judged on idle cores, every pair is compared on that too (``core_regret``).
    """
    index = {(r.label, r.form, r.k, r.lag, r.life_steps): r for r in results}
    out: list[Comparison] = []
    for life, steps in LIVES.items():
        scored = [p.name for p in policies if p.scored and judged_at(p, life)]
        for form in ("exact", "margin"):
            for k in KS:

                def get(label: str, form: str = form, k: int = k, steps: int = steps) -> Result:
                    return index[(label, "-" if label in BASELINES else form, k, 0, steps)]

                labels = ["random", *(f"{p}/raw" for p in scored)]
                pairs = [(a, b) for n, a in enumerate(labels) for b in labels[n + 1 :]]
                pairs += [(f"{p}/stabilized", f"{p}/raw") for p in scored]
                for a, b in pairs:
                    first, second = get(a), get(b)
                    interval = paired_block_bootstrap(first.per_step, second.per_step)
                    out.append(Comparison(life, form, k, 0, a, b, interval))
                    if first.per_step_cores is not None and second.per_step_cores is not None:
                        cores = paired_block_bootstrap(first.per_step_cores, second.per_step_cores)
                        out.append(Comparison(life, form, k, 0, a, b, cores, "core_regret"))
    return out


@dataclass(frozen=True)
class Anticipation:
    """One policy's placements around one ramp definition's ramps, at one life (pick 1, Exact, lag 0).

    ``live`` and ``base`` are the mean live share and base rate over the ramps; ``interval`` is their
    mean difference with a bootstrap interval over ramps (each ramp its own block), None without ramps.
    """

    life: str
    definition: str
    policy: str
    events: int
    live: float | None
    base: float | None
    interval: Interval | None

    @property
    def verdict(self) -> str:
        """What may be said: nothing below :data:`~bench.placement_quality.anticipation.MIN_EVENTS` ramps."""
        if self.interval is None:
            return "no ramps"
        if self.events < anticipation.MIN_EVENTS:
            return f"too few ramps ({self.events} < {anticipation.MIN_EVENTS})"
        if not self.interval.excludes_zero:
            return "no difference shown"
        return "keeps away from ramps" if self.interval.difference < 0 else "drawn to ramps"

    def record(self) -> dict[str, Any]:
        """The JSON form: the fields, the interval flattened (None without ramps) and the verdict."""
        i = self.interval
        return {
            **{k: v for k, v in dataclasses.asdict(self).items() if k != "interval"},
            "difference": None if i is None else i.difference,
            "low": None if i is None else i.low,
            "high": None if i is None else i.high,
            "verdict": self.verdict,
        }


def anticipate(results: Sequence[Result]) -> list[Anticipation]:
    """Every reported pick-1 Exact result at lag 0, per life and ramp definition, with its interval."""
    out = []
    for life, steps in LIVES.items():
        for r in results:
            if r.life_steps != steps or r.k != 1 or r.lag != 0 or r.form not in ("exact", "-"):
                continue
            if not _reported(r, life):
                continue
            for definition, ramp in r.ramps.items():
                if not ramp.events:
                    out.append(Anticipation(life, definition, r.label, 0, None, None, None))
                    continue
                interval = paired_block_bootstrap(ramp.live, ramp.base, block=1)
                live, base = float(ramp.live.mean()), float(ramp.base.mean())
                out.append(Anticipation(life, definition, r.label, ramp.events, live, base, interval))
    return out


@dataclass(frozen=True)
class Half:
    """One half of the fleet's split, decided and judged on its own clusters."""

    name: str  # "held-out" or "train"
    names: tuple[str, ...]
    effective: float
    results: list[Result]
    comparisons: list[Comparison]
    oracle: dict[str, list[OraclePoint]]
    """The pick-1 oracle's frontier per life."""
    oracle_k3: dict[str, list[OraclePoint]] = dataclasses.field(default_factory=dict)
    """The pick-3 oracle's (a change: the set of 3 differs)."""
    anticipation: list[Anticipation] = dataclasses.field(default_factory=list)
    margins: list[targets.MarginTarget] = dataclasses.field(default_factory=list)
    """The margin recipe's targets (:data:`MARGIN_PAIRS`) whose policies were replayed."""
    targets: list[targets.Target] = dataclasses.field(default_factory=list)
    """The named comparisons (:data:`PAIRS`, or the run's own) whose policies were replayed."""


def judge_half(
    name: str,
    rows: Sequence[int],
    names: Sequence[str],
    loads: NDArray[np.float64],
    published: Mapping[tuple[str, str, int], replay.Scores],
    judged_days: float,
    policies: Sequence[Policy] = REPLAYED,
    free_cores: NDArray[np.float64] | None = None,
    pairs: Sequence[targets.Pair] = PAIRS,
    margin_pairs: Sequence[targets.MarginPair] = MARGIN_PAIRS,
) -> Half:
    """Decide and judge the clusters ``rows`` as a fleet of their own (the others unseen).

    ``names``, ``loads`` (the judged steps), ``free_cores`` (idle cores at those steps, when the
    decisions are judged on them too) and ``published`` (the aligned scores) are the replayed fleet's,
    one row per cluster; ``rows`` index into them; ``policies`` are the ones replayed.
    """
    index = list(rows)
    mine = loads[index]
    scores = {key: series[index] for key, series in published.items()}
    writes = {
        f"{policy}/{variant}": replay.aps_writes(series) / (len(index) * judged_days)
        for (policy, variant, lag), series in scores.items()
        if lag == 0
    }
    _say(f"{name}: deciding and judging {len(index)} clusters under {ORDERS} tie orders")
    results = evaluate(
        mine,
        scores,
        writes,
        forms=FORMS,
        ks=KS,
        lives=list(LIVES.values()),
        step_seconds=STEP_SECONDS,
        free_cores=None if free_cores is None else free_cores[index],
    )
    thresholds = metrics.percentile_thresholds(mine, replay.OVERLOAD_PERCENTILE)
    tables = {life: LifeTable(mine, steps, thresholds).means for life, steps in LIVES.items()}
    return Half(
        name=name,
        names=tuple(names[i] for i in index),
        effective=effective_clusters(mine),
        results=results,
        comparisons=compare(results, policies),
        oracle={life: frontier(means, STEP_SECONDS) for life, means in tables.items()},
        oracle_k3={life: frontier(means, STEP_SECONDS, k=3) for life, means in tables.items()},
        anticipation=anticipate(results),
        targets=targets.judge(results, pairs),
        margins=targets.judge_margins(results, margin_pairs),
    )


def comparison_record(c: Comparison | closed_loop.LoopComparison) -> dict[str, Any]:
    """A comparison as the JSON files hold it: its setting, its interval flattened, and its verdict."""
    return {
        **{k: v for k, v in dataclasses.asdict(c).items() if k != "interval"},
        **dataclasses.asdict(c.interval),
        "verdict": c.verdict,
    }


def frontier_record(frontiers: Mapping[str, Sequence[OraclePoint]]) -> dict[str, list[dict[str, float]]]:
    """An oracle's frontier per life as the JSON files hold it."""
    return {life: [dataclasses.asdict(p) for p in points] for life, points in frontiers.items()}


def _record(
    workdir: Path, halves: Sequence[Half], setup: dict[str, Any], closed: closed_loop.Simulated
) -> None:
    """Every combination as one CSV row and JSON object (``fleet`` names the half), with the setup,
    every comparison's interval and the oracle frontier; the held-out half's rows come first.  The
    closed loop's results and comparisons go to the JSON's ``closed_loop``."""
    flat = [{"fleet": h.name, **r.row()} for h in halves for r in h.results]
    with (workdir / f"{NAME}.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
    record = {
        "setup": setup,
        # The plots read "results" and "oracle": the held-out half's.
        "results": [r.row() for r in halves[0].results],
        "oracle": frontier_record(halves[0].oracle),
        "oracle_k3": frontier_record(halves[0].oracle_k3),
        "halves": {
            h.name: {
                "clusters": list(h.names),
                "effective_clusters": h.effective,
                "results": [r.row() for r in h.results],
                "comparisons": [comparison_record(c) for c in h.comparisons],
                "oracle": frontier_record(h.oracle),
                "oracle_k3": frontier_record(h.oracle_k3),
                "anticipation": [a.record() for a in h.anticipation],
                "targets": [t.record() for t in h.targets],
                "margins": [t.record() for t in h.margins],
            }
            for h in halves
        },
        "closed_loop": {
            "results": [r.row() for r in closed.results],
            "comparisons": [comparison_record(c) for c in closed.comparisons],
        },
    }
    (workdir / f"{NAME}.json").write_text(json.dumps(record, indent=2))


def _fleet(quick: bool) -> tuple[Fleet, dict[str, list[int]], int]:
    """The fleet, its halves (rows of each, held-out first) and how many steps of it to use.

    Full: every 3-day block of the held-out half (and of the training half with :data:`TRAIN_ENV`).
    Quick: the held-out half's first :data:`QUICK_PER_FAMILY` clusters of each trace, one judged day.
    """
    fleet = fleet_module.real_fleet(FLEET_DAYS)
    held_out = [i for i, r in enumerate(fleet.roles) if r == "test"]
    train = [i for i, r in enumerate(fleet.roles) if r == "train"]
    if not quick:
        halves = {"held-out": held_out} | ({"train": train} if os.environ.get(TRAIN_ENV) == "1" else {})
        return fleet, halves, fleet.loads.shape[1]
    kept: list[int] = []
    for family in fleet_module.FAMILIES:
        kept += [i for i in held_out if fleet.family[i] == family][:QUICK_PER_FAMILY]
    return fleet, {"held-out": kept}, WARMUP + STEPS_PER_DAY


WARMUP = replay.warmup_steps([p.range for p in REPLAYED if p.scored], STEP_SECONDS, whole_days=False)
"""The first judged step: the longest window (the seasonal day and an hour) at the largest lag."""


@benchmark(NAME)
def placement_quality(workdir: Path) -> list[Row]:
    """Replay, decide and judge every policy x variant x form x k x lag x life; see the module docstring."""
    quick = os.environ.get(QUICK_ENV) == "1"
    fleet, halves_rows, steps = _fleet(quick)
    used = sorted({i for rows in halves_rows.values() for i in rows})
    names = tuple(fleet.names[i] for i in used)
    position = {i: n for n, i in enumerate(used)}
    scored_policies = [p for p in REPLAYED if p.scored]
    timeline = replay.Timeline(WARMUP, steps - WARMUP)
    # The guarantee the whole benchmark rests on, checked here and not only in the tests.
    assert timeline.first_scored * STEP_SECONDS >= max(p.range for p in scored_policies), "warm-up too short"
    all_loads = fleet.loads[used, :steps]
    clusters = ClusterLoads(names, STEP_SECONDS, all_loads)
    times = [float(prom.step_time(s)) for s in timeline.scored]
    loads = all_loads[:, WARMUP:]
    capacities = fleet.capacities[used]
    scoring = score_fleet(workdir, clusters, REPLAYED, times, _say, capacities)
    plans, raw = scoring.plans, scoring.raw
    published = replay.publish(raw, times, timeline, STABILIZATION)
    judged_days = timeline.judged * STEP_SECONDS / 86_400
    rows_of = [[position[i] for i in rows] for rows in halves_rows.values()]
    held_rows = rows_of[0]  # the held-out half comes first
    free = fleet.free_cores[used, WARMUP:steps]
    judging = time.monotonic()
    halves = [
        judge_half(half, rows, names, loads, published, judged_days, free_cores=free)
        for half, rows in zip(halves_rows, rows_of, strict=True)
    ]
    judge_seconds = time.monotonic() - judging
    held = halves[0]
    closed = _closed_loop(workdir, held.names, all_loads[held_rows], quick)
    reactive = plans["reactive"]
    busiest = replay.decide(
        published[("reactive", "raw", 0)][held_rows],
        held.names,
        1,
        "exact",
        reactive.aps_name,
        reactive.score_name,
    )
    series_at_lag0 = {f"{p}/{v}": s[held_rows] for (p, v, lag), s in published.items() if lag == 0}
    segment = _segment(workdir, held.names, series_at_lag0, busiest)
    closed_segment = None if quick else _closed_segment(workdir, held.names, all_loads[held_rows])
    summary = fleet_module.fleet_summary(fleet)
    setup = {
        "quick": quick,
        "fleet_days": FLEET_DAYS,
        "clusters": list(held.names),
        "capacities": dict(zip(names, capacities.tolist(), strict=True)),
        "policies": [p.name for p in REPLAYED],
        "halves": {h.name: list(h.names) for h in halves},
        "warmup_steps": WARMUP,
        "first_scored_sample": timeline.first_scored,
        "judged_steps": timeline.judged,
        "lags": list(replay.LAGS),
        "lives": LIVES,
        "tie_orders": ORDERS,
        "effective_clusters": {h.name: h.effective for h in halves},
        "fleet_summary": summary,
        "stabilization": dataclasses.asdict(STABILIZATION),
        "seconds": {"start": scoring.start_seconds, "score": scoring.score_seconds, "judge": judge_seconds},
        "controller_segment": None if segment is None else dataclasses.asdict(segment),
        "closed_loop": {
            "clusters": list(held.names),
            "placements": closed_loop.PLACEMENTS,
            "hot_percent": closed_loop.HOT,
            "cost_cap": closed_loop.COST_CAP,
            "cycles": closed.cycles,
            "seconds": closed.seconds,
            "controller_segment": None if closed_segment is None else dataclasses.asdict(closed_segment),
        },
    }
    _record(workdir, halves, setup, closed)
    # The raw scores of every scored sample (held-out clusters' rows), for re-judging without a replay.
    arrays: dict[str, Any] = {
        "loads": all_loads[held_rows],
        "warmup_steps": np.asarray(WARMUP),
        "first_scored_sample": np.asarray(timeline.first_scored),
        **{p: v[held_rows] for p, v in raw.items()},
    }
    np.savez_compressed(workdir / f"{NAME}-scores.npz", **arrays)
    pngs = plot_all(workdir)
    rows = [
        Row(
            NAME,
            "mode",
            f"{'quick' if quick else 'full'}: {len(names)} clusters from {FLEET_DAYS}-day trace blocks,"
            f" warm-up {WARMUP} steps, {timeline.judged} judged steps",
        ),
        *(
            Row(
                NAME,
                f"{h.name} fleet",
                f"{len(h.names)} clusters ({', '.join(h.names)}),"
                f" {h.effective:.1f} effective (correlation eigenvalues)",
            )
            for h in halves
        ),
        *timing_rows(NAME, scoring, judge_seconds),
        Row(NAME, "note", f"each measure: median [lowest-highest] over {ORDERS} random cluster-name orders"),
        Row(NAME, "note", "a decision at step j uses the score of sample j-1-lag; its workload lives from j"),
        Row(NAME, "plots", ", ".join(str(p) for p in pngs)),
    ]
    rows.extend(_segment_rows(segment))
    rows.extend(_closed_rows(closed))
    rows.extend(_closed_segment_rows(closed_segment))
    for h in halves:
        rows.extend(result_rows(h))
        rows.extend(_lag_rows(h))
        rows.extend(oracle_rows(h))
        rows.extend(comparison_rows(h))
        rows.extend(anticipation_rows(h))
        rows.extend(targets.rows(NAME, h.name, h.targets))
        rows.extend(targets.margin_rows(NAME, h.name, h.margins))
    rows.extend(_agreement_rows(halves))
    return rows


def _closed_loop(
    workdir: Path, names: Sequence[str], base: NDArray[np.float64], quick: bool
) -> closed_loop.Simulated:
    """The closed loop (``bench.placement_quality.closed_loop``) on the held-out clusters' whole series."""
    lives = QUICK_CLOSED if quick else CLOSED
    setups = [
        setup
        for life, (policies, sizes) in lives.items()
        for setup in closed_loop.setups_for(policies, sizes, [life])
    ]
    return closed_loop.simulate(
        workdir / "closed-loop", names, base, WARMUP, setups, step_seconds=STEP_SECONDS, progress=_say
    )


def _closed_rows(closed: closed_loop.Simulated) -> list[Row]:
    """The closed loop: its cost, every setup's measures, and every slowdown comparison."""
    rows = [
        Row(
            NAME,
            "closed loop: simulations / real cycles / seconds",
            f"{len(closed.results)} ({sum(r.setup.scored for r in closed.results)} scored)"
            f" / {closed.cycles} / {closed.seconds:.1f}",
        ),
        Row(
            NAME,
            "closed loop: note",
            f"{closed_loop.PLACEMENTS} Placements place work at a steady rate; each workload adds its size"
            " to its cluster's load for its life; scores see it from the next sample",
        ),
    ]
    return rows + closed_setup_rows(closed)


def closed_setup_rows(closed: closed_loop.Simulated, prefix: str = "", changes: bool = True) -> list[Row]:
    """Every closed-loop setup's measures and every slowdown comparison, metrics starting ``prefix``;
    ``changes`` adds a scored setup's decision changes a day."""
    rows = []
    for r in closed.results:
        s = r.setup
        extra = "" if r.tie_share is None else f", ties {100 * r.tie_share:.1f} %"
        if changes and r.changes_per_day is not None:
            extra += f", changes/day {r.changes_per_day:.1f}"
        rows.append(
            Row(
                NAME,
                f"{prefix}closed life {s.life} size {s.size:g} % {s.label}",
                f"load mean {r.load_mean:.1f} p95 {r.load_p95:.1f}, above {closed_loop.HOT:g} %"
                f" {100 * r.hot_share:.1f} % of workload-time, slowdown {r.slowdown:.2f}{extra}",
            )
        )
    rows.extend(
        Row(
            NAME,
            f"{prefix}closed life {c.life} size {c.size:g} %: {c.a} - {c.b} slowdown",
            f"{_interval(c.interval)}: {c.verdict}",
        )
        for c in closed.comparisons
        if c.measure == "slowdown"
    )
    return rows


def _agreement_rows(halves: Sequence[Half]) -> list[Row]:
    """How many of the held-out half's clear comparisons the training half confirms (same sign, clear)."""
    if len(halves) < 2:
        return []
    held, train = halves[0], halves[1]
    other = {(c.life, c.form, c.k, c.a, c.b, c.measure): c for c in train.comparisons}
    clear = [c for c in held.comparisons if c.interval.excludes_zero]
    same = [
        c
        for c in clear
        if (t := other.get((c.life, c.form, c.k, c.a, c.b, c.measure))) is not None
        and t.interval.excludes_zero
        and (t.interval.difference < 0) == (c.interval.difference < 0)
    ]
    return [
        Row(
            NAME,
            "held-out comparisons with a clear winner, confirmed by the training half",
            f"{len(same)} of {len(clear)} (of {len(held.comparisons)} comparisons)",
        )
    ]


def result_rows(half: Half) -> list[Row]:
    """One row per reported combination at lag 0: regret, p95, exposure, changes and writes."""
    results, prefix = half.results, half.name
    rows = []
    order = {p.name: n for n, p in enumerate(REPLAYED)} | {
        b: -len(BASELINES) + n for n, b in enumerate(BASELINES)
    }
    for life, steps in LIVES.items():
        for form in FORMS:
            for k in KS:
                here = [
                    r
                    for r in results
                    if r.life_steps == steps
                    and r.k == k
                    and r.lag == 0
                    and r.form in (form, "-")
                    and _reported(r, life)
                ]
                if form == "additive":
                    scored = [r for r in here if r.form == "additive"]
                    low = min(r.regret.median for r in scored)
                    high = max(r.regret.median for r in scored)
                    moves = max(r.changes_per_day.median for r in scored)
                    rows.append(
                        Row(
                            NAME,
                            f"{prefix} life {life} additive k={k}: every scored policy",
                            f"regret {low:.2f}-{high:.2f}, at most {moves:.1f} changes/day"
                            " (Steady keeps the first pick)",
                        )
                    )
                    continue
                for r in sorted(here, key=lambda r: (order.get(r.policy, 99), r.variant)):
                    writes = (
                        ""
                        if r.writes_per_cluster_day is None
                        else f", writes {r.writes_per_cluster_day:.1f}/cluster-day"
                    )
                    if r.core_regret is not None:
                        writes += f", idle cores short of the best {_band(r.core_regret, '.0f')}"
                    rows.append(
                        Row(
                            NAME,
                            f"{prefix} life {life} {form} k={k} {r.label}",
                            f"regret {_band(r.regret)} p95 {_band(r.regret_p95)},"
                            f" exposure {_band(r.exposure, '.1f', 100)} %,"
                            f" changes/day {_band(r.changes_per_day, '.1f')}{writes}",
                        )
                    )
    return rows


def _lag_rows(half: Half) -> list[Row]:
    """Regret at 0, 1 and 2 steps of extra staleness, 1 h life, pick 1, Exact and margin."""
    results = half.results
    steps = LIVES["1h"]
    index = {(r.label, r.form, r.k, r.lag, r.life_steps): r for r in results}
    rows = []
    for form in ("exact", "margin"):
        for r in results:
            if r.lag != 0 or r.life_steps != steps or r.k != 1 or r.form != form or not _reported(r, "1h"):
                continue
            values = " / ".join(
                f"{index[(r.label, form, 1, lag, steps)].regret.median:.2f}" for lag in replay.LAGS
            )
            rows.append(Row(NAME, f"{half.name} lag 0/1/2 life 1h {form} k=1 {r.label}: regret", values))
    return rows


def oracle_rows(half: Half) -> list[Row]:
    """The churn-constrained oracle's frontier per life and pick: regret at each number of changes a day."""
    return [
        Row(
            NAME,
            f"{half.name} oracle frontier life {life} k={k}: changes/day -> regret",
            ", ".join(f"{p.changes_per_day:.1f}->{p.regret:.2f}" for p in points),
        )
        for k, frontiers in ((1, half.oracle), (3, half.oracle_k3))
        for life, points in frontiers.items()
    ]


def anticipation_rows(half: Half) -> list[Row]:
    """Per life, ramp definition and policy: ramps, live share against base rate, and the verdict.

    Every policy sees the same ramps (they are the loads'), so a definition without ramps at a life
    gets one row, not one per policy."""
    rows = []
    done: set[tuple[str, str]] = set()
    for a in half.anticipation:
        if a.interval is None or a.live is None or a.base is None:
            if (a.definition, a.life) not in done:
                done.add((a.definition, a.life))
                rows.append(
                    Row(NAME, f"{half.name} anticipation {a.definition} ramps life {a.life}", "0 ramps")
                )
            continue
        rows.append(
            Row(
                NAME,
                f"{half.name} anticipation {a.definition} ramps life {a.life} exact k=1 {a.policy}",
                f"{a.events} ramps, live {100 * a.live:.1f} % against base {100 * a.base:.1f} %,"
                f" {100 * a.interval.difference:+.1f} points"
                f" [{100 * a.interval.low:+.1f}, {100 * a.interval.high:+.1f}]: {a.verdict}",
            )
        )
    return rows


def comparison_rows(half: Half) -> list[Row]:
    """Each comparison: the regret difference a - b with its 95 % interval and what may be said."""
    return [
        Row(
            NAME,
            f"{half.name} life {c.life} {c.form} k={c.k}: {c.a} - {c.b} {c.measure.replace('_', ' ')}",
            f"{_interval(c.interval)}: {c.verdict}",
        )
        for c in half.comparisons
    ]


def _segment(
    workdir: Path,
    names: tuple[str, ...],
    series: dict[str, replay.Scores],
    busiest: list[tuple[int, ...]],
) -> controller.SegmentResult | None:
    """The real-controller segment (``bench.placement_quality.controller``), or None when it is switched
    off."""
    if os.environ.get(CONTROLLER_ENV, "1") == "0":
        _say(f"{CONTROLLER_ENV}=0: the real placement controller segment is not run")
        return None
    length = controller.SEGMENT_STEPS
    start = controller.busiest_window(busiest, length)
    _say(f"replaying steps {start}..{start + length - 1} through OCM's placement controller")
    return controller.run_segment(workdir / "ocm", names, series, start, length, _say)


def _closed_segment(
    workdir: Path, names: Sequence[str], base: NDArray[np.float64]
) -> closed_controller.ClosedSegmentResult | None:
    """The closed loop driven by OCM's placement controller
    (``bench.placement_quality.closed_controller``)."""
    if os.environ.get(CONTROLLER_ENV, "1") == "0":
        return None
    _say(f"closed loop: {closed_controller.SEGMENT_STEPS} steps decided by OCM's placement controller")
    return closed_controller.run_closed_segment(workdir / "closed-segment", names, base, WARMUP, _say)


def _agreement(
    metric: str, equal: str, s: controller.SegmentResult | closed_controller.ClosedSegmentResult
) -> list[Row]:
    """A controller segment's verdict row (every decision equal), its seconds and its first mismatches."""
    return [
        Row(
            NAME,
            f"{metric}: {equal}",
            f"{s.matched} / {s.compared}",
            "all",
            verdict(0 < s.matched == s.compared),
        ),
        Row(NAME, f"{metric}: seconds setup / steps", f"{s.seconds_setup:.1f} / {s.seconds_steps:.1f}"),
        *(Row(NAME, f"{metric}: mismatch", m) for m in s.mismatches),
    ]


def _closed_segment_rows(segment: closed_controller.ClosedSegmentResult | None) -> list[Row]:
    """The closed segment's rows: how many of OCM's decisions the model made too."""
    metric = "closed loop, real placement controller"
    if segment is None:
        why = (
            f"{CONTROLLER_ENV}=0"
            if os.environ.get(CONTROLLER_ENV, "1") == "0"
            else "--quick: the full run has it"
        )
        return [Row(NAME, metric, f"not run ({why})")]
    s = segment
    setups = ", ".join(f"{x.label} {x.form} at {x.size:g} %" for x in closed_controller.SETUPS)
    return [
        Row(
            NAME,
            f"{metric}: segment",
            f"the first {s.steps} judged steps, {s.loops} loops ({setups}) placing on OCM's decisions,"
            f" {s.changes} changes in all",
        ),
        *_agreement(metric, "model's pick equal to OCM's", s),
    ]


def _segment_rows(segment: controller.SegmentResult | None) -> list[Row]:
    """The segment's rows: what was replayed, how many decisions matched, and the first mismatches."""
    metric = "real placement controller"
    if segment is None:
        return [Row(NAME, metric, f"not run ({CONTROLLER_ENV}=0): the decisions below are the model's alone")]
    s = segment
    offset = WARMUP + s.start
    day, step = divmod(offset, STEPS_PER_DAY)
    minutes = step * STEP_SECONDS // 60
    at = f"judged step {s.start} (day {day + 1} of the series, {minutes // 60:02d}:{minutes % 60:02d})"
    return [
        Row(
            NAME,
            f"{metric}: segment",
            f"{s.steps} steps from {at}, {s.placements} Placements, {s.model_changes} changes in all",
        ),
        *_agreement(metric, "decisions equal to the model's", s),
    ]
