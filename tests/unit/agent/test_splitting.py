from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.agent.source.splitting import split_queries


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("up", ["up"]),
        ("a;b", ["a", "b"]),
        (" a ;  ; b ;", ["a", "b"]),
        ("", []),
        (";;", []),
        ('x{job="a;b"};y', ['x{job="a;b"}', "y"]),
        ("x{job='a;b'};y", ["x{job='a;b'}", "y"]),
        ("x{job=`a;b\\`};y", ["x{job=`a;b\\`}", "y"]),
        ('x{job="a\\";b"};y', ['x{job="a\\";b"}', "y"]),
        ('x{pod=~"web-.*;db"} ; sum(rate(y[5m]))', ['x{pod=~"web-.*;db"}', "sum(rate(y[5m]))"]),
        ('label_replace(up, "a", "$1;$2", "b", "(.*)")', ['label_replace(up, "a", "$1;$2", "b", "(.*)")']),
        ("x{a=b;c}", ["x{a=b;c}"]),
        ('unterminated "a;b', ['unterminated "a;b']),
    ],
)
def test_examples(text: str, expected: list[str]) -> None:
    assert split_queries(text) == expected


_plain = st.text(alphabet=st.sampled_from("abcxyz_()[]0123456789 +-*/,=~!"), min_size=1, max_size=12)
_quoted_body = st.text(alphabet=st.sampled_from("ab;'\"` {}\\"), max_size=8)


@st.composite
def _string_literal(draw: st.DrawFn) -> str:
    quote = draw(st.sampled_from(['"', "'", "`"]))
    body = draw(_quoted_body)
    escaped = (
        body.replace("`", "") if quote == "`" else body.replace("\\", "\\\\").replace(quote, "\\" + quote)
    )
    return quote + escaped + quote


@st.composite
def _query(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(_plain, _string_literal()), min_size=1, max_size=5))
    if draw(st.booleans()):
        parts.append("{job=" + draw(_string_literal()) + "}")
    return "".join(parts).strip()


@given(st.lists(_query(), min_size=1, max_size=5), st.sampled_from([";", " ; ", ";;", "; \n"]))
def test_joining_then_splitting_gives_the_queries_back(queries: list[str], separator: str) -> None:
    wanted = [q for q in queries if q]
    assert split_queries(separator.join(queries)) == wanted


@given(st.text(max_size=40))
def test_segments_are_trimmed_and_never_empty(text: str) -> None:
    for segment in split_queries(text):
        assert segment and segment == segment.strip()
