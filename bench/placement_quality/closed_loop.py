"""The closed loop: placed work adds load, and the scores see it only through the metrics, late.

Why.  The open-loop replay judges a placement against the trace as it was; the workload itself adds
nothing.  A real workload does add load, and a score computed from the metrics learns of it only at the
next sample.  Every consumer of a pick-1 Placement follows its one decision, and every Placement that
reads the same scores with the same form makes the same decision, so a stale "this cluster is best"
sends all of the new work to one cluster until the metrics catch up: the herd of stale load
information (Mitzenmacher, "How useful is old information?", IEEE TPDS 2000).  This module measures it
on the real product path.

The loop, per judged step ``s`` (one :class:`Loop` per setup, all advanced in lockstep):

1. each scored setup's scores of sample ``s - 1`` come from the agent's real ``ScoringCycle`` against
   a real Prometheus and the policy's real scoring API (``bench.placement_quality.replay``);
2. the setup decides with OCM Placement's ranking (``bench.placement_quality.experiment.decide_next``, one
   step of ``decide_fast``, both unit-tested equal to the placement model) and places the step's arrivals:
   each workload adds ``size`` percent of the cluster's capacity to its load over ``[s, s + life)``;
3. sample ``s`` of every setup's clusters, the trace plus the workloads live then, is pushed into
   Prometheus (``bench.placement_quality.remote_write``), so the next cycle reads it back.

No setup ever reads a sample at or after the step it decides: the causality of the open loop holds by
construction (a decision reads only what was written before it).

Arrivals.  :data:`PLACEMENTS` Placements each place workloads at a steady rate of one per hour of
life per ``LIVES["1h"]`` steps (one a step at a 1 h life, one every 4 steps at 4 h), so the offered
load is the same at every life: ``PLACEMENTS * 12 * size`` percent of one cluster, spread over the
fleet.  Scored setups' Placements decide on the same scores, so all of a step's arrivals go to one
cluster; the baselines decide per workload.

Warm-up.  Before the judged steps the workloads are placed round-robin (as a neutral history, the same
for every setup of a size), so the history the scorers read, the seasonal scorer's day before
included, already carries placed load, and the judged steps begin in steady state.

Baselines (:data:`LOOP_BASELINES`), each deciding per workload with the same staleness as the scores
(the load of sample ``s - 1``): ``random``; ``round-robin`` over the names in order;
``power-of-two`` (two distinct random clusters, the less loaded wins); ``least-loaded`` (the least
loaded cluster: the whole step's arrivals go to it, as with a score).

Measures (:func:`judge`), over every judged workload (placed at a judged step, its life inside the
series), weighted by workload and step of its life: the mean and the 95th percentile of the load it
experiences (trace plus all placed work on its cluster), how far that load is above the least loaded
cluster's at the same step (``regret``: with a workload size of 0, placed work adds nothing and this is
the open loop's regret, so the same loop prices what a spread form gives up when there is no herd to
avoid), the share of its time above :data:`HOT` percent, and a convex cost, the M/M/1 slowdown
``1 / (1 - u)`` at utilisation ``u`` (capped at :data:`COST_CAP`, so an overloaded step costs 100: the
cost of a queue that does not drain).  Per-step series (at each step, the mean over the judged workloads alive
then) are what the paired bootstrap compares, in blocks of at least one life.

Tie orders.  Each simulation is a whole run of the loop, so the closed loop cannot afford 20 tie orders
per setup as the open loop does.  Instead, every size gets its own random name order, shared by every
setup of that size (so comparisons at a size are paired on the same order), and the tie rate (the
share of scored decisions whose best score was tied) is reported beside the results.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.placement_quality.confidence import BLOCK_STEPS, Interval, paired_block_bootstrap
from bench.placement_quality.experiment import decide_next, tie_order
from bench.placement_quality.policies import BY_NAME, LIVES, STABILIZATION, serving
from bench.placement_quality.prometheus import METRIC, step_time
from bench.placement_quality.ranking import Form
from bench.placement_quality.remote_write import RemoteWriter, Samples
from bench.placement_quality.replay import CONCURRENCY, LOOPBACK, score_once
from bench.placement_quality.spread import SPREAD_ADDON_WEIGHT, Spread, balance_scores, setup_label
from dynamic_scoring.agent.http import ClientPool
from dynamic_scoring.agent.items.stabilization import Stabilizer
from dynamic_scoring.agent.plan import ScorerPlan
from e2e.prometheus import PrometheusServer

LOOP_BASELINES = ("random", "round-robin", "power-of-two", "least-loaded")
"""Placers without scores, each deciding per workload on the load of the sample before."""

SIZES = (1.0, 3.0, 6.0)
"""Workload sizes, in percent of a cluster's capacity."""

