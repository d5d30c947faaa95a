"""The cost sample scorer as a real process, on a real Prometheus, through the real agent cycle.

The agent fills ``${cluster}`` into the scorer's own query, so the series arrive labelled with the
cluster's name and the scorer looks up its price schedule.  The schedule is written relative to the
wall clock (the price in force now is known), and rewriting the price file, as a ConfigMap update
does, changes the next published score.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.scorer.conformance import check
from e2e.prometheus import PrometheusServer, synthetic_cpu_openmetrics
from tests.component.harness import SampleScorer, backfilled_prometheus, eventually, published, sample_summary

STEP = 15.0
CORES = 4.0  # machine_cpu_cores; the pod uses 1 core: utilisation 0.25


def hhmm(offset_hours: float) -> str:
    return (datetime.now(UTC) + timedelta(hours=offset_hours)).strftime("%H:%M")


def table(now_price: float) -> dict[str, Any]:
    """cluster1 pays ``now_price`` from two hours ago until two hours ahead; other clusters pay 0.5."""
    rates = [{"from": hhmm(-2), "price": now_price}, {"from": hhmm(2), "price": 0.1}]
    return {
        "cluster1": {"timezone": "UTC", "rates": rates},
        "*": {"rates": [{"from": "00:00", "price": 0.5}]},
    }


def cpu_openmetrics(start: float, end: float) -> str:
    usage = synthetic_cpu_openmetrics({("demo", "app-0"): 1.0}, start, end, STEP).removesuffix("# EOF\n")
    lines = [usage.rstrip("\n"), "# TYPE machine_cpu_cores gauge"]
    t = start
    while t <= end:
        lines.append(f'machine_cpu_cores{{node="node-1"}} {CORES!r} {t!r}')
        t += STEP
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def cost_prometheus(component_dir: Path) -> Iterator[PrometheusServer]:
    start = math.floor((time.time() - 7200) / STEP) * STEP
    text = cpu_openmetrics(start, time.time() - 60)
    with backfilled_prometheus(component_dir / "prometheus-cost", text, lookback_delta="1d") as server:
        yield server


@pytest.fixture(scope="module")
def prices_file(component_dir: Path) -> Path:
    path = component_dir / "prices.json"
    path.write_text(json.dumps(table(0.3)))
    return path


@pytest.fixture(scope="module")
def cost_scorer(component_dir: Path, prices_file: Path) -> Iterator[SampleScorer]:
    with SampleScorer("cost", component_dir, "--prices", str(prices_file)) as scorer:
        yield scorer


@pytest.mark.anyio
async def test_the_agent_names_the_cluster_and_a_price_change_moves_the_score(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    cost_prometheus: PrometheusServer,
    cost_scorer: SampleScorer,
    prices_file: Path,
) -> None:
    config = cost_scorer.config()
    assert '"${cluster}"' in config.source.params.query
    s = sample_summary("cost", cost_scorer, cost_prometheus.query_range_url, scoringInterval=1)
    await supervisor.apply([s])
    first = (await published(publisher, "cost"))[0]
    assert first.condition.reason == "Scored", first.condition
    # 75 % of the CPU free (room); price 0.3 in a table spanning 0.1 to 0.5: cheapness one half
    assert first.items == [ScoreItem("cost", 75)]

    prices_file.write_text(json.dumps(table(0.1)))  # a ConfigMap update: cluster1 is now the cheapest
    os.utime(prices_file, (time.time() + 5, time.time() + 5))

    def cheapest() -> bool | None:
        return True if publisher.requests_for("cost")[-1].items == [ScoreItem("cost", 100)] else None

    await eventually(cheapest, timeout=30, what="the score after the price change")


def test_it_passes_the_conformance_check(cost_scorer: SampleScorer) -> None:
    # The default per-pod series carry no cluster label: the table's '*' schedule prices them.
    report = check(cost_scorer.base, dimension_format="${scoreName}-${pod}")
    assert report.ok, report.text()


def test_a_request_without_a_schedule_for_its_cluster_is_a_named_400(cost_scorer: SampleScorer) -> None:
    data = [{"metric": {"cluster": "cluster7"}, "values": [[time.time(), "0.5"]]}]
    params = {"prices": {"cluster1": table(0.3)["cluster1"]}}
    status, body = cost_scorer.call("POST", "/scoring", json.dumps({"data": data, "params": params}).encode())
    assert status == 400, body
    assert "no price schedule for cluster 'cluster7'" in json.loads(body)["error"]
    assert cost_scorer.get("/healthz") == (200, b"ok")  # and it keeps serving
