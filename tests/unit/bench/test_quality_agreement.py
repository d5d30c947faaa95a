"""Setting the synthetic fleet's comparisons beside the real fleet's: what counts as agreeing."""

from __future__ import annotations

from typing import Any

from bench.placement_quality.agreement import agree, key, sign


def _c(a: str, b: str, low: float, high: float, **where: Any) -> dict[str, Any]:
    where = {"life": "1h", "form": "exact", "k": 1, "lag": 0, **where}
    return {**where, "a": a, "b": b, "difference": (low + high) / 2, "low": low, "high": high, "steps": 9}


def test_the_sign_is_that_of_an_interval_clear_of_zero() -> None:
    assert sign(_c("x", "y", 0.1, 0.5)) == 1
    assert sign(_c("x", "y", -0.5, -0.1)) == -1
    assert sign(_c("x", "y", -0.1, 0.5)) == 0


def test_comparisons_are_matched_by_pair_and_setting_and_sorted_by_outcome() -> None:
    synthetic = [
        _c("cpu/raw", "reactive/raw", 0.1, 0.3),  # same: both above 0
        _c("random", "cpu/raw", -0.4, -0.1),  # opposite
        _c("random", "reactive/raw", 0.2, 0.4),  # clear on the synthetic fleet only
        _c("cpu/stabilized", "cpu/raw", -0.1, 0.1),  # clear on the real fleet only
        _c("predict-1h/raw", "cpu/raw", -0.1, 0.1),  # the real run has no such comparison
        _c("cpu/raw", "reactive/raw", -0.1, 0.1, life="4h"),  # neither
    ]
    real = [
        _c("cpu/raw", "reactive/raw", 0.2, 0.6),
        _c("random", "cpu/raw", 0.3, 0.9),
        _c("random", "reactive/raw", -0.2, 0.3),
        _c("cpu/stabilized", "cpu/raw", 0.05, 0.2),
        _c("cpu/raw", "reactive/raw", -0.3, 0.2, life="4h"),
        _c("seasonal-1h/raw", "cpu/raw", 0.1, 0.2),
    ]
    out = agree(synthetic, real)
    assert (out.shared, out.same, out.opposite, out.synthetic_only, out.real_only, out.neither) == (
        5,
        1,
        1,
        1,
        1,
        1,
    )
    assert len(out.opposites) == 1 and out.opposites[0].startswith("random - cpu/raw (life 1h, form exact")
    assert "synthetic -0.25 [-0.40, -0.10], real +0.60 [+0.30, +0.90]" in out.opposites[0]
    assert [p["outcome"] for p in out.pairs] == ["same", "opposite", "synthetic_only", "real_only", "neither"]


def test_closed_loop_comparisons_are_keyed_by_size_and_measure_not_form() -> None:
    a = {"life": "1h", "size": 3.0, "measure": "slowdown", "a": "cpu/raw", "b": "random"}
    assert key(a) == (
        ("life", "1h"),
        ("size", 3.0),
        ("measure", "slowdown"),
        ("a", "cpu/raw"),
        ("b", "random"),
    )
    rec = {**a, "difference": 1.0, "low": 0.5, "high": 1.5}
    other = {**rec, "size": 6.0}
    assert agree([rec], [other]).shared == 0
    assert agree([rec], [rec]).same == 1