PLACEMENTS = 2
"""Placements placing work at every step (each at the steady rate; see the module docstring)."""

HOT = 80.0
"""Load, in percent, above which a workload's time counts as hot."""

COST_CAP = 0.99
"""Utilisation at which the slowdown ``1 / (1 - u)`` is capped (cost 100)."""


@dataclass(frozen=True)
class Setup:
    """One closed-loop simulation: who places, how big the work is and how long it lives.

    ``policy`` is a scored policy of ``bench.placement_quality.policies`` or one of :data:`LOOP_BASELINES`;
    ``variant`` is ``raw`` or ``stabilized`` for a scored policy and ``-`` for a baseline, ``form`` a
    Placement form or ``-``.
    """

    policy: str
    variant: str
    form: str
    size: float
    life: str

    @property
    def scored(self) -> bool:
        """True when the setup's decisions come from scores (a scoring cycle per cluster and step)."""
        return self.variant != "-"

    @property
    def label(self) -> str:
        """``policy/variant`` (``+form`` for a spread form), or the baseline's name."""
        return setup_label(self.policy, self.variant, self.form)

    @property
    def life_steps(self) -> int:
        """The workload life in steps."""
        return LIVES[self.life]


def arrivals(steps: int, life_steps: int, placements: int = PLACEMENTS) -> NDArray[np.int64]:
    """Workloads arriving at each step: ``placements`` streams of ``LIVES["1h"] / life_steps`` a step.

    The rate is spread evenly (a step gets ``floor((s + 1) r) - floor(s r)`` per stream), so at every
    life about ``placements * LIVES["1h"]`` workloads are alive at once.
    """
    if life_steps < 1 or placements < 1:
        raise ValueError(f"need a life and placements >= 1, got {life_steps} and {placements}")
    s = np.arange(steps, dtype=np.int64)
    per_stream = ((s + 1) * LIVES["1h"]) // life_steps - (s * LIVES["1h"]) // life_steps
    return per_stream * placements


