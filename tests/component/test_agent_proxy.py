"""The ADC's proxyConfig, as rendered into the agent's environment, is what the agent's calls use."""

from __future__ import annotations

import dataclasses
import http.client
import ssl
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.proxy import proxy_settings_from_env
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy
from e2e.pki import CertificateAuthority
from tests.component.conftest import FAST
from tests.component.harness import ScorerProcess, eventually, published, summary

pytestmark = pytest.mark.anyio


class _Forwarder(BaseHTTPRequestHandler):
    """A plain forward proxy for http:// URLs in absolute form; it records what passed through."""

    seen: list[str]

    def _forward(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        target = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        conn = http.client.HTTPConnection(target.hostname or "", target.port or 80, timeout=10)
        path = target.path + (f"?{target.query}" if target.query else "")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "host")}
        conn.request(self.command, path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = _forward  # http.server dispatches to do_<METHOD>
    do_POST = _forward

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Recording", (_Forwarder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def _supervisor(
    env: dict[str, str], policy: AddressPolicy | None = None
) -> tuple[Supervisor, MemoryPublisher]:
    settings = dataclasses.replace(FAST, proxies=proxy_settings_from_env(env))
    if policy is not None:
        settings = dataclasses.replace(settings, address_policy=policy)
    publisher = MemoryPublisher()
    sup = Supervisor(
        cluster_name="cluster1",
        secrets=MemorySecrets(),
        publisher=publisher,
        metrics=AgentMetrics(process_collectors=False),
        settings=settings,
    )
    return sup, publisher


@pytest.fixture
async def scored(scorer: ScorerProcess) -> AsyncIterator[tuple[str, ScorerProcess]]:
    key = uuid.uuid4().hex
    scorer.respond(key, {"results": [{"metric": {"pod": "p"}, "score": 42}]})
    yield scorer.url(f"/fixed/{key}/scoring"), scorer


async def scored_once(publisher: MemoryPublisher, name: str) -> list[ScoreItem] | None:
    """The items of the first successful cycle (a loaded machine may fail one first)."""

    def success() -> list[ScoreItem] | None:
        return next((r.items for r in publisher.requests_for(name) if r.items is not None), None)

    return await eventually(success, timeout=30, what=f"a successful cycle of {name}")


async def test_scorer_calls_go_through_the_configured_proxy(
    proxy: tuple[str, list[str]], scored: tuple[str, ScorerProcess]
) -> None:
    proxy_url, seen = proxy
    url, _ = scored
    sup, publisher = _supervisor({"HTTP_PROXY": proxy_url})
    try:
        await sup.apply([summary("via_proxy", url, scoringInterval=1, scoreDimensionFormat="${pod}")])
        assert await scored_once(publisher, "via_proxy") == [ScoreItem("p", 42)]
    finally:
        await sup.close(2)
    assert any(line.startswith("POST http://127.0.0.1:") and "/scoring" in line for line in seen), seen


async def test_no_proxy_hosts_are_called_direct(
    proxy: tuple[str, list[str]], scored: tuple[str, ScorerProcess]
) -> None:
    proxy_url, seen = proxy
    url, _ = scored
    sup, publisher = _supervisor({"HTTP_PROXY": proxy_url, "NO_PROXY": "localhost,127.0.0.1"})
    try:
        await sup.apply([summary("direct", url, scoringInterval=1, scoreDimensionFormat="${pod}")])
        assert await scored_once(publisher, "direct") == [ScoreItem("p", 42)]
    finally:
        await sup.close(2)
    assert seen == []


async def test_through_a_proxy_a_literal_refused_target_is_refused_before_the_proxy(
    proxy: tuple[str, list[str]], scored: tuple[str, ScorerProcess]
) -> None:
    """The proxy (on loopback) is not checked; the target 127.0.0.1 is, and never reaches the proxy."""
    proxy_url, seen = proxy
    url, _ = scored
    sup, publisher = _supervisor({"HTTP_PROXY": proxy_url}, STRICT)
    try:
        await sup.apply([summary("literal", url, scoringInterval=1)])
        first = (await published(publisher, "literal", timeout=20))[0]
    finally:
        await sup.close(2)
    assert first.condition.reason == "ScorerAddressRefused", first.condition
    assert "127.0.0.1 is a loopback address" in first.condition.message
    assert seen == []


async def test_through_a_proxy_a_target_name_is_left_to_the_proxy(
    proxy: tuple[str, list[str]], scored: tuple[str, ScorerProcess]
) -> None:
    """A name is resolved by the proxy, not by the agent: the policy cannot judge it (documented)."""
    proxy_url, seen = proxy
    url, _ = scored
    by_name = url.replace("127.0.0.1", "localhost")
    sup, publisher = _supervisor({"HTTP_PROXY": proxy_url}, STRICT)
    try:
        await sup.apply([summary("by_name", by_name, scoringInterval=1, scoreDimensionFormat="${pod}")])
        assert await scored_once(publisher, "by_name") == [ScoreItem("p", 42)]
    finally:
        await sup.close(2)
    assert any(line.startswith("POST http://localhost:") for line in seen), seen


