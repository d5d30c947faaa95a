"""Reading the scoring request: Prometheus matrix series, non-finite values, errors naming the element."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.scorer import EmptySeriesError, RequestError, ScoringRequest, Series, parse_request
from dynamic_scoring.scorer.matrix import _checked_points, _fast_points

T0 = 1_800_000_000


def test_values_are_parsed_sorted_and_non_finite_points_counted_apart() -> None:
    body = {
        "data": [
            {
                "metric": {"pod": "a"},
                "values": [[T0 + 15, "2"], [T0, "1"], [T0 + 30, "NaN"], [T0 + 45, "-Inf"]],
            },
            {"metric": {"pod": "b"}, "value": [T0, "7"]},
        ],
        "params": {"horizon": 60},
    }
    request = parse_request(json.dumps(body).encode())
    assert request.series == [
        Series({"pod": "a"}, [(T0, 1.0), (T0 + 15, 2.0)], non_finite=2),
        Series({"pod": "b"}, [(T0, 7.0)]),
    ]
    assert request.params == {"horizon": 60}


@pytest.mark.parametrize("body", [b'{"data": null}', b"{}", b'{"data": []}', b'{"data": [], "params": null}'])
def test_empty_requests_have_no_series(body: bytes) -> None:
    assert parse_request(body) == ScoringRequest([], {})


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"\xff", "not JSON"),
        (b'{"data": [{"values": [[1, "1", 2]]}]}', r"data\[0\]\.values\[0\]: expected \[time, value\]"),
        (b'{"data": [{"values": [[1, false]]}]}', r"data\[0\]\.values\[0\]\[1\]: expected a number"),
        (b'{"data": [{"values": ["12"]}]}', r"data\[0\]\.values\[0\]"),
        (b'{"data": [{"values": {}}]}', r"data\[0\]\.values: expected a list"),
        (b'{"data": [], "params": []}', "params: expected an object"),
    ],
)
def test_malformed_requests_name_the_element(body: bytes, where: str) -> None:
    with pytest.raises(RequestError, match=where):
        parse_request(body)


value_text = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "1e400", "0x10", "x", ""]),
    st.integers(-(10**6), 10**6),
    st.booleans(),
    st.none(),
)
pair = st.one_of(
    st.tuples(st.integers(0, 2**33), value_text).map(list),
    st.lists(st.integers(), max_size=3),
    st.text(max_size=2),
)


@given(st.lists(pair, max_size=8))
def test_the_fast_path_agrees_with_the_checked_path(values: list[object]) -> None:
    # The fast path may decline (None) but must never accept what the checked path refuses,
    # nor read a value differently.
    fast = _fast_points(values)
    try:
        checked = _checked_points(values, "data[0]")
    except RequestError:
        assert fast is None
        return
    if fast is not None:
        assert [(t, v if not math.isnan(v) else "nan") for t, v in fast] == [
            (t, v if not math.isnan(v) else "nan") for t, v in checked
        ]


def test_series_helpers() -> None:
    s = Series({"node": "n1", "pod": "p"}, [(T0, 1.0), (T0 + 10, 2.0), (T0 + 20, 6.0)])
    assert s.label("node") == "n1" and s.label("device") == "" and s.label("device", "all") == "all"
    assert s.pick("pod", "app") == {"pod": "p"}
    assert s.values == [1.0, 2.0, 6.0]
    assert s.mean() == 3.0 and s.last() == 6.0 and s.rate() == pytest.approx(0.25)
    assert s.trend() == pytest.approx(0.25)
    empty = Series({}, [], non_finite=3)
    for stat in (empty.mean, empty.last, empty.rate, empty.trend):
        with pytest.raises(EmptySeriesError):
            stat()
    assert list(ScoringRequest([s, empty]).with_points()) == [s]
