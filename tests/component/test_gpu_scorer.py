"""The GPU sample scorer on a real Prometheus holding DCGM exporter series, through the real agent cycle.

The series carry the exporter's own metric names and labels (``gpu``, ``UUID``, ``pci_bus_id``,
``device``, ``modelName``, ``Hostname``, ``DCGM_FI_DRIVER_VERSION`` and, with pod mapping, the pod
using the GPU), backfilled as gauges, as a scrape of ``nvidia-dcgm-exporter`` stores them.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dynamic_scoring.agent.memory import MemoryPublisher
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.contract.wire import ScorerSummary
from dynamic_scoring.ctl.main import main
from dynamic_scoring.samples.scorers import gpu
from dynamic_scoring.samples.scorers.server import build_app, build_parser
from dynamic_scoring.scorer.conformance import check
from e2e.prometheus import PrometheusServer
from tests.component.conftest import PromFixture
from tests.component.harness import SampleScorer, backfilled_prometheus, published, sample_summary, serving

NODE = "gpu-node-1"
STEP = 30.0
# GPU 0: 30 % busy but 24,000 of 40,000 MiB used -> its memory leaves 0.4 of it free;
# GPU 1: 90 % busy with half its memory free -> its cores leave 0.1.
CARDS = {0: (30.0, 24_000.0, 16_000.0), 1: (90.0, 20_000.0, 20_000.0)}


def dcgm_labels(index: int) -> dict[str, str]:
    """The DCGM exporter's labels of one GPU as a Prometheus scrape stores them."""
    labels = {
        "gpu": str(index),
        "UUID": f"GPU-5c1a0e3e-7b4f-4d2a-9e61-00000000000{index}",
        "pci_bus_id": f"00000000:0{index}:00.0",
        "device": f"nvidia{index}",
        "modelName": "NVIDIA A100-SXM4-40GB",
        "Hostname": NODE,
        "DCGM_FI_DRIVER_VERSION": "535.104.05",
        "instance": "10.128.2.17:9400",
        "job": "nvidia-dcgm-exporter",
    }
    if index == 0:  # pod mapping: the pod using this GPU
        labels |= {"container": "trainer", "namespace": "ml", "pod": "trainer-0"}
    return labels


def dcgm_openmetrics(start: float, end: float) -> str:
    lines: list[str] = []
    for metric, column in ((gpu.UTIL, 0), (gpu.FB_USED, 1), (gpu.FB_FREE, 2)):
        lines.append(f"# TYPE {metric} gauge")
        for index, readings in CARDS.items():
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(dcgm_labels(index).items()))
            t = start
            while t <= end:
                lines.append(f"{metric}{{{labels}}} {readings[column]!r} {t!r}")
                t += STEP
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def dcgm_prometheus(component_dir: Path) -> Iterator[PrometheusServer]:
    start = math.floor((time.time() - 7200) / STEP) * STEP
    text = dcgm_openmetrics(start, time.time() - 60)
    with backfilled_prometheus(component_dir / "prometheus-dcgm", text, lookback_delta="1d") as server:
        yield server


@pytest.fixture(scope="module")
def gpu_scorer(component_dir: Path) -> Iterator[SampleScorer]:
    with SampleScorer("gpu", component_dir) as scorer:
        yield scorer


def gpu_summary(name: str, scorer: SampleScorer, endpoint: str, **fields: Any) -> ScorerSummary:
    """The sample DynamicScorer's summary: the scorer's own query and window, missing data -100."""
    return sample_summary(name, scorer, endpoint, missingDataScore=-100, **fields)


@pytest.mark.anyio
async def test_the_real_agent_publishes_free_gpus_per_cluster_and_per_gpu(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    dcgm_prometheus: PrometheusServer,
    gpu_scorer: SampleScorer,
) -> None:
    per_gpu = gpu_summary(
        "gpu_free_by_gpu",
        gpu_scorer,
        dcgm_prometheus.query_range_url,
        scoringParams={"per": "gpu"},
        scoreDimensionFormat="${node}-${device}",
    )
    two = gpu_summary("gpu_free_two", gpu_scorer, dcgm_prometheus.query_range_url, scoringParams={"gpus": 2})
    await supervisor.apply(
        [gpu_summary("gpu_free", gpu_scorer, dcgm_prometheus.query_range_url), per_gpu, two]
    )
    whole = (await published(publisher, "gpu_free"))[0]
    assert whole.condition.reason == "Scored", whole.condition
    assert whole.items == [ScoreItem("gpu_free", 50)]  # 0.4 + 0.1 GPUs free of the 1 asked for
    each = (await published(publisher, "gpu_free_by_gpu"))[0]
    assert each.condition.reason == "Scored", each.condition
    assert sorted(each.items or []) == [ScoreItem(f"{NODE}-nvidia0", 40), ScoreItem(f"{NODE}-nvidia1", 10)]
    halves = (await published(publisher, "gpu_free_two"))[0]
    assert halves.items == [ScoreItem("gpu_free_two", 25)]


@pytest.mark.anyio
async def test_a_cluster_without_gpus_gets_the_missing_data_score(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, gpu_scorer: SampleScorer
) -> None:
    # The session's Prometheus holds CPU gauges only: no DCGM series, as on a cluster without GPUs.
    await supervisor.apply([gpu_summary("gpu_free", gpu_scorer, prometheus.query_range_url)])
    first = (await published(publisher, "gpu_free"))[0]
    assert (first.condition.status, first.condition.reason) == ("True", "NoData"), first.condition
    assert first.items == [ScoreItem("gpu_free", -100)]


def test_it_passes_the_conformance_check_when_sent_dcgm_series(gpu_scorer: SampleScorer) -> None:
    sets = [{"__name__": m, **dcgm_labels(i)} for i in CARDS for m in (gpu.UTIL, gpu.FB_USED, gpu.FB_FREE)]
    report = check(gpu_scorer.base, series_labels=sets, dimension_format="${scoreName}")
    assert report.ok, report.text()
    # Sent the default per-pod CPU series it names what it reads and how to send it that.
    report = check(gpu_scorer.base, large=False)
    assert not report.ok
    text = report.text()
    assert "no DCGM_FI_DEV_GPU_UTIL" in text and "--series-labels" in text, text


def test_scorer_validate_sends_the_series_labels_it_is_given() -> None:
    parser = build_parser("gpu", gpu.DEFAULTS)
    app = build_app(parser.parse_args([]), argparse.ArgumentParser(), "gpu", gpu.score)
    sets = [json.dumps({"__name__": m, **dcgm_labels(1)}) for m in (gpu.UTIL, gpu.FB_USED, gpu.FB_FREE)]
    with serving(app) as base:
        ok = CliRunner().invoke(
            main,
            ["scorer", "validate", base, "--no-large", *(a for s in sets for a in ("--series-labels", s))],
        )
        assert ok.exit_code == 0, ok.output
        refused = CliRunner().invoke(main, ["scorer", "validate", base, "--no-large"])
        assert refused.exit_code == 1 and "--series-labels" in refused.output, refused.output
        bad = CliRunner().invoke(main, ["scorer", "validate", base, "--series-labels", "[1]"])
        assert bad.exit_code == 2 and "--series-labels: series labels [0]" in bad.output, bad.output
