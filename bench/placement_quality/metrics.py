"""How good a sequence of placement decisions was, judged in hindsight against the clusters' real load.

A benchmark replays utilization traces (``loads[cluster][step]``) and asks a placement policy, at every
step, which cluster(s) a new workload should go to (``decisions[step]``).  These functions score those
decisions; they are pure (no I/O, inputs are not modified) so that the same rules judge every policy.

Conventions shared by all functions:

- ``loads`` is 2-D, clusters by steps, finite floats (utilization in percent, but any unit works).
- ``decisions`` has one entry per step: a cluster index (pick 1) or a tuple of distinct indices (pick k,
  one workload replica per picked cluster).  An empty tuple means nothing was placed at that step.
  Entries may mix both forms; the order inside a tuple never matters.
- A workload placed at step ``t`` lives ``life_steps`` steps, ``[t, t + life_steps)``.  Only steps whose
  whole life fits in the series are scored (``t <= steps - life_steps``), so every placement is judged
  over the same length of time; with a life longer than the series nothing is scored.
- A cluster is *overloaded* at a step when its load is strictly above its threshold.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import ArrayLike, NDArray

Decision = int | tuple[int, ...]
"""One step's choice: a cluster index, or a tuple of distinct cluster indices (pick k)."""

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class Regret:
    """Lifetime regret of the scored placements (see :func:`lifetime_regret`).

    ``mean`` and ``p95`` are None when nothing was scored (no step's life fits, or every decision empty).
    """

    placements: int
    mean: float | None
    p95: float | None
    values: tuple[float, ...]  # one per scored step, in step order


@dataclass(frozen=True)
class Exposure:
    """Workload-time on overloaded clusters (see :func:`overload_exposure`); ``share`` None if no workload."""

    overloaded_steps: int
    workload_steps: int
    share: float | None


@dataclass(frozen=True)
class Crossing:
    """One upward threshold crossing and how the decisions had treated that cluster (see :func:`lead_times`).

    ``status`` is ``"left"`` (``lead`` is set), ``"stayed"`` (held in the window and never left before the
    series ended) or ``"not_held"`` (not picked in the window before the crossing).
    """

    cluster: int
    step: int  # the first step above the threshold
    status: Literal["left", "stayed", "not_held"]
    lead: int | None


