from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.contract.score_size import (
    ETCD_DEFAULT_REQUEST_BYTES,
    MAX_SCORE_BYTES,
    MIN_ITEM_BYTES,
    max_results_for,
    scores_bytes,
)

NAMES = st.text(st.characters(codec="utf-8"), min_size=1, max_size=60)


def go_json(items: list[tuple[str, int]]) -> bytes:
    """The list as the apiserver (Go's encoding/json) stores it: UTF-8, and <, >, & escaped."""
    text = json.dumps([{"name": n, "value": v} for n, v in items], separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, esc)
    return text.encode()


@given(st.lists(st.tuples(NAMES, st.integers(-100, 100)), max_size=30))
def test_the_size_is_the_stored_json_exactly(items: list[tuple[str, int]]) -> None:
    assert scores_bytes(items) == len(go_json(items))


def test_ten_thousand_per_series_items_fit_and_long_names_do_not() -> None:
    per_series = [(f"cpu-node-{i % 50:02d}-pod-{i:05d}-0123456789abcdef", -100) for i in range(10_000)]
    assert scores_bytes(per_series) < MAX_SCORE_BYTES
    long_names = [(f"{i:05d}" + "x" * 248, -100) for i in range(10_000)]
    assert scores_bytes(long_names) > MAX_SCORE_BYTES
    # what the old count limit allowed (4,096 names of 253 characters) still fits
    assert scores_bytes([(f"{i:05d}" + "x" * 248, -100) for i in range(4096)]) < MAX_SCORE_BYTES


def test_the_default_leaves_room_in_etcds_request_limit() -> None:
    assert ETCD_DEFAULT_REQUEST_BYTES - MAX_SCORE_BYTES >= 128 * 1024


def test_no_answer_over_the_result_bound_can_fit() -> None:
    bound = max_results_for(MAX_SCORE_BYTES)
    smallest = [("x", 0)] * bound
    assert scores_bytes(smallest) <= MAX_SCORE_BYTES < scores_bytes([("x", 0)] * (bound + 1))
    assert len('{"name":"x","value":0},') == MIN_ITEM_BYTES
