"""record from a real Prometheus, replay it, and read the replay with the agent's own query_range."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from click.testing import CliRunner

from dynamic_scoring.agent.errors import PrometheusQueryError
from dynamic_scoring.agent.source.prometheus import RangeWindow, query_range
from dynamic_scoring.ctl.main import main
from dynamic_scoring.ctl.recording import RecordingFile, load
from dynamic_scoring.ctl.replay import Replay, ReplayServer
from e2e.procs import wait_until
from tests.component.conftest import GAUGE, PODS, PromFixture
from tests.component.harness import free_port
from tests.unit.ctl.test_record_replay import recording

# timestamp() changes every 15 s of the backfill, so each point of a series has its own value and a
# shifted or misaligned replay cannot pass by accident the way a constant gauge would.
VARYING = f"timestamp({GAUGE})"
SHIFT = 5 * 3600


def _series(raw: Any) -> dict[str, list[list[Any]]]:
    decoded = msgspec.json.decode(raw) if not isinstance(raw, list) else raw
    return {json.dumps(s["metric"], sort_keys=True): s["values"] for s in decoded}


def _record(prometheus: PromFixture, out: Path, end: int, *extra: str) -> None:
    result = CliRunner().invoke(
        main,
        [
            "record",
            "--prometheus",
            prometheus.server.query_range_url.removesuffix("/api/v1/query_range"),
            "--query",
            VARYING,
            "--query",
            GAUGE,
            "--range",
            "30m",
            "--step",
            "60s",
            "--end",
            str(end),
            "-o",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output


def test_replay_serves_what_was_recorded_shifted_to_now(prometheus: PromFixture, tmp_path: Path) -> None:
    end = int(time.time()) - 600
    out = tmp_path / "rec.json"
    _record(prometheus, out, end)
    recordings = load(out).recordings
    assert [r.query for r in recordings] == [VARYING, GAUGE]
    recorded = _series(recordings[0].response["data"]["result"])
    assert len(recorded) == len(PODS)
    assert all(len(v) == 31 for v in recorded.values())
    assert len({p[1] for v in recorded.values() for p in v}) > 10  # the values really vary

    now = end + SHIFT
    window = RangeWindow(start=now - 1800, end=now, step=60)
    # A step twice the recorded one thins the points, keeping every other one.
    wide = RangeWindow(start=now - 1800, end=now, step=120)

    async def ask(url: str) -> tuple[Any, Any]:
        async with httpx.AsyncClient() as client:
            replayed = _series(await query_range(client, url, VARYING, window))
            thinned = _series(await query_range(client, url, VARYING, wide))
            with pytest.raises(PrometheusQueryError) as refused:
                await query_range(client, url, "up", window)
        return (replayed, thinned), refused.value

    with ReplayServer(Replay(recordings, clock=lambda: now + 0.7)) as server:
        (replayed, thinned), error = asyncio.run(ask(server.query_range_url))

    assert replayed == {k: [[t + SHIFT, v] for t, v in points] for k, points in recorded.items()}
    assert thinned == {k: [[t + SHIFT, v] for t, v in points[::2]] for k, points in recorded.items()}
    assert error.error_type == "bad_data"
    # Prometheus's free text is not carried (only its fixed errorType): the server's words stay there
    assert error.prometheus_error == ""


def test_record_of_a_bad_query_writes_nothing_and_names_prometheus_error(
    prometheus: PromFixture, tmp_path: Path
) -> None:
    out = tmp_path / "bad.json"
    result = CliRunner().invoke(
        main,
        ["record", "--prometheus", prometheus.query_range_url, "--query", "sum(", "-o", str(out)],
    )
    assert result.exit_code == 1, result.output
    assert "PrometheusQueryError" in result.output and "bad_data" in result.output
    assert not out.exists()


def test_record_against_nothing_listening_exits_3(tmp_path: Path) -> None:
    out = tmp_path / "none.json"
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(main, ["record", "--prometheus", url, "--query", "up", "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert "PrometheusUnavailable" in result.output
    assert not out.exists()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_the_replay_command_serves_until_stopped(tmp_path: Path, stop: signal.Signals) -> None:
    """``replay`` serves until SIGTERM (kill, systemd, the kubelet) or Ctrl-C, and stops cleanly on both."""
    path = tmp_path / "one.json"
    path.write_text(RecordingFile(recordings=[recording("up", ["1", "2", "3"])]).dumps())
    port = free_port()
    argv = [
        sys.executable,
        "-c",
        # A job started in the background by a shell without job control (a CI script, `cmd &`)
        # inherits SIGINT ignored, and Python then installs no Ctrl-C handler.  Install it, so the
        # Ctrl-C case does not depend on how the test run was launched.
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from dynamic_scoring.ctl.main import main; main()",
        "replay",
        str(path),
        "--listen",
        f":{port}",
    ]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/api/v1/query_range"
        wait_until(lambda: _answers(url), timeout=30, what="replay listening")
        now = int(time.time())
        # Every second, so the answer does not depend on which second the replay's "now" falls in.
        answer = httpx.get(url, params={"query": "up", "start": now - 200, "end": now + 2, "step": 1}).json()
        values = [v for _, v in answer["data"]["result"][0]["values"]]
        assert [v for i, v in enumerate(values) if i == 0 or values[i - 1] != v] == ["1", "2", "3"]
    finally:
        proc.send_signal(stop)
        try:
            _, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"serving 1 queries at http://127.0.0.1:{port}/api/v1/query_range" in err and "stopped" in err
    assert not _answers(url)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url.replace("query_range", "status/buildinfo"), timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
