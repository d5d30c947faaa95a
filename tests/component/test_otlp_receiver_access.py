"""Who may push to the OTLP receiver: bearer token, mutual TLS and label caps, on real pushes.

The receiver is the real one on loopback; accepted pushes come from the OpenTelemetry SDK's own
``OTLPMetricExporter`` (with its ``headers`` and client-certificate options, as a Collector's
``otlphttp`` exporter would send them), refusals from plain HTTP clients.  What the receiver held,
counted and answered is read back from the store, its response and the agent's metrics.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.source.otlp.access import ReceiverAccess
from dynamic_scoring.agent.source.otlp.receiver import OtlpReceiver
from dynamic_scoring.agent.source.otlp.selection import parse_selector
from dynamic_scoring.agent.source.otlp.store import LabelLimits, SeriesStore
from dynamic_scoring.agent.source.otlp.telemetry import OtlpTelemetry
from e2e.procs import wait_until
from tests.component.harness import ScorerPKI

TOKEN = "s3cr3t-otlp-token-0123456789"


class Receiver:
    """A started receiver whose store keeps the gauge ``temp``, and the metrics it exports."""

    def __init__(self, access: ReceiverAccess, limits: LabelLimits | None = None) -> None:
        self.store = SeriesStore(max_series=100, label_limits=limits)
        self.store.configure([parse_selector("temp")], 600, 10)
        self.receiver = OtlpReceiver(self.store, port=0, access=access, read_timeout_seconds=5)
        self.metrics = AgentMetrics(process_collectors=False)
        self.metrics.registry.register(OtlpTelemetry(self.store, self.receiver))
        self.receiver.start()

    @property
    def url(self) -> str:
        return f"{self.receiver.scheme}://127.0.0.1:{self.receiver.port}/v1/metrics"

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        value: float | None = self.metrics.registry.get_sample_value(name, labels or {})
        return value

    def stop(self) -> None:
        self.receiver.stop()


def body(attributes: dict[str, str] | None = None, value: float = 21.5) -> dict[str, object]:
    """One ``temp`` gauge point as OTLP JSON."""
    point = {
        "timeUnixNano": str(time.time_ns()),
        "asDouble": value,
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in (attributes or {}).items()],
    }
    return {
        "resourceMetrics": [
            {"scopeMetrics": [{"metrics": [{"name": "temp", "gauge": {"dataPoints": [point]}}]}]}
        ]
    }


def sdk_push(
    url: str,
    value: float,
    *,
    headers: dict[str, str] | None = None,
    certificate_file: str | None = None,
    client_certificate_file: str | None = None,
    client_key_file: str | None = None,
) -> None:
    """Push one ``temp`` gauge with the SDK's exporter (a flush, then another export on shutdown).

    The SDK logs a failed export and goes on, so callers check what the receiver answered.
    """
    exporter = OTLPMetricExporter(
        endpoint=url,
        timeout=10,
        headers=headers,
        certificate_file=certificate_file,
        client_certificate_file=client_certificate_file,
        client_key_file=client_key_file,
    )
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    provider = MeterProvider(resource=Resource.create({"service.name": "sdk"}), metric_readers=[reader])

    def observe(_: CallbackOptions) -> list[Observation]:
        return [Observation(value, {"pod": "p1"})]

    try:
        provider.get_meter("test").create_observable_gauge("temp", callbacks=[observe])
        provider.force_flush(10_000)
    finally:
        provider.shutdown()


# -- bearer token -----------------------------------------------------------------------------------


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")  # a trailing newline, as `kubectl create secret --from-file` keeps it
    return path


@pytest.fixture
def with_token(token_file: Path) -> Iterator[Receiver]:
    running = Receiver(ReceiverAccess(bearer_token_file=token_file))
    try:
        yield running
    finally:
        running.stop()


def test_a_push_without_the_token_is_refused_with_401_before_anything_is_decoded(
    with_token: Receiver,
) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        answer = httpx.post(with_token.url, json=body(), headers=headers, timeout=10)
        assert answer.status_code == 401, headers
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        status = answer.json()
        assert status["code"] == 16  # UNAUTHENTICATED, in the OTLP error body (google.rpc.Status)
        assert "bearer token is required" in status["message"]
        assert TOKEN not in answer.text
    assert with_token.store.stats.points_received == 0  # refused before the body was read
    assert with_token.store.series_held == 0
    assert with_token.sample("dynamic_scoring_otlp_requests_total", {"code": "401"}) == 3


def test_the_sdk_exporter_with_the_token_is_accepted(with_token: Receiver) -> None:
    sdk_push(with_token.url, 1.0)  # the SDK without the header: refused
    assert with_token.sample("dynamic_scoring_otlp_requests_total", {"code": "401"}) == 2  # flush + shutdown
    assert with_token.store.series_held == 0
    sdk_push(with_token.url, 2.0, headers={"Authorization": f"Bearer {TOKEN}"})
    assert with_token.sample("dynamic_scoring_otlp_requests_total", {"code": "200"}) == 2
    assert with_token.store.series_held == 1


def test_a_rotated_token_takes_effect_without_a_restart_and_a_missing_one_fails_closed(
    with_token: Receiver, token_file: Path
) -> None:
    old = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(with_token.url, json=body(), headers=old, timeout=10).status_code == 200
    replacement = token_file.with_name("token.new")
    replacement.write_text("rotated-token")
    replacement.replace(token_file)  # atomic, as the kubelet swaps a Secret volume
    assert httpx.post(with_token.url, json=body(), headers=old, timeout=10).status_code == 401
    new = {"Authorization": "Bearer rotated-token"}
    assert httpx.post(with_token.url, json=body(), headers=new, timeout=10).status_code == 200
    token_file.unlink()
    assert httpx.post(with_token.url, json=body(), headers=new, timeout=10).status_code == 401
    assert httpx.post(with_token.url, json=body(), timeout=10).status_code == 401


# -- mutual TLS -------------------------------------------------------------------------------------


@pytest.fixture
def with_mtls(pki: ScorerPKI) -> Iterator[Receiver]:
    access = ReceiverAccess(
        tls_cert_file=pki.server.cert_path,
        tls_key_file=pki.server.key_path,
        client_ca_file=pki.client_ca.cert_path,
    )
    running = Receiver(access)
    try:
        yield running
    finally:
        running.stop()


def _client(pki: ScorerPKI, cert: tuple[Path, Path] | None) -> httpx.Client:
    context = ssl.create_default_context(cafile=str(pki.ca.cert_path))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return httpx.Client(verify=context, timeout=10)


def test_mtls_refuses_a_push_without_a_client_certificate_or_with_an_untrusted_one(
    with_mtls: Receiver, pki: ScorerPKI
) -> None:
    assert with_mtls.url.startswith("https://")
    for cert in (None, (pki.stranger_client.cert_path, pki.stranger_client.key_path)):
        with (
            _client(pki, cert) as client,
            pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)),
        ):
            client.post(with_mtls.url, json=body())
    # Plain HTTP to the TLS port is no way around it either.
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError, httpx.ConnectError)):
        httpx.post(with_mtls.url.replace("https://", "http://"), json=body(), timeout=10)
    assert with_mtls.store.stats.points_received == 0
    # The server counts a failed handshake on its own thread, possibly just after the client gave up.
    wait_until(
        lambda: with_mtls.sample("dynamic_scoring_otlp_tls_handshake_failures_total") == 3,
        timeout=10,
        what="3 failed handshakes counted",
    )


def test_mtls_accepts_the_sdk_exporter_with_a_client_certificate_the_ca_signed(
    with_mtls: Receiver, pki: ScorerPKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests (under the SDK's exporter) lets these variables override the exporter's CA file.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    sdk_push(
        with_mtls.url,
        3.0,
        certificate_file=str(pki.ca.cert_path),
        client_certificate_file=str(pki.client.cert_path),
        client_key_file=str(pki.client.key_path),
    )
    assert with_mtls.sample("dynamic_scoring_otlp_requests_total", {"code": "200"}) == 2
    assert with_mtls.store.series_held == 1
    assert with_mtls.sample("dynamic_scoring_otlp_tls_handshake_failures_total") == 0


def test_token_and_mtls_together_need_both(pki: ScorerPKI, token_file: Path) -> None:
    access = ReceiverAccess(
        bearer_token_file=token_file,
        tls_cert_file=pki.server.cert_path,
        tls_key_file=pki.server.key_path,
        client_ca_file=pki.client_ca.cert_path,
    )
    running = Receiver(access)
    try:
        with _client(pki, (pki.client.cert_path, pki.client.key_path)) as client:
            assert client.post(running.url, json=body()).status_code == 401
            auth = {"Authorization": f"Bearer {TOKEN}"}
            assert client.post(running.url, json=body(), headers=auth).status_code == 200
    finally:
        running.stop()


# -- label caps -------------------------------------------------------------------------------------


def test_label_caps_refuse_the_oversized_series_and_keep_the_rest_of_the_push() -> None:
    running = Receiver(ReceiverAccess(), LabelLimits(max_labels=8, max_value_length=100))
    try:
        many = {f"attr_{i}": "x" for i in range(20)}
        long = {"pod": "p" * 101}
        ok = {"pod": "p1"}
        for attributes in (many, long, ok):
            answer = httpx.post(running.url, json=body(attributes), timeout=10)
            assert answer.status_code == 200  # OTLP partial success, not a 400 for the whole batch
            reply = answer.json()
            if attributes is ok:
                assert "partialSuccess" not in reply or not reply["partialSuccess"].get("rejectedDataPoints")
            else:
                assert reply["partialSuccess"]["rejectedDataPoints"] == "1"
                message = reply["partialSuccess"]["errorMessage"]
                assert message.startswith("1 point(s) refused: a series of temp has ")
                assert "p" * 101 not in message  # no label value comes back or goes to the log
        assert json.dumps(body(long))  # (the body itself was valid OTLP)
        assert running.store.series_held == 1
        assert running.sample("dynamic_scoring_otlp_points_dropped_total", {"reason": "label_limit"}) == 2
    finally:
        running.stop()
