"""The placement-quality benchmark's scoring rules (bench/placement_quality/metrics.py), its trace loader."""

from __future__ import annotations

import itertools
import random
from typing import Literal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.placement_quality.metrics import (
    Crossing,
    Decision,
    changes_per_day,
    decision_changes,
    lead_times,
    lifetime_regret,
    overload_exposure,
    percentile_thresholds,
)

# --- lifetime_regret ---------------------------------------------------------------------------------


def test_regret_is_the_life_mean_above_the_best_life_mean() -> None:
    loads = [[1, 2, 3, 4], [4, 3, 2, 1]]
    # Life means over [t, t+2): cluster 0 -> 1.5, 2.5, 3.5; cluster 1 -> 3.5, 2.5, 1.5.  Step 3 does not fit.
    regret = lifetime_regret(loads, [1, 0, 0, 0], life_steps=2)
    assert regret.values == (2.0, 0.0, 2.0)  # step 1 is a tie: exactly 0
    assert regret.placements == 3
    assert regret.mean == pytest.approx(4 / 3)


def test_regret_p95_interpolates_linearly() -> None:
    loads = [[0, 0, 0, 8], [0, 0, 0, 0]]
    regret = lifetime_regret(loads, [0, 0, 0, 0], life_steps=1)
    assert regret.values == (0.0, 0.0, 0.0, 8.0)
    assert regret.mean == 2.0
    assert regret.p95 == pytest.approx(6.8)  # rank 0.95 * 3 = 2.85 between 0 and 8


def test_regret_of_a_pick_k_is_per_replica_against_the_best_k_set() -> None:
    loads = [[1], [2], [6]]
    assert lifetime_regret(loads, [(2, 0)], life_steps=1).values == (2.0,)  # (1+6)/2 - (1+2)/2
    assert lifetime_regret(loads, [(1, 0)], life_steps=1).values == (0.0,)
    assert lifetime_regret(loads, [(0, 1, 2)], life_steps=1).values == (0.0,)  # all clusters: no choice


def test_regret_skips_empty_decisions_and_lives_longer_than_the_series() -> None:
    loads = [[1, 2, 3], [3, 2, 1]]
    assert lifetime_regret(loads, [(), 1, ()], life_steps=1).values == (0.0,)
    for life in (3, 4):
        nothing = lifetime_regret(loads, [0, 0, 0], life_steps=life)
        assert nothing.placements == (1 if life == 3 else 0)
    too_long = lifetime_regret(loads, [0, 0, 0], life_steps=4)
    assert (too_long.mean, too_long.p95, too_long.values) == (None, None, ())
    assert lifetime_regret(loads, [(), (), ()], life_steps=1).mean is None


def test_regret_ties_between_identical_clusters_are_exactly_zero() -> None:
    loads: list[list[float]] = [[0.1, 0.7, 0.2, 0.3], [0.1, 0.7, 0.2, 0.3], [9, 9, 9, 9]]
    assert lifetime_regret(loads, [0, 1, 0, 1], life_steps=3).values == (0.0, 0.0)


@pytest.mark.parametrize(
    ("decisions", "life"),
    [([0, 0], 1), ([0, 0, 2], 1), ([(0, 0), 0, 0], 1), ([-1, 0, 0], 1), ([0, 0, 0], 0)],
    ids=["too-few", "out-of-range", "duplicate", "negative", "zero-life"],
)
def test_regret_rejects_malformed_input(decisions: list[Decision], life: int) -> None:
    with pytest.raises(ValueError):
        lifetime_regret([[1, 2, 3], [3, 2, 1]], decisions, life_steps=life)


loads_strategy = st.integers(1, 4).flatmap(
    lambda clusters: st.integers(1, 12).flatmap(
        lambda steps: st.lists(
            st.lists(st.floats(0, 100, allow_nan=False), min_size=steps, max_size=steps),
            min_size=clusters,
            max_size=clusters,
        )
    )
)


@given(loads_strategy, st.integers(1, 14), st.randoms(use_true_random=False))
def test_regret_is_never_negative_and_zero_for_the_hindsight_oracle(
    loads: list[list[float]], life: int, rnd: random.Random
) -> None:
    clusters, steps = len(loads), len(loads[0])
    picks: list[Decision] = [
        tuple(rnd.sample(range(clusters), rnd.randint(1, clusters)))
        if rnd.random() < 0.5
        else rnd.randrange(clusters)
        for _ in range(steps)
    ]
    regret = lifetime_regret(loads, picks, life_steps=life)
    assert all(v >= 0.0 for v in regret.values)
    assert regret.placements == max(steps - life + 1, 0)
    # The oracle picks, at every step, a cluster with the lowest mean over the coming life.
    arr = np.asarray(loads)
    oracle: list[Decision] = [
        int(np.argmin(arr[:, t : t + life].mean(axis=1))) if t + life <= steps else 0 for t in range(steps)
    ]
    assert all(v == 0.0 for v in lifetime_regret(loads, oracle, life_steps=life).values)


