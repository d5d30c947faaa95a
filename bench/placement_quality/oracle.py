"""The hindsight oracle that pays for its moves: the lower bound of regret at a given churn.

Regret is measured against the per-step hindsight best, which itself moves many times a day; a policy
that moves less cannot reach 0, so "regret 2.2 at 5 changes a day" says nothing until it is set against
the best *any* policy could do at 5 changes a day.  :func:`churn_oracle` finds, with the whole future
known, the pick-1 sequence that minimises ``total regret + penalty x changes`` (a Viterbi pass over
clusters); sweeping the penalty (:func:`frontier`) traces the lower convex hull of what is achievable,
which the churn plot draws as a line.  Points between hull vertices may be slightly better than the line
(a Lagrangian sweep finds the hull, not every point), so the frontier is a lower bound only at its
vertices and a close one between them.

Pick k.  A Placement picking k clusters changes its decision when the set changes, whichever of its
clusters moved, so the same pass runs over every k-subset of the clusters (:func:`churn_oracle_sets`):
a change costs one penalty whatever it replaces, so each step costs a minimum and a comparison per
subset, not a pass over pairs.  A subset's regret is its clusters' mean load over the life minus the
best k clusters', per replica, as :class:`bench.placement_quality.experiment.LifeTable` judges a pick-k
decision.  There are ``C(n, k)`` subsets: 165 for 11 clusters at k=3, 24,804 for 54.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.placement_quality.metrics import SECONDS_PER_DAY

MAX_SUBSETS = 50_000
"""The most k-subsets the pick-k oracle walks (54 clusters at k=3 are 24,804): memory is subsets x steps."""

PENALTIES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0, 1e6)
"""Regret points (summed over placements) one decision change costs, from free to never."""


@dataclass(frozen=True)
class OraclePoint:
    """One vertex of the frontier: the oracle at ``penalty`` and what its picks achieve."""

    penalty: float
    changes_per_day: float
    regret: float


def _walk(regret: NDArray[np.float64], penalty: float) -> NDArray[np.int64]:
    """The state at every step minimising summed ``regret[state, t]`` plus ``penalty`` per change."""
    if penalty < 0:
        raise ValueError(f"penalty must not be negative, got {penalty}")
    states, steps = regret.shape
    cost = regret[:, 0].copy()
    came = np.zeros((steps, states), dtype=np.int64)
    stay = np.arange(states)
    for t in range(1, steps):
        best = int(np.argmin(cost))
        move = cost[best] + penalty
        # Staying wins ties, so a free change is only taken when it helps.
        moved = move < cost
        came[t] = np.where(moved, best, stay)
        cost = np.where(moved, move, cost) + regret[:, t]
    picks = np.zeros(steps, dtype=np.int64)
    picks[-1] = int(np.argmin(cost))
    for t in range(steps - 1, 0, -1):
        picks[t - 1] = came[t, picks[t]]
    return picks


def _check(means: NDArray[np.float64]) -> None:
    if means.ndim != 2 or means.shape[0] == 0 or means.shape[1] == 0:
        raise ValueError(f"means must be clusters x steps, got shape {means.shape}")


def churn_oracle(means: NDArray[np.float64], penalty: float) -> NDArray[np.int64]:
    """The pick at every step minimising summed regret plus ``penalty`` per change.

    Args:
        means: ``means[c, t]``, cluster ``c``'s mean load over the life of a workload placed at ``t``
            (what :class:`bench.placement_quality.experiment.LifeTable` holds).
        penalty: what one change costs, in regret points; 0 gives the per-step best.
    """
    _check(means)
    return _walk(means - means.min(axis=0), penalty)


def subset_regret(means: NDArray[np.float64], k: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Every k-subset of the clusters (rows of cluster indices) and its per-replica regret at each step."""
    _check(means)
    clusters = means.shape[0]
    if not 1 <= k <= clusters:
        raise ValueError(f"k must be within [1, {clusters}], got {k}")
    if math.comb(clusters, k) > MAX_SUBSETS:
        raise ValueError(
            f"{math.comb(clusters, k)} subsets of {clusters} clusters at k={k}: over {MAX_SUBSETS}"
        )
    subsets = np.asarray(list(itertools.combinations(range(clusters), k)), dtype=np.int64)
    total = np.zeros((len(subsets), means.shape[1]))
    for column in range(k):
        total += means[subsets[:, column]]
    best = np.sort(means, axis=0)[:k].sum(axis=0)
    return subsets, (total - best) / k


def churn_oracle_sets(means: NDArray[np.float64], penalty: float, k: int) -> NDArray[np.int64]:
    """:func:`churn_oracle` for a Placement picking ``k`` clusters: the chosen set at every step
    (steps x k), one change whenever the set differs from the step before."""
    subsets, regret = subset_regret(means, k)
    return subsets[_walk(regret, penalty)]


def frontier(
    means: NDArray[np.float64], step_seconds: int, penalties: Sequence[float] = PENALTIES, k: int = 1
) -> list[OraclePoint]:
    """The oracle's (changes per day, mean regret) at every penalty, fewest changes last, picking ``k``.

    Changes per day count over every judged decision, as for the policies; the mean regret is over the
    placements whose life fits (the columns of ``means``), per replica.
    """
    _, regret = subset_regret(means, k)
    steps = np.arange(means.shape[1])
    points = []
    for penalty in penalties:
        states = _walk(regret, penalty)
        # Distinct subsets are distinct states, so a change of state is a change of the set.
        changes = int(np.count_nonzero(np.diff(states)))
        points.append(
            OraclePoint(
                penalty=float(penalty),
                changes_per_day=changes * SECONDS_PER_DAY / (means.shape[1] * step_seconds),
                regret=float(regret[states, steps].mean()),
            )
        )
    return points


__all__ = [
    "MAX_SUBSETS",
    "PENALTIES",
    "OraclePoint",
    "churn_oracle",
    "churn_oracle_sets",
    "frontier",
    "subset_regret",
]
