from __future__ import annotations

import json

import msgspec
import pytest

from dynamic_scoring.agent.scorer_client.client import scoring_body


def body(series: list[object]) -> bytes:
    length, pieces = scoring_body(series)
    data = b"".join(bytes(p) for p in pieces)
    assert len(data) == length
    return data


def test_no_series_is_an_empty_list_never_null() -> None:
    assert json.loads(body([])) == {"data": []}
    assert json.loads(body([b"[]", b" [ ] "])) == {"data": []}


def test_series_are_spliced_verbatim_in_order() -> None:
    class Result(msgspec.Struct):
        result: msgspec.Raw

    one = msgspec.json.decode(b'{"result":[{"metric":{"a":"1"},"values":[[1,"0.5"]]}]}', type=Result).result
    two = b'[ {"metric":{},"values":[]} , {"metric":{"b":"2"},"values":[[2,"1e3"]]} ]'
    raw = body([one, b"[]", two])
    assert json.loads(raw)["data"] == [
        {"metric": {"a": "1"}, "values": [[1, "0.5"]]},
        {"metric": {}, "values": []},
        {"metric": {"b": "2"}, "values": [[2, "1e3"]]},
    ]
    assert b'"1e3"' in raw  # values are not re-encoded


def test_not_an_array_is_refused() -> None:
    with pytest.raises(ValueError):
        scoring_body([b'{"a":1}'])
