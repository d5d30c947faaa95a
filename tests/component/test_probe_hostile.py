"""The hub probe against hostile scorer endpoints: real HTTP servers on loopback, the real transport.

What a DynamicScorer author controls (the URLs) and what a scorer operator controls (the answers)
must not let either one make the manager connect where it should not, hold more than the size cap in
memory, or read the hub's internals back from the CR's status.  Every client here is built like the
scorer controller builds its own: ``guarded_transport`` with an ``AddressPolicy``.  The servers run
on 127.0.0.1, which the default policy refuses; tests that need an answer use the policy a
development hub uses (``--scorer-probe-allow-cidr 127.0.0.0/8``).
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import tracemalloc
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Event, Thread
from typing import Any

import httpx
import pytest

from dynamic_scoring.addon.registry.probe import MAX_CONFIG_BYTES, fetch_config, probe_health
from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy
from dynamic_scoring.outbound.guarded_transport import guarded_transport
from tests.component.harness import ScorerPKI, ScorerProcess

LOOPBACK = AddressPolicy.parse("127.0.0.0/8")
BOMB_MIB = 200
RELEASE = Event()
"""Set at module teardown: until then /slow never answers."""
SLOW_ANSWERED = Event()
"""Set by /slow once it has answered (only after RELEASE, or after SLOW_PEER_SECONDS)."""
SLOW_PEER_SECONDS = 30.0
"""How long a slow peer holds out at most: far past the probe timeouts used here (0.5 s)."""


def _gzip(data_mib: int, *, wbits: int = 16 + zlib.MAX_WBITS) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = b"0" * (1 << 20)
    return b"".join([packer.compress(block) for _ in range(data_mib)] + [packer.flush()])


GZIP_BOMB = _gzip(BOMB_MIB)
DEFLATE_BOMB = _gzip(BOMB_MIB, wbits=zlib.MAX_WBITS)
GOOD_CONFIG = {
    "name": "cpu",
    "description": "a test scorer",
    "source": {"type": "Prometheus", "host": "https://prom.example", "path": "/api/v1/query_range"},
    "scoring": {
        "host": "https://scorer.example",
        "path": "/scoring",
        "params": {"name": "cpu", "interval": 30},
    },
}


class Hostile(BaseHTTPRequestHandler):
    """One behaviour per path; every request is recorded (path and headers) on the server."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json", **headers: str) -> None:
        self.send_response(code)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)  # the probe may stop reading, as it should

    def do_GET(self) -> None:
        self.server.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        p = self.path
        config = dict(GOOD_CONFIG)
        if p == "/healthz":
            self._send(200, b'{"status":"ok"}')
        elif p == "/config":
            self._send(200, json.dumps(GOOD_CONFIG).encode(), "application/json; charset=utf-8")
        elif p == "/gzip-bomb":
            self._send(200, GZIP_BOMB, Content_Encoding="gzip")
        elif p == "/deflate-bomb":
            self._send(200, DEFLATE_BOMB, Content_Encoding="deflate")
        elif p == "/gzip-config":  # compressed although identity was asked for: still read, bounded
            self._send(
                200, zlib.compress(json.dumps(GOOD_CONFIG).encode(), wbits=31), Content_Encoding="gzip"
            )
        elif p == "/corrupt-gzip":
            self._send(200, GZIP_BOMB[:10] + b"\x00" * 64, Content_Encoding="gzip")
        elif p == "/truncated-gzip":
            self._send(
                200, zlib.compress(json.dumps(GOOD_CONFIG).encode(), wbits=31)[:-12], Content_Encoding="gzip"
            )
        elif p == "/brotli":
            self._send(200, b"\x0b\x02\x80{}\x03", Content_Encoding="br")
        elif p == "/redirect":
            self._send(302, b"", Location="/config")
        elif p == "/slow":
            RELEASE.wait(SLOW_PEER_SECONDS)
            self._send(200, b"{}")
            SLOW_ANSWERED.set()
        elif p == "/html":
            self._send(200, b"<html><title>internal admin</title></html>", "text/html")
        elif p == "/odd-content-type":
            self._send(200, b"{}", "text/x-internal; build=9f3e secret-ish")
        elif p == "/odd-encoding":
            self._send(200, b"{}", Content_Encoding="x-internal-build 9f3e")
        elif p == "/no-content-type":
            self._send(200, json.dumps(GOOD_CONFIG).encode(), "")
        elif p == "/invalid-json":
            self._send(200, b'{"name": "secret-internal-value", oops}')
        elif p == "/unknown-keys":
            config["internal"] = {"token": "leaked"}
            config["source"] = {**GOOD_CONFIG["source"], "extra": "x"}  # type: ignore[dict-item]
            self._send(200, json.dumps(config).encode())
        elif p == "/many-params":
            params = {"name": "cpu", "interval": 30, **{f"k{i}": i for i in range(100)}}
            config["scoring"] = {**GOOD_CONFIG["scoring"], "params": params}  # type: ignore[dict-item]
            self._send(200, json.dumps(config).encode())
        elif p == "/big-params":
            params = {"name": "cpu", "blob": "x" * (20 << 10)}
            config["scoring"] = {**GOOD_CONFIG["scoring"], "params": params}  # type: ignore[dict-item]
            self._send(200, json.dumps(config).encode())
        elif p == "/deep-json":
            self._send(200, b"[" * 100_000 + b"]" * 100_000)
        elif p == "/deep-params":
            deep: Any = 1
            for _ in range(40):
                deep = {"d": deep}
            config["scoring"] = {**GOOD_CONFIG["scoring"], "params": {"name": "cpu", "deep": deep}}  # type: ignore[dict-item]
            self._send(200, json.dumps(config).encode())
        elif p == "/long-description":
            config["description"] = "d" * 5000
            self._send(200, json.dumps(config).encode())
        else:
            self._send(404, b"{}")


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    srv.daemon_threads = True
    srv.seen = []  # type: ignore[attr-defined]
    thread = Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        RELEASE.set()  # lets a /slow still being served end
        srv.shutdown()
        srv.server_close()


