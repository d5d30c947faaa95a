"""A real OpenTelemetry Collector forwards an SDK's pushes to the agent's receiver.

The Collector is built from the Go module proxy by ``e2e/build-tools.sh otelcol`` (the Collector
builder with the otlp receiver and the otlphttp exporter; `make tools` runs it, and this test builds
it when it is missing; a skipped test would count as a pass).  Its config is the sample's
(``samples/opentelemetry/collector-configmap.yaml``) with loopback ports, so the sample is what is
tested.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from dynamic_scoring.agent.source.otlp.access import ReceiverAccess
from dynamic_scoring.agent.source.otlp.receiver import OtlpReceiver
from dynamic_scoring.agent.source.otlp.selection import parse_selector
from dynamic_scoring.agent.source.otlp.store import SeriesStore
from e2e.procs import Proc, free_port, wait_until
from e2e.tools import component_dirs
from tests.component.harness import ScorerProcess, eventually, summary
from tests.component.test_otlp_receiver import Agent, close_agent, make_agent, scored

pytestmark = [pytest.mark.anyio, pytest.mark.late_tools]

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "opentelemetry" / "collector-configmap.yaml"


def collector_binary() -> Path:
    """The Collector from the tools cache (built first when missing, or waited for while being built)."""
    return component_dirs("otelcol")["otelcol"] / "bin" / "otelcol-ds"


@pytest.fixture
async def agent() -> AsyncIterator[Agent]:
    running = make_agent()
    try:
        yield running
    finally:
        await close_agent(running)


def start_collector(
    receiver_port: int, tmp_path: Path, headers: dict[str, str] | None = None
) -> tuple[Proc, int]:
    """A Collector listening for OTLP/HTTP on a loopback port, exporting to the agent's receiver."""
    binary = collector_binary()
    [configmap] = list(yaml.safe_load_all(SAMPLE.read_text()))
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    port = free_port()
    config["receivers"]["otlp"]["protocols"] = {"http": {"endpoint": f"127.0.0.1:{port}"}}
    exporter = config["exporters"]["otlphttp/dynamic-scoring"]
    exporter["endpoint"] = f"http://127.0.0.1:{receiver_port}"
    if headers is not None:
        exporter["headers"] = headers  # what the sample's commented "headers:" block turns on
    config["service"]["telemetry"] = {"metrics": {"level": "none"}}  # no :8888 listener
    path = tmp_path / "collector.yaml"
    path.write_text(yaml.safe_dump(config))
    return Proc("otelcol", [str(binary), f"--config={path}"], tmp_path / "otelcol.log").start(), port


@pytest.fixture
def collector(agent: Agent, tmp_path: Path) -> Iterator[int]:
    proc, port = start_collector(agent.receiver.port, tmp_path)
    try:
        yield port
    finally:
        proc.stop()


async def test_a_collector_forwards_sdk_pushes_to_the_agent(
    agent: Agent, collector: int, scorer: ScorerProcess
) -> None:
    path = f"/mean/otlp-collector-{uuid.uuid4().hex[:8]}/scoring"
    s = summary(
        "otel_collector",
        scorer.url(path),
        sourceType="OpenTelemetry",
        sourceQuery='queue.depth{service_name="via-collector"}',
        sourceRange=120,
        sourceStep=10,
        scoringInterval=1,
        scoreDimensionFormat="${pod}",
    )
    await agent.supervisor.apply([s])

    def observe(_: CallbackOptions) -> list[Observation]:
        return [Observation(12, {"pod": "q1"}), Observation(30, {"pod": "q2"})]

    exporter = OTLPMetricExporter(endpoint=f"http://127.0.0.1:{collector}/v1/metrics")
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=500)
    provider = MeterProvider(
        resource=Resource.create({"service.name": "via-collector"}), metric_readers=[reader]
    )
    provider.get_meter("test").create_observable_gauge("queue.depth", callbacks=[observe])
    try:
        # The SDK retries until the Collector listens; the Collector forwards with gzip and protobuf.
        await eventually(
            lambda: agent.store.series_held == 2 or None, timeout=60, what="2 series via the Collector"
        )
        first = (await eventually(lambda: scored(agent.publisher, "otel_collector"), what="a scored cycle"))[
            0
        ]
    finally:
        provider.shutdown()
    assert sorted((i.name, i.value) for i in first.items or []) == [("q1", 12), ("q2", 30)]
    # counted by the receiver's handler thread just before it answers, after the store took the points
    await eventually(
        lambda: agent.receiver.responses[200] >= 1, timeout=10, what="a 200 counted by the receiver"
    )


def test_a_collector_sending_the_token_header_is_admitted_by_a_receiver_that_requires_it(
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_text("collector-token")
    store = SeriesStore(max_series=10)
    store.configure([parse_selector("queue.depth")], 600, 10)
    receiver = OtlpReceiver(store, port=0, access=ReceiverAccess(bearer_token_file=token))
    receiver.start()
    proc, port = start_collector(receiver.port, tmp_path, {"Authorization": "Bearer collector-token"})

    def observe(_: CallbackOptions) -> list[Observation]:
        return [Observation(7, {"pod": "q1"})]

    exporter = OTLPMetricExporter(endpoint=f"http://127.0.0.1:{port}/v1/metrics")
    provider = MeterProvider(
        resource=Resource.create({"service.name": "via-collector"}),
        metric_readers=[PeriodicExportingMetricReader(exporter, export_interval_millis=500)],
    )
    provider.get_meter("test").create_observable_gauge("queue.depth", callbacks=[observe])
    try:
        wait_until(lambda: store.series_held == 1, timeout=60, what="a series via the Collector", proc=proc)
    finally:
        provider.shutdown()
        proc.stop()
        receiver.stop()
    # the handler threads are not joined by stop(): wait for the count of the answer that stored the series
    wait_until(lambda: receiver.responses[200] >= 1, timeout=10, what="a 200 counted by the receiver")
    assert receiver.responses[401] == 0
