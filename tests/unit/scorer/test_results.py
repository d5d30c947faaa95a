"""``result``: finite scores and only the dimension labels the agent maps."""

from __future__ import annotations

import pytest

from dynamic_scoring.scorer import DIMENSION_LABELS, result


def test_dimension_labels_are_the_ones_the_agent_renders() -> None:
    from dynamic_scoring.agent.items.dimensions import (
        _PLACEHOLDER,  # the agent's own list, so the two cannot drift
    )

    agent = set(_PLACEHOLDER.pattern.split("(")[1].split(")")[0].split("|")) - {"cluster", "scoreName"}
    assert set(DIMENSION_LABELS) == agent


def test_result_carries_labels_and_dimensions() -> None:
    r = result(42, {"job": "x"}, pod="p1", namespace="ns")
    assert r.model_dump() == {"metric": {"job": "x", "pod": "p1", "namespace": "ns"}, "score": 42.0}


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"score": float("nan")}, ValueError, "finite"),
        ({"score": float("inf")}, ValueError, "finite"),
        ({"score": True}, TypeError, "number"),
        ({"score": 1, "namepsace": "x"}, ValueError, "unknown dimension label.*namepsace"),
        ({"score": 1, "pod": 3}, TypeError, "pod must be a string"),
        ({"score": 1, "pod": "p" * 254}, ValueError, "longer than 253"),
    ],
)
def test_mistakes_fail_in_the_authors_traceback(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        result(**kwargs)  # type: ignore[arg-type]
