"""The sample scorers as real processes on loopback: the contract, the agent's requests, real Prometheus.

Each scorer runs with ``python -m dynamic_scoring.samples.scorers.<name>`` exactly as docs/samples.md
says.  The Prometheus tests compute the expected score in closed form: a backfilled counter whose rate ramps
linearly makes ``rate()`` exactly linear in time, so the forecast and the mean are known exactly.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.contract.wire import ScorerConfig
from e2e.procs import wait_until
from e2e.prometheus import PrometheusServer
from tests.component.conftest import GAUGE, PromFixture
from tests.component.harness import SampleScorer, backfilled_prometheus, published, summary

ROOT = Path(__file__).resolve().parents[2]
CAPACITY = 4.0


@pytest.fixture(scope="module")
def scorers(component_dir: Path) -> Iterator[dict[str, SampleScorer]]:
    with contextlib.ExitStack() as stack:
        yield {
            module: stack.enter_context(
                SampleScorer(module, component_dir, "--capacity-cores", str(CAPACITY))
            )
            for module in ("cpu", "predict", "seasonal")
        }


@pytest.mark.parametrize(
    ("module", "name", "rate_window", "range_", "step", "interval"),
    [
        ("cpu", "cpu_headroom", "1m", 300, 15, 30),
        ("predict", "cpu_forecast", "1m", 600, 15, 30),
        ("seasonal", "cpu_seasonal", "5m", 90_000, 300, 60),
    ],
)
def test_config_is_a_valid_scorer_config_naming_its_own_endpoint(
    scorers: dict[str, SampleScorer],
    module: str,
    name: str,
    rate_window: str,
    range_: int,
    step: int,
    interval: int,
) -> None:
    s = scorers[module]
    config = s.config()
    assert config.name == name and config.scoring.params.name == name
    assert config.source.type == "Prometheus" and config.source.path == "/api/v1/query_range"
    assert config.source.params.query == f"sum(rate(container_cpu_usage_seconds_total[{rate_window}]))"
    assert (config.source.params.range, config.source.params.step) == (range_, step)
    assert config.scoring.params.interval == interval
    assert (config.scoring.host, config.scoring.path) == ("", "/scoring")  # configURL's origin


@pytest.mark.parametrize("module", ["cpu", "predict", "seasonal"])
def test_bad_requests_get_a_named_error_and_the_scorer_keeps_serving(
    scorers: dict[str, SampleScorer], module: str
) -> None:
    s = scorers[module]
    status, body = s.call("POST", "/scoring", b'{"data": [{"values": [[1, "x"]]}]}')
    assert status == 400 and "data[0].values[0][1]: not a number" in json.loads(body)["error"]
    assert s.call("POST", "/scoring", b"not json")[0] == 400
    assert s.call("POST", "/elsewhere", b"{}")[0] == 404
    assert s.get("/nothing")[0] == 404
    assert s.score([]).results == []
    assert s.get("/healthz") == (200, b"ok")
    assert s.proc.alive
    # the scorer process writes its log line in its own time: wait for it
    wait_until(
        lambda: "-> 400: data[0].values[0][1]: not a number" in s.proc.log_path.read_text(),
        timeout=10,
        what="the scorer's log line '-> 400: data[0].values[0][1]: not a number'",
        proc=s.proc,
    )


def test_sigterm_stops_the_scorer_cleanly_and_frees_its_port(component_dir: Path) -> None:
    s = SampleScorer("cpu", component_dir).start()
    s.proc.stop()  # SIGTERM first
    assert s.proc.returncode == 0
    with socket.socket() as probe:  # the port is free again for a restarted server
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server does
        probe.bind(("127.0.0.1", s.port))


@pytest.mark.anyio
@pytest.mark.parametrize("module", ["cpu", "predict", "seasonal"])
async def test_the_real_agent_publishes_their_scores(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    prometheus: PromFixture,
    scorers: dict[str, SampleScorer],
    module: str,
) -> None:
    # The agent's own request (Prometheus series spliced raw) against the session's backfilled
    # constant gauges: team-a uses 0.5 + 1.5 cores, team-b 1.0, at every step of the window.
    config = scorers[module].config()
    s = summary(
        f"sample_{module}",
        scorers[module].base + config.scoring.path,  # no scoring.host: the hub takes configURL's origin
        sourceType="Prometheus",
        sourceEndpoint=prometheus.query_range_url,
        sourceQuery=f"sum by (namespace) ({GAUGE})",
        sourceRange=config.source.params.range,
        sourceStep=config.source.params.step,
        scoreDimensionFormat="${namespace}",
    )
    await supervisor.apply([s])
    first = (await published(publisher, f"sample_{module}"))[0]
    assert first.condition.status == "True", first.condition
    # Flat load: mean and forecast agree. 2 of 4 cores -> 50, 1 of 4 -> 75.
    assert first.items == [ScoreItem("team-a", 50), ScoreItem("team-b", 75)]


# -- real Prometheus, the scorers' own default query ---------------------------------------------

STEP = 15.0
RAMP = 1 / 3600  # cores per second by which app-1's load grows
BASE = 0.4 + 0.5  # app-0's constant load plus app-1's load at the history's start


def ramp_openmetrics(start: float, end: float) -> str:
    """Two pods' CPU counters: app-0 at 0.4 cores, app-1 at 0.5 + RAMP * (t - start) cores."""
    lines = ["# TYPE container_cpu_usage_seconds counter"]
    for pod in ("app-0", "app-1"):
        labels = f'{{container="app",namespace="demo",node="node-1",pod="{pod}"}}'
        t = start
        while t <= end:
            x = t - start
            value = 0.4 * x if pod == "app-0" else 0.5 * x + RAMP * x * x / 2
            lines.append(f"container_cpu_usage_seconds_total{labels} {value!r} {t!r}")
            t += STEP
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def ramp_prometheus(component_dir: Path) -> Iterator[tuple[PrometheusServer, float]]:
    start = math.floor((time.time() - 7200) / STEP) * STEP
    with backfilled_prometheus(
        component_dir / "prometheus-ramp", ramp_openmetrics(start, time.time() - 60)
    ) as server:
        yield server, start


