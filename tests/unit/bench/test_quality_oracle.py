"""The churn-constrained oracle: exact on small cases; free moves follow the best, costly ones stay."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.placement_quality.oracle import churn_oracle, churn_oracle_sets, frontier


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


def _set_objective(means: np.ndarray, sets: tuple[tuple[int, ...], ...], penalty: float, k: int) -> float:
    best = np.sort(means, axis=0)[:k].sum(axis=0)
    regret = sum((means[list(s), t].sum() - best[t]) / k for t, s in enumerate(sets))
    changes = sum(1 for a, b in itertools.pairwise(sets) if set(a) != set(b))
    return float(regret) + penalty * changes


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("penalty", [0.0, 2.0, 8.0])
def test_the_pick_k_oracle_is_the_best_sequence_of_sets_by_brute_force(seed: int, penalty: float) -> None:
    means = np.random.default_rng(seed).uniform(0, 20, size=(4, 5))
    choices = list(itertools.combinations(range(4), 2))
    best = min(_set_objective(means, p, penalty, 2) for p in itertools.product(choices, repeat=5))
    sets = tuple(tuple(int(c) for c in row) for row in churn_oracle_sets(means, penalty, 2))
    assert _set_objective(means, sets, penalty, 2) == pytest.approx(best)
    # The frontier's point at that penalty is those sets' mean regret per replica.
    point = frontier(means, 300, [penalty], k=2)[0]
    changes = sum(1 for a, b in itertools.pairwise(sets) if a != b)
    assert point.regret == pytest.approx((_set_objective(means, sets, penalty, 2) - penalty * changes) / 5)


def test_pick_1_through_subsets_is_the_pick_1_oracle_and_too_many_subsets_are_refused() -> None:
    means = np.random.default_rng(9).uniform(0, 20, size=(5, 30))
    assert churn_oracle_sets(means, 4.0, 1)[:, 0].tolist() == churn_oracle(means, 4.0).tolist()
    with pytest.raises(ValueError, match="k must be within"):
        churn_oracle_sets(means, 1.0, 6)
    with pytest.raises(ValueError, match="subsets of 200 clusters"):
        frontier(np.zeros((200, 3)), 300, k=3)
