"""The hub's /healthz probe and /config fetch against real HTTP(S) servers on loopback."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from dynamic_scoring.addon.registry.probe import fetch_config, probe_health
from e2e.loopback import LoopbackServer
from tests.component.harness import ScorerPKI, ScorerProcess

CONFIGS = Path(__file__).resolve().parents[2] / "samples" / "upstream" / "config"
SEEN: list[dict[str, str]] = []
RELEASE = threading.Event()
"""Set at module teardown: until then /slow never answers and /drip keeps dripping."""
SLOW_ANSWERED = threading.Event()
"""Set by /slow once it has answered (it answers only after RELEASE, or after SLOW_PEER_SECONDS)."""
DRIP_ENDED = threading.Event()
"""Set by /drip once it stopped dripping for any reason other than the client hanging up."""
SLOW_PEER_SECONDS = 30.0
"""How long the slow peers hold out at most: far past every probe timeout used here (0.5 s, 1 s)."""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json", **headers: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        SEEN.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        p = self.path
        if p == "/healthz":
            self._send(200, b'{"status":"ok"}')
        elif p.startswith("/status/"):
            self._send(int(p.split("/")[2]), b'{"name":"x"}')
        elif p == "/redirect":
            self._send(302, b"", Location="/healthz")
        elif p == "/slow":
            RELEASE.wait(SLOW_PEER_SECONDS)
            with contextlib.suppress(OSError):  # the probe gave up, as it should
                self._send(200, b"{}")
            SLOW_ANSWERED.set()
        elif p == "/drip":
            began = time.monotonic()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            # one byte every 0.1 s (well inside the read timeout) for up to SLOW_PEER_SECONDS
            try:
                while not RELEASE.wait(0.1):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    if time.monotonic() - began > SLOW_PEER_SECONDS:
                        break
            except (BrokenPipeError, ConnectionResetError):
                return  # the probe gave up, as it should
            DRIP_ENDED.set()
        elif p == "/auth/healthz":
            ok = self.headers.get("Authorization") == "Bearer s3cret"
            self._send(200 if ok else 401, b"{}")
        elif p.startswith("/config/"):
            self._send(200, (CONFIGS / p.split("/")[2]).read_bytes())
        elif p == "/bad-types":
            self._send(200, json.dumps({"source": {"params": {"range": "3600"}}}).encode())
        elif p == "/unknown-type":
            self._send(200, json.dumps({"source": {"type": "OpenTelemetry"}}).encode())
        elif p == "/negative":
            self._send(200, json.dumps({"scoring": {"params": {"interval": -30}}}).encode())
        elif p == "/html":
            self._send(200, b"<html>hi</html>", "text/html")
        elif p == "/list":
            self._send(200, b"[]")
        elif p == "/huge":
            self._send(200, b'{"description":"' + b"x" * (2 << 20) + b'"}')
        else:
            self._send(404, b"{}")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    try:
        with LoopbackServer(Handler, name="probe-scorer") as srv:
            yield srv.url
    finally:
        RELEASE.set()  # lets a /slow or /drip still being served end


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client() as c:
        yield c


def test_healthz_2xx_is_healthy(server: str, client: httpx.Client) -> None:
    r = probe_health(client, f"{server}/healthz")
    assert (r.ok, r.reason, r.status_code) == (True, "Healthy", 200)


@pytest.mark.parametrize(("path", "reason"), [("/status/500", "HTTPStatus"), ("/redirect", "Redirected")])
def test_non_2xx_is_unhealthy(server: str, client: httpx.Client, path: str, reason: str) -> None:
    r = probe_health(client, f"{server}{path}")
    assert (r.ok, r.reason) == (False, reason)
    assert path in r.message


def test_a_hanging_scorer_times_out(server: str) -> None:
    # A client without a timeout of its own: only the probe's 0.5 s can end the request.  /slow
    # answers only at module teardown (or after 30 s), so a Timeout while it has not answered
    # proves the probe gave up at its deadline; no wall-clock bound, nothing for load to break.
    # Without the timeout the probe would wait the 30 s and then read a 200 (ok=True): fails.
    with httpx.Client(timeout=None) as untimed:
        r = probe_health(untimed, f"{server}/slow", timeout=0.5)
    assert (r.ok, r.reason) == (False, "Timeout") and "0.5s" in r.message
    assert not SLOW_ANSWERED.is_set(), "the probe waited for the slow answer"


def test_a_dripping_body_hits_the_total_deadline(server: str, client: httpx.Client) -> None:
    # Each byte arrives well within the read timeout; only a total deadline stops this.  The drip
    # goes on until module teardown (or 30 s), so a Timeout while it is still dripping proves the
    # deadline cut it; without the deadline the probe would read until the drip ends and the server
    # closes the connection short of its Content-Length (not a Timeout, and DRIP_ENDED set).
    r = fetch_config(client, f"{server}/drip", timeout=1.0).result
    assert (r.ok, r.reason) == (False, "Timeout") and "1s" in r.message
    assert not DRIP_ENDED.is_set(), "the probe read until the drip ended"


def test_unreachable(client: httpx.Client) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = probe_health(client, f"http://127.0.0.1:{port}/healthz", timeout=1)
    assert (r.ok, r.reason) == (False, "Unreachable")


def test_probe_token_is_sent_and_never_shown(server: str, client: httpx.Client) -> None:
    assert probe_health(client, f"{server}/auth/healthz").reason == "HTTPStatus"
    r = probe_health(client, f"{server}/auth/healthz", token="  s3cret\n")
    assert r.ok
    assert SEEN[-1]["authorization"] == "Bearer s3cret"
    bad = probe_health(client, f"{server}/auth/healthz", token="a\nb")
    assert (bad.ok, bad.reason) == (False, "InvalidToken") and "a\nb" not in bad.message


def test_quickstart_config_is_fetched_and_validated(server: str, client: httpx.Client) -> None:
    res = fetch_config(client, f"{server}/config/sample-scorer.json")
    assert res.result.ok and res.config is not None
    assert res.config.scoring.params.name == "sample_my_score"


def test_lowercase_source_type_is_stored_canonical(server: str, client: httpx.Client) -> None:
    res = fetch_config(client, f"{server}/config/simple-prediction.json")
    assert res.config is not None and res.config.source.type == "Prometheus"


@pytest.mark.parametrize(
    ("path", "reason", "needle"),
    [
        ("/status/404", "HTTPStatus", "HTTP 404"),  # upstream accepted any status with a JSON body
        ("/status/500", "HTTPStatus", "HTTP 500"),
        ("/bad-types", "InvalidSchema", "source.params.range"),
        ("/unknown-type", "InvalidSchema", "source.type: 'OpenTelemetry'"),
        ("/negative", "InvalidSchema", "scoring.params.interval: -30 is negative"),
        ("/html", "InvalidContentType", "expected application/json"),
        ("/list", "InvalidSchema", "expected a JSON object"),
        ("/huge", "TooLarge", "larger than"),
    ],
)
def test_bad_config_documents_are_rejected_naming_the_field(
    server: str, client: httpx.Client, path: str, reason: str, needle: str
) -> None:
    res = fetch_config(client, f"{server}{path}")
    assert res.config is None
    assert (res.result.ok, res.result.reason) == (False, reason)
    assert needle in res.result.message


def test_tls_is_verified(tls_scorer: ScorerProcess, pki: ScorerPKI) -> None:
    with httpx.Client() as default:
        r = probe_health(default, tls_scorer.url("/healthz"))
    assert (r.ok, r.reason) == (False, "TLSError")
    with httpx.Client(verify=ssl.create_default_context(cafile=str(pki.ca.cert_path))) as trusting:
        assert probe_health(trusting, tls_scorer.url("/healthz")).ok
