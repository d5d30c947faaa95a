"""Selectors: the PromQL-style ``sourceQuery`` subset, the ``otel`` objects, and name translation."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.agent.plan import InvalidSummary, plan_summary
from dynamic_scoring.agent.source.otlp.selection import (
    SelectorError,
    from_spec,
    parse_selector,
    sanitize_name,
)
from dynamic_scoring.contract.wire import OtelSelector, ScorerSummary


def test_a_vector_selector_with_every_operator() -> None:
    sel = parse_selector(
        r'http.server.duration_count{service_name="web", route=~"/api/.*",code!="500",x!~"a\"b"}'
    )
    assert sel.metric == "http_server_duration_count" and not sel.rate
    assert [(m.name, m.op, m.value) for m in sel.matchers] == [
        ("service_name", "=", "web"),
        ("route", "=~", "/api/.*"),
        ("code", "!=", "500"),
        ("x", "!~", 'a"b'),
    ]
    labels = {"service_name": "web", "route": "/api/v1", "code": "200", "x": "z"}
    assert sel.matches("http_server_duration_count", "http_server_duration", labels)
    assert not sel.matches("http_server_duration_count", "x", {**labels, "route": "/web"})
    assert not sel.matches("http_server_duration_count", "x", {**labels, "code": "500"})
    # Regexes match the whole value, and a missing label is the empty string (PromQL semantics).
    assert not parse_selector('m{a=~"b"}').matches("m", "m", {"a": "abc"})
    assert parse_selector('m{a=""}').matches("m", "m", {})


def test_rate_and_a_histogram_base_name() -> None:
    sel = parse_selector("rate( latency )")
    assert sel.rate and sel.metric == "latency"
    assert sel.matches("latency_bucket", "latency", {"le": "0.5"})
    assert not parse_selector("latency_count").matches("latency_bucket", "latency", {})


@pytest.mark.parametrize(
    "query", ["sum(x)", "x[5m]", 'x{a="b"', "x{a=b}", 'x{a=~"("}', "rate(x[1m])", 'x{1a="b"}', ""]
)
def test_anything_else_is_an_error(query: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(query)


def test_the_otel_object_compiles_like_the_query_form() -> None:
    spec = OtelSelector.model_validate(
        {
            "metric": "http.server.requests",
            "matchers": [{"name": "service_name", "op": "=~", "value": "w.*"}],
            "rate": True,
        }
    )
    assert from_spec(spec) == parse_selector('rate(http_server_requests{service_name=~"w.*"})')


def test_plans_of_both_forms_carry_selectors_and_name_bad_ones() -> None:
    base = {
        "scoreName": "s",
        "scoringEndpoint": "http://scorer/score",
        "scoringInterval": 30,
        "sourceRange": 300,
        "sourceStep": 30,
    }
    upstream = plan_summary(
        ScorerSummary.model_validate({**base, "sourceType": "OpenTelemetry", "sourceQuery": "a; rate(b)"})
    )
    [source] = upstream.sources
    assert source.type == "OpenTelemetry" and [s.metric for s in source.selectors] == ["a", "b"]
    named = plan_summary(
        ScorerSummary.model_validate(
            {
                **base,
                "sources": [
                    {
                        "name": "otel",
                        "type": "OpenTelemetry",
                        "step": 15,
                        "otel": {"selectors": [{"metric": "a.b"}]},
                    }
                ],
            }
        )
    )
    assert named.sources[0].selectors[0].metric == "a_b"
    with pytest.raises(InvalidSummary, match=r"^sourceQuery: query #2: "):
        plan_summary(
            ScorerSummary.model_validate({**base, "sourceType": "OpenTelemetry", "sourceQuery": "a; sum(b)"})
        )
    with pytest.raises(InvalidSummary, match=r"^sources\[0\] \(otel\)\.otel\.selectors: no selector"):
        plan_summary(
            ScorerSummary.model_validate(
                {**base, "sources": [{"name": "otel", "type": "OpenTelemetry", "step": 5}]}
            )
        )


@given(st.text(min_size=1, max_size=40))
def test_translated_names_are_always_legal_prometheus_names(name: str) -> None:
    assert re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", sanitize_name(name))


# -- RE2: pushers choose the label values a selector's regex runs on ------------------------------


def test_a_catastrophic_pattern_matches_a_long_value_in_linear_time() -> None:
    # Python's backtracking re needs about 2**n steps for (a+)+$ against n a's and a final b:
    # 0.76 s at 25 characters, doubling per character.  At 10,000 this test would never end.
    sel = parse_selector('m{v=~"(a+)+$"}')
    hostile = "a" * 10_000 + "b"
    assert not sel.matches("m", "m", {"v": hostile})
    assert sel.matches("m", "m", {"v": "a" * 10_000})
    negated = from_spec(
        OtelSelector.model_validate(
            {"metric": "m", "matchers": [{"name": "v", "op": "!~", "value": "(a|aa)*c"}]}
        )
    )
    assert negated.matches("m", "m", {"v": "a" * 10_000})


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(a)\\1", "backreferences are not supported"),
        ("(?=a)a", "lookahead and lookbehind are not supported"),
        ("(?<!a)b", "lookahead and lookbehind are not supported"),
        ("a{1001}", "invalid repetition size"),
    ],
)
def test_perl_only_patterns_are_refused_in_both_forms(pattern: str, why: str) -> None:
    with pytest.raises(SelectorError, match=rf"^matcher v: not a valid RE2 regular expression \(.*{why}"):
        parse_selector(f'm{{v=~"{pattern}"}}')
    with pytest.raises(ValueError, match=rf"matcher v: not a valid RE2 regular expression \(.*{why}"):
        OtelSelector.model_validate(
            {"metric": "m", "matchers": [{"name": "v", "op": "=~", "value": pattern.replace("\\\\", "\\")}]}
        )


def test_re2_anchors_like_promql_and_keeps_ordinary_syntax() -> None:
    sel = parse_selector(r'm{a=~"checkout|cart", b=~"(?i)WEB-\\d+", c!~"api"}')
    assert sel.matches("m", "m", {"a": "cart", "b": "web-12", "c": "api-v2"})
    assert not sel.matches("m", "m", {"a": "cartx", "b": "web-12", "c": "x"})
    assert not sel.matches("m", "m", {"a": "cart", "b": "web-12", "c": "api"})
