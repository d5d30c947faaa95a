"""The seasonal sample scorer: it sees a daily peak coming that the trend scorer cannot, and conforms."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.contract.wire import MAX_HORIZON_SECONDS
from dynamic_scoring.samples.scorers import cpu, predict, seasonal
from dynamic_scoring.samples.scorers.server import build_app, build_parser, config_document, requested_horizon
from dynamic_scoring.scorer import RequestError, ScoringRequest, Series
from dynamic_scoring.scorer.testing import check_app

T0 = 1_800_000_000.0
DAY, STEP = 86_400.0, 300.0


def daily_load(t: float) -> float:
    """Percent CPU: 40 at night, a peak of 90 every day from 13:00 to 15:00 (a batch window)."""
    hour = (t % DAY) / 3_600
    return 90.0 if 13 <= hour < 15 else 40.0


def series_until(end: float, days: float = 1.1) -> Series:
    """Points every 5 minutes over ``days`` days, the last one at ``end``."""
    n = int(days * DAY / STEP)
    return Series({"cluster": "c1"}, [(end - i * STEP, daily_load(end - i * STEP)) for i in range(n, -1, -1)])


def test_the_daily_peak_costs_points_before_it_comes() -> None:
    # 12:30: quiet for hours, the batch window opens at 13:00.  The next hour is half peak.
    s = series_until(12.5 * 3_600 + 3 * DAY)
    expected_load = (5 * 40.0 + 7 * 90.0) / 12  # 12:35 ... 13:30, of which 13:00 ... 13:30 in the peak
    got = seasonal.score_series(s, capacity=100.0, horizon=3_600, season=DAY, level=3_600)
    assert got == pytest.approx(100.0 - expected_load, abs=0.01)
    # The mean and the trend see a flat 40 %: they score 60 and are caught by the peak.
    assert cpu.score_series(s, 100.0) == pytest.approx(100.0 - s.mean())
    assert predict.score_series(Series({}, s.points[-12:]), 100.0, 3_600) == pytest.approx(60.0)


def test_the_end_of_the_peak_is_seen_coming_too() -> None:
    s = series_until(14.5 * 3_600 + 3 * DAY)  # 14:30, in the peak; it ends at 15:00
    got = seasonal.score_series(s, capacity=100.0, horizon=3_600, season=DAY, level=3_600)
    assert got is not None and got > 100.0 - 90.0 + 20  # better than the trend's "still at 90"


def test_a_short_window_scores_the_recent_mean() -> None:
    s = series_until(12.5 * 3_600 + 3 * DAY, days=0.2)
    assert seasonal.score_series(s, 100.0, 3_600, DAY, 3_600) == pytest.approx(60.0)
    assert seasonal.score_series(Series({}, []), 100.0, 3_600, DAY, 3_600) is None


@given(st.lists(st.floats(0, 100), min_size=1, max_size=300), st.floats(0, 2 * DAY))
def test_scores_stay_in_range(loads: list[float], horizon: float) -> None:
    s = Series({}, [(T0 + STEP * i, v) for i, v in enumerate(loads)])
    got = seasonal.score_series(s, 100.0, horizon, season=STEP * 24, level=STEP * 4)
    assert got is not None and 0.0 <= got <= 100.0


def test_params_horizon_is_checked() -> None:
    assert requested_horizon(ScoringRequest([], {"horizon": 600}), 3_600) == 600.0
    assert requested_horizon(ScoringRequest([], {}), 3_600) == 3_600.0
    assert (
        requested_horizon(ScoringRequest([], {"horizon": MAX_HORIZON_SECONDS}), 3_600) == MAX_HORIZON_SECONDS
    )
    for bad in (-1, "1h", True, math.inf, MAX_HORIZON_SECONDS + 1, 10**10):
        with pytest.raises(RequestError, match=r"params\.horizon"):
            requested_horizon(ScoringRequest([], {"horizon": bad}), 3_600)


def test_config_asks_for_a_day_and_an_hour_at_a_coarse_step_and_says_so() -> None:
    args = build_parser("x", seasonal.DEFAULTS).parse_args([])
    document = config_document(args, seasonal.DEFAULTS.description).model_dump()
    params = document["source"]["params"]
    assert params["range"] == 90_000 and params["step"] == 300  # 301 points per series
    # The history the scorer needs is in its /config, where a reader of the registry looks.
    assert "needs a day and an hour of Prometheus history" in document["description"]


def test_close_ahead_the_default_blends_with_the_last_hour_and_no_blend_does_not() -> None:
    """12:30, the batch window opens at 13:00: the blend hedges between the quiet hour and the peak."""
    s = series_until(12.5 * 3_600 + 3 * DAY)
    request = ScoringRequest([s], {})
    blended = seasonal.score(request, capacity=100.0, horizon=3_600, season=DAY, level=3_600)
    alone = seasonal.score(request, capacity=100.0, horizon=3_600, season=DAY, level=3_600, blend=False)
    load_ahead = (5 * 40.0 + 7 * 90.0) / 12
    assert alone[0].score == pytest.approx(100.0 - load_ahead, abs=0.01)
    assert blended[0].score == pytest.approx(100.0 - (load_ahead + 40.0) / 2, abs=0.01)
    assert blended[0].score == seasonal.score_series(s, 100.0, 3_600, DAY, 3_600, blend=True)


def test_far_ahead_the_default_is_the_seasonal_forecast_alone() -> None:
    """A 12-hour horizon (params.horizon wins over --horizon): the recent level has no say."""
    s = series_until(12.5 * 3_600 + 3 * DAY)
    far = seasonal.score(
        ScoringRequest([s], {"horizon": 43_200}), capacity=100.0, horizon=3_600, season=DAY, level=3_600
    )
    assert far[0].score == seasonal.score_series(s, 100.0, 43_200, DAY, 3_600)


def test_the_sample_passes_the_scorer_librarys_conformance_check() -> None:
    parser = build_parser("x", seasonal.DEFAULTS)
    args = parser.parse_args(["--capacity-cores", "100"])
    app = build_app(
        args,
        parser,
        seasonal.DEFAULTS.description,
        lambda request: seasonal.score(request, capacity=100.0, horizon=3_600, season=DAY, level=3_600),
    )
    report = check_app(app, large=False)
    assert report.ok, report


def test_no_blend_is_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[argparse.Namespace] = []
    monkeypatch.setattr(seasonal, "run", lambda args, *_: started.append(args))
    seasonal.main(["--port", "0"])
    seasonal.main(["--port", "0", "--no-blend"])
    assert [a.blend for a in started] == [True, False]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--horizon", "-5"], "--horizon must be at least 0"),
        (["--season", "0"], "--season and --level positive"),
    ],
)
def test_bad_options_stop_the_scorer(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        seasonal.main(["--port", "0", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_range_too_short_for_a_season_is_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[argparse.Namespace] = []
    monkeypatch.setattr(seasonal, "run", lambda args, *_: started.append(args))
    seasonal.main(["--port", "0", "--range", "3600"])
    assert started and "every forecast is the recent mean" in caplog.text
