"""The placement-quality core: fast ranking and judge agree with the model and metrics; baselines; bands."""

from __future__ import annotations

import numpy as np
import pytest

from bench.placement_quality import metrics
from bench.placement_quality.experiment import (
    LifeTable,
    as_decisions,
    decide_baseline,
    decide_fast,
    evaluate,
    tie_names,
    tie_order,
)
from bench.placement_quality.ranking import FORMS, Form
from bench.placement_quality.replay import decide

NAMES = tuple(f"cluster-{c}" for c in "abcdefg")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("k", [1, 3, 9])
def test_fast_ranking_decides_what_the_placement_model_decides(seed: int, form: Form, k: int) -> None:
    rng = np.random.default_rng(seed)
    # Few distinct values, so ties at the top are common and the tie order matters.
    scores = rng.integers(40, 46, size=(len(NAMES), 120)).astype(np.int64)
    scores[:, 60:] = rng.integers(0, 101, size=(len(NAMES), 60))
    order = tie_order(len(NAMES), seed)
    model = decide(scores, tie_names(NAMES, order), k, form, "quality", "score")
    assert as_decisions(decide_fast(scores, k, form, order)) == model


def test_tie_order_sorts_names_and_changes_who_wins_a_tie() -> None:
    scores = np.full((len(NAMES), 4), 50, dtype=np.int64)
    winners = {int(decide_fast(scores, 1, "exact", tie_order(len(NAMES), s))[0, 0]) for s in range(20)}
    assert len(winners) > 3  # a tie is not always won by the same cluster
    order = tie_order(len(NAMES), 3)
    names = tie_names(NAMES, order)
    assert [names.index(n) for n in sorted(names)] == np.argsort(order).tolist()


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("life", [1, 5, 12])
def test_life_table_judges_as_the_metrics_do(k: int, life: int) -> None:
    rng = np.random.default_rng(k * 100 + life)
    loads = rng.uniform(0, 100, size=(5, 80))
    thresholds = metrics.percentile_thresholds(loads, 90)
    picks = np.vstack([rng.choice(5, size=k, replace=False) for _ in range(80)]).astype(np.int64)
    decisions = as_decisions(picks)
    judged = LifeTable(loads, life, thresholds).judge(picks, 300)
    regret = metrics.lifetime_regret(loads, decisions, life)
    assert judged.regret_values.tolist() == pytest.approx(list(regret.values), abs=1e-9)
    assert (judged.regret_mean, judged.regret_p95) == pytest.approx((regret.mean, regret.p95), abs=1e-9)
    assert judged.exposure == metrics.overload_exposure(loads, decisions, life, thresholds).share
    assert judged.changes_per_day == metrics.changes_per_day(decisions, 300)


def test_a_life_longer_than_the_judged_steps_is_refused() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        LifeTable(np.zeros((2, 5)), 6, np.zeros(2))


def test_baselines() -> None:
    order = np.array([2, 0, 1], dtype=np.int64)  # names sort: cluster 1, cluster 2, cluster 0
    assert decide_baseline("static", 3, 3, 1, order, 0).tolist() == [[1]] * 3
    assert decide_baseline("round-robin", 4, 3, 1, order, 0).tolist() == [[1], [2], [0], [1]]
    assert decide_baseline("round-robin", 2, 3, 2, order, 0).tolist() == [[1, 2], [0, 1]]
    drawn = decide_baseline("random", 3000, 3, 2, order, 7)
    assert all(len(set(row)) == 2 for row in drawn.tolist())
    counts = np.bincount(drawn.ravel(), minlength=3) / drawn.size
    assert counts == pytest.approx([1 / 3] * 3, abs=0.02)
    assert np.array_equal(drawn, decide_baseline("random", 3000, 3, 2, order, 7))
    with pytest.raises(ValueError, match="unknown baseline"):
        decide_baseline("oracle", 3, 3, 1, order, 0)


