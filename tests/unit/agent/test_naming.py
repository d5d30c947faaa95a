from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.agent.items.naming import aps_name


@pytest.mark.parametrize(
    ("score_name", "expected"),
    [
        ("sample_my_score", "sample-my-score"),
        ("My Score@Name", "my-score-name"),
        ("", "score"),
        ("___", "score"),
        ("-.a.-", "a"),
        ("a..b", "a..b"),  # upstream leaves it invalid
        ("a__b--c", "a-b-c"),
        ("ÄPS", "ps"),
        ("x" * 300, "x" * 253),
        ("x" * 252 + "-yy", "x" * 252),
    ],
)
def test_upstream_rules(score_name: str, expected: str) -> None:
    assert aps_name(score_name) == expected


@given(st.text(max_size=300))
def test_result_is_always_a_plausible_object_name(score_name: str) -> None:
    name = aps_name(score_name)
    assert re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", name)
    assert len(name) <= 253
    assert "--" not in name