def _as_loads(loads: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(loads, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(
            f"loads must be 2-D [cluster][step] with at least one cluster, got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("loads must be finite")
    return arr


def _as_picks(decisions: Sequence[Decision], clusters: int | None = None) -> list[tuple[int, ...]]:
    """Every decision as a tuple of distinct indices, checked against the number of clusters if given."""
    picks: list[tuple[int, ...]] = []
    for step, decision in enumerate(decisions):
        picked = (
            tuple(operator.index(c) for c in decision)
            if isinstance(decision, tuple)
            else (operator.index(decision),)
        )
        if len(set(picked)) != len(picked):
            raise ValueError(f"step {step}: a cluster is picked twice in {picked}")
        if clusters is not None and any(not 0 <= c < clusters for c in picked):
            raise ValueError(f"step {step}: {picked} has an index outside [0, {clusters})")
        picks.append(picked)
    return picks


def _checked(
    loads: ArrayLike, decisions: Sequence[Decision]
) -> tuple[NDArray[np.float64], list[tuple[int, ...]]]:
    arr = _as_loads(loads)
    if len(decisions) != arr.shape[1]:
        raise ValueError(f"{len(decisions)} decisions for {arr.shape[1]} steps: need one per step")
    return arr, _as_picks(decisions, arr.shape[0])


def _as_thresholds(thresholds: ArrayLike, clusters: int) -> NDArray[np.float64]:
    thr = np.asarray(thresholds, dtype=np.float64)
    if thr.shape != (clusters,) or np.any(np.isnan(thr)):
        raise ValueError(f"need one non-NaN threshold per cluster ({clusters}), got shape {thr.shape}")
    return thr


def _check_life(life_steps: int) -> None:
    if life_steps < 1:
        raise ValueError(f"life_steps must be at least 1, got {life_steps}")


def lifetime_regret(loads: ArrayLike, decisions: Sequence[Decision], life_steps: int) -> Regret:
    """How much busier the picked cluster was over the workload's life than the best cluster in hindsight.

    A placement is made once and then lives with the load it gets, so the right yardstick is the load
    over its whole life, not at the instant of the decision: a policy that chases the currently idlest
    cluster is punished when that cluster fills up a few steps later.  For a placement at step ``t``
    on cluster ``c`` the regret is ``mean(loads[c][t:t+life]) - min over c' of mean(loads[c'][t:t+life])``,
    in the unit of ``loads`` (percentage points for utilization).  For a pick of ``k`` clusters it is
    the mean window load of the picked clusters minus the mean of the ``k`` lowest window loads, i.e.
    the per-replica regret against the best ``k``-set.  Regret is never negative and is exactly 0 for a
    pick tied with the best (both sides are sums of the same floats, sorted).

    Returns the mean, the 95th percentile (numpy's default linear interpolation) and every value, over
    the steps ``t <= steps - life_steps`` with a non-empty decision.
    """
    _check_life(life_steps)
    arr, picks = _checked(loads, decisions)
    if life_steps > arr.shape[1]:
        return Regret(placements=0, mean=None, p95=None, values=())
    # means[c, t]: mean load of cluster c over [t, t + life); computed the same way for every window.
    means = sliding_window_view(arr, life_steps, axis=1).mean(axis=-1)
    ranked = np.sort(means, axis=0)
    values: list[float] = []
    for t in range(means.shape[1]):
        picked = picks[t]
        if not picked:
            continue
        chosen = np.sort(means[list(picked), t])
        best = ranked[: len(picked), t]
        # chosen[i] >= best[i] for every i, and rounding is monotonic, so the difference is >= 0.
        values.append(float(chosen.sum() - best.sum()) / len(picked))
    if not values:
        return Regret(placements=0, mean=None, p95=None, values=())
    return Regret(
        placements=len(values),
        mean=float(np.mean(values)),
        p95=float(np.percentile(values, 95)),
        values=tuple(values),
    )


def percentile_thresholds(loads: ArrayLike, q: float = 90.0) -> NDArray[np.float64]:
    """Each cluster's own ``q``-th percentile of load, as its overload threshold.

    Clusters from different traces have different baselines (one data center idles at 30 %, another
    at 75 %), so a single absolute threshold would call one always overloaded and the other never.
    A per-trace percentile marks each cluster's own busiest ``100 - q`` percent of time instead.  It is
    computed over the whole series, i.e. in hindsight, which is right for judging, not for deciding.
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be within [0, 100], got {q}")
    return np.asarray(np.percentile(_as_loads(loads), q, axis=1), dtype=np.float64)


def overload_exposure(
    loads: ArrayLike, decisions: Sequence[Decision], life_steps: int, thresholds: ArrayLike
) -> Exposure:
    """Share of workload-time spent on a cluster whose load is above its threshold.

    Regret measures average load; exposure measures the tail that hurts workloads (throttling, noisy
    neighbours).  Every placement at a scored step ``t`` contributes ``life_steps`` workload-steps per
    picked cluster ``c``, and of those the steps ``s`` in ``[t, t + life)`` with
    ``loads[c][s] > thresholds[c]`` are overloaded.  The share is overloaded over total workload-steps,
    in [0, 1]; None when nothing was placed (every decision empty or no step's life fits).
    """
    _check_life(life_steps)
    arr, picks = _checked(loads, decisions)
    thr = _as_thresholds(thresholds, arr.shape[0])
    if life_steps > arr.shape[1]:
        return Exposure(overloaded_steps=0, workload_steps=0, share=None)
    over = arr > thr[:, None]
    # hot[c, t]: overloaded steps of cluster c within [t, t + life).
    hot = sliding_window_view(over, life_steps, axis=1).sum(axis=-1)
    overloaded = workload = 0
    for t in range(hot.shape[1]):
        for c in picks[t]:
            overloaded += int(hot[c, t])
            workload += life_steps
    return Exposure(
        overloaded_steps=overloaded,
        workload_steps=workload,
        share=overloaded / workload if workload else None,
    )


def lead_times(
    loads: ArrayLike, decisions: Sequence[Decision], thresholds: ArrayLike, *, window: int = 12
) -> tuple[Crossing, ...]:
    """For every upward threshold crossing, whether and how early the decisions had moved off that cluster.

    A scorer that predicts load should steer new placements away from a cluster *before* it crosses
    into overload; one that only measures load can react at the crossing at best.  The lead time tells
    the two apart.  Exact rules:

    - A crossing of cluster ``c`` is a step ``x >= 1`` with ``loads[c][x-1] <= thr[c] < loads[c][x]``.
      A series that starts above its threshold has no crossing at step 0.
    - ``c`` was *held* if some decision in ``[max(0, x - window), x - 1]`` picked it (alone or in a
      pick-k tuple).  If not, the crossing is ``"not_held"`` with no lead: the policy had already kept
      away (or never went there), which says nothing about anticipation.  A cluster picked only at ``x``
      or later also counts as not held; :func:`overload_exposure` is what penalizes moving onto it.
    - Otherwise let ``h`` be the last held step in that window and ``leave`` the first step after ``h``
      whose decision does not pick ``c``.  The crossing is ``"left"`` with ``lead = x - leave``:
      positive when the decisions had moved off ``c`` that many steps before the crossing (at most
      ``window - 1``, as ``h >= x - window``), 0 when the first decision without ``c`` was at ``x``
      itself, negative when they left only after ``x``.  If every decision from ``h`` to the end
      picks ``c``, it is ``"stayed"``.

    ``window`` is in steps (12 is one hour at 300 s).  Crossings are returned by step, then cluster.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    arr, picks = _checked(loads, decisions)
    thr = _as_thresholds(thresholds, arr.shape[0])
    steps = arr.shape[1]
    above = arr > thr[:, None]
    crossings: list[Crossing] = []
    for x in range(1, steps):
        for c in np.flatnonzero(above[:, x] & ~above[:, x - 1]).tolist():
            held = [s for s in range(max(0, x - window), x) if c in picks[s]]
            if not held:
                crossings.append(Crossing(cluster=c, step=x, status="not_held", lead=None))
                continue
            leave = next((s for s in range(held[-1] + 1, steps) if c not in picks[s]), None)
            if leave is None:
                crossings.append(Crossing(cluster=c, step=x, status="stayed", lead=None))
            else:
                crossings.append(Crossing(cluster=c, step=x, status="left", lead=x - leave))
    return tuple(crossings)


def decision_changes(decisions: Sequence[Decision]) -> int:
    """Number of steps whose decision differs from the previous step's (compared as sets of clusters).

    Every change moves where new workloads land, which costs (cold caches, image pulls, operators
    chasing placements), so a policy that flips between near-equal clusters should show it.  The first
    decision is not a change; a step going to or from an empty decision is one.
    """
    picks = [frozenset(p) for p in _as_picks(decisions)]
    return sum(1 for prev, cur in itertools.pairwise(picks) if cur != prev)


def changes_per_day(decisions: Sequence[Decision], step_seconds: float) -> float:
    """:func:`decision_changes` scaled to one day, each decision standing for ``step_seconds`` of time.

    The series covers ``len(decisions) * step_seconds`` seconds (288 decisions at 300 s are one day),
    so changes per day are the count times ``86400 / (len(decisions) * step_seconds)``.
    """
    if step_seconds <= 0:
        raise ValueError(f"step_seconds must be positive, got {step_seconds}")
    if not decisions:
        raise ValueError("no decisions: changes per day are undefined")
    return decision_changes(decisions) * SECONDS_PER_DAY / (len(decisions) * step_seconds)