class Loop:
    """One setup's state: the trace, the load its placements added, and how it decides.

    Args:
        setup: what this simulation places and how.
        base: the trace, clusters x every step of the series (warm-up included).
        warmup: the first judged step; placements before it are round-robin (the neutral history).
        order: the tie order (position of each cluster when the names are sorted).
        seed: the random baselines' seed.
        placements: how many Placements place work (see :func:`arrivals`).
    """

    def __init__(
        self,
        setup: Setup,
        base: NDArray[np.float64],
        warmup: int,
        order: NDArray[np.int64],
        seed: int,
        placements: int = PLACEMENTS,
    ) -> None:
        self.setup = setup
        self.base = base
        self.warmup = warmup
        self.order = order
        self.added = np.zeros_like(base)
        self.arrivals = arrivals(base.shape[1], setup.life_steps, placements)
        self.placed: list[tuple[int, int, int]] = []
        """(step, cluster, workloads) of every placement, warm-up included."""
        self._rng = np.random.default_rng(seed)
        self._turn = 0
        self._by_name = np.argsort(order, kind="stable")
        self._stabilizers = (
            [Stabilizer(STABILIZATION) for _ in range(base.shape[0])]
            if setup.variant == "stabilized"
            else None
        )
        self._previous: tuple[int, ...] = ()
        self.ties = 0
        self.decisions = 0
        self.raw: list[NDArray[np.int64]] = []
        """Every judged step's raw scores (of the sample before it), in step order."""
        self.picks: list[tuple[int, int]] = []
        """Every judged step's (model's pick, pick placed on): equal unless a decider was given."""
        self._workloads: list[list[int]] = []
        """A spread form's workloads placed in the judged steps: [start step, cluster it is on now]."""
        self.moves: list[tuple[int, int, int, int]] = []
        """A spread form's moves: (step, from cluster, to cluster, the workload's start step)."""

    @property
    def clusters(self) -> int:
        """How many clusters the fleet has."""
        return int(self.base.shape[0])

    def total(self, step: int) -> NDArray[np.float64]:
        """Every cluster's load at ``step``: the trace plus the work placed on it and live then."""
        return np.asarray(self.base[:, step] + self.added[:, step], dtype=np.float64)

    def place(self, step: int, cluster: int, count: int) -> None:
        """Place ``count`` workloads on ``cluster`` at ``step``: each adds the size for the life."""
        if count <= 0:
            return
        end = min(step + self.setup.life_steps, self.base.shape[1])
        self.added[cluster, step:end] += self.setup.size * count
        self.placed.append((step, cluster, count))

    def _round_robin(self) -> int:
        cluster = int(self._by_name[self._turn % self.clusters])
        self._turn += 1
        return cluster

    def warm(self) -> None:
        """The neutral history: every arrival before the first judged step, round-robin."""
        for step in range(self.warmup):
            for _ in range(int(self.arrivals[step])):
                self.place(step, self._round_robin(), 1)

    def step(
        self,
        step: int,
        scores: NDArray[np.int64] | None,
        decider: Callable[[NDArray[np.int64]], int] | None = None,
    ) -> None:
        """Decide and place the arrivals of ``step`` (``scores``: each cluster's raw score of ``step - 1``).

        The baselines read the load of ``step - 1``, as stale as the scores.  ``decider``, given the
        published scores, makes a scored setup's decision instead of the model (OCM's placement
        controller in ``bench.placement_quality.closed_controller``); the model's own pick is still made
        and both are kept in :attr:`picks`, and Steady then follows the decider's pick, as a live Placement
        does.
        """
        count = int(self.arrivals[step])
        if self.setup.scored:
            if scores is None:
                raise ValueError(f"{self.setup.label}: a scored setup needs the step's scores")
            self.raw.append(scores.copy())
            published = self._publish(step, scores)
            spread = Spread.parse(self.setup.form)
            if spread is not None:
                self._spread(step, published, count, spread)
                return
            model = self._decide(published)
            picked = model if decider is None else decider(published)
            self._previous = (picked,)
            self.picks.append((model, picked))
            self.decisions += 1
            top = published.max()
            self.ties += int(np.count_nonzero(published == top) > 1)
            self.place(step, picked, count)
            return
        seen = self.total(step - 1)
        policy = self.setup.policy
        if policy == "least-loaded":
            self.place(step, self._least(seen, np.arange(self.clusters)), count)
            return
        for _ in range(count):
            if policy == "random":
                cluster = int(self._rng.integers(self.clusters))
            elif policy == "round-robin":
                cluster = self._round_robin()
            elif policy == "power-of-two":
                pair = self._rng.choice(self.clusters, size=min(2, self.clusters), replace=False)
                cluster = self._least(seen, pair)
            else:
                raise ValueError(f"unknown loop baseline {policy!r}: one of {', '.join(LOOP_BASELINES)}")
            self.place(step, cluster, 1)

    def _spread(self, step: int, published: NDArray[np.int64], count: int, spread: Spread) -> None:
        """Re-decide the held Placements (with ``Steady``), then place each of the step's ``count``
        workloads by its own Placement, one after the other."""
        life = self.setup.life_steps
        reach = life if spread.window is None else min(spread.window, life)
        counts = np.zeros(self.clusters, dtype=np.int64)
        for placed_at, cluster, n in self.placed:
            if step - reach < placed_at <= step and placed_at < self.warmup:  # live, inside the window
                counts[cluster] += n
        for start, cluster in self._workloads:
            if step - reach < start <= step:
                counts[cluster] += 1
        tie = self.clusters - 1 - self.order
        if spread.steady:
            self._hold(step, published, counts, spread, tie)
        top = published.max()
        for _ in range(count):
            total = SPREAD_ADDON_WEIGHT * published + spread.weight * balance_scores(counts)
            picked = int(np.argmax(total * self.clusters + tie))
            self.decisions += 1
            self.ties += int(np.count_nonzero(published == top) > 1)
            self.picks.append((picked, picked))
            self.place(step, picked, 1)
            self._workloads.append([step, picked])
            counts[picked] += 1

    def _hold(
        self,
        step: int,
        published: NDArray[np.int64],
        counts: NDArray[np.int64],
        spread: Spread,
        tie: NDArray[np.int64],
    ) -> None:
        """Every live workload's Placement decides again, oldest first; a changed decision moves it."""
        life = self.setup.life_steps
        held = np.zeros(self.clusters, dtype=np.int64)
        for workload in self._workloads:
            start, cluster = workload
            if not start < step < start + life:
                continue
            counts[cluster] -= 1  # Balance counts every decision but the Placement's own
            held[cluster] = spread.steady * 100
            total = SPREAD_ADDON_WEIGHT * published + spread.weight * balance_scores(counts) + held
            held[cluster] = 0
            picked = int(np.argmax(total * self.clusters + tie))
            counts[picked] += 1
            if picked != cluster:
                end = min(start + life, self.base.shape[1])
                self.added[cluster, step:end] -= self.setup.size
                self.added[picked, step:end] += self.setup.size
                self.moves.append((step, cluster, picked, start))
                workload[1] = picked

    def _least(self, seen: NDArray[np.float64], candidates: NDArray[np.int64]) -> int:
        """The least loaded of ``candidates``; a tie goes to the name that sorts first."""
        best = min(candidates.tolist(), key=lambda c: (float(seen[c]), int(self.order[c])))
        return int(best)

    def _publish(self, step: int, raw: NDArray[np.int64]) -> NDArray[np.int64]:
        """What the agent publishes from ``raw``: the raw score, or the stabilizer's."""
        if self._stabilizers is None:
            return raw
        at = float(step_time(step - 1))
        return np.asarray(
            [
                stabilizer.apply(at, [("score", int(raw[c]))])["score"].published
                for c, stabilizer in enumerate(self._stabilizers)
            ],
            dtype=np.int64,
        )

    def _decide(self, published: NDArray[np.int64]) -> int:
        """The Placement's pick (k = 1) at this step, with Steady's bonus for the previous pick."""
        form: Form = "exact" if self.setup.form == "exact" else "margin"
        (picked,) = decide_next(published, self._previous, 1, form, self.order)
        self._previous = (picked,)
        return picked


