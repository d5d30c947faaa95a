"""The agent's OTLP/HTTP receiver on loopback: real pushes in, a real scorer receiving the matrix.

Pushes come from the OpenTelemetry Python SDK's own ``OTLPMetricExporter`` (HTTP, protobuf) and
from hand-written OTLP JSON bodies; the scorer is the component tier's real scorer process.  The
refusals (400, 404, 405, 413, 415, 429, gzip bomb) and the series bound are checked on the wire.
"""

from __future__ import annotations

import gzip
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.ports import PublishRequest, ScoreItem
from dynamic_scoring.agent.source.otlp.receiver import OtlpReceiver
from dynamic_scoring.agent.source.otlp.store import SeriesStore
from dynamic_scoring.agent.source.otlp.telemetry import OtlpTelemetry
from dynamic_scoring.agent.supervisor import Supervisor
from tests.component.conftest import FAST
from tests.component.harness import ScorerProcess, eventually, peak_rss_growth, summary

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


@dataclass
class Agent:
    """The parts of an agent an OpenTelemetry source needs: store, receiver, supervisor, metrics."""

    store: SeriesStore
    receiver: OtlpReceiver
    supervisor: Supervisor
    publisher: MemoryPublisher
    metrics: AgentMetrics

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.receiver.port}/v1/metrics"

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        value: float | None = self.metrics.registry.get_sample_value(name, labels or {})
        return value


def make_agent() -> Agent:
    """A store of 50 series, a 1 MiB receiver on loopback (started), and a supervisor using both."""
    store = SeriesStore(max_series=50)
    receiver = OtlpReceiver(
        store, port=0, max_body_bytes=1 * MIB, max_concurrent=1, max_wait_seconds=0.2, read_timeout_seconds=10
    )
    metrics = AgentMetrics(process_collectors=False)
    metrics.registry.register(OtlpTelemetry(store, receiver))
    publisher = MemoryPublisher()
    sup = Supervisor(
        cluster_name="cluster1",
        secrets=MemorySecrets(),
        publisher=publisher,
        metrics=metrics,
        settings=FAST,
        otlp_store=store,
    )
    receiver.start()
    return Agent(store, receiver, sup, publisher, metrics)


async def close_agent(agent: Agent) -> None:
    await agent.supervisor.close()
    agent.receiver.stop()


@pytest.fixture
async def agent() -> AsyncIterator[Agent]:
    running = make_agent()
    try:
        yield running
    finally:
        await close_agent(running)


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def scored(publisher: MemoryPublisher, name: str) -> list[PublishRequest] | None:
    found = [r for r in publisher.requests_for(name) if r.items]
    return found or None


async def test_sdk_exporter_pushes_reach_the_scorer_as_a_prometheus_matrix(
    agent: Agent, scorer: ScorerProcess
) -> None:
    path = f"/mean/otlp-sdk-{uuid.uuid4().hex[:8]}/scoring"
    s = summary(
        "otel_cpu",
        scorer.url(path),
        sourceType="OpenTelemetry",
        sourceQuery='pod.cpu.load{service_name="web"}',
        sourceRange=120,
        sourceStep=10,
        scoringInterval=1,
        scoreDimensionFormat="${pod}",
    )
    await agent.supervisor.apply([s])

    loads = {"web-1": 25.0, "web-2": 75.0}

    def observe(_: CallbackOptions) -> list[Observation]:
        return [Observation(v, {"pod": pod}) for pod, v in loads.items()]

    exporter = OTLPMetricExporter(endpoint=agent.url)  # protobuf over HTTP, the SDK's default
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    provider = MeterProvider(resource=Resource.create({"service.name": "web"}), metric_readers=[reader])
    other = MeterProvider(
        resource=Resource.create({"service.name": "batch"}),
        metric_readers=[
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=agent.url), export_interval_millis=3_600_000
            )
        ],
    )
    try:
        provider.get_meter("test").create_observable_gauge("pod.cpu.load", callbacks=[observe])
        other.get_meter("test").create_observable_gauge("pod.cpu.load", callbacks=[observe])
        assert provider.force_flush(10_000) and other.force_flush(10_000)
    finally:
        provider.shutdown()
        other.shutdown()

    # Only the selected service's two series are kept; the other service's are discarded on arrival.
    assert agent.store.series_held == 2
    first = (await eventually(lambda: scored(agent.publisher, "otel_cpu"), what="a scored cycle"))[0]
    assert first.condition.status == "True", first.condition
    assert sorted(first.items or [], key=lambda i: i.name) == [ScoreItem("web-1", 25), ScoreItem("web-2", 75)]

    received = next(r for r in scorer.requests(path) if r["series"])
    labels = sorted(received["series"], key=lambda m: m["pod"])
    assert [m["pod"] for m in labels] == ["web-1", "web-2"]
    for metric in labels:
        assert (
            metric["__name__"] == "pod_cpu_load"
        )  # dots become underscores, as Prometheus' OTLP endpoint does
        assert metric["service_name"] == "web"
        assert metric["otel_scope_name"] == "test"
    assert agent.sample("dynamic_scoring_otlp_series_held") == 2
    # Each provider exported twice: on force_flush and again on shutdown.
    assert agent.sample("dynamic_scoring_otlp_requests_total", {"code": "200"}) == 4