# --- overload_exposure and percentile_thresholds ------------------------------------------------------


def test_exposure_counts_overloaded_workload_steps() -> None:
    loads = [[10, 95, 95, 10], [50, 50, 50, 50]]
    # Life 2 scores steps 0..2: cluster 0 over [0,2) has one hot step, 1 over [1,3) none, 0 over [2,4) one.
    exposure = overload_exposure(loads, [0, 1, 0, 0], life_steps=2, thresholds=[90, 90])
    assert (exposure.overloaded_steps, exposure.workload_steps) == (2, 6)
    assert exposure.share == pytest.approx(1 / 3)


def test_exposure_is_strictly_above_the_threshold_and_per_cluster() -> None:
    loads = [[10, 95, 95, 10], [50, 50, 50, 50]]
    assert overload_exposure(loads, [0, 0, 0, 0], 2, thresholds=[95, 0]).share == 0.0
    assert overload_exposure(loads, [1, 1, 1, 1], 2, thresholds=[95, 49.9]).share == 1.0


def test_exposure_of_a_pick_k_counts_every_replica() -> None:
    loads = [[95, 95], [50, 50]]
    exposure = overload_exposure(loads, [(0, 1), ()], life_steps=1, thresholds=[90, 90])
    assert (exposure.overloaded_steps, exposure.workload_steps, exposure.share) == (1, 2, 0.5)


def test_exposure_without_workload_has_no_share() -> None:
    loads = [[95, 95], [50, 50]]
    assert overload_exposure(loads, [0, 0], life_steps=3, thresholds=[90, 90]).share is None
    assert overload_exposure(loads, [(), ()], life_steps=1, thresholds=[90, 90]).share is None
    with pytest.raises(ValueError):
        overload_exposure(loads, [0, 0], life_steps=1, thresholds=[90])


def test_thresholds_are_each_clusters_own_percentile() -> None:
    loads = [[0, 10, 20, 30, 40], [5, 5, 5, 5, 5]]
    assert percentile_thresholds(loads).tolist() == pytest.approx([36.0, 5.0])  # 30 + 0.6 * 10
    assert percentile_thresholds(loads, q=50).tolist() == [20.0, 5.0]
    with pytest.raises(ValueError):
        percentile_thresholds(loads, q=101)


@given(loads_strategy, st.integers(1, 6), st.data())
def test_exposure_is_a_share_and_nothing_is_above_its_own_maximum(
    loads: list[list[float]], life: int, data: st.DataObject
) -> None:
    clusters, steps = len(loads), len(loads[0])
    picks = data.draw(st.lists(st.integers(0, clusters - 1), min_size=steps, max_size=steps))
    q = data.draw(st.floats(0, 100))
    share = overload_exposure(loads, picks, life, percentile_thresholds(loads, q)).share
    assert share is None or 0.0 <= share <= 1.0
    assert (share is None) == (life > steps)
    assert overload_exposure(loads, picks, life, percentile_thresholds(loads, 100)).overloaded_steps == 0


# --- lead_times ---------------------------------------------------------------------------------------

RISING = [[0, 0, 0, 0, 10, 10], [0, 0, 0, 0, 0, 0]]  # cluster 0 crosses 5 at step 4
THR = [5, 5]


@pytest.mark.parametrize(
    ("decisions", "status", "lead"),
    [
        ([0, 0, 1, 1, 1, 1], "left", 2),  # last held at 1, off it from 2: two steps early
        ([0, 0, 0, 0, 1, 1], "left", 0),  # off it at the crossing itself
        ([0, 0, 0, 0, 0, 1], "left", -1),  # one step late
        ([(0, 1), (0, 1), (0, 1), (1,), (1,), (1,)], "left", 1),  # pick-k: off when no tuple holds it
        ([0, 0, 0, 0, 0, 0], "stayed", None),
        ([1, 1, 1, 1, 1, 1], "not_held", None),  # never chosen
        ([1, 1, 1, 1, 0, 0], "not_held", None),  # chosen only from the crossing on
    ],
)
def test_lead_time_of_one_crossing(
    decisions: list[Decision], status: Literal["left", "stayed", "not_held"], lead: int | None
) -> None:
    assert lead_times(RISING, decisions, THR) == (Crossing(cluster=0, step=4, status=status, lead=lead),)


