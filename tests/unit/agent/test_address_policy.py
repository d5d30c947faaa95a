"""The agent's side of finding S3: address refusal, metadata headers, and the fixed message vocabulary.

Each test runs the real client function (``call_scorer``, ``query_range``) or the real ``ClientPool``
transport; a stub transport stands in for a peer that answers, and a resolver stub for DNS.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpcore
import httpx
import pytest

from dynamic_scoring.agent.errors import (
    AddressRefused,
    PrometheusAddressRefused,
    PrometheusQueryError,
    PrometheusRequestInvalid,
    PrometheusUnavailable,
    ScorerAddressRefused,
    ScorerHTTPError,
    ScorerRequestInvalid,
)
from dynamic_scoring.agent.http import ClientPool, status_phrase
from dynamic_scoring.agent.proxy import ProxySettings, TargetChecked, proxy_mounts
from dynamic_scoring.agent.scorer_client.client import call_scorer
from dynamic_scoring.agent.source.prometheus import RangeWindow, known_error_type, query_range
from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy, metadata_header
from dynamic_scoring.outbound.guarded_transport import AsyncGuardedBackend

pytestmark = pytest.mark.anyio

SECRET = "AKIA-LOOKS-SECRET-0123456789"
WINDOW = RangeWindow(start=0, end=60, step=15)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Answer(httpx.AsyncBaseTransport):
    """A peer answering ``status`` with ``body``, streamed (``MockTransport`` would read it first)."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = self.body

        class Once(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                yield body

        return httpx.Response(self.status, stream=Once(), request=request)


def answering(status: int, body: bytes) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=Answer(status, body))


# -- the message vocabulary ----------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 404, 500, 502, 503, 599])
async def test_a_scorers_error_body_is_never_in_the_message(status: int) -> None:
    async with answering(status, f'{{"detail": "{SECRET}"}}'.encode()) as client:
        with pytest.raises(ScorerHTTPError) as caught:
            await call_scorer(client, "http://scorer.example/scoring", [])
    assert SECRET not in str(caught.value) and "detail" not in str(caught.value)
    assert (
        str(caught.value)
        == f"scoring API http://scorer.example/scoring answered HTTP {status} ({status_phrase(status)})"
    )


def test_status_phrases_are_fixed_words() -> None:
    assert status_phrase(500) == "Internal Server Error" and status_phrase(418) == "I'm a Teapot"
    assert status_phrase(599) == "server error" and status_phrase(499) == "client error"


async def test_prometheus_keeps_a_known_error_type_and_drops_its_free_text() -> None:
    body = f'{{"status": "error", "errorType": "bad_data", "error": "parse error near {SECRET}"}}'.encode()
    async with answering(400, body) as client:
        with pytest.raises(PrometheusQueryError) as caught:
            await query_range(client, "http://prom.example/api/v1/query_range", "up", WINDOW)
    message = str(caught.value)
    assert message.endswith("HTTP 400 (Bad Request), errorType bad_data"), message
    assert SECRET not in message and "parse error" not in message
    assert caught.value.error_type == "bad_data" and caught.value.prometheus_error == ""


async def test_an_unknown_error_type_is_free_text_too() -> None:
    body = f'{{"status": "error", "errorType": "{SECRET}", "error": "x"}}'.encode()
    async with answering(503, body) as client:
        with pytest.raises(PrometheusUnavailable) as caught:
            await query_range(client, "http://prom.example/api/v1/query_range", "up", WINDOW)
    assert SECRET not in str(caught.value) and "errorType" not in str(caught.value)
    assert known_error_type("execution") == "execution" and known_error_type("Bad_Data") == ""


async def test_a_success_envelope_with_an_error_and_an_odd_result_type_repeat_nothing() -> None:
    failed = f'{{"status": "error", "errorType": "timeout", "error": "{SECRET}"}}'.encode()
    async with answering(200, failed) as client:
        with pytest.raises(PrometheusQueryError) as caught:
            await query_range(client, "http://prom.example/api/v1/query_range", "up", WINDOW)
    assert SECRET not in str(caught.value) and "errorType timeout" in str(caught.value)
    odd = f'{{"status": "success", "data": {{"resultType": "{SECRET}", "result": []}}}}'.encode()
    async with answering(200, odd) as client:
        with pytest.raises(Exception) as caught_odd:
            await query_range(client, "http://prom.example/api/v1/query_range", "up", WINDOW)
    assert SECRET not in str(caught_odd.value) and "another type" in str(caught_odd.value)