def json_gauge(name: str, points: list[tuple[dict[str, str], str, int]]) -> dict[str, object]:
    """An OTLP JSON body: lowerCamelCase keys, int64 values and times as strings, as the spec writes them."""
    return {
        "resourceMetrics": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-app"}}]},
                "scopeMetrics": [
                    {
                        "scope": {"name": "handmade"},
                        "metrics": [
                            {
                                "name": name,
                                "gauge": {
                                    "dataPoints": [
                                        {
                                            "attributes": [
                                                {"key": k, "value": {"stringValue": v}}
                                                for k, v in attrs.items()
                                            ],
                                            "timeUnixNano": str(t_ns),
                                            "asInt": value,
                                            "exemplars": [
                                                {
                                                    "timeUnixNano": str(t_ns),
                                                    "asInt": value,
                                                    "traceId": "5b8efff798038103d269b633813fc60c",
                                                    "spanId": "eee19b7ec3c1b174",
                                                }
                                            ],
                                        }
                                        for attrs, value, t_ns in points
                                    ]
                                },
                            }
                        ],
                    }
                ],
            }
        ]
    }


async def test_json_pushes_are_scored_and_a_series_limit_is_reported_as_partial_success(
    agent: Agent, scorer: ScorerProcess, http: httpx.Client
) -> None:
    path = f"/mean/otlp-json-{uuid.uuid4().hex[:8]}/scoring"
    s = summary(
        "otel_json",
        scorer.url(path),
        sourceType="OpenTelemetry",
        sourceQuery="queue_depth",
        sourceRange=60,
        sourceStep=5,
        scoringInterval=1,
        scoreDimensionFormat="${pod}",
    )
    await agent.supervisor.apply([s])
    now_ns = time.time_ns()
    body = json_gauge("queue.depth", [({"pod": "a"}, "42", now_ns), ({"pod": "b"}, "7", now_ns)])
    answer = http.post(agent.url, json=body)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {}  # nothing rejected: no partialSuccess

    first = (await eventually(lambda: scored(agent.publisher, "otel_json"), what="a scored cycle"))[0]
    assert sorted(first.items or [], key=lambda i: i.name) == [ScoreItem("a", 42), ScoreItem("b", 7)]

    # 60 more series than the store may hold (50): the excess is rejected, counted and said.
    many = [({"pod": f"q{i}"}, "1", now_ns) for i in range(60)]
    answer = http.post(
        agent.url,
        content=gzip.compress(json.dumps(json_gauge("queue.depth", many)).encode()),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedDataPoints"] == "12"  # int64 in OTLP JSON is a string; 50 - 2 held = 48 taken
    assert "limit of 50 series" in partial["errorMessage"]
    assert agent.store.series_held == 50
    assert agent.sample("dynamic_scoring_otlp_series_dropped_total") == 12
    assert agent.sample("dynamic_scoring_otlp_points_dropped_total", {"reason": "series_limit"}) == 12

    # The same over protobuf: the response is an ExportMetricsServiceResponse in protobuf.
    from google.protobuf import json_format
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    message = json_format.ParseDict(
        json_gauge("queue.depth", [({"pod": "late"}, "1", now_ns)]),
        ExportMetricsServiceRequest(),
        ignore_unknown_fields=True,
    )
    answer = http.post(
        agent.url, content=message.SerializeToString(), headers={"Content-Type": "application/x-protobuf"}
    )
    assert answer.status_code == 200
    response = ExportMetricsServiceResponse.FromString(answer.content)
    assert response.partial_success.rejected_data_points == 1


async def test_bad_requests_get_the_otlp_status_and_the_receiver_keeps_working(
    agent: Agent, http: httpx.Client
) -> None:
    from google.rpc import status_pb2

    proto = {"Content-Type": "application/x-protobuf"}
    cases = [
        (http.post(agent.url, content=b"\xff\xff\xff garbage", headers=proto), 400),
        (http.post(agent.url, content=b"{not json", headers={"Content-Type": "application/json"}), 400),
        (http.post(agent.url, content=b"a=1", headers={"Content-Type": "text/plain"}), 415),
        (http.post(agent.url, content=b"x", headers={**proto, "Content-Encoding": "br"}), 415),
        (http.post(agent.url, content=b"\0" * (MIB + 1), headers=proto), 413),
        (http.post(agent.url.replace("/v1/metrics", "/v1/traces"), content=b"", headers=proto), 404),
        (http.get(agent.url), 405),
    ]
    for response, status in cases:
        assert response.status_code == status, (status, response.content[:200])
        if response.headers["content-type"] == "application/x-protobuf":
            assert status_pb2.Status.FromString(response.content).message
    assert json.loads(cases[1][0].content)["message"] == "the body is not valid JSON"

    # A gzip bomb: 256 MiB of zeros in about 250 kB; inflation stops at the 1 MiB limit.
    bomb = gzip.compress(b"\0" * (256 * MIB), compresslevel=9)
    assert len(bomb) < MIB
    with peak_rss_growth() as growth:
        answer = http.post(agent.url, content=bomb, headers={**proto, "Content-Encoding": "gzip"})
    assert answer.status_code == 413
    assert "inflates to more than" in status_pb2.Status.FromString(answer.content).message
    assert growth() < 16, f"peak RSS grew {growth():.1f} MiB"

    # 429 with Retry-After while the only decoding slot is taken by a request whose body stalls.
    with socket.create_connection(("127.0.0.1", agent.receiver.port)) as stalled:
        stalled.sendall(
            b"POST /v1/metrics HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 100\r\n\r\nabc"
        )

        def busy() -> httpx.Response | None:
            r = http.post(agent.url, content=b"", headers=proto)
            return r if r.status_code == 429 else None

        refused = await eventually(busy, timeout=10, what="a 429 while the slot is taken")
        assert refused.headers["retry-after"] == "1"

    # Still working after all of that.
    ok = http.post(agent.url, content=b"", headers=proto)
    assert ok.status_code == 200
    assert agent.sample("dynamic_scoring_otlp_requests_total", {"code": "400"}) == 2
    assert agent.sample("dynamic_scoring_otlp_requests_total", {"code": "413"}) == 2
