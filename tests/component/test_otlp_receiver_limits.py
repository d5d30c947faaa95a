"""The OTLP receiver's connection limits against slow and greedy peers, on loopback.

The receiver is the real one with a bearer token.  Slow-header peers are raw sockets that send a
request line and then drip one header byte every 0.1 s: far inside the per-recv read timeout, so
only a deadline on the whole head can cut them.  A second client address is ``127.0.0.2`` (any
127/8 address reaches a loopback listener).  Deadlines are short (0.5 s) so the tests take seconds;
the read timeout is long (60 s), so that whatever closes a connection within ``CUT_WITHIN`` is a
refusal or the head deadline, never the read timeout, and scheduling delay on a loaded machine has
tens of seconds of room before it could change an outcome.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.source.otlp.access import ReceiverAccess
from dynamic_scoring.agent.source.otlp.receiver import OtlpReceiver
from dynamic_scoring.agent.source.otlp.selection import parse_selector
from dynamic_scoring.agent.source.otlp.store import SeriesStore
from dynamic_scoring.agent.source.otlp.telemetry import OtlpTelemetry
from e2e.procs import wait_until
from tests.component.harness import ScorerPKI

TOKEN = "limits-otlp-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HEAD_TIMEOUT = 0.5
READ_TIMEOUT = 60.0
"""Per recv; the drip (0.1 s) never trips it, so the old receiver held a dripped slot for good."""
CUT_WITHIN = 20.0
"""How long a test waits for the receiver to close a connection it should close (at once, or at the
0.5 s head deadline): far above any scheduling delay, far below ``READ_TIMEOUT``, the only other
thing that would close it (so a receiver that does not cut still fails, after 20 s)."""
SLOTS = 8
BODY = {
    "resourceMetrics": [
        {
            "scopeMetrics": [
                {
                    "metrics": [
                        {"name": "temp", "gauge": {"dataPoints": [{"timeUnixNano": "1", "asDouble": 1.0}]}}
                    ]
                }
            ]
        }
    ]
}


class Limited:
    """A started receiver with a token and small limits, and the metrics it exports."""

    def __init__(self, token_file: Path, access: ReceiverAccess | None = None, **limits: float) -> None:
        self.store = SeriesStore(max_series=10)
        self.store.configure([parse_selector("temp")], 600, 10)
        self.receiver = OtlpReceiver(
            self.store,
            port=0,
            access=access or ReceiverAccess(bearer_token_file=token_file),
            read_timeout_seconds=READ_TIMEOUT,
            **limits,  # type: ignore[arg-type]
        )
        self.metrics = AgentMetrics(process_collectors=False)
        self.metrics.registry.register(OtlpTelemetry(self.store, self.receiver))
        self.receiver.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.receiver.port}/v1/metrics"

    def refused(self, reason: str) -> float | None:
        return self.sample("dynamic_scoring_otlp_connections_refused_total", {"reason": reason})

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        value: float | None = self.metrics.registry.get_sample_value(name, labels or {})
        return value

    def open_connections(self) -> int:
        return self.receiver._connections


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    return path


class Dripper:
    """A connection that sends a request line, then one header byte every 0.1 s until cut off."""

    def __init__(self, port: int, source: str = "127.0.0.1") -> None:
        self.sock = socket.socket()
        self.sock.bind((source, 0))
        # Taken before connecting: the receiver arms the head deadline after the accept, so the
        # cut comes at least HEAD_TIMEOUT after this, however the threads are scheduled.
        self.opened = time.monotonic()
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(b"POST /v1/metrics HTTP/1.1\r\nHost: x\r\nX-Drip: ")
        self.closed_after: float | None = None
        """Seconds from connect until the server closed the connection (None: still open)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drip, daemon=True)
        self._thread.start()

    def _drip(self) -> None:
        while not self._stop.is_set():
            try:
                readable, _, _ = select.select([self.sock], [], [], 0.1)
                if readable and not self.sock.recv(1024):
                    break
                self.sock.send(b"a")
            except OSError:
                break
        if not self._stop.is_set():
            self.closed_after = time.monotonic() - self.opened

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


