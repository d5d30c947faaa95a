"""The power and latency samples as real processes, on a real Prometheus, through the real agent cycle.

The Prometheus holds what a cluster with Kepler and a blackbox exporter stores: Kepler 0.10's
``kepler_node_cpu_joules_total`` counters per node and RAPL zone (labels ``zone``, ``path``,
``node_name``), and the exporter's ``probe_duration_seconds``/``probe_success`` per probe target
(labels ``instance``, ``job``, ``module``), backfilled in those exact shapes.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.samples.scorers import latency
from dynamic_scoring.scorer.conformance import check
from e2e.prometheus import PrometheusServer
from tests.component.harness import SampleScorer, backfilled_prometheus, published, sample_summary

STEP = 15.0
# Watts per (node, RAPL zone): the package zones sum to 400 W; the dram zone is not counted.
RAPL = {("node-a", "package"): 150.0, ("node-b", "package"): 250.0, ("node-a", "dram"): 30.0}
EU, US = "https://eu.users.example.com", "https://us.users.example.com"
PROBES = {EU: 0.02, US: 0.10}  # seconds


def openmetrics(start: float, end: float) -> str:
    times = [start + STEP * i for i in range(int((end - start) // STEP) + 1)]
    lines = ["# TYPE kepler_node_cpu_joules counter"]
    for (node, zone), watts in RAPL.items():
        index = 0 if node == "node-a" else 1
        labels = (
            f'instance="{node}:28282",job="kepler",node_name="{node}",'
            f'path="/sys/class/powercap/intel-rapl:{index}",zone="{zone}"'
        )
        lines += [f"kepler_node_cpu_joules_total{{{labels}}} {watts * (t - start)!r} {t!r}" for t in times]
    for metric, value in (("probe_duration_seconds", None), ("probe_success", 1.0)):
        lines.append(f"# TYPE {metric} gauge")
        for target, seconds in PROBES.items():
            labels = f'instance="{target}",job="blackbox",module="http_2xx"'
            v = seconds if value is None else value
            lines += [f"{metric}{{{labels}}} {v!r} {t!r}" for t in times]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def site_prometheus(component_dir: Path) -> Iterator[PrometheusServer]:
    start = math.floor((time.time() - 7200) / STEP) * STEP
    # Past the present: rate() over the last window then sees samples up to its end, so it is exact.
    text = openmetrics(start, time.time() + 900)
    with backfilled_prometheus(component_dir / "prometheus-site", text, lookback_delta="1d") as server:
        yield server


@pytest.fixture(scope="module")
def scorers(component_dir: Path) -> Iterator[dict[str, SampleScorer]]:
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(SampleScorer(name, component_dir)) for name in ("power", "latency")}


@pytest.mark.anyio
async def test_the_real_agent_publishes_power_headroom_and_user_latency(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    site_prometheus: PrometheusServer,
    scorers: dict[str, SampleScorer],
) -> None:
    endpoint = site_prometheus.query_range_url
    caps = {"cluster1": 1000, "*": 5000}  # the agent's cluster is cluster1
    await supervisor.apply(
        [
            sample_summary("power_headroom", scorers["power"], endpoint, scoringParams={"capWatts": caps}),
            sample_summary("user_latency", scorers["latency"], endpoint),
            sample_summary(
                "user_latency_eu", scorers["latency"], endpoint, scoringParams={"weights": {EU: 3, US: 1}}
            ),
        ]
    )
    watts = (await published(publisher, "power_headroom"))[0]
    assert watts.condition.reason == "Scored", watts.condition
    assert watts.items == [ScoreItem("power_headroom", 60)]  # 400 W of cluster1's 1000 W cap
    even = (await published(publisher, "user_latency"))[0]
    assert even.condition.reason == "Scored", even.condition
    assert even.items == [ScoreItem("user_latency", 70)]  # (20 + 100) / 2 = 60 ms of 200
    weighted = (await published(publisher, "user_latency_eu"))[0]
    assert weighted.items == [ScoreItem("user_latency_eu", 80)]  # (3 x 20 + 100) / 4 = 40 ms


def test_both_pass_the_conformance_check(scorers: dict[str, SampleScorer]) -> None:
    report = check(scorers["power"].base, params={"capWatts": 1000}, dimension_format="${scoreName}-${pod}")
    assert report.ok, report.text()
    probes = [{"__name__": m, "instance": EU, "job": "blackbox"} for m in (latency.DURATION, latency.SUCCESS)]
    report = check(scorers["latency"].base, series_labels=probes)
    assert report.ok, report.text()
