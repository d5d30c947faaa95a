"""The health servers of the hub manager and of the agent against idle and slow clients, on loopback.

Each server is the real one (``Manager.serve``, the agent's ``HealthServer``) with small limits;
every test runs against both.  An idle client is a raw socket
that connects and sends nothing, or half a request head; a dripping client sends one header byte
every 0.1 s, far inside any per-recv timeout, so only a deadline on the whole head can cut it.  A
second client address is ``127.0.0.2`` (any 127/8 address reaches a loopback listener).

Handler threads are counted by name: the standard library names each one after its target,
``process_request_thread``; only threads that appeared after the server started are counted, so
threads left by other tests in the session cannot make a count wrong.  Nothing here measures elapsed
time: every wait is a condition polled up to ``CUT_WITHIN``, a liveness deadline far above any
scheduling delay on a loaded machine.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import cast

import pytest

from dynamic_scoring.addon.manager import Manager, ManagerOptions
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.server import HealthServer
from dynamic_scoring.kube.api import KubeAPI
from e2e.procs import wait_until

SERVERS = ("manager", "agent")

PER_PEER = 3
CAP = 2 * PER_PEER
HEAD_TIMEOUT = 0.5
"""The short head deadline of the deadline tests; the cap tests use ``LONG_HEAD``."""
LONG_HEAD = 120.0
"""A head deadline no cap test can reach, so whatever closes a connection there is the cap."""
CUT_WITHIN = 20.0
"""How long a test waits for the server to close a connection it should close: far above any
scheduling delay, far below ``LONG_HEAD`` (so a server that does not cut still fails, after 20 s)."""


class _NoAPI:
    """The manager needs an API only to lead; these tests never lead (no leader election, no run)."""


def _handler_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [
        t for t in threading.enumerate() if t.name.endswith("(process_request_thread)") and t not in before
    ]


class Served:
    """The manager's or the agent's server on 127.0.0.1 with the given limits."""

    def __init__(self, kind: str, *, head_timeout_seconds: float) -> None:
        self.before = set(threading.enumerate())
        if kind == "manager":
            manager = Manager(
                cast(KubeAPI, _NoAPI()),
                ManagerOptions(bind_address="127.0.0.1:0", leader_elect=False),
                factories=[],
            )
            self.port = manager.serve(
                max_connections=CAP,
                max_connections_per_peer=PER_PEER,
                head_timeout_seconds=head_timeout_seconds,
            )
            self.stop: Callable[[], None] = manager.stop_serving
        else:
            agent = HealthServer(
                AgentMetrics(),
                lambda: True,
                port=0,
                max_connections=CAP,
                max_connections_per_peer=PER_PEER,
                head_timeout_seconds=head_timeout_seconds,
            )
            agent.start()
            self.port, self.stop = agent.port, agent.stop
        self.most_threads = 0
        """The most handler threads seen alive at once by any ``threads`` call."""

    def threads(self) -> int:
        count = len(_handler_threads(self.before))
        self.most_threads = max(self.most_threads, count)
        return count

    def healthz(self, source: str) -> int:
        conn = http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=CUT_WITHIN, source_address=(source, 0)
        )
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status
        finally:
            conn.close()


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """Client sockets, closed before the server stops (its stop waits for its handler threads)."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _connect(port: int, source: str, opened: list[socket.socket]) -> socket.socket:
    sock = socket.socket()
    opened.append(sock)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed ``sock`` (end of stream or reset); never blocks."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1024, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def _first_bytes(sock: socket.socket) -> bytes:
    """What the server sent before closing ``sock``; a reset after its end of stream reads as none."""
    try:
        return sock.recv(1024)
    except ConnectionResetError:
        return b""


@pytest.mark.parametrize("kind", SERVERS)
def test_idle_connections_are_held_to_the_caps_and_a_probe_from_another_address_still_answers(
    sockets: list[socket.socket], kind: str
) -> None:
    served = Served(kind, head_timeout_seconds=LONG_HEAD)
    try:
        # One peer opens more idle connections than the whole cap: it keeps PER_PEER of them.
        idle = [_connect(served.port, "127.0.0.1", sockets) for _ in range(CAP + 4)]
        wait_until(
            lambda: sum(_closed_by_server(s) for s in idle) == len(idle) - PER_PEER,
            timeout=CUT_WITHIN,
            what="the connections over the peer cap closed",
            interval=0.05,
        )
        wait_until(lambda: served.threads() == PER_PEER, timeout=CUT_WITHIN, what="one thread per kept one")
        # A probe from another address is answered while those are held, and its thread ends.
        assert served.healthz("127.0.0.2") == 200
        wait_until(lambda: served.threads() == PER_PEER, timeout=CUT_WITHIN, what="the probe's thread ended")
        # A second peer fills the total cap (CAP = 2 x PER_PEER); the next connection, from a third
        # address that holds none, is closed at once.
        idle += [_connect(served.port, "127.0.0.2", sockets) for _ in range(PER_PEER)]
        wait_until(lambda: served.threads() == CAP, timeout=CUT_WITHIN, what="every slot taken")
        extra = _connect(served.port, "127.0.0.3", sockets)
        wait_until(
            lambda: _closed_by_server(extra),
            timeout=CUT_WITHIN,
            what="the one over the cap closed",
            interval=0.05,
        )
        assert served.threads() <= CAP
        assert served.most_threads <= CAP, "more handler threads than the connection cap at once"
        kept = idle[:PER_PEER] + idle[-PER_PEER:]
        assert not any(_closed_by_server(s) for s in kept), "a connection within the caps was cut"
    finally:
        for sock in sockets:
            sock.close()
        served.stop()
    assert not _handler_threads(served.before)


@pytest.mark.parametrize("kind", SERVERS)
def test_a_client_that_sends_no_complete_head_in_time_is_closed(
    sockets: list[socket.socket], kind: str
) -> None:
    served = Served(kind, head_timeout_seconds=HEAD_TIMEOUT)
    stop_dripping = threading.Event()
    dripper: threading.Thread | None = None
    try:
        silent = _connect(served.port, "127.0.0.1", sockets)
        half = _connect(served.port, "127.0.0.1", sockets)
        half.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        dripping = _connect(served.port, "127.0.0.2", sockets)
        dripping.sendall(b"GET /healthz HTTP/1.1\r\nX-Drip: ")

        def drip() -> None:
            # One byte every 0.1 s: each recv of the server returns within its timeout, so only a
            # deadline on the whole head ends this connection.
            while not stop_dripping.wait(0.1):
                try:
                    dripping.send(b"a")
                except OSError:
                    return

        dripper = threading.Thread(target=drip, name="test-dripper", daemon=True)
        dripper.start()
        for sock, what in (
            (silent, "the silent one"),
            (half, "the half head"),
            (dripping, "the dripping one"),
        ):
            wait_until(
                partial(_closed_by_server, sock), timeout=CUT_WITHIN, what=f"{what} closed", interval=0.05
            )
            assert _first_bytes(sock) == b"", f"{what} got an answer to a head that never completed"
        wait_until(lambda: served.threads() == 0, timeout=CUT_WITHIN, what="their threads ended")
        assert served.healthz("127.0.0.1") == 200  # the server serves on, and a prompt client gets in
    finally:
        stop_dripping.set()
        if dripper is not None:
            dripper.join(timeout=CUT_WITHIN)
        for sock in sockets:
            sock.close()
        served.stop()
    assert not _handler_threads(served.before)
