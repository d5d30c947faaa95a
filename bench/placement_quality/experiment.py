"""Deciding and judging every combination under random tie orders: the placement-quality benchmark's core.

Why tie orders.  OCM ranks clusters by their prioritizer totals and breaks a tie by cluster name.  With
integer scores, several clusters often tie at the top, and a fixed set of names hands every tie to the
clusters whose names sort first: whether those happen to be the usually-best ones decides part of the
result.  So every combination is decided under :data:`ORDERS` random name orders (each cluster's name
gets a random prefix, :func:`tie_names`), and each measure is reported as the median over them with the
lowest and highest (:class:`~bench.placement_quality.confidence.Band`).  The baselines without scores
depend on the order too: static picks the first name (a different fixed cluster per order, so its median is
a typical fixed cluster, not one alphabetical accident), round-robin walks the names in order, random draws
with the order's seed.

Why a fast ranking.  The combinations need millions of "which k clusters now" answers.
:func:`decide_fast` computes OCM's totals for the three Placement forms of
:mod:`bench.placement_quality.ranking` with numpy and sorts as OCM does (total descending, then name); a
unit test checks that it decides exactly what :func:`bench.placement_quality.replay.decide` (the placement
model) decides, on random scores, in every form and k.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from bench.placement_quality import anticipation, metrics
from bench.placement_quality.confidence import Band
from bench.placement_quality.ranking import Form
from bench.placement_quality.replay import OVERLOAD_PERCENTILE, Scores

ORDERS = 20
"""Random cluster-name orders every combination is decided under."""

MAX_SCORE = 100
"""What Steady gives a cluster already decided, and Balance one no other Placement chose."""

BASELINES = ("static", "random", "round-robin")
"""Policies without scores: OCM's first cluster by name, a uniform draw, the names in turn."""


def tie_order(count: int, seed: int) -> NDArray[np.int64]:
    """``order[i]``: the position of cluster ``i`` when names are sorted, for random order ``seed``."""
    return np.random.default_rng(seed).permutation(count).astype(np.int64)


def tie_names(names: Sequence[str], order: NDArray[np.int64]) -> tuple[str, ...]:
    """``names`` with a prefix that makes them sort in ``order`` (for the placement model's ranking)."""
    width = len(str(max(len(names) - 1, 0)))
    return tuple(f"{int(order[i]):0{width}d}-{n}" for i, n in enumerate(names))


def _weights(form: Form) -> tuple[int, int, int]:
    """(AddOn, Steady, Balance) weights of ``form`` as OCM merges them (see
    ``bench.placement_quality.ranking``)."""
    if form == "exact":
        return 1, 0, 0
    if form == "margin":
        return 10, 1, 0
    return 1, 1, 1


Picks = NDArray[np.int64]
"""``picks[step]``: the clusters decided at each step, best first (steps x k)."""


def as_decisions(picks: Picks) -> list[tuple[int, ...]]:
    """``picks`` as the tuples :mod:`bench.placement_quality.metrics` and
    :func:`bench.placement_quality.replay.decide` use."""
    return [tuple(int(c) for c in row) for row in picks]


def decide_fast(published: Scores, k: int, form: Form, order: NDArray[np.int64]) -> Picks:
    """The Placement's decision at every step, as :func:`bench.placement_quality.replay.decide` makes it.

    ``order`` is the tie order (:func:`tie_order`): among equal totals the cluster with the lower
    ``order`` wins, as the lower name does in OCM.  Exact mode has no Steady, so every step is ranked at
    once; the other forms carry the previous decision forward.
    """
    clusters, steps = published.shape
    if order.shape != (clusters,):
        raise ValueError(f"order has shape {order.shape}, need ({clusters},)")
    addon, steady, balance = _weights(form)
    # key = total * clusters + (clusters - 1 - order): one integer whose descending sort is OCM's order.
    base = (addon * published.astype(np.int64) + balance * MAX_SCORE) * clusters + (clusters - 1 - order)[
        :, None
    ]
    take = min(k, clusters)
    if steady == 0:
        return np.ascontiguousarray(np.argsort(-base, axis=0, kind="stable")[:take].T)
    bonus = steady * MAX_SCORE * clusters
    picks = np.zeros((steps, take), dtype=np.int64)
    held = np.zeros(clusters, dtype=np.int64)
    for j in range(steps):
        picked = np.argsort(-(base[:, j] + bonus * held), kind="stable")[:take]
        held[:] = 0
        held[picked] = 1
        picks[j] = picked
    return picks


