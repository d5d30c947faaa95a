"""Condition helpers: only our condition changes, and its transition time only on a status change."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.kube.conditions import find_condition, is_true, remove_condition, set_condition

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(hours=1)
OTHERS = [
    {
        "type": "Available",
        "status": "True",
        "reason": "LeaseUpdated",
        "message": "m",
        "lastTransitionTime": "x",
    },
    {
        "type": "Progressing",
        "status": "False",
        "reason": "Completed",
        "message": "c",
        "lastTransitionTime": "y",
    },
]


def test_adds_a_condition_after_the_others_untouched() -> None:
    out = set_condition(OTHERS, "ManifestApplied", "True", "AddonManifestApplied", "ok", now=T0)
    assert out[:2] == OTHERS
    assert out[2] == {
        "type": "ManifestApplied",
        "status": "True",
        "reason": "AddonManifestApplied",
        "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    assert OTHERS[0]["status"] == "True" and len(OTHERS) == 2  # input not mutated


def test_same_condition_returns_the_same_list_so_nothing_is_written() -> None:
    once = set_condition(OTHERS, "ManifestApplied", "True", "R", "ok", now=T0)
    assert set_condition(once, "ManifestApplied", "True", "R", "ok", now=T1) is once


def test_reason_change_keeps_the_transition_time_status_change_moves_it() -> None:
    once = set_condition([], "A", "True", "R1", "m", now=T0)
    reason = set_condition(once, "A", "True", "R2", "m2", now=T1)
    assert reason[0]["reason"] == "R2"
    assert reason[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    flipped = set_condition(reason, "A", "False", "R3", "m3", now=T1)
    assert flipped[0]["lastTransitionTime"] == "2026-01-01T01:00:00Z"


def test_replaces_in_place_and_keeps_order() -> None:
    conds = [
        *OTHERS,
        {"type": "X", "status": "True", "reason": "r", "message": "", "lastTransitionTime": "z"},
    ]
    out = set_condition(conds, "Available", "False", "Stopped", "gone", now=T0)
    assert [c["type"] for c in out] == ["Available", "Progressing", "X"]
    assert out[1:] == conds[1:]


def test_observed_generation_is_set_and_a_new_one_is_a_difference() -> None:
    once = set_condition([], "A", "True", "R", "m", observed_generation=3, now=T0)
    assert once[0]["observedGeneration"] == 3
    assert set_condition(once, "A", "True", "R", "m", observed_generation=3) is once
    assert set_condition(once, "A", "True", "R", "m", observed_generation=4)[0]["observedGeneration"] == 4


def test_rejects_a_status_that_is_not_a_kubernetes_condition_status() -> None:
    with pytest.raises(ValueError, match="True, False or Unknown"):
        set_condition([], "A", "true", "R", "m")


def test_remove_and_find_and_is_true() -> None:
    assert remove_condition(OTHERS, "Nope") is OTHERS
    assert [c["type"] for c in remove_condition(OTHERS, "Available")] == ["Progressing"]
    assert find_condition(OTHERS, "Progressing") is OTHERS[1]
    assert find_condition(None, "Progressing") is None
    assert is_true(OTHERS, "Available") and not is_true(OTHERS, "Progressing")


types = st.sampled_from(["A", "B", "C", "D"])
statuses = st.sampled_from(["True", "False", "Unknown"])


@given(st.lists(st.tuples(types, statuses, st.text(max_size=3)), max_size=12), types, statuses)
def test_property_other_types_survive_and_one_entry_per_type(
    steps: list[tuple[str, str, str]], type_: str, status: str
) -> None:
    conds: list[dict[str, Any]] = []
    for t, s, r in steps:
        conds = set_condition(conds, t, s, r or "R", "m", now=T0)
    out = set_condition(conds, type_, status, "Z", "z", now=T1)
    assert [c for c in out if c["type"] != type_] == [c for c in conds if c["type"] != type_]
    assert sorted(c["type"] for c in out) == sorted({c["type"] for c in out})
    found = find_condition(out, type_)
    assert found is not None and found["status"] == status