def test_lead_time_looks_back_only_over_the_window() -> None:
    decisions: list[Decision] = [0, 0, 1, 1, 1, 1]  # last held at step 1
    assert lead_times(RISING, decisions, THR, window=2)[0].status == "not_held"  # looks at steps 2..3
    assert lead_times(RISING, decisions, THR, window=3)[0].lead == 2  # looks at 1..3: window - 1
    with pytest.raises(ValueError):
        lead_times(RISING, decisions, THR, window=0)


def test_crossings_are_upward_strictly_above_and_not_at_step_zero() -> None:
    loads = [[10, 0, 10, 10, 0, 10], [5, 6, 6, 4, 5, 5]]
    crossings = lead_times(loads, [1] * 6, [5, 5])
    # Cluster 0 starts above (no crossing), crosses at 2 and 5; cluster 1 only at 1 (5 is not above 5).
    assert [(c.cluster, c.step) for c in crossings] == [(1, 1), (0, 2), (0, 5)]
    assert [c.status for c in crossings] == ["stayed", "not_held", "not_held"]


@given(loads_strategy, st.integers(1, 5), st.data())
def test_lead_times_agree_with_the_decisions(
    loads: list[list[float]], window: int, data: st.DataObject
) -> None:
    clusters, steps = len(loads), len(loads[0])
    picks = data.draw(st.lists(st.integers(0, clusters - 1), min_size=steps, max_size=steps))
    thr = percentile_thresholds(loads, 50)
    crossings = lead_times(loads, picks, thr, window=window)
    above = np.asarray(loads) > thr[:, None]
    assert len(crossings) == int(np.sum(above[:, 1:] & ~above[:, :-1]))
    for c in crossings:
        held = [s for s in range(max(0, c.step - window), c.step) if picks[s] == c.cluster]
        assert (c.status == "not_held") == (not held)
        if c.status == "left":
            assert c.lead is not None
            leave = c.step - c.lead
            assert picks[leave] != c.cluster and picks[leave - 1] == c.cluster
            assert leave - 1 >= held[-1] and c.lead <= window - 1
        if c.status == "stayed":
            assert all(p == c.cluster for p in picks[held[-1] :])


# --- decision_changes and changes_per_day -------------------------------------------------------------


def test_changes_compare_decisions_as_sets() -> None:
    assert decision_changes([0, 0, 1, 1, 0]) == 2
    assert decision_changes([(0, 1), (1, 0), (1,), (), ()]) == 2  # reordering is no change; emptying is
    assert decision_changes([1, (1,)]) == 0
    assert decision_changes([]) == 0
    assert decision_changes([3]) == 0


def test_changes_per_day_scale_by_the_covered_time() -> None:
    day = [0, 1, 0, 1] + [1] * 284  # 288 decisions at 300 s: one day, three changes
    assert changes_per_day(day, 300) == 3.0
    assert changes_per_day(day[:144], 300) == 6.0
    with pytest.raises(ValueError):
        changes_per_day([], 300)


@given(st.lists(st.lists(st.integers(0, 3), max_size=3, unique=True), max_size=20))
def test_changes_count_the_boundaries_between_runs_of_equal_sets(seq: list[list[int]]) -> None:
    runs = [key for key, _ in itertools.groupby(frozenset(d) for d in seq)]
    decisions: list[Decision] = [tuple(d) for d in seq]
    assert decision_changes(decisions) == max(len(runs) - 1, 0)
    assert decision_changes([tuple(reversed(d)) for d in seq]) == decision_changes(decisions)


# --- traces -------------------------------------------------------------------------------------------


def test_the_traces_cpu_columns_are_read_as_recorded() -> None:
    from bench.placement_quality.traces import STEP_SECONDS, cpu_percent, read_trace

    alibaba = cpu_percent("alibaba2018", read_trace("alibaba2018"))
    azure = cpu_percent("azure_v2", read_trace("azure_v2"))
    assert STEP_SECONDS == 300 and len(alibaba) == 2243 and len(azure) == 8640
    assert alibaba[0] == pytest.approx(16.126976521322472)  # first row of the Alibaba 300 s file
    assert np.all((alibaba >= 0) & (alibaba <= 100))
    assert azure.max() == 100.0  # Azure: percent of its own 30-day peak
    assert np.array_equal(cpu_percent("alibaba2018", read_trace("alibaba2018")), alibaba)  # deterministic
