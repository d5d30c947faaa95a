"""The hindsight oracle that pays for its moves: the lower bound of regret at a given churn.

Regret is measured against the per-step hindsight best, which itself moves many times a day; a policy
that moves less cannot reach 0, so "regret 2.2 at 5 changes a day" says nothing until it is set against
the best *any* policy could do at 5 changes a day.  :func:`churn_oracle` finds, with the whole future
known, the pick-1 sequence that minimises ``total regret + penalty x changes`` (a Viterbi pass over
clusters); sweeping the penalty (:func:`frontier`) traces the lower convex hull of what is achievable,
which the churn plot draws as a line.  Points between hull vertices may be slightly better than the line
(a Lagrangian sweep finds the hull, not every point), so the frontier is a lower bound only at its
vertices and a close one between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.quality.metrics import SECONDS_PER_DAY

PENALTIES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0, 1e6)
"""Regret points (summed over placements) one decision change costs, from free to never."""


@dataclass(frozen=True)
class OraclePoint:
    """One vertex of the frontier: the oracle at ``penalty`` and what its picks achieve."""

    penalty: float
    changes_per_day: float
    regret: float


def churn_oracle(means: NDArray[np.float64], penalty: float) -> NDArray[np.int64]:
    """The pick at every step minimising summed regret plus ``penalty`` per change.

    Args:
        means: ``means[c, t]``, cluster ``c``'s mean load over the life of a workload placed at ``t``
            (what :class:`bench.quality.experiment.LifeTable` holds).
        penalty: what one change costs, in regret points; 0 gives the per-step best.
    """
    if means.ndim != 2 or means.shape[0] == 0 or means.shape[1] == 0:
        raise ValueError(f"means must be clusters x steps, got shape {means.shape}")
    if penalty < 0:
        raise ValueError(f"penalty must not be negative, got {penalty}")
    regret = means - means.min(axis=0)
    clusters, steps = regret.shape
    cost = regret[:, 0].copy()
    came = np.zeros((steps, clusters), dtype=np.int64)
    stay = np.arange(clusters)
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


def frontier(
    means: NDArray[np.float64], step_seconds: int, penalties: Sequence[float] = PENALTIES
) -> list[OraclePoint]:
    """The oracle's (changes per day, mean regret) at every penalty, fewest changes last.

    Changes per day count over every judged decision, as for the policies; the mean regret is over the
    placements whose life fits (the columns of ``means``).
    """
    regret = means - means.min(axis=0)
    points = []
    for penalty in penalties:
        picks = churn_oracle(means, penalty)
        changes = int(np.count_nonzero(np.diff(picks)))
        points.append(
            OraclePoint(
                penalty=float(penalty),
                changes_per_day=changes * SECONDS_PER_DAY / (means.shape[1] * step_seconds),
                regret=float(regret[picks, np.arange(means.shape[1])].mean()),
            )
        )
    return points


__all__ = ["PENALTIES", "OraclePoint", "churn_oracle", "frontier"]
