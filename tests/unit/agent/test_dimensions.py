from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.items.dimensions import build_items, item_name_problem, render_name
from agent.items.maths import score_value
from agent.ports import ScoreItem
from dynamic_scoring.wire import ScoreNormalization, ScoreResult

pytestmark = pytest.mark.unit


def r(score: float, **metric: str) -> ScoreResult:
    return ScoreResult(metric=metric, score=score)


def test_render_uses_upstream_placeholders() -> None:
    metric = {"node": "w1", "namespace": "ns", "pod": "p", "app": "app01", "device": "3g.48gb"}
    assert render_name("${node};${namespace};${pod}", cluster="c", score_name="s", metric=metric) == "w1;ns;p"
    assert render_name("${app};${device}", cluster="c", score_name="s", metric=metric) == "app01;3g.48gb"
    assert (
        render_name("${cluster}/${scoreName}/${meta}", cluster="c", score_name="s", metric=metric) == "c/s/"
    )
    assert render_name("${unknown}-${pod}", cluster="c", score_name="s", metric=metric) == "${unknown}-p"
    assert render_name("", cluster="c", score_name="s", metric=metric) == "s"


def test_label_values_are_not_expanded_again() -> None:
    assert (
        render_name("${node}:${pod}", cluster="c", score_name="s", metric={"node": "${pod}", "pod": "p"})
        == "${pod}:p"
    )


def test_last_duplicate_wins_and_items_are_sorted() -> None:
    results = [r(10, pod="b"), r(20, pod="a"), r(30, pod="b"), r(5, node="x")]
    out = build_items(results, fmt="${pod}", cluster="c", score_name="s")
    assert out.items == [ScoreItem("a", 20), ScoreItem("b", 30)]
    assert out.duplicates == 1 and out.skipped_empty == 1


def test_invalid_names_are_rejected_with_a_reason() -> None:
    results = [r(1, pod="ok"), r(2, pod="bad\nname"), r(3, pod="x" * 254)]
    out = build_items(results, fmt="${pod}", cluster="c", score_name="s")
    assert out.items == [ScoreItem("ok", 1)]
    assert [(x.index, x.reason) for x in out.rejected] == [
        (1, "contains control or non-printable characters"),
        (2, "longer than 253 characters (254)"),
    ]


def test_a_value_that_is_not_finite_after_normalisation_is_rejected_not_scored() -> None:
    spec = ScoreNormalization(min=0, max=1e-300, target_min=0, target_max=100)
    out = build_items(
        [r(1e300, pod="big"), r(0, pod="zero")], fmt="${pod}", cluster="c", score_name="s", normalization=spec
    )
    assert out.items == [ScoreItem("zero", 0)]
    assert [(x.index, x.reason) for x in out.rejected] == [
        (0, "not a finite number after normalisation (inf)")
    ]


def test_clamping_is_counted() -> None:
    out = build_items(
        [r(250, pod="a"), r(-1000, pod="b"), r(3, pod="c")], fmt="${pod}", cluster="", score_name="s"
    )
    assert out.items == [ScoreItem("a", 100), ScoreItem("b", -100), ScoreItem("c", 3)]
    assert out.clamped == 2


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(-500, 500)), max_size=20))
def test_items_are_unique_sorted_in_range_and_the_last_value_wins(rows: list[tuple[str, float]]) -> None:
    out = build_items([r(score, pod=pod) for pod, score in rows], fmt="${pod}", cluster="c", score_name="s")
    names = [i.name for i in out.items]
    assert names == sorted(set(names))
    assert all(-100 <= i.value <= 100 for i in out.items)
    last = {pod: score for pod, score in rows}
    assert {i.name: i.value for i in out.items} == {pod: score_value(score)[0] for pod, score in last.items()}


@pytest.mark.parametrize("name", ["a;b;c", "ünïcödé", "with space", "x" * 253])
def test_valid_names(name: str) -> None:
    assert item_name_problem(name) is None
