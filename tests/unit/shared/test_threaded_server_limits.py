"""The connection caps and the head deadline of the threaded server base, on loopback.

Nothing here measures elapsed time: each wait is a condition polled up to ``WITHIN``, a liveness
deadline far above any scheduling delay on a loaded machine.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from dynamic_scoring.runtime.threaded_server import HeadDeadlineHandler, ThreadedHTTPServer
from e2e.procs import wait_until

HEAD_TIMEOUT = 0.5
WITHIN = 20.0
"""How long a test waits for something the server should do at once or at the head deadline."""
BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class _KeepAlive(HeadDeadlineHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # per recv: far beyond any wait here, so only the head deadline can cut a head

    def do_GET(self) -> None:
        body = b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Plain(BaseHTTPRequestHandler):
    pass


class _Busy(ThreadedHTTPServer):
    """Answers a connection over a cap with a 503 instead of closing it bare."""

    thread_name = "threaded-server-limits-test"

    def refuse_connection(self, request: Any, client_address: Any, reason: str) -> None:
        try:
            request.setblocking(False)
            request.send(BUSY)
        except OSError:
            pass
        super().refuse_connection(request, client_address, reason)


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """Client sockets, closed before the server stops (its stop waits for its handler threads)."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _connect(port: int, opened: list[socket.socket]) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WITHIN)
    opened.append(sock)
    return sock


def _read_answer(sock: socket.socket) -> bytes:
    """One whole answer of ``_KeepAlive`` (its body ends the answer), or what came before the close."""
    got = b""
    while not got.endswith(b"hello\n"):
        chunk = sock.recv(1024)
        if not chunk:
            break
        got += chunk
    return got


def _closed_by_server(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1024, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def test_bounds_are_checked_and_a_deadline_needs_a_handler_that_keeps_it() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        ThreadedHTTPServer(("127.0.0.1", 0), _KeepAlive, max_connections=0)
    with pytest.raises(ValueError, match="max_connections_per_peer"):
        ThreadedHTTPServer(("127.0.0.1", 0), _KeepAlive, max_connections_per_peer=0)
    with pytest.raises(ValueError, match="head_timeout_seconds"):
        ThreadedHTTPServer(("127.0.0.1", 0), _KeepAlive, head_timeout_seconds=0)
    with pytest.raises(TypeError, match="HeadDeadlineHandler"):  # nothing would ever arm it
        ThreadedHTTPServer(("127.0.0.1", 0), _Plain, head_timeout_seconds=1)


def test_a_connection_over_the_cap_gets_the_refusal_hook_and_no_thread(sockets: list[socket.socket]) -> None:
    server = _Busy(("127.0.0.1", 0), _KeepAlive, max_connections=2, head_timeout_seconds=60)
    server.start()
    try:
        held = [_connect(server.port, sockets) for _ in range(2)]
        wait_until(lambda: server.connections == 2, timeout=WITHIN, what="both slots taken")
        over = _connect(server.port, sockets)
        assert over.recv(1024) == BUSY  # answered by the accepting thread, then closed
        assert server.connections == 2
        assert server.connections_refused["total_cap"] == 1
        held[0].sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert _read_answer(held[0]).startswith(b"HTTP/1.1 200")  # a held one is served as usual
        wait_until(lambda: server.connections == 1, timeout=WITHIN, what="its slot freed")
        again = _connect(server.port, sockets)
        again.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answer(again).startswith(b"HTTP/1.1 200")  # the freed slot is taken again
    finally:
        for sock in sockets:
            sock.close()
        server.stop()
    assert server.connections == 0


def test_a_kept_alive_connection_may_idle_past_the_head_deadline_but_a_late_head_is_cut(
    sockets: list[socket.socket],
) -> None:
    # The idle time under test is not a sleep: a connection opened after the first answer sends
    # half a head and is cut at the deadline.  One watchdog keeps every deadline and cuts all that
    # are due, so had the idle connection been under one (armed earlier), it would have been cut too.
    server = ThreadedHTTPServer(("127.0.0.1", 0), _KeepAlive, head_timeout_seconds=HEAD_TIMEOUT)
    server.start()
    try:
        kept = _connect(server.port, sockets)
        kept.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answer(kept).startswith(b"HTTP/1.1 200")
        late = _connect(server.port, sockets)
        late.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never the blank line that ends the head
        wait_until(lambda: _closed_by_server(late), timeout=WITHIN, what="the late head cut", interval=0.05)
        assert server.connections_refused["head_timeout"] == 1
        assert not _closed_by_server(kept)
        kept.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answer(kept).startswith(b"HTTP/1.1 200")  # the same connection, served again
        assert server.connections_refused["head_timeout"] == 1
    finally:
        for sock in sockets:
            sock.close()
        server.stop()
