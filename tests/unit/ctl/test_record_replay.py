"""The recording format, the replay's shifting and windowing, and the record/replay arguments."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.ctl.main import main
from dynamic_scoring.ctl.record import parse_duration, query_range_endpoint
from dynamic_scoring.ctl.recording import Recording, RecordingError, RecordingFile, load
from dynamic_scoring.ctl.replay import LOOKBACK, QueryError, Replay, is_loopback, parse_listen

T0 = 1_700_000_000


def recording(query: str, values: list[str], step: int = 60, start: int = T0) -> Recording:
    points = [[start + i * step, v] for i, v in enumerate(values)]
    return Recording.model_validate(
        {
            "query": query,
            "start": start,
            "end": start + (len(values) - 1) * step,
            "step": step,
            "capturedAt": datetime(2026, 1, 1, tzinfo=UTC),
            "response": {
                "status": "success",
                "data": {"resultType": "matrix", "result": [{"metric": {"pod": "a"}, "values": points}]},
            },
        }
    )


def ask(replay: Replay, query: str, start: float, end: float, step: float) -> list[list[Any]]:
    answer = replay.answer({"query": [query], "start": [str(start)], "end": [str(end)], "step": [str(step)]})
    result = answer["data"]["result"]
    return result[0]["values"] if result else []


@given(
    values=st.lists(st.integers(0, 10**6).map(str), min_size=1, max_size=60),
    step=st.integers(1, 600),
    later=st.floats(0, 10**7, allow_nan=False),
    thin=st.integers(1, 4),
)
def test_same_window_gives_back_every_value_shifted_and_a_wider_step_thins(
    values: list[str], step: int, later: float, thin: int
) -> None:
    now = T0 + later
    replay = Replay([recording("q", values, step)], clock=lambda: now)
    newest = int(now)
    span = (len(values) - 1) * step
    got = ask(replay, "q", newest - span, newest, step * thin)
    expected = [[newest - span + i * step, v] for i, v in enumerate(values)][::thin]
    assert got == expected


def test_points_older_than_the_lookback_are_not_repeated() -> None:
    replay = Replay([recording("q", ["1", "2"], step=60)], clock=lambda: T0 + 60)
    # Asked every 100 s for 10 minutes after the newest sample: it stays current for LOOKBACK only.
    got = ask(replay, "q", T0 + 60, T0 + 660, 100)
    assert [t for t, _ in got] == [t for t in range(T0 + 60, T0 + 661, 100) if t - (T0 + 60) < LOOKBACK]
    assert {v for _, v in got} == {"2"}


def test_a_window_before_the_recording_has_no_series() -> None:
    replay = Replay([recording("q", ["1", "2"])], clock=lambda: T0 + 60)
    assert ask(replay, "q", T0 - 1000, T0 - 500, 60) == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"query": ["other"], "start": ["1"], "end": ["2"], "step": ["1"]}, "no recording for query 'other'"),
        ({"query": ["q"], "start": ["x"], "end": ["2"], "step": ["1"]}, 'invalid parameter "start"'),
        ({"query": ["q"], "start": ["5"], "end": ["2"], "step": ["1"]}, "must not be before start"),
        ({"query": ["q"], "start": ["1"], "end": ["2"], "step": ["0"]}, "zero or negative"),
        ({"query": ["q"], "start": ["0"], "end": ["20000"], "step": ["1"]}, "11,000 points"),
        ({"start": ["1"], "end": ["2"], "step": ["1"]}, 'invalid parameter "query"'),
    ],
)
def test_bad_requests_are_refused_as_prometheus_would(params: dict[str, list[str]], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        Replay([recording("q", ["1"])]).answer(params)


def test_a_query_recorded_twice_serves_the_later_one() -> None:
    replay = Replay([recording("q", ["1"]), recording(" q ", ["2"])], clock=lambda: T0)
    assert replay.replaced == ["q"]
    assert ask(replay, "q", T0, T0, 60) == [[T0, "2"]]


def test_load_names_file_and_field_of_a_broken_recording(tmp_path: Path) -> None:
    good = RecordingFile(recordings=[recording("q", ["1"])])
    path = tmp_path / "r.json"
    path.write_text(good.dumps())
    assert load(path) == good

    document = json.loads(good.dumps())
    document["recordings"][0]["step"] = 0
    path.write_text(json.dumps(document))
    with pytest.raises(RecordingError, match=r"r\.json: recordings\.0\.step"):
        load(path)
    document["version"] = 2
    path.write_text(json.dumps(document))
    with pytest.raises(RecordingError, match="version 2 is not supported"):
        load(path)
    path.write_text("[]")
    with pytest.raises(RecordingError, match="not a recording"):
        load(path)


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("5m", 300), ("1h30m", 5400)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "5x", "1.5h", "100ms", "m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_query_range_endpoint() -> None:
    assert query_range_endpoint("http://p:9090") == "http://p:9090/api/v1/query_range"
    assert query_range_endpoint("https://p/prom/") == "https://p/prom/api/v1/query_range"
    assert query_range_endpoint("http://p/api/v1/query_range") == "http://p/api/v1/query_range"
    with pytest.raises(ValueError):
        query_range_endpoint("p:9090")


def test_listen_addresses() -> None:
    assert parse_listen(":9091") == ("127.0.0.1", 9091)
    assert parse_listen("[::1]:9091") == ("::1", 9091)
    assert parse_listen("0.0.0.0:80") == ("0.0.0.0", 80)
    for bad in ("9091", "h:99999", "h:x"):
        with pytest.raises(ValueError):
            parse_listen(bad)
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.org")


def test_cli_arguments_are_checked_before_anything_runs(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "x.json"
    bad_step = runner.invoke(
        main, ["record", "--prometheus", "http://p", "--query", "up", "--step", "2h", "-o", str(out)]
    )
    assert bad_step.exit_code == 2 and "larger than --range" in bad_step.output
    bad_url = runner.invoke(main, ["record", "--prometheus", "p:9090", "--query", "up", "-o", str(out)])
    assert bad_url.exit_code == 2 and "not an http or https URL" in bad_url.output
    bad_range = runner.invoke(
        main, ["record", "--prometheus", "http://p", "--query", "up", "--range", "1x", "-o", str(out)]
    )
    assert bad_range.exit_code == 2 and "--range" in bad_range.output
    assert not out.exists()

    out.write_text('{"format": "dynamic-scoring/recording", "version": 9}')
    wrong = runner.invoke(main, ["replay", str(out), "--listen", "127.0.0.1:0"])
    assert wrong.exit_code == 1 and "version 9 is not supported" in wrong.output
    bad_listen = runner.invoke(main, ["replay", str(out), "--listen", "nowhere"])
    assert bad_listen.exit_code == 2 and "expected HOST:PORT" in bad_listen.output