def range_query(server: PrometheusServer, config: ScorerConfig, end: float) -> list[dict[str, Any]]:
    params = {
        "query": config.source.params.query,
        "start": repr(end - config.source.params.range),
        "end": repr(end),
        "step": str(config.source.params.step),
    }
    url = f"{server.url}{config.source.path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success" and body["data"]["resultType"] == "matrix"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_real_prometheus_answer_to_their_default_query(
    ramp_prometheus: tuple[PrometheusServer, float], scorers: dict[str, SampleScorer]
) -> None:
    server, start = ramp_prometheus
    # Evaluate half a step off the sample grid and well inside the history: each rate[1m] then
    # covers samples t-52.5 ... t-7.5, whose secant slope is exactly the load at t-30.
    end = math.floor((time.time() - 300) / STEP) * STEP + STEP / 2

    def load(t: float) -> float:
        return BASE + RAMP * (t - 30 - start)

    cpu = scorers["cpu"].config()
    data = range_query(server, cpu, end)
    assert len(data) == 1 and len(data[0]["values"]) == cpu.source.params.range // 15 + 1
    mean = load(end - cpu.source.params.range / 2)
    [result] = scorers["cpu"].score(data).results
    assert result.score == pytest.approx(100 * (1 - mean / CAPACITY), abs=1e-6)

    predict = scorers["predict"].config()
    data = range_query(server, predict, end)
    expected = load(end + predict.scoring.params.interval)  # the forecast horizon is one interval
    [result] = scorers["predict"].score(data).results
    assert result.score == pytest.approx(100 * (1 - expected / CAPACITY), abs=1e-6)
    # The load is rising, so the forecast scores lower than the present mean would.
    assert result.score < 100 * (1 - load(end) / CAPACITY)