class _Intercepting(BaseHTTPRequestHandler):
    """A TLS-inspecting proxy: it answers CONNECT, then presents a certificate its own CA signed for
    the destination's name, and forwards the decrypted request to ``upstream`` over plain HTTP."""

    protocol_version = "HTTP/1.1"
    context: ssl.SSLContext
    upstream: tuple[str, int]
    seen: list[str]

    def do_CONNECT(self) -> None:
        self.seen.append(f"CONNECT {self.path}")
        self.send_response(200, "Connection established")
        self.end_headers()
        try:
            tls = self.context.wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            self.close_connection = True  # the agent refused the certificate
            return
        # The rest of the connection is the tunnelled exchange, read by http.server's own loop.
        self.connection = tls
        self.rfile = tls.makefile("rb")
        self.wfile = tls.makefile("wb")  # flushed by http.server after each request

    def do_POST(self) -> None:
        self.seen.append(f"decrypted {self.command} {self.path}")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        conn = http.client.HTTPConnection(*self.upstream, timeout=10)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        conn.request("POST", self.path, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.getheader("Content-Type") or "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def intercepting(
    tmp_path: Path, scored: tuple[str, ScorerProcess]
) -> Iterator[tuple[str, Path, str, list[str]]]:
    """(proxy URL, the proxy's CA file as the ADC's caBundle, an https:// scoring URL, what it saw)."""
    url, _ = scored
    ca = CertificateAuthority(tmp_path / "proxy-ca", "intercepting proxy CA")
    issued = ca.issue("localhost", common_name="localhost", server_hosts=("localhost",))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(issued.cert_path), str(issued.key_path))
    seen: list[str] = []
    target = urlsplit(url)
    upstream = (target.hostname or "127.0.0.1", target.port or 80)
    handler = type("Intercepting", (_Intercepting,), {"seen": seen, "context": context, "upstream": upstream})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # a host name, not 127.0.0.1: through a proxy the agent leaves name resolution to the proxy
    https_url = f"https://localhost:{upstream[1]}{target.path}"
    yield f"http://127.0.0.1:{server.server_address[1]}", ca.cert_path, https_url, seen
    server.shutdown()
    server.server_close()


def _intercepted_supervisor(
    proxy_url: str, ca_file: Path, *, trust: bool
) -> tuple[Supervisor, MemoryPublisher]:
    """An agent whose ADC named the proxy and its CA; ``trust`` is --trust-proxy-ca-for-destinations."""
    env = {"HTTPS_PROXY": proxy_url, "CA_BUNDLE_FILE_PATH": str(ca_file)}
    settings = dataclasses.replace(
        FAST, proxies=proxy_settings_from_env(env, trust_ca_for_destinations=trust)
    )
    publisher = MemoryPublisher()
    sup = Supervisor(
        cluster_name="cluster1",
        secrets=MemorySecrets(),
        publisher=publisher,
        metrics=AgentMetrics(process_collectors=False),
        settings=settings,
    )
    return sup, publisher


async def test_the_adc_proxy_ca_does_not_let_an_intercepting_proxy_read_scorer_calls(
    intercepting: tuple[str, Path, str, list[str]],
) -> None:
    """Without the hub admin's opt-in the agent refuses the certificate the proxy forged: the bound
    token and the metrics it would send never reach the proxy in clear text."""
    proxy_url, ca_file, url, seen = intercepting
    sup, publisher = _intercepted_supervisor(proxy_url, ca_file, trust=False)
    try:
        await sup.apply([summary("intercepted", url, scoringInterval=1, scoreDimensionFormat="${pod}")])

        def refused() -> str | None:
            failed = [r for r in publisher.requests_for("intercepted") if r.items is None]
            return failed[0].condition.message if failed else None

        message = await eventually(refused, timeout=30, what="a failed cycle of intercepted")
    finally:
        await sup.close(2)
    assert "certificate" in message.lower(), message
    assert any(line.startswith("CONNECT localhost:") for line in seen), seen
    assert not any(line.startswith("decrypted") for line in seen), seen
    assert all(r.items is None for r in publisher.requests_for("intercepted"))


async def test_the_opt_in_trusts_the_adc_proxy_ca_for_destinations(
    intercepting: tuple[str, Path, str, list[str]],
) -> None:
    """With --trust-proxy-ca-for-destinations (a proxy that intercepts TLS by design) the call succeeds."""
    proxy_url, ca_file, url, seen = intercepting
    sup, publisher = _intercepted_supervisor(proxy_url, ca_file, trust=True)
    try:
        await sup.apply([summary("inspected", url, scoringInterval=1, scoreDimensionFormat="${pod}")])
        assert await scored_once(publisher, "inspected") == [ScoreItem("p", 42)]
    finally:
        await sup.close(2)
    assert any(line.startswith("decrypted POST /fixed/") for line in seen), seen