def closed_at_once(sock: socket.socket, within: float = CUT_WITHIN) -> bool:
    """True when the server closes ``sock`` (end of stream or reset) within ``within`` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_slow_header_peers_on_every_slot_are_cut_at_the_head_deadline_and_an_honest_push_gets_in(
    token_file: Path,
) -> None:
    running = Limited(
        token_file, max_connections=SLOTS, max_connections_per_peer=SLOTS, head_timeout_seconds=HEAD_TIMEOUT
    )
    drippers: list[Dripper] = []
    try:
        drippers = [Dripper(running.receiver.port) for _ in range(SLOTS)]
        wait_until(lambda: running.open_connections() == SLOTS, timeout=30, what="every slot taken")
        attack = time.monotonic()
        # The honest pusher retries while the slots are taken (a real exporter retries too), for
        # up to CUT_WITHIN while the drippers keep dripping: they never stop on their own and never
        # trip the read timeout, so only the head deadline can free a slot for it.
        answer: httpx.Response | None = None
        while answer is None and time.monotonic() - attack < CUT_WITHIN:
            try:
                answer = httpx.post(running.url, json=BODY, headers=AUTH, timeout=1)
            except httpx.HTTPError:
                time.sleep(0.05)  # refused (closed at once): the slots are still taken
        waited = time.monotonic() - attack
        assert answer is not None, f"no honest push got through in {waited:.1f}s"
        assert answer.status_code == 200
        assert running.store.series_held == 1
        # Cut at all proves the deadline (a dripper is never cut otherwise); not before it, as the
        # lower bound says (scheduling delay only makes a cut later); by the deadline, as counted.
        wait_until(
            lambda: all(d.closed_after for d in drippers), timeout=CUT_WITHIN, what="every dripper cut"
        )
        cut = sorted(d.closed_after or 0.0 for d in drippers)
        assert cut[0] >= HEAD_TIMEOUT * 0.9, cut
        wait_until(lambda: running.refused("head_timeout") == SLOTS, timeout=30, what="cuts counted")
    finally:
        for dripper in drippers:
            dripper.close()
        running.receiver.stop()


def test_one_peer_is_held_to_its_cap_while_another_address_still_gets_in(token_file: Path) -> None:
    # Three slots, two per peer: 127.0.0.1 takes two, its third is refused; 127.0.0.2 takes the
    # last slot (a kept-alive push); its next connection finds every slot taken.
    running = Limited(token_file, max_connections=3, max_connections_per_peer=2, head_timeout_seconds=30)
    held = [socket.create_connection(("127.0.0.1", running.receiver.port)) for _ in range(2)]
    try:
        for sock in held:
            sock.sendall(b"POST /v1/metrics HTTP/1.1\r\n")  # a head that stays incomplete
        wait_until(lambda: running.open_connections() == 2, timeout=30, what="two connections held")
        with socket.create_connection(("127.0.0.1", running.receiver.port)) as third:
            assert closed_at_once(third), "a connection over the peer cap was not closed at once"
        assert running.refused("peer_cap") == 1

        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(transport=transport, timeout=5) as other:
            answer = other.post(running.url, json=BODY, headers=AUTH)
            assert answer.status_code == 200
            assert running.store.series_held == 1
            # The client keeps its connection alive, so the receiver holds all three slots now.
            assert running.open_connections() == 3
            with socket.socket() as fourth:
                fourth.bind(("127.0.0.2", 0))
                fourth.connect(("127.0.0.1", running.receiver.port))
                assert closed_at_once(fourth), "a connection over the total cap was not closed at once"
            assert running.refused("total_cap") == 1
            assert other.post(running.url, json=BODY, headers=AUTH).status_code == 200  # still served
        assert running.refused("peer_cap") == 1
        assert running.refused("head_timeout") == 0
    finally:
        for sock in held:
            sock.close()
        running.receiver.stop()


def client_port(response: httpx.Response) -> int:
    """The local port of the connection ``response`` came on (the same port: the same connection)."""
    port: int = response.extensions["network_stream"].get_extra_info("client_addr")[1]
    return port


def test_a_kept_alive_connection_may_idle_past_the_head_deadline(token_file: Path) -> None:
    # The deadline covers a head once its first byte arrives; an exporter's idle connection
    # between pushes is bounded by the read timeout only, as before.  The idle time under test is
    # not a sleep: a connection opened after the idle one began sends half a head and is cut at
    # the deadline.  One watchdog keeps every deadline and cuts all that are due in deadline order,
    # so had the idle connection been under one, it would have been cut first.
    running = Limited(token_file, head_timeout_seconds=HEAD_TIMEOUT)
    try:
        with httpx.Client(timeout=30) as client:
            first = client.post(running.url, json=BODY, headers=AUTH)
            assert first.status_code == 200
            port = client_port(first)  # now: once the connection closes, it has no address
            with socket.create_connection(("127.0.0.1", running.receiver.port)) as stalled:
                stalled.sendall(b"POST /v1/metrics HTTP/1.1\r\n")
                assert closed_at_once(stalled), "the half head was not cut"
            wait_until(
                lambda: (running.refused("head_timeout") or 0) >= 1, timeout=30, what="the cut counted"
            )
            second = client.post(running.url, json=BODY, headers=AUTH)
            assert second.status_code == 200
            assert client_port(second) == port, "a new connection: the idle one had been cut"
        assert running.refused("head_timeout") == 1  # the half head only
    finally:
        running.receiver.stop()


def test_a_stalled_tls_handshake_is_cut_at_the_head_deadline(token_file: Path, pki: ScorerPKI) -> None:
    access = ReceiverAccess(tls_cert_file=pki.server.cert_path, tls_key_file=pki.server.key_path)
    running = Limited(token_file, access, head_timeout_seconds=HEAD_TIMEOUT)
    try:
        with socket.create_connection(("127.0.0.1", running.receiver.port)) as stalled:
            stalled.sendall(b"\x16\x03\x01")  # the start of a ClientHello, and then nothing
            # closed within CUT_WITHIN (20 s), far below the 60 s read timeout: only the head
            # deadline can have done it, and the count below says it was
            assert closed_at_once(stalled), "the handshake was not cut"
        wait_until(lambda: running.refused("head_timeout") == 1, timeout=30, what="the cut counted")
        assert running.sample("dynamic_scoring_otlp_tls_handshake_failures_total") == 0  # counted once
    finally:
        running.receiver.stop()
