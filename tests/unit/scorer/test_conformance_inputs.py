"""The conformance check's inputs: the fast large body is the same document as the plain one."""

from __future__ import annotations

import json

import pytest

from dynamic_scoring.scorer.conformance import matrix, matrix_body, non_finite_matrix


@pytest.mark.parametrize(("series", "points"), [(0, 5), (1, 1), (15, 7)])
def test_matrix_body_is_the_matrix(series: int, points: int) -> None:
    assert json.loads(matrix_body(series, points)) == {"data": matrix(series, points)}


def test_inputs_carry_distinct_dimension_labels_and_prometheus_non_finite_strings() -> None:
    small = matrix(3, 2)
    assert len({json.dumps(s["metric"], sort_keys=True) for s in small}) == 3
    values = {v for s in non_finite_matrix() for _, v in s["values"]}
    assert {"NaN", "+Inf", "-Inf"} <= values