# -- metadata-service headers --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "Metadata-Flavor",
        "metadata-flavor",
        "Metadata",
        "X-aws-ec2-metadata-token",
        "X-AWS-EC2-METADATA-TOKEN-TTL-SECONDS",
        "X-Google-Metadata-Request",
    ],
)
async def test_metadata_headers_are_refused_by_name_before_any_request(name: str) -> None:
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"results": []})

    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as client:
        with pytest.raises(ScorerRequestInvalid, match=f"header '{name}' is a cloud metadata-service header"):
            await call_scorer(client, "http://scorer.example/scoring", [], headers={name: "Google"})
        with pytest.raises(PrometheusRequestInvalid, match=f"header '{name}'"):
            await query_range(client, "http://prom.example/q", "up", WINDOW, headers={name: "true"})
    assert sent == []


def test_ordinary_headers_pass() -> None:
    assert metadata_header(["X-Scope-OrgID", "Authorization", "X-Metadata-Id"]) is None
    assert metadata_header(["X-Scope-OrgID", " Metadata "]) == " Metadata "


# -- refused addresses ---------------------------------------------------------------------------


def resolving_to(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> list[str]:
    """Make every look-up answer ``addresses``; returns the names looked up."""
    asked: list[str] = []

    async def getaddrinfo(self: Any, host: str, port: int, **_kw: Any) -> list[tuple[Any, ...]]:
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr("asyncio.base_events.BaseEventLoop.getaddrinfo", getaddrinfo)
    return asked


class NoConnect(httpcore.AsyncNetworkBackend):
    """Fails the test if a connection is attempted."""

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise AssertionError(f"connected: {args}")


@pytest.mark.parametrize(
    ("address", "category"),
    [
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
    ],
)
async def test_the_backend_refuses_without_connecting(
    monkeypatch: pytest.MonkeyPatch, address: str, category: str
) -> None:
    resolving_to(monkeypatch, address)
    backend = AsyncGuardedBackend(STRICT, inner=NoConnect())
    with pytest.raises(httpcore.ConnectError, match=f"resolves to a {category} address"):
        await backend.connect_tcp("scorer.example", 80, timeout=5)


async def test_a_name_with_one_refused_answer_is_refused_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    resolving_to(monkeypatch, "10.0.0.5", "127.0.0.1")
    with pytest.raises(httpcore.ConnectError, match="loopback"):
        await AsyncGuardedBackend(STRICT, inner=NoConnect()).connect_tcp("mixed.example", 80, timeout=5)


@pytest.mark.parametrize(
    ("url", "family", "call"),
    [
        ("http://127.0.0.1:9/scoring", ScorerAddressRefused, "scorer"),
        ("http://[::ffff:169.254.169.254]/latest", ScorerAddressRefused, "scorer"),
        ("http://169.254.169.254/api/v1/query_range", PrometheusAddressRefused, "prometheus"),
    ],
)
async def test_the_client_pool_refuses_with_the_familys_error(url: str, family: type, call: str) -> None:
    pool = ClientPool(extra_ca_files=())
    try:
        client = pool.client_for(None)
        with pytest.raises(family) as caught:
            if call == "scorer":
                await call_scorer(client, url, [], timeout=5)
            else:
                await query_range(client, url, "up", WINDOW, timeout=5)
    finally:
        await pool.aclose()
    error = caught.value
    assert isinstance(error, AddressRefused) and not error.transient
    assert error.category in ("loopback", "metadata") and error.host in url
    assert f"{error.host} is a {error.category} address" in str(error)


async def test_private_networks_are_allowed_and_the_allow_list_opens_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connected: list[str] = []

    class Records(httpcore.AsyncNetworkBackend):
        async def connect_tcp(
            self, host: str, port: int, *args: Any, **kwargs: Any
        ) -> httpcore.AsyncNetworkStream:
            connected.append(host)
            raise httpcore.ConnectError("stub")

    resolving_to(monkeypatch, "10.96.0.10")
    with pytest.raises(httpcore.ConnectError, match="stub"):
        await AsyncGuardedBackend(STRICT, inner=Records()).connect_tcp("svc.cluster.local", 80, timeout=5)
    resolving_to(monkeypatch, "127.0.0.1")
    loopback = AddressPolicy.parse("127.0.0.0/8")
    with pytest.raises(httpcore.ConnectError, match="stub"):
        await AsyncGuardedBackend(loopback, inner=Records()).connect_tcp("localhost", 80, timeout=5)
    assert connected == ["10.96.0.10", "127.0.0.1"]


async def test_through_a_proxy_a_literal_target_is_checked_and_the_proxy_is_not() -> None:
    mounts = proxy_mounts(
        ProxySettings(http="http://127.0.0.1:3128"), ssl.create_default_context(), httpx.Limits(), STRICT
    )
    proxied = mounts["http://"]
    assert isinstance(proxied, TargetChecked)
    with pytest.raises(httpx.ConnectError, match=r"169\.254\.169\.254 resolves to a metadata address"):
        await proxied.handle_async_request(httpx.Request("GET", "http://169.254.169.254/latest/meta-data/"))
    await proxied.aclose()
