"""``check_app`` over real HTTP on loopback: the score function's own exception reaches the report."""

from __future__ import annotations

import pytest

from dynamic_scoring.scorer import ScorerApp, ScoreResult, ScoringRequest, result
from dynamic_scoring.scorer.testing import assert_conformant, check_app


class BudgetExceededError(Exception):
    """An author's own exception type."""


def breaks_on_non_finite(request: ScoringRequest) -> list[ScoreResult]:
    out = []
    for s in request.series:
        if s.non_finite:  # an author who forgot Prometheus' "NaN" strings
            raise BudgetExceededError(f"series {s.label('pod')} has a non-finite point")
        out.append(result(s.mean(), pod=s.label("pod")))
    return out


def app() -> ScorerApp:
    return ScorerApp(breaks_on_non_finite, name="x", query="up")


def test_the_report_carries_the_real_exception_type_message_and_traceback() -> None:
    report = check_app(app(), large=False, dimension_format="${scoreName}-${pod}")
    assert not report.ok
    (raised,) = report.exceptions
    assert raised.check == "scoring:non-finite"
    assert raised.type == f"{__name__}.BudgetExceededError"
    assert raised.message == "series pod-0 has a non-finite point"
    assert "in breaks_on_non_finite" in raised.traceback and "raise BudgetExceededError" in raised.traceback
    assert report.to_json()["exceptions"][0]["type"] == raised.type


def test_the_report_reads_as_text() -> None:
    report = check_app(app(), large=False, dimension_format="${scoreName}-${pod}")
    text = str(report)
    assert text == report.text()
    lines = text.splitlines()
    assert lines[0].startswith("scorer http://127.0.0.1:")
    assert lines[1] == "checks: healthz, config, token, scoring:empty, scoring:small, scoring:non-finite"
    assert (
        f"RAISED  [scoring:non-finite] {__name__}.BudgetExceededError: series pod-0 has a non-finite point"
        in lines
    )
    assert any(
        line.startswith("ERROR   [scoring:non-finite] POST /scoring with non-finite") for line in lines
    )
    assert lines[-1] == "does not conform: 1 error(s), 0 warning(s)"


def test_assert_conformant_names_the_exception() -> None:
    with pytest.raises(
        AssertionError, match=r"raised \[scoring:non-finite\] .*BudgetExceededError: series pod-0"
    ):
        assert_conformant(app(), large=False)


def test_a_conforming_app_raises_nothing() -> None:
    def fine(request: ScoringRequest) -> list[ScoreResult]:
        return [result(50, pod=s.label("pod")) for s in request.series]

    report = check_app(ScorerApp(fine, name="x", query="up"), large=False, dimension_format="${pod}")
    assert report.ok and report.exceptions == [] and report.findings == []
    assert str(report).endswith("conforms: 0 error(s), 0 warning(s)")


def means_everything(request: ScoringRequest) -> list[ScoreResult]:
    return [result(100 - s.mean(), pod=s.label("pod")) for s in request.series]  # all-NaN: no mean


def test_a_library_error_in_the_authors_code_is_scoring_failed_with_the_authors_line() -> None:
    """``mean()`` of an all-NaN series raises in the library; the author needs their own line."""
    report = check_app(ScorerApp(means_everything, name="x", query="up"), large=False)
    (raised,) = report.exceptions
    assert raised.type == "dynamic_scoring.scorer.maths.EmptySeriesError"
    assert "in means_everything" in raised.traceback and "s.mean()" in raised.traceback
    last = raised.traceback.rstrip().splitlines()[-2]  # the frame that raised, in the library's maths
    assert "maths.py" in last, raised.traceback
    assert "matrix.py" not in raised.traceback  # the library frames between are left out
    assert "scorer/app.py" not in raised.traceback  # the library's callers are not the author's concern
    (finding,) = report.errors
    assert "scoring failed: EmptySeriesError" in finding.seen and "invalid result" not in finding.seen