@dataclass(frozen=True)
class LoopResult:
    """One setup's measures over its judged workloads (see the module docstring)."""

    setup: Setup
    workloads: int
    load_mean: float
    load_p95: float
    regret: float
    """The mean, over workload-steps, of the load experienced above the least loaded cluster's then."""
    hot_share: float
    slowdown: float
    tie_share: float | None
    changes_per_day: float | None
    """Decision changes a day of a scored setup (None for a baseline, which decides per workload)."""
    per_step_slowdown: NDArray[np.float64] = field(repr=False, compare=False)
    per_step_hot: NDArray[np.float64] = field(repr=False, compare=False)
    per_step_p95: NDArray[np.float64] = field(repr=False, compare=False)
    """At each step, the 95th percentile of the load the judged workloads alive then experience."""
    per_step_regret: NDArray[np.float64] = field(repr=False, compare=False)
    """At each step, the mean over the judged workloads alive then of their load above the least's."""

    def row(self) -> dict[str, object]:
        """The flat record for the CSV and JSON files."""
        return {
            "policy": self.setup.policy,
            "variant": self.setup.variant,
            "form": self.setup.form,
            "size": self.setup.size,
            "life": self.setup.life,
            "workloads": self.workloads,
            "load_mean": self.load_mean,
            "load_p95": self.load_p95,
            "regret": self.regret,
            "hot_share": self.hot_share,
            "slowdown": self.slowdown,
            "tie_share": self.tie_share,
            "changes_per_day": self.changes_per_day,
        }