def decide_next(
    published: NDArray[np.int64], previous: Sequence[int], k: int, form: Form, order: NDArray[np.int64]
) -> tuple[int, ...]:
    """One step of :func:`decide_fast`: the decision for ``published`` (one score per cluster) when
    ``previous`` was decided the step before (Steady's bonus; ignored by Exact).  For a loop whose next
    scores depend on this decision, so the steps cannot be ranked all at once."""
    clusters = published.shape[0]
    if published.shape != (clusters,) or order.shape != (clusters,):
        raise ValueError(f"need one score and one order per cluster, got {published.shape}, {order.shape}")
    addon, steady, balance = _weights(form)
    key = (addon * published.astype(np.int64) + balance * MAX_SCORE) * clusters + (clusters - 1 - order)
    held = np.zeros(clusters, dtype=np.int64)
    held[list(previous)] = steady * MAX_SCORE * clusters
    return tuple(int(c) for c in np.argsort(-(key + held), kind="stable")[: min(k, clusters)])


def decide_baseline(
    policy: str, steps: int, clusters: int, k: int, order: NDArray[np.int64], seed: int
) -> Picks:
    """A baseline's decisions: ``static`` (the first ``k`` by name), ``random`` or ``round-robin``."""
    take = min(k, clusters)
    by_name = np.argsort(order, kind="stable")
    if policy == "static":
        return np.tile(by_name[:take], (steps, 1))
    if policy == "round-robin":
        turn = (np.arange(steps)[:, None] * take + np.arange(take)[None, :]) % clusters
        return np.asarray(by_name[turn], dtype=np.int64)
    if policy == "random":
        # One uniform draw of k distinct clusters per step: the k smallest of fresh uniform keys.
        keys = np.random.default_rng(seed).random((steps, clusters))
        return np.asarray(np.argsort(keys, axis=1)[:, :take], dtype=np.int64)
    raise ValueError(f"unknown baseline {policy!r}: one of {', '.join(BASELINES)}")


@dataclass(frozen=True)
class Judged:
    """One decision sequence's measures (one combination under one tie order).

    The same numbers as :func:`bench.placement_quality.metrics.lifetime_regret`, ``overload_exposure`` and
    ``changes_per_day`` (a unit test holds them equal); :class:`LifeTable` computes them from arrays.
    """

    regret_values: NDArray[np.float64]
    regret_mean: float
    regret_p95: float
    exposure: float
    changes_per_day: float
    core_regret_values: NDArray[np.float64] | None = None
    """Per judged step: the best idle cores over the life minus the chosen cluster's (when judged)."""
    ramps: Mapping[str, tuple[NDArray[np.float64], NDArray[np.float64]]] = field(default_factory=dict)
    """Per ramp definition: each ramp's live share and base rate (``anticipation.shares``)."""


@dataclass(frozen=True)
class RampShares:
    """One combination's placements around one definition's ramps, each averaged over the tie orders.

    ``live[i]`` and ``base[i]`` are ramp ``i``'s live share and base rate; ``excess`` is the band over tie
    orders of their mean difference (negative: the policy keeps away from clusters about to ramp).
    """

    live: NDArray[np.float64] = field(repr=False, compare=False)
    base: NDArray[np.float64] = field(repr=False, compare=False)
    excess: Band | None

    @property
    def events(self) -> int:
        """How many ramps."""
        return int(self.live.size)


class LifeTable:
    """Everything about the judged loads that does not depend on the decisions, for one workload life.

    ``means[c, t]`` is cluster ``c``'s mean load over ``[t, t + life)``; ``best[m, t]`` the sum of the
    ``m + 1`` lowest such means (the best ``m + 1``-set); ``hot[c, t]`` its overloaded steps in the life.
    Only steps whose whole life fits are judged (as in :mod:`bench.placement_quality.metrics`).
    """

    def __init__(self, loads: NDArray[np.float64], life_steps: int, thresholds: NDArray[np.float64]) -> None:
        if not 1 <= life_steps <= loads.shape[1]:
            raise ValueError(f"a life of {life_steps} steps does not fit {loads.shape[1]} judged steps")
        self.life_steps = life_steps
        self.means = sliding_window_view(loads, life_steps, axis=1).mean(axis=-1)
        self.best = np.cumsum(np.sort(self.means, axis=0), axis=0)
        over = loads > thresholds[:, None]
        self.hot = sliding_window_view(over, life_steps, axis=1).sum(axis=-1)
        self.steps = self.means.shape[1]

    def judge(self, picks: Picks, step_seconds: int) -> Judged:
        """The measures of ``picks`` (every judged step's decision, steps x k)."""
        scored = picks[: self.steps]
        cols = np.arange(self.steps)[:, None]
        k = scored.shape[1]
        # Sorting the chosen means makes the sum the same floats in the same order as metrics' version.
        chosen = np.sort(self.means[scored, cols], axis=1).sum(axis=1)
        values = (chosen - self.best[k - 1]) / k
        exposure = float(self.hot[scored, cols].sum()) / (scored.size * self.life_steps)
        ordered = np.sort(picks, axis=1)
        changes = int(np.count_nonzero(np.any(ordered[1:] != ordered[:-1], axis=1)))
        return Judged(
            regret_values=values,
            regret_mean=float(np.mean(values)),
            regret_p95=float(np.percentile(values, 95)),
            exposure=exposure,
            changes_per_day=changes * metrics.SECONDS_PER_DAY / (len(picks) * step_seconds),
        )