def test_evaluate_reports_bands_over_tie_orders_and_every_combination() -> None:
    steps = 60
    loads = np.vstack([np.full(steps, 30.0), np.full(steps, 70.0), np.full(steps, 50.0)])
    # A score that always knows the best cluster (0), and one that ties everywhere.
    good = np.vstack([np.full(steps, 70), np.full(steps, 30), np.full(steps, 50)]).astype(np.int64)
    flat = np.full((3, steps), 50, dtype=np.int64)
    published = {("good", "raw", 0): good, ("flat", "raw", 0): flat}
    results = evaluate(
        loads, published, {"good/raw": 1.0}, forms=["exact"], ks=[1], lives=[4], step_seconds=300, orders=12
    )
    by = {r.label: r for r in results}
    assert set(by) == {"static", "random", "round-robin", "good/raw", "flat/raw"}
    assert by["good/raw"].regret.high == 0.0
    assert by["good/raw"].writes_per_cluster_day == 1.0
    # The flat score's result depends only on who wins its ties: 0, 20 or 40 points.
    flat_band = by["flat/raw"].regret
    assert (flat_band.low, flat_band.high) == (0.0, 40.0)
    assert by["flat/raw"].per_step.shape == (steps - 4 + 1,)
    assert by["round-robin"].regret.median == pytest.approx(20.0, abs=0.5)


def test_evaluate_judges_the_same_picks_on_idle_cores_when_given() -> None:
    steps = 40
    # Cluster 0 is the least utilised but small; cluster 1 is busier but has far more idle cores.
    loads = np.vstack([np.full(steps, 20.0), np.full(steps, 60.0)])
    free = np.vstack([np.full(steps, 80.0 * 0.8), np.full(steps, 1000.0 * 0.4)])  # 64 and 400 cores
    by_load = np.vstack([np.full(steps, 80), np.full(steps, 40)]).astype(np.int64)
    published = {("headroom", "raw", 0): by_load}
    results = evaluate(
        loads, published, {}, forms=["exact"], ks=[1], lives=[3], step_seconds=300, orders=2, free_cores=free
    )
    by = {r.label: r for r in results}
    assert by["headroom/raw"].regret.median == 0.0  # the least utilised cluster, every step
    assert by["headroom/raw"].core_regret is not None
    assert by["headroom/raw"].core_regret.median == pytest.approx(
        400.0 - 64.0
    )  # ... with 336 fewer idle cores
    assert by["headroom/raw"].per_step_cores is not None and by["headroom/raw"].per_step_cores.shape == (38,)
    row = by["headroom/raw"].row()
    assert (row["core_regret_mean"], row["core_regret_mean_low"]) == pytest.approx((336.0, 336.0))
    # The judge of idle cores is the regret of the negated idle cores, as the metrics compute it.
    rng = np.random.default_rng(3)
    free = rng.uniform(0, 500, size=(4, 50))
    picks = rng.integers(0, 4, size=(50, 1)).astype(np.int64)
    again = evaluate(
        rng.uniform(0, 100, size=(4, 50)),
        {("p", "raw", 0): picks.T.repeat(4, axis=0) * 0 + np.arange(4)[:, None]},
        {},
        forms=["exact"],
        ks=[1],
        lives=[5],
        step_seconds=300,
        orders=1,
        free_cores=free,
    )
    static = next(r for r in again if r.label == "static")
    chosen = decide_baseline("static", 50, 4, 1, tie_order(4, 0), 0)
    expected = metrics.lifetime_regret(-free, as_decisions(chosen), 5)
    assert static.core_regret is not None
    assert static.core_regret.median == pytest.approx(expected.mean)
    without = evaluate(loads, published, {}, forms=["exact"], ks=[1], lives=[3], step_seconds=300, orders=1)
    assert all(r.core_regret is None and "core_regret_mean" not in r.row() for r in without)
