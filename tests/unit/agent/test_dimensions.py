from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.agent.items.dimensions import (
    ItemCollision,
    build_items,
    describe_collisions,
    describe_empty_placeholders,
    item_name_problem,
    render_name,
)
from dynamic_scoring.agent.items.maths import score_value
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.contract.wire import ScoreNormalization, ScoreResult, ScorerSummary


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


def test_results_rendering_one_name_are_a_collision_and_items_are_sorted() -> None:
    results = [r(10, pod="b"), r(20, pod="a"), r(30, pod="b"), r(5, node="x")]
    out = build_items(results, fmt="${pod}", cluster="c", score_name="s")
    assert out.items == [ScoreItem("a", 20), ScoreItem("b", 30)]  # what explain shows; not published
    assert out.collisions == [ItemCollision("b", [0, 2], ["${pod}"])]
    assert out.duplicates == 0 and out.skipped_empty == 1


def test_no_collision_when_every_result_has_a_name_of_its_own() -> None:
    out = build_items(
        [r(1, node="n1"), r(2, node="n2")], fmt="${scoreName}-${node}", cluster="c", score_name="s"
    )
    assert out.collisions == [] and [i.name for i in out.items] == ["s-n1", "s-n2"]


def test_the_collision_message_names_format_labels_and_a_format_that_separates_them() -> None:
    results = [r(1, node="n1"), r(2, node="n2")]
    out = build_items(results, fmt="", cluster="c", score_name="cpu_headroom")
    assert describe_collisions(out.collisions, results) == (
        '2 results render to item "cpu_headroom" under format "${scoreName}": they differ in '
        "node=n1, node=n2 (labels the format does not use); set scoreDimensionFormat, "
        'e.g. "${scoreName}-${node}"'
    )


def test_labels_no_placeholder_can_use_ask_the_scorer_to_aggregate() -> None:
    results = [r(1, pod="p", source="a"), r(2, pod="p", source="b")]
    out = build_items(results, fmt="${pod}", cluster="c", score_name="s")
    text = describe_collisions(out.collisions, results)
    assert text.startswith(
        '2 results render to item "p" under format "${pod}": they differ in source=a, source=b'
    )
    assert "no placeholder can tell them apart (source cannot be part of an item name)" in text


def test_identical_series_and_names_that_render_alike_are_told_apart() -> None:
    twice = [r(1, pod="p"), r(2, pod="p")]
    out = build_items(twice, fmt="${pod}", cluster="c", score_name="s")
    assert "they have the same labels" in describe_collisions(out.collisions, twice)
    glued = [r(1, node="a", pod="bc"), r(2, node="ab", pod="c")]
    out = build_items(glued, fmt="${node}${pod}", cluster="c", score_name="s")
    assert "separators between placeholders" in describe_collisions(out.collisions, glued)


def test_the_collision_message_is_bounded_and_counts_the_rest() -> None:
    results = [r(i, node=f"n{i}" * 50, pod=f"p{i}", app=str(i), meta=str(i)) for i in range(500)]
    results += [r(1, node="x", pod="dup"), r(2, node="y", pod="dup")]
    out = build_items(results, fmt=["${scoreName}", "${pod}"], cluster="c", score_name="s")
    text = describe_collisions(out.collisions, results, several_formats=True)
    assert len(text) < 700, text
    assert text.startswith('502 results render to item "s" under format "${scoreName}": they differ in ')
    assert "node=" + ("n0" * 50)[:39] + "…, " in text and "499 more" in text
    assert "1 more label(s) differ" in text
    assert 'change "${scoreName}" in scoreDimensionFormats' in text
    assert text.endswith("; 1 more item name(s) collide")


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
def test_items_are_unique_sorted_in_range_and_every_shared_name_is_a_collision(
    rows: list[tuple[str, float]],
) -> None:
    out = build_items([r(score, pod=pod) for pod, score in rows], fmt="${pod}", cluster="c", score_name="s")
    names = [i.name for i in out.items]
    assert names == sorted(set(names))
    assert all(-100 <= i.value <= 100 for i in out.items)
    last = {pod: score for pod, score in rows}
    assert {i.name: i.value for i in out.items} == {pod: score_value(score)[0] for pod, score in last.items()}
    by_name = {pod: [i for i, (p, _) in enumerate(rows) if p == pod] for pod in last}
    assert {c.name: c.results for c in out.collisions} == {p: i for p, i in by_name.items() if len(i) > 1}


@pytest.mark.parametrize("name", ["a;b;c", "ünïcödé", "with space", "x" * 253])
def test_valid_names(name: str) -> None:
    assert item_name_problem(name) is None