def base(srv: ThreadingHTTPServer, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{srv.server_address[1]}"


def seen(srv: ThreadingHTTPServer) -> list[tuple[str, dict[str, str]]]:
    return srv.seen  # type: ignore[attr-defined,no-any-return]


def client(policy: AddressPolicy) -> httpx.Client:
    # exactly as the scorer controller builds its clients
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=2)
    return httpx.Client(transport=guarded_transport(limits=limits, policy=policy), trust_env=False)


@pytest.fixture
def dev() -> Iterator[httpx.Client]:
    with client(LOOPBACK) as c:
        yield c


# -------------------------------------------------------------------------- where the probe connects
@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "2130706433", "0x7f.1", "127.1", "[::ffff:127.0.0.1]"]
)
def test_loopback_is_refused_by_default_however_it_is_spelled(server: ThreadingHTTPServer, host: str) -> None:
    before = len(seen(server))
    with client(STRICT) as strict:
        r = probe_health(strict, base(server, host) + "/healthz", timeout=2)
    assert (r.ok, r.reason) == (False, "AddressNotAllowed")
    assert "loopback address" in r.message and "--scorer-probe-allow-cidr" in r.message
    assert len(seen(server)) == before  # nothing reached the server


@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "0x7f.1"])
def test_the_opt_out_allows_loopback(server: ThreadingHTTPServer, dev: httpx.Client, host: str) -> None:
    r = probe_health(dev, base(server, host) + "/healthz")
    assert (r.ok, r.reason) == (True, "Healthy")
    # the Host header keeps the name the URL gave, not the address connected to
    assert seen(server)[-1][1]["host"] == f"{host}:{server.server_address[1]}"


def test_metadata_and_link_local_stay_refused_with_the_loopback_opt_out(dev: httpx.Client) -> None:
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[fe80::1]:80/", "http://0.0.0.0:80/"):
        r = probe_health(dev, url, timeout=2)
        assert (r.ok, r.reason) == (False, "AddressNotAllowed"), url


