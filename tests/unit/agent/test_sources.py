"""Several sources in the plan, ``${cluster}`` placement and escaping, and the ``source`` label."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.agent.plan import InvalidSummary, plan_summary
from dynamic_scoring.agent.source.labelling import label_series
from dynamic_scoring.agent.source.placeholders import (
    PlaceholderError,
    _segments,
    check_query,
    cluster_value,
    substitute,
)
from dynamic_scoring.contract.wire import ScorerSummary

PROM = "http://central:9090/api/v1/query_range"


def make(sources: list[dict[str, Any]], **fields: Any) -> ScorerSummary:
    data: dict[str, object] = {
        "scoreName": "s",
        "scoringEndpoint": "http://scorer:8000/scoring",
        "scoringInterval": 30,
        # Upstream keys as a hub fills them from the first source: ignored by this agent.
        "sourceType": "Prometheus",
        "sourceEndpoint": "http://legacy:9090/api/v1/query_range",
        "sourceQuery": "legacy",
        "sourceStep": 60,
        "sourceRange": 3600,
        "sources": sources,
    }
    data.update(fields)
    return ScorerSummary.model_validate(data)


def src(name: str, **fields: object) -> dict[str, Any]:
    data: dict[str, Any] = {"name": name, "endpoint": PROM, "queries": ["up"], "range": 600, "step": 30}
    data.update(fields)
    return data


# -- plan --------------------------------------------------------------------------------------------


def test_sources_replace_the_upstream_keys_and_keep_their_order() -> None:
    plan = plan_summary(make([src("b", queries=["x", " ", "y"]), src("a", step=5)]))
    assert [s.name for s in plan.sources] == ["b", "a"]
    assert plan.queries == ("x", "y", "up")  # blank queries dropped, the legacy query not used
    assert plan.sources[1].step == 5 and plan.sources[0].range == 600
    assert all(s.labelled and s.legacy_secret is None for s in plan.sources)
    assert not plan.score_with_available


def test_upstream_keys_make_one_unnamed_unlabelled_source() -> None:
    summary = ScorerSummary.model_validate(
        {
            "scoreName": "s",
            "scoringEndpoint": "http://scorer:8000/scoring",
            "scoringInterval": 30,
            "sourceType": "Prometheus",
            "sourceEndpoint": PROM,
            "sourceQuery": "a;b",
            "sourceStep": 60,
            "sourceRange": 3600,
            "sourceEndpointAuthName": "tok",
            "sourceEndpointAuthKey": "k",
        }
    )
    (only,) = plan_summary(summary).sources
    assert only.name == "" and not only.labelled and only.legacy_secret == ("tok", "k")
    assert only.queries == ("a", "b") and only.display == "the source"


def test_score_with_available_is_read() -> None:
    assert plan_summary(make([src("a")], onSourceError="ScoreWithAvailable")).score_with_available


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([src("a", endpoint="ftp://x/y")], "sources[0] (a).endpoint"),
        ([src("a"), src("b", queries=[])], "sources[1] (b).queries: no query"),
        ([src("a", step=0)], "sources[0] (a).step"),
        ([src("a", queries=['up{c="${cluster}"}', "up + ${cluster}"])], "sources[0] (a).queries: query #2"),
        ([src("a", queries=["up{c=`${cluster}`}"])], "backtick raw string"),
    ],
)
def test_bad_sources_are_rejected_naming_the_entry(sources: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(
        InvalidSummary, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
    ):
        plan_summary(make(sources))


def test_placeholder_in_the_upstream_query_is_checked_too() -> None:
    summary = make([src("a")]).model_copy(update={"sources": None, "source_query": "up * ${cluster}"})
    with pytest.raises(
        InvalidSummary, match=r"sourceQuery: query #1: \$\{cluster\} stands in the expression"
    ):
        plan_summary(summary)


@pytest.mark.parametrize(
    "payload",
    [
        {"sources": [src("a"), src("a")]},
        {"sources": [src("Bad_Name")]},
        {"sources": [src("a", type="Loki")]},
        {"sources": []},
        {"onSourceError": "Ignore"},
    ],
)
def test_wire_rejects_malformed_sources(payload: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make(**{"sources": [src("ok")], **payload})


# -- placeholders ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('up{cluster="${cluster}"}', 'up{cluster="c1"}'),
        ("up{cluster='${cluster}'}", "up{cluster='c1'}"),
        ('up{cluster=~"${cluster}|global"}', 'up{cluster=~"c1|global"}'),
        (
            'label_replace(up, "x", "${1}", "cluster", "(.*)")',
            'label_replace(up, "x", "${1}", "cluster", "(.*)")',
        ),
        ('up{a="${cluster}"} # ${cluster} stays in a comment', 'up{a="c1"} # ${cluster} stays in a comment'),
        ('up{a="#${cluster}"}', 'up{a="#c1"}'),
        ("up", "up"),
    ],
)
def test_substitution_inside_strings_only(query: str, expected: str) -> None:
    assert substitute(query, {"cluster": "c1"}) == expected


@pytest.mark.parametrize(
    "query", ["up * ${cluster}", "${cluster}", "sum(up) by (${cluster})", 'up{a="x"} or ${cluster}_total']
)
def test_placeholder_outside_a_string_is_refused(query: str) -> None:
    with pytest.raises(PlaceholderError, match="may only stand inside a double- or single-quoted"):
        check_query(query)


def _unquote(body: str) -> str:
    """PromQL's (Go's) reading of an escaped string body, for the escapes ``substitute`` writes."""
    out, i = [], 0
    table = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
    while i < len(body):
        if body[i] == "\\":
            out.append(table[body[i + 1]])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


VALUES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from("\\\"'\n\r\t`#{}$")
)


@given(value=VALUES, quote=st.sampled_from(['"', "'"]))
def test_any_value_stays_inside_its_string_and_reads_back_exactly(value: str, quote: str) -> None:
    query = f"sum by (node) (load{{cluster={quote}${{cluster}}{quote}, x=`raw`}}) # tail"
    result = substitute(query, {"cluster": value})
    before = [s for s in _segments(query) if s.quote not in ('"', "'")]
    after = [s for s in _segments(result) if s.quote not in ('"', "'")]
    assert after == before  # the expression around the string is untouched
    (inside,) = [s.text for s in _segments(result) if s.quote == quote]
    assert _unquote(inside) == value


@pytest.mark.parametrize("name", ["cluster1", "a", "prod-eu-1", "0" * 63])
def test_dns_label_cluster_names_are_values(name: str) -> None:
    assert cluster_value(name) == name


@pytest.mark.parametrize("name", ["", "Cluster1", "a.b", "-a", 'a"b', "x" * 64, "a\nb"])
def test_other_cluster_names_are_not_substituted(name: str) -> None:
    with pytest.raises(PlaceholderError, match="not a DNS label"):
        cluster_value(name)


# -- the source label --------------------------------------------------------------------------------


def test_source_label_is_added_and_an_own_one_is_kept_as_exported_source() -> None:
    raw = json.dumps(
        [
            {
                "metric": {"__name__": "up", "source": "theirs", "exported_source": "older"},
                "values": [[1, "1"]],
            },
            {"metric": {"node": "n1"}, "values": [[1, "2"], [2, "3"]]},
            {"metric": {}, "histograms": [[1, {"count": "4", "sum": "1.5"}]]},
        ]
    ).encode()
    out, collisions = label_series(msgspec.Raw(raw), "central")
    assert collisions == 1
    assert json.loads(out) == [
        {
            "metric": {"__name__": "up", "source": "central", "exported_source": "theirs"},
            "values": [[1, "1"]],
        },
        {"metric": {"node": "n1", "source": "central"}, "values": [[1, "2"], [2, "3"]]},
        {"metric": {"source": "central"}, "histograms": [[1, {"count": "4", "sum": "1.5"}]]},
    ]


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "metric": st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=4),
                "values": st.lists(
                    st.tuples(st.integers(0, 10**9), st.from_regex(r"-?[0-9]{1,5}", fullmatch=True))
                ),
            }
        ),
        max_size=5,
    )
)
def test_labelling_changes_nothing_but_the_source_labels(series: list[dict[str, Any]]) -> None:
    out, collisions = label_series(json.dumps(series).encode(), "s1")
    got = json.loads(out)
    assert collisions == sum("source" in s["metric"] for s in series)
    assert len(got) == len(series)
    for before, after in zip(series, got, strict=True):
        assert after["values"] == [list(v) for v in before["values"]]
        assert after["metric"]["source"] == "s1"
        rest = {k: v for k, v in after["metric"].items() if k not in ("source", "exported_source")}
        assert rest == {k: v for k, v in before["metric"].items() if k not in ("source", "exported_source")}
        if "source" in before["metric"]:
            assert after["metric"]["exported_source"] == before["metric"]["source"]


def test_a_result_that_is_not_series_is_an_error() -> None:
    with pytest.raises(msgspec.ValidationError):
        label_series(b'[{"metric": 3}]', "s")
