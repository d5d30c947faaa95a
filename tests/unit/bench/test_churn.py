"""The placement-stability benchmark's counting rules (bench/placement_stability/churn.py)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from bench.placement_stability.churn import (
    Sample,
    decision_changes,
    per_hour,
    published_values,
    reaction,
    spread,
    writes,
)

C1, C2 = ("cluster1",), ("cluster2",)


def decided(*seq: tuple[str, ...]) -> list[Sample]:
    return [Sample(t=float(i), decisions={"p": d}) for i, d in enumerate(seq)]


def test_the_first_decision_is_no_change_and_an_empty_read_is_not_two() -> None:
    samples = decided((), C1, C1, (), C1, C2, C2, (), C1)
    assert decision_changes(samples, "p") == [5.0, 8.0]
    assert decision_changes(samples, "other") == []


@given(st.lists(st.sampled_from([(), C1, C2]), max_size=40))
def test_changes_are_the_boundaries_between_runs_of_non_empty_decisions(seq: list[tuple[str, ...]]) -> None:
    runs = [key for key, _ in itertools.groupby(d for d in seq if d)]
    assert len(decision_changes(decided(*seq), "p")) == max(len(runs) - 1, 0)


def test_reaction_counts_from_the_onset_to_the_first_target_decision() -> None:
    samples = decided(C2, C1, C1, C1, C2, C2)
    assert reaction(samples, "p", C2, onset=2.0) == 2.0  # t=0's C2 is before the onset
    assert reaction(samples, "p", ("cluster3",), onset=0.0) is None


def test_a_write_is_a_new_resource_version_per_object() -> None:
    samples = [
        Sample(0, versions={("a", "c1"): "1", ("a", "c2"): "7", ("b", "c1"): "3"}),
        Sample(1, versions={("a", "c1"): "1", ("a", "c2"): "8", ("b", "c1"): "4"}),
        Sample(2, versions={("a", "c1"): "2", ("a", "c2"): "8", ("b", "c1"): "4"}),
        Sample(3, versions={("a", "c2"): "9"}),  # c1 missing from one read: not a write
        Sample(4, versions={("a", "c1"): "2", ("a", "c2"): "9"}),
    ]
    assert writes(samples, "a") == 3
    assert writes(samples, "b") == 1


def test_published_values_are_read_once_per_write() -> None:
    key = ("a", "c1")
    samples = [
        Sample(0, scores={key: 50}, versions={key: "1"}),
        Sample(1, scores={key: 50}, versions={key: "1"}),
        Sample(2, scores={key: 54}, versions={key: "2"}),
        Sample(3, scores={}, versions={}),
        Sample(4, scores={key: 46}, versions={key: "3"}),
    ]
    assert published_values(samples, key) == [50, 54, 46]
    assert round(spread(samples, key), 3) == 3.266
    assert spread(samples[:1], key) == 0.0


def test_per_hour_scales_a_compressed_run_to_production_time() -> None:
    assert per_hour(18, 180) == 360  # 18 changes in 180 s, as run
    assert per_hour(60, 600, compression=6) == 60  # a 600 s run at 6x is one production hour