def slowdown(load: NDArray[np.float64]) -> NDArray[np.float64]:
    """``1 / (1 - u)`` of load in percent, with ``u`` capped at :data:`COST_CAP`."""
    u = np.minimum(np.maximum(load, 0.0) / 100.0, COST_CAP)
    return np.asarray(1.0 / (1.0 - u), dtype=np.float64)


def live_weights(loop: Loop, first: int) -> NDArray[np.float64]:
    """``w[c, t]``: judged workloads alive on cluster ``c`` at step ``t`` (placed from ``first`` on,
    their whole life inside the series)."""
    life = loop.setup.life_steps
    end = loop.base.shape[1]
    weights = np.zeros_like(loop.base)
    for step, cluster, count in loop.placed:
        if first <= step and step + life <= end:
            weights[cluster, step : step + life] += count
    for step, before, after, start in loop.moves:  # a moved workload lives on elsewhere from its move
        if first <= start and start + life <= end:
            weights[before, step : start + life] -= 1
            weights[after, step : start + life] += 1
    return weights


def step_p95(total: NDArray[np.float64], weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per step, the workload-weighted 95th percentile of ``total`` (NaN where no workload is alive):
    the load that 5 % of the workloads alive then meet or exceed."""
    out = np.full(total.shape[1], np.nan)
    order = np.argsort(total, axis=0, kind="stable")
    loads = np.take_along_axis(total, order, axis=0)
    cumulative = np.cumsum(np.take_along_axis(weights, order, axis=0), axis=0)
    for t in np.flatnonzero(cumulative[-1] > 0):
        out[t] = loads[np.searchsorted(cumulative[:, t], 0.95 * cumulative[-1, t]), t]
    return out


def judge(loop: Loop, first: int, step_seconds: int) -> LoopResult:
    """The measures of every workload ``loop`` placed from step ``first`` whose life fits the series.

    Each workload counts at every step of its life, on the load its cluster carries then (the trace
    plus all placed work).  The per-step series hold, at each step, the mean over the judged workloads
    alive then; a step with none is NaN (the same steps for every setup, as arrivals are the same).
    """
    weights = live_weights(loop, first)
    if not weights.any():
        life = loop.setup.life_steps
        raise ValueError(f"{loop.setup.label}: no judged workload (series too short for a {life}-step life)")
    total = loop.base + loop.added
    cost = slowdown(total)
    hot = (total > HOT).astype(np.float64)
    above = total - total.min(axis=0)  # at size 0, the open loop's regret against the trace
    alive = weights.sum(axis=0)
    has = alive > 0
    per_cost = np.full(alive.size, np.nan)
    per_hot = np.full(alive.size, np.nan)
    per_regret = np.full(alive.size, np.nan)
    per_cost[has] = (weights * cost).sum(axis=0)[has] / alive[has]
    per_hot[has] = (weights * hot).sum(axis=0)[has] / alive[has]
    per_regret[has] = (weights * above).sum(axis=0)[has] / alive[has]
    per_p95 = step_p95(total, weights)
    mask = weights > 0
    flat, flat_weights = total[mask], weights[mask]
    order = np.argsort(flat, kind="stable")
    cumulative = np.cumsum(flat_weights[order])
    p95 = float(flat[order][np.searchsorted(cumulative, 0.95 * cumulative[-1])])
    judged = [
        (s, c, n) for s, c, n in loop.placed if first <= s and s + loop.setup.life_steps <= total.shape[1]
    ]
    picked = [c for _, c, _ in judged]
    # A spread form's Placements decide once each, so consecutive workloads on other clusters are no
    # moves: its changes are the moves of judged workloads (None when nothing may move).
    spread = Spread.parse(loop.setup.form) if loop.setup.scored else None
    if spread is not None:
        moved = [m for m in loop.moves if first <= m[3] and m[3] + loop.setup.life_steps <= total.shape[1]]
        changes = len(moved) if spread.steady else None
    elif loop.setup.scored:
        changes = sum(1 for a, b in itertools.pairwise(picked) if a != b)
    else:
        changes = None
    span = max(len({s for s, _, _ in judged}), 1)
    return LoopResult(
        setup=loop.setup,
        workloads=sum(n for _, _, n in judged),
        load_mean=float(np.average(flat, weights=flat_weights)),
        load_p95=p95,
        regret=float(np.average(above[mask], weights=flat_weights)),
        hot_share=float(np.average(hot[mask], weights=flat_weights)),
        slowdown=float(np.average(cost[mask], weights=flat_weights)),
        tie_share=loop.ties / loop.decisions if loop.decisions else None,
        changes_per_day=None if changes is None else changes * 86_400 / (span * step_seconds),
        per_step_slowdown=per_cost[first:],
        per_step_hot=per_hot[first:],
        per_step_p95=per_p95[first:],
        per_step_regret=per_regret[first:],
    )


@dataclass(frozen=True)
class LoopComparison:
    """``a`` against ``b`` at one (life, size): the paired bootstrap of a per-step measure's difference."""

    life: str
    size: float
    measure: str  # "slowdown", "hot_share", "load_p95" or "regret"
    a: str
    b: str
    interval: Interval

    @property
    def verdict(self) -> str:
        """Which one is lower (better), or that the interval includes 0."""
        return self.interval.verdict(self.a, self.b)


def compare_loops(results: Sequence[LoopResult]) -> list[LoopComparison]:
    """Every pair of setups at the same (life, size), on slowdown, hot share, the 95th percentile of load
    and regret; scored setups first.

    A step's value is the mean over the judged workloads alive then, so steps before the first and after
    the last judged life are left out of both series alike (the arrivals are the same for every setup).
    A workload's life ties its steps together, so a block is at least one life long (4 h at least).
    """
    out: list[LoopComparison] = []
    groups: dict[tuple[str, float], list[LoopResult]] = {}
    for r in results:
        groups.setdefault((r.setup.life, r.setup.size), []).append(r)
    for (life, size), group in groups.items():
        here = sorted(group, key=lambda r: not r.setup.scored)  # a scored setup is always ``a``
        for n, a in enumerate(here):
            for b in here[n + 1 :]:
                for measure, x, y in (
                    ("slowdown", a.per_step_slowdown, b.per_step_slowdown),
                    ("hot_share", a.per_step_hot, b.per_step_hot),
                    ("load_p95", a.per_step_p95, b.per_step_p95),
                    ("regret", a.per_step_regret, b.per_step_regret),
                ):
                    keep = np.isfinite(x) & np.isfinite(y)
                    block = max(BLOCK_STEPS, LIVES[life])
                    interval = paired_block_bootstrap(x[keep], y[keep], block=block)
                    out.append(LoopComparison(life, size, measure, a.setup.label, b.setup.label, interval))
    return out


def loop_name(index: int, cluster: str) -> str:
    """The ``cluster`` label of one simulation's copy of a cluster (each simulation has its own series)."""
    return f"loop{index:02d}-{cluster}"


def series_at(loops: Sequence[Loop], names: Sequence[str], step: int) -> list[tuple[dict[str, str], Samples]]:
    """Sample ``step`` of every simulation's clusters, as remote-write series."""
    millis = step_time(step) * 1000
    return [
        ({"__name__": METRIC, "cluster": loop_name(n, name)}, [(millis, float(value))])
        for n, loop in enumerate(loops)
        for name, value in zip(names, loop.total(step), strict=True)
    ]


def history(loops: Sequence[Loop], names: Sequence[str], upto: int) -> str:
    """OpenMetrics text of every simulation's samples before ``upto`` (the warm-up, for promtool)."""
    lines = [f"# TYPE {METRIC} gauge"]
    for n, loop in enumerate(loops):
        total = loop.base[:, :upto] + loop.added[:, :upto]
        for name, row in zip(names, total, strict=True):
            prefix = f'{METRIC}{{cluster="{loop_name(n, name)}"}} '
            lines.extend(f"{prefix}{float(v)!r} {step_time(s)}" for s, v in enumerate(row))
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def make_loops(
    setups: Sequence[Setup],
    base: NDArray[np.float64],
    warmup: int,
    *,
    seed: int = 0,
    placements: int = PLACEMENTS,
) -> list[Loop]:
    """One :class:`Loop` per setup, warmed up; every size gets its own tie order, shared by its setups."""
    sizes = sorted({s.size for s in setups})
    orders = {size: tie_order(base.shape[0], seed + n) for n, size in enumerate(sizes)}
    loops = []
    for setup in setups:
        loop = Loop(setup, base, warmup, orders[setup.size], seed + sizes.index(setup.size), placements)
        loop.warm()
        loops.append(loop)
    return loops


async def score_loops(
    loops: Sequence[Loop],
    names: Sequence[str],
    plans: Mapping[str, ScorerPlan],
    clients: ClientPool,
    gate: asyncio.Semaphore,
    step: int,
) -> dict[int, NDArray[np.int64]]:
    """Every scored loop's raw scores for ``step``: real cycles with the window ending at ``step - 1``."""
    at = float(step_time(step - 1))
    scores = {n: np.zeros(len(names), dtype=np.int64) for n, loop in enumerate(loops) if loop.setup.scored}

    async def one(n: int, c: int) -> None:
        async with gate:
            scores[n][c] = await score_once(plans[loops[n].setup.policy], loop_name(n, names[c]), at, clients)

    await asyncio.gather(*(one(n, c) for n in scores for c in range(len(names))))
    return scores


async def run(
    loops: Sequence[Loop],
    names: Sequence[str],
    plans: Mapping[str, ScorerPlan],
    writer: RemoteWriter,
    end: int,
    *,
    concurrency: int = CONCURRENCY,
    progress: Callable[[str], None] = lambda _: None,
) -> int:
    """Advance every loop from its warm-up to ``end`` in lockstep; returns the scoring cycles run.

    Each step: score every scored loop's clusters at the sample before (real cycles, at most
    ``concurrency`` at once), decide, place, then write the step's samples of every loop.
    """
    if not loops:
        return 0
    first = loops[0].warmup
    gate = asyncio.Semaphore(concurrency)
    clients = ClientPool(policy=LOOPBACK)
    cycles = 0
    began = time.monotonic()
    try:
        for step in range(first, end):
            scores = await score_loops(loops, names, plans, clients, gate, step)
            cycles += sum(out.size for out in scores.values())
            for n, loop in enumerate(loops):
                loop.step(step, scores.get(n))
            await asyncio.to_thread(writer.write, series_at(loops, names, step))
            done = step - first + 1
            if done % 48 == 0 or step == end - 1:
                rate = cycles / max(time.monotonic() - began, 1e-9)
                left = (end - 1 - step) * (cycles / done) / max(rate, 1e-9)
                progress(
                    f"closed loop: step {done}/{end - first}, {rate:.0f} cycles/s, about {left:.0f} s left"
                )
    finally:
        await clients.aclose()
    return cycles


@dataclass(frozen=True)
class Simulated:
    """What :func:`simulate` returns: every setup's measures, their comparisons, and the run's cost."""

    results: list[LoopResult]
    comparisons: list[LoopComparison]
    cycles: int
    seconds: float
    loops: list[Loop] = field(repr=False, compare=False)


def setups_for(
    policies: Sequence[str], sizes: Sequence[float], lives: Sequence[str], *, form: str = "exact"
) -> list[Setup]:
    """Every scored policy (raw) and every loop baseline, at each size and life.

    A policy written ``name+form`` (``recipe-1h+balance-1``) is placed in that form instead of ``form``.
    """
    scored = [(p.partition("+")[0], p.partition("+")[2] or form) for p in policies]
    return [
        *(Setup(p, "raw", f, size, life) for life in lives for size in sizes for p, f in scored),
        *(Setup(b, "-", "-", size, life) for life in lives for size in sizes for b in LOOP_BASELINES),
    ]


@contextlib.contextmanager
def backend(
    workdir: Path, names: Sequence[str], loops: Sequence[Loop], warmup: int, setups: Sequence[Setup]
) -> Iterator[tuple[dict[str, ScorerPlan], RemoteWriter]]:
    """A real Prometheus holding every loop's warm-up (backfilled) and taking its later samples by
    remote write, and the scored setups' scoring APIs; yields their plans by policy and the writer."""
    server = PrometheusServer(workdir, remote_write_receiver=True)
    server.backfill(history(loops, names, warmup))
    server.start()
    try:
        wanted = [BY_NAME[p] for p in sorted({s.policy for s in setups if s.scored})]
        with serving(wanted, server.url) as plans, RemoteWriter(server.url) as writer:
            yield plans, writer
    finally:
        server.stop()


def simulate(
    workdir: Path,
    names: Sequence[str],
    base: NDArray[np.float64],
    warmup: int,
    setups: Sequence[Setup],
    *,
    step_seconds: int,
    placements: int = PLACEMENTS,
    progress: Callable[[str], None] = lambda _: None,
) -> Simulated:
    """Run every setup's loop over ``base`` (clusters x steps) on a real Prometheus and real scorers.

    The warm-up of every simulation is backfilled; the judged steps are pushed one at a time.
    ``placements`` Placements place work (a larger fleet takes more to carry the same load per cluster).
    """
    began = time.monotonic()
    loops = make_loops(setups, base, warmup, placements=placements)
    with backend(workdir, names, loops, warmup, setups) as (plans, writer):
        progress(
            f"closed loop: {len(loops)} simulations ({sum(s.scored for s in setups)} scored)"
            f" x {len(names)} clusters x {base.shape[1] - warmup} steps"
        )
        cycles = asyncio.run(run(loops, names, plans, writer, base.shape[1], progress=progress))
    results = [judge(loop, warmup, step_seconds) for loop in loops]
    return Simulated(results, compare_loops(results), cycles, time.monotonic() - began, loops)


__all__ = [
    "COST_CAP",
    "HOT",
    "LOOP_BASELINES",
    "PLACEMENTS",
    "SIZES",
    "Loop",
    "LoopComparison",
    "LoopResult",
    "Setup",
    "Simulated",
    "arrivals",
    "backend",
    "compare_loops",
    "history",
    "judge",
    "loop_name",
    "make_loops",
    "run",
    "score_loops",
    "series_at",
    "setups_for",
    "simulate",
    "slowdown",
    "step_p95",
]