@dataclass(frozen=True)
class Result:
    """One combination (policy, variant, form, k, lag, life) over every tie order.

    ``per_step`` is each judged placement's regret averaged over the tie orders: the expected regret
    under a random tie order, which the bootstrap pairs between policies.  It is kept out of the
    recorded files' rows (see :meth:`row`).
    """

    policy: str
    variant: str  # "raw", "stabilized", or "-" for a baseline
    form: str  # a Placement form, or "-" for a baseline (it has no Placement)
    k: int
    lag: int
    life_steps: int
    regret: Band
    regret_p95: Band
    exposure: Band | None
    changes_per_day: Band
    writes_per_cluster_day: float | None
    per_step: NDArray[np.float64] = field(repr=False, compare=False)
    core_regret: Band | None = None
    """Idle cores short of the best cluster's, per replica, over the life (when capacities are given)."""
    per_step_cores: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    ramps: Mapping[str, RampShares] = field(default_factory=dict, repr=False, compare=False)
    """Anticipation per ramp definition (see :mod:`bench.placement_quality.anticipation`)."""

    @property
    def label(self) -> str:
        """``policy/variant``, or the policy alone for a baseline."""
        return self.policy if self.variant == "-" else f"{self.policy}/{self.variant}"

    def row(self) -> dict[str, object]:
        """The flat record of this result for the CSV and JSON files (bands as median, low, high)."""
        out: dict[str, object] = {
            "policy": self.policy,
            "variant": self.variant,
            "form": self.form,
            "k": self.k,
            "lag": self.lag,
            "life_steps": self.life_steps,
        }
        bands = {
            "regret_mean": self.regret,
            "regret_p95": self.regret_p95,
            "exposure": self.exposure,
            "changes_per_day": self.changes_per_day,
        }
        for key, band in bands.items():
            _put_band(out, key, band)
        out["writes_per_cluster_day"] = self.writes_per_cluster_day
        if self.core_regret is not None:
            _put_band(out, "core_regret_mean", self.core_regret)
        for name, ramp in self.ramps.items():
            out[f"ramp_{name}_events"] = ramp.events
            out[f"ramp_{name}_live"] = float(ramp.live.mean()) if ramp.events else None
            out[f"ramp_{name}_base"] = float(ramp.base.mean()) if ramp.events else None
            _put_band(out, f"ramp_{name}_excess", ramp.excess)
        return out


def _put_band(out: dict[str, object], key: str, band: Band | None) -> None:
    """``band`` as three columns of ``out``: ``key`` (the median), ``key_low`` and ``key_high``."""
    out[key] = None if band is None else band.median
    out[f"{key}_low"] = None if band is None else band.low
    out[f"{key}_high"] = None if band is None else band.high


def _ramp_shares(judged: Sequence[Judged]) -> dict[str, RampShares]:
    """Each definition's live shares and base rates averaged over the tie orders, and the band of excesses."""
    out = {}
    for name in judged[0].ramps:
        live = np.vstack([j.ramps[name][0] for j in judged])
        base = np.vstack([j.ramps[name][1] for j in judged])
        excess = Band.of([float(v) for v in (live - base).mean(axis=1)]) if live.size else None
        out[name] = RampShares(live=live.mean(axis=0), base=base.mean(axis=0), excess=excess)
    return out


def summarize(
    key: tuple[str, str, str, int, int, int], judged: Sequence[Judged], writes: float | None
) -> Result:
    """The :class:`Result` of one combination from its judgement under every tie order."""
    policy, variant, form, k, lag, life = key
    if not judged:
        raise ValueError(f"{key}: nothing judged")
    cores = [j.core_regret_values for j in judged if j.core_regret_values is not None]
    return Result(
        policy=policy,
        variant=variant,
        form=form,
        k=k,
        lag=lag,
        life_steps=life,
        regret=Band.of([j.regret_mean for j in judged]),
        regret_p95=Band.of([j.regret_p95 for j in judged]),
        exposure=Band.of([j.exposure for j in judged]),
        changes_per_day=Band.of([j.changes_per_day for j in judged]),
        writes_per_cluster_day=writes,
        per_step=np.mean(np.vstack([j.regret_values for j in judged]), axis=0),
        core_regret=Band.of([float(np.mean(c)) for c in cores]) if cores else None,
        per_step_cores=np.mean(np.vstack(cores), axis=0) if cores else None,
        ramps=_ramp_shares(judged),
    )