def test_one_refused_address_in_a_dns_answer_refuses_the_name(
    server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a rebinding resolver: the first answer mixes a public and a loopback address
    real = socket.getaddrinfo
    calls: list[str] = []

    def rebinding(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        calls.append(host)
        if host == "rebind.test":
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    before = len(seen(server))
    with client(STRICT) as strict:
        r = probe_health(strict, f"http://rebind.test:{server.server_address[1]}/healthz", timeout=2)
    assert (r.ok, r.reason) == (False, "AddressNotAllowed")
    assert calls.count("rebind.test") == 1 and len(seen(server)) == before


def test_the_checked_address_is_the_one_connected_to(
    server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # resolve once: a second look-up would answer an address the policy never saw
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1", "10.255.255.1"])
    calls: list[str] = []

    def changing(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if host == "scorer.test":
            calls.append(host)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", changing)
    with client(LOOPBACK) as c:
        r = probe_health(c, f"http://scorer.test:{server.server_address[1]}/healthz", timeout=2)
    assert r.ok, r.message
    assert calls == ["scorer.test"]
    assert seen(server)[-1][1]["host"] == f"scorer.test:{server.server_address[1]}"


def test_a_resolver_that_never_answers_is_under_the_probe_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # The look-up blocks until the test ends (or 30 s) and then fails, so a Timeout while it is
    # still blocked proves the probe gave up at its own 0.5 s; no wall-clock bound to race.  An
    # unbounded look-up would wait for the resolver and then get its failure (not a Timeout).
    real = socket.getaddrinfo
    unblock = Event()
    answered = Event()

    def blackhole(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if host == "blackhole.test":
            unblock.wait(SLOW_PEER_SECONDS)
            answered.set()
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", blackhole)
    try:
        with client(STRICT) as strict:
            r = probe_health(strict, "http://blackhole.test/healthz", timeout=0.5)
        assert (r.ok, r.reason) == (False, "Timeout")
        assert not answered.is_set(), "the probe waited for the resolver"
    finally:
        unblock.set()  # frees the resolver thread the abandoned look-up holds


# -------------------------------------------------------------------------------- what it reads
def test_the_probe_asks_for_identity_encoding(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    assert probe_health(dev, base(server) + "/healthz").ok
    assert seen(server)[-1][1]["accept-encoding"] == "identity"


@pytest.mark.parametrize("path", ["/gzip-bomb", "/deflate-bomb"])
def test_a_compression_bomb_is_refused_within_the_cap(
    server: ThreadingHTTPServer, dev: httpx.Client, path: str
) -> None:
    assert len(GZIP_BOMB) < 300 << 10  # ~200 KiB on the wire, 200 MiB inflated
    tracemalloc.start()
    try:
        res = fetch_config(dev, base(server) + path, timeout=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (res.result.ok, res.result.reason) == (False, "TooLarge")
    assert "inflates to more than" in res.result.message
    # the cap is on the decoded body; the old code held ~140 MiB at the peak
    assert peak < MAX_CONFIG_BYTES + (2 << 20), f"peak {peak / 2**20:.1f} MiB"


def test_healthz_bodies_are_bounded_too(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    r = probe_health(dev, base(server) + "/gzip-bomb")
    assert (r.ok, r.reason) == (False, "TooLarge")


def test_a_compressed_config_within_the_cap_is_read(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    res = fetch_config(dev, base(server) + "/gzip-config")
    assert res.result.ok and res.config is not None and res.config.name == "cpu"


@pytest.mark.parametrize(
    ("path", "needle"),
    [("/corrupt-gzip", "corrupt"), ("/truncated-gzip", "truncated"), ("/brotli", "Content-Encoding 'br'")],
)
def test_bad_or_unknown_encodings_are_refused(
    server: ThreadingHTTPServer, dev: httpx.Client, path: str, needle: str
) -> None:
    res = fetch_config(dev, base(server) + path)
    assert (res.result.ok, res.result.reason) == (False, "InvalidEncoding")
    assert needle in res.result.message


def test_a_redirect_is_not_followed(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    before = len(seen(server))
    res = fetch_config(dev, base(server) + "/redirect", token="s3cret")
    assert (res.result.ok, res.result.reason) == (False, "Redirected")
    assert [p for p, _ in seen(server)[before:]] == ["/redirect"]


def test_a_slow_scorer_times_out(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    # /slow answers only at module teardown (or after 30 s): a Timeout before it answered proves
    # the probe gave up at its 0.5 s, with no wall-clock bound to race.  Without the timeout the
    # probe would wait for the answer (SLOW_ANSWERED set, and a 200 rather than a Timeout).
    res = fetch_config(dev, base(server) + "/slow", timeout=0.5)
    assert (res.result.ok, res.result.reason) == (False, "Timeout")
    assert "0.5s" in res.result.message
    assert not SLOW_ANSWERED.is_set(), "the probe waited for the slow answer"


# ------------------------------------------------------------------------ what reaches the status
@pytest.mark.parametrize("path", ["/html", "/no-content-type"])
def test_config_must_be_declared_json(server: ThreadingHTTPServer, dev: httpx.Client, path: str) -> None:
    res = fetch_config(dev, base(server) + path)
    assert (res.result.ok, res.result.reason) == (False, "InvalidContentType")
    assert "expected application/json" in res.result.message
    assert "internal admin" not in res.result.message


def test_odd_header_values_are_not_echoed(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    typed = fetch_config(dev, base(server) + "/odd-content-type").result
    assert typed.reason == "InvalidContentType" and "'text/x-internal'" in typed.message
    assert "secret-ish" not in typed.message
    coded = fetch_config(dev, base(server) + "/odd-encoding").result
    assert coded.reason == "InvalidEncoding" and "(an unexpected value)" in coded.message
    assert "9f3e" not in coded.message


def test_invalid_json_does_not_quote_the_body(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    res = fetch_config(dev, base(server) + "/invalid-json")
    assert (res.result.ok, res.result.reason) == (False, "InvalidJSON")
    assert "line 1 column" in res.result.message and "secret-internal-value" not in res.result.message


def test_deeply_nested_json_is_refused_not_raised(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    res = fetch_config(dev, base(server) + "/deep-json")
    assert (res.result.ok, res.result.reason) == (False, "InvalidJSON")
    assert "nested too deeply" in res.result.message


def test_json_with_a_charset_is_json(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    res = fetch_config(dev, base(server) + "/config")
    assert res.result.ok and res.config is not None


def test_unknown_keys_do_not_travel(server: ThreadingHTTPServer, dev: httpx.Client) -> None:
    res = fetch_config(dev, base(server) + "/unknown-keys")
    assert res.result.ok and res.config is not None
    stored = res.config.model_dump(mode="json")  # what status.lastSyncedConfig receives
    assert "internal" not in stored and "extra" not in stored["source"]
    assert "leaked" not in json.dumps(stored)


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("/many-params", "scoring.params: 100 keys, at most 64"),
        ("/big-params", "bytes as JSON, at most 16384"),
        ("/long-description", "description: 5000 characters, at most 1024"),
        ("/deep-params", "scoring.params: nested more than 16 levels deep"),
    ],
)
def test_free_form_params_and_strings_are_bounded(
    server: ThreadingHTTPServer, dev: httpx.Client, path: str, needle: str
) -> None:
    res = fetch_config(dev, base(server) + path)
    assert (res.result.ok, res.result.reason, res.config) == (False, "InvalidSchema", None)
    assert needle in res.result.message


def test_errno_text_stays_out_of_the_message(dev: httpx.Client) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = probe_health(dev, f"http://127.0.0.1:{port}/healthz", timeout=2)
    assert (r.ok, r.reason) == (False, "Unreachable")
    assert r.message.endswith("failed: connection refused")
    assert "Errno" not in r.message


def test_unresolvable_names_are_classified(dev: httpx.Client) -> None:
    r = probe_health(dev, "http://no-such-scorer.invalid/healthz", timeout=2)
    assert (r.ok, r.reason) == (False, "Unreachable")
    assert r.message.endswith("host name does not resolve") and "Errno" not in r.message


def test_tls_failures_are_classified(tls_scorer: ScorerProcess) -> None:
    with client(LOOPBACK) as c:
        r = probe_health(c, tls_scorer.url("/healthz"))
    assert (r.ok, r.reason) == (False, "TLSError")
    assert "TLS certificate verification failed" in r.message
    assert "_ssl.c" not in r.message and "SSL:" not in r.message


def test_tls_verifies_the_name_of_the_url_not_the_address_connected_to(
    tls_scorer: ScorerProcess, pki: ScorerPKI
) -> None:
    # the certificate names localhost and 127.0.0.1; 2130706433 is 127.0.0.1 too, but not a name the
    # certificate carries: connecting to the checked address must not turn hostname verification
    # into address verification
    trusting = ssl.create_default_context(cafile=str(pki.ca.cert_path))
    limits = httpx.Limits(max_connections=2)
    policy = AddressPolicy.parse("127.0.0.0/8")
    with httpx.Client(transport=guarded_transport(verify=trusting, limits=limits, policy=policy)) as c:
        by_name = probe_health(c, tls_scorer.url("/healthz").replace("127.0.0.1", "localhost"))
        assert (by_name.ok, by_name.reason) == (True, "Healthy"), by_name.message
        other = probe_health(c, tls_scorer.url("/healthz").replace("127.0.0.1", "2130706433"), timeout=2)
    assert (other.ok, other.reason) == (False, "TLSError")
    assert "TLS certificate verification failed" in other.message
