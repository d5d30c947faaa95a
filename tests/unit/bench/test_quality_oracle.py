"""The churn-constrained oracle: exact on small cases; free moves follow the best, costly ones stay."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.quality.oracle import churn_oracle, frontier


def _objective(means: np.ndarray, picks: tuple[int, ...], penalty: float) -> float:
    regret = means - means.min(axis=0)
    changes = sum(1 for a, b in itertools.pairwise(picks) if a != b)
    return float(sum(regret[c, t] for t, c in enumerate(picks))) + penalty * changes


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("penalty", [0.0, 3.0, 12.0])
def test_oracle_is_the_best_sequence_by_brute_force(seed: int, penalty: float) -> None:
    means = np.random.default_rng(seed).uniform(0, 20, size=(3, 7))
    best = min(_objective(means, p, penalty) for p in itertools.product(range(3), repeat=7))
    picks = tuple(int(c) for c in churn_oracle(means, penalty))
    assert _objective(means, picks, penalty) == pytest.approx(best)


def test_free_moves_follow_the_best_and_costly_ones_stay_on_the_best_fixed_cluster() -> None:
    means = np.array([[1.0, 9.0, 1.0, 9.0], [5.0, 5.0, 5.0, 5.1], [9.0, 1.0, 9.0, 1.0]])
    assert churn_oracle(means, 0.0).tolist() == [0, 2, 0, 2]
    assert churn_oracle(means, 1e6).tolist() == [0, 0, 0, 0]  # 20 in all against cluster 1's 20.1
    points = frontier(means, 300, [0.0, 1e6])
    assert points[0].regret == 0.0 and points[0].changes_per_day == pytest.approx(3 * 288 / 4)
    assert points[1].changes_per_day == 0.0 and points[1].regret == pytest.approx(16 / 4)


def test_oracle_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="clusters x steps"):
        churn_oracle(np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="negative"):
        churn_oracle(np.zeros((2, 2)), -1.0)
