"""The fast decoder of scoring answers agrees with the schema on every body, valid or not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dynamic_scoring.agent.scorer_client.answer import decode_answer
from dynamic_scoring.contract.wire import ScoringResponse

_scalars = st.one_of(
    st.text(max_size=8),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
_labels = st.one_of(
    st.none(), st.dictionaries(st.text(max_size=6), _scalars, max_size=4), st.lists(_scalars, max_size=2)
)
_results = st.lists(
    st.fixed_dictionaries(
        {},
        optional={"metric": _labels, "score": _scalars, "extra": _scalars},
    ),
    max_size=6,
)
_bodies = st.one_of(
    st.fixed_dictionaries({}, optional={"results": st.one_of(st.none(), _results), "other": _scalars}),
    _results,
    _scalars,
).map(lambda doc: json.dumps(doc).encode())


def _outcome(decode: Any, body: bytes) -> list[tuple[dict[str, str], float]] | str:
    try:
        return [(dict(r.metric), r.score) for r in decode(body).results]
    except ValidationError:
        return "invalid"


@settings(max_examples=400, deadline=None)
@given(_bodies)
def test_fast_and_schema_paths_agree(body: bytes) -> None:
    assert _outcome(decode_answer, body) == _outcome(ScoringResponse.model_validate_json, body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"results":[{"score":1e400}]}',  # out of float range: the schema names it
        b'{"results":[{"score":NaN}]}',
        b'{"results":[{"score":"5"}]}',
        b'{"results":[{"score":true}]}',
        b"[1, 2",
        b'{"results":[{"metric":{"a":{"b":1}}}]}',
    ],
)
def test_bad_bodies_raise_the_schemas_error(body: bytes) -> None:
    with pytest.raises(ValidationError):
        decode_answer(body)


def test_labels_the_schema_turns_into_text_are_kept_as_it_does() -> None:
    body = b'{"results":[{"metric":{"n":1,"b":true,"z":null},"score":2},{"metric":null,"score":3}]}'
    assert _outcome(decode_answer, body) == [({"n": "1", "b": "true", "z": ""}, 2.0), ({}, 3.0)]
