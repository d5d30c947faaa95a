"""Scorer parameters in the request body, several dimension formats, and the stated default's items."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.agent.items.dimensions import build_items, default_item_names
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.scorer_client.client import has_series, scoring_body
from dynamic_scoring.contract.wire import (
    MAX_SCORING_PARAMS_BYTES,
    ScorerConfig,
    ScoreResult,
    ScorerSummary,
    parse_summaries,
)

SERIES = b'[{"metric":{"pod":"a"},"values":[[1,"0.5"]]}]'


def body(series: list[object], params: dict[str, Any] | None) -> bytes:
    length, pieces = scoring_body(series, params)
    data = b"".join(bytes(p) for p in pieces)
    assert len(data) == length  # the Content-Length the agent declares
    return data


def test_params_ride_beside_data() -> None:
    sent = json.loads(body([SERIES, b"[]"], {"model": "linear", "horizon": 300}))
    assert sent == {
        "data": [{"metric": {"pod": "a"}, "values": [[1, "0.5"]]}],
        "params": {"model": "linear", "horizon": 300},
    }


def test_without_params_the_body_is_upstreams_byte_for_byte() -> None:
    assert body([SERIES], None) == b'{"data":[' + SERIES[1:-1] + b"]}"
    assert body([], None) == b'{"data":[]}'


def test_empty_params_are_still_sent_as_an_object() -> None:
    assert json.loads(body([], {})) == {"data": [], "params": {}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=12), json_values, max_size=6), st.integers(0, 3))
def test_any_json_params_round_trip_with_the_declared_length(params: dict[str, Any], copies: int) -> None:
    sent = json.loads(body([SERIES] * copies, params))
    assert sent["params"] == params
    assert len(sent["data"]) == copies


def test_has_series_is_false_only_for_empty_arrays() -> None:
    assert not has_series([])
    assert not has_series([b"[]", b" [\n] "])
    assert has_series([b"[]", SERIES])


def results(*rows: tuple[dict[str, str], float]) -> list[ScoreResult]:
    return [ScoreResult(metric=m, score=s) for m, s in rows]


def test_each_result_yields_one_item_per_format() -> None:
    out = build_items(
        results(({"node": "n1", "pod": "p1"}, 10), ({"node": "n2", "pod": "p2"}, 20)),
        fmt=["${node}", "${cluster}/${pod}"],
        cluster="c1",
        score_name="cpu",
    )
    assert out.items == [
        ScoreItem("c1/p1", 10),
        ScoreItem("c1/p2", 20),
        ScoreItem("n1", 10),
        ScoreItem("n2", 20),
    ]
    assert out.duplicates == 0


def test_a_name_two_formats_render_for_two_results_is_a_collision() -> None:
    # Format 1 renders "n1" for the first result; format 2 renders "n1" for the second one.
    out = build_items(
        results(({"node": "n1", "pod": "x"}, 10), ({"node": "n2", "pod": "n1"}, 30)),
        fmt=["${node}", "${pod}"],
        cluster="c1",
        score_name="cpu",
    )
    assert [(c.name, c.results, c.formats) for c in out.collisions] == [("n1", [0, 1], ["${node}", "${pod}"])]
    assert out.duplicates == 0


def test_a_name_one_result_renders_under_two_formats_is_one_item() -> None:
    out = build_items(
        results(({"node": "n1"}, 10), ({"node": "n2"}, 30)),
        fmt=["${node}", "${node}${pod}"],
        cluster="c1",
        score_name="cpu",
    )
    assert out.collisions == [] and out.duplicates == 2
    assert out.items == [ScoreItem("n1", 10), ScoreItem("n2", 30)]


def test_one_format_in_a_list_is_the_same_as_the_string() -> None:
    rows = results(({"pod": "a"}, 5), ({"pod": "a"}, 7), ({"pod": "b"}, 250))
    assert build_items(rows, fmt=["${pod}"], cluster="c", score_name="s") == build_items(
        rows, fmt="${pod}", cluster="c", score_name="s"
    )


def test_a_clamped_result_is_counted_once_however_many_formats_render_it() -> None:
    out = build_items(
        results(
            ({"pod": "a"}, 250),
        ),
        fmt=["${pod}", "x-${pod}"],
        cluster="c",
        score_name="s",
    )
    assert out.items == [ScoreItem("a", 100), ScoreItem("x-a", 100)]
    assert out.clamped == 1


@pytest.mark.parametrize(
    ("formats", "expected"),
    [
        ([], ["cpu"]),
        (["${scoreName}"], ["cpu"]),
        (["${cluster}-${scoreName}"], ["c1-cpu"]),
        (["${node};${pod}"], ["cpu"]),  # no labels to fill: the score name itself
        (["${scoreName}", "${node}", "total"], ["cpu", "total"]),
    ],
)
def test_default_item_names(formats: list[str], expected: list[str]) -> None:
    assert default_item_names(formats, cluster="c1", score_name="cpu") == expected


def summary(**extra: Any) -> dict[str, Any]:
    return {"name": "s", "scoreName": "cpu", **extra}


def test_new_summary_keys_are_omitted_when_unset_and_kept_when_set() -> None:
    plain = ScorerSummary.model_validate(summary()).to_wire()
    assert not {"scoringParams", "missingDataScore", "masked", "scoreDimensionFormats"} & plain.keys()
    full = ScorerSummary.model_validate(
        summary(
            scoringParams={"model": "linear", "horizon": 300},
            missingDataScore=-100,
            masked=True,
            scoreDimensionFormats=["${scoreName}", "${node}"],
        )
    )
    wire = full.to_wire()
    assert wire["scoringParams"] == {"model": "linear", "horizon": 300}
    assert (wire["missingDataScore"], wire["masked"]) == (-100, True)
    assert full.dimension_formats == ("${scoreName}", "${node}")


def test_the_legacy_format_is_the_only_format_without_the_list() -> None:
    s = ScorerSummary.model_validate(summary(scoreDimensionFormat="${pod}"))
    assert s.dimension_formats == ("${pod}",)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"scoringParams": {"interval": 5}}, "scoringParams"),  # agent settings are not scorer parameters
        ({"scoringParams": {"blob": "x" * MAX_SCORING_PARAMS_BYTES}}, "scoringParams"),
        ({"scoringParams": {"x": float("nan")}}, "scoringParams"),
        ({"missingDataScore": -101}, "missingDataScore"),
        ({"missingDataScore": 100.5}, "missingDataScore"),
        ({"masked": True}, "masked"),  # nothing to write without a default
        ({"scoreDimensionFormats": []}, "scoreDimensionFormats"),
        ({"scoreDimensionFormats": [""]}, "scoreDimensionFormats"),
    ],
)
def test_a_bad_new_key_is_that_entrys_error_naming_the_field(extra: dict[str, Any], field: str) -> None:
    good = summary(scoreName="ok")
    bad = summary(**extra)
    summaries, errors = parse_summaries(json.dumps([good, bad]))
    assert [s.score_name for s in summaries] == ["ok"]
    assert len(errors) == 1 and errors[0].index == 1
    assert field in errors[0].message


def test_config_document_keeps_the_scorers_own_params() -> None:
    doc = ScorerConfig.model_validate(
        {"scoring": {"params": {"name": "cpu", "interval": 30, "model": "linear", "horizon": 600}}}
    )
    assert doc.scoring.params.extra_params == {"model": "linear", "horizon": 600}
    assert doc.model_dump(mode="json")["scoring"]["params"]["model"] == "linear"  # kept in lastSyncedConfig