def evaluate(
    loads: NDArray[np.float64],
    published: Mapping[tuple[str, str, int], Scores],
    writes: Mapping[str, float],
    *,
    forms: Sequence[Form],
    ks: Sequence[int],
    lives: Sequence[int],
    step_seconds: int,
    orders: int = ORDERS,
    overload_percentile: float = OVERLOAD_PERCENTILE,
    free_cores: NDArray[np.float64] | None = None,
    ramps: Mapping[str, anticipation.Ramp] = anticipation.RAMPS,
) -> list[Result]:
    """Decide and judge every combination under ``orders`` random tie orders.

    Args:
        loads: the judged steps, clusters x steps.
        published: ``(policy, variant, lag) -> scores`` aligned to the judged steps (each judged step's
            decision uses its column; see :meth:`bench.placement_quality.replay.Timeline.aligned`).
        writes: APS writes per cluster-day by ``policy/variant``.
        forms, ks, lives: the Placement forms, numbers of clusters and workload lives (steps) to judge.
        step_seconds: the step, for changes per day.
        orders: how many random tie orders (seeds ``0 .. orders - 1``).
        overload_percentile: each cluster's own threshold for exposure.
        free_cores: idle cores per cluster and judged step; when given, every decision is also
            judged on them (the same picks; regret in cores, the most idle cluster being best).
        ramps: the ramp definitions whose events every decision sequence is measured around (each
            cluster's own percentiles over ``loads``; see :mod:`bench.placement_quality.anticipation`).
    """
    clusters, steps = loads.shape
    thresholds = metrics.percentile_thresholds(loads, overload_percentile)
    tables = {life: LifeTable(loads, life, thresholds) for life in lives}
    # Fewest negative idle cores = most idle: the same table's "lowest is best" arithmetic, in cores.
    never = np.full(clusters, np.inf)
    cores = {} if free_cores is None else {life: LifeTable(-free_cores, life, never) for life in lives}
    events = {name: anticipation.ramp_events(loads, ramp) for name, ramp in ramps.items()}
    judged: dict[tuple[str, str, str, int, int, int], list[Judged]] = {}
    writes_of: dict[tuple[str, str, str, int, int, int], float | None] = {}
    lags = sorted({lag for (_, _, lag) in published} or {0})
    for seed in range(orders):
        order = tie_order(clusters, seed)
        for k in ks:
            # (policy, variant, form), the lags it stands for, its decisions and its writes.
            runs: list[tuple[tuple[str, str, str], Sequence[int], Picks, float | None]] = []
            for baseline in BASELINES:
                # A baseline reads no score, so every lag has the same decisions: judged once.
                picks = decide_baseline(baseline, steps, clusters, k, order, seed)
                runs.append(((baseline, "-", "-"), lags, picks, None))
            for (policy, variant, lag), scores in published.items():
                for form in forms:
                    picks = decide_fast(scores, k, form, order)
                    runs.append(((policy, variant, form), (lag,), picks, writes.get(f"{policy}/{variant}")))
            for (policy, variant, shown), at_lags, picks, w in runs:
                for life, table in tables.items():
                    outcome = dataclasses.replace(
                        table.judge(picks, step_seconds),
                        ramps={
                            name: anticipation.shares(picks, found, life, clusters)
                            for name, found in events.items()
                        },
                    )
                    if life in cores:
                        outcome = dataclasses.replace(
                            outcome, core_regret_values=cores[life].judge(picks, step_seconds).regret_values
                        )
                    for lag in at_lags:
                        key = (policy, variant, shown, k, lag, life)
                        judged.setdefault(key, []).append(outcome)
                        writes_of[key] = w
    return [summarize(key, runs_, writes_of[key]) for key, runs_ in judged.items()]


__all__ = [
    "BASELINES",
    "ORDERS",
    "Judged",
    "LifeTable",
    "Picks",
    "RampShares",
    "Result",
    "as_decisions",
    "decide_baseline",
    "decide_fast",
    "decide_next",
    "evaluate",
    "summarize",
    "tie_names",
    "tie_order",
]