# --- a placeholder the results have no value for is counted and described, never silent ---------------
def test_a_placeholder_no_result_has_is_counted_with_the_names_it_emptied() -> None:
    # OpenShift's node metrics: instance, no node
    results = [r(10, instance="10.0.0.1:9100", job="node"), r(20, instance="10.0.0.2:9100", job="node")]
    out = build_items(results, fmt="${node}", cluster="c", score_name="s")
    assert out.items == [] and out.skipped_empty == 2
    (empty,) = out.empty_placeholders
    assert (empty.fmt, empty.placeholder, empty.index, empty.count, empty.emptied) == (
        "${node}",
        "node",
        0,
        2,
        2,
    )
    text = describe_empty_placeholders(out.empty_placeholders, results)
    assert text == (
        '${node} is empty in format "${node}" for 2 of 2 result(s), 2 of which publish no item '
        '(their name renders empty): result 0 has labels instance="10.0.0.1:9100", job="node"'
    )


def test_a_partly_empty_name_is_published_and_still_reported() -> None:
    results = [r(10, node="n1"), r(20, pod="p")]
    out = build_items(results, fmt="${scoreName}-${node}", cluster="c", score_name="s")
    assert [i.name for i in out.items] == ["s-", "s-n1"]
    (empty,) = out.empty_placeholders
    assert (empty.index, empty.count, empty.emptied) == (1, 1, 0)
    assert 'whose names miss that part: result 1 has labels pod="p"' in describe_empty_placeholders(
        out.empty_placeholders, results
    )


def test_each_format_and_placeholder_is_reported_once_and_present_labels_are_not() -> None:
    results = [r(1, node="n1"), r(2, node="n2")]
    assert build_items(results, fmt="${node}", cluster="c", score_name="s").empty_placeholders == []
    out = build_items(results, fmt=["${node}", "${pod}-${device}"], cluster="c", score_name="s")
    assert [(e.fmt, e.placeholder, e.count) for e in out.empty_placeholders] == [
        ("${pod}-${device}", "device", 2),
        ("${pod}-${device}", "pod", 2),
    ]
    assert [c.name for c in out.collisions] == ["-"]  # both results render "-": reported as well
    # ${cluster} and ${scoreName} never come from labels
    assert (
        build_items(results, fmt="${cluster}-${scoreName}", cluster="c", score_name="s").empty_placeholders
        == []
    )


def test_the_labels_quoted_are_bounded_and_escaped() -> None:
    metric = {f"l{i}": "v" * 100 for i in range(9)} | {"bad": "a\nb"}
    text = describe_empty_placeholders(
        build_items([r(1, **metric)], fmt="${pod}", cluster="c", score_name="s").empty_placeholders,
        [r(1, **metric)],
    )
    assert "\n" not in text and "and 4 more" in text and "v" * 100 not in text


def test_a_label_mapping_fills_a_placeholder_from_another_label() -> None:
    # OpenShift's node metrics: instance carries the node's name, there is no node label.
    results = [r(10, instance="worker-1", node="ignored"), r(20, instance="worker-2")]
    labels = (("node", "instance"),)
    out = build_items(results, fmt="${cluster}-${node}", cluster="c", score_name="s", labels=labels)
    assert [i.name for i in out.items] == ["c-worker-1", "c-worker-2"] and out.empty_placeholders == []
    # The mapping replaces the placeholder's own label, and unmapped placeholders keep theirs.
    metric = {"instance": "w", "node": "n", "pod": "p"}
    assert render_name("${node}/${pod}", cluster="c", score_name="s", metric=metric, labels=labels) == "w/p"
    assert render_name("${node}/${pod}", cluster="c", score_name="s", metric=metric) == "n/p"


def test_a_mapped_placeholder_the_results_lack_names_the_label_it_reads() -> None:
    results = [r(10, node="n1")]
    out = build_items(results, fmt="${node}", cluster="c", score_name="s", labels=(("node", "instance"),))
    assert out.items == []
    text = describe_empty_placeholders(out.empty_placeholders, results)
    assert text.startswith('${node} (read from label instance) is empty in format "${node}" for 1 of 1')


def test_the_wire_accepts_only_label_placeholders_and_label_names() -> None:
    ok = ScorerSummary.model_validate({"scoreDimensionLabels": {"node": "instance", "pod": "pod_name"}})
    assert ok.dimension_labels == (("node", "instance"), ("pod", "pod_name"))
    assert ok.to_wire()["scoreDimensionLabels"] == {"node": "instance", "pod": "pod_name"}
    assert "scoreDimensionLabels" not in ScorerSummary().to_wire()
    for bad in ({"cluster": "x"}, {"scoreName": "x"}, {"node": "not-a-label"}, {"node": ""}):
        with pytest.raises(ValueError, match=r"placeholder|label name"):
            ScorerSummary.model_validate({"scoreDimensionLabels": bad})
