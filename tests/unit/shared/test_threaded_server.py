"""The threaded server base the four hand-written servers share: served, answered, stopped for good."""

from __future__ import annotations

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from dynamic_scoring.runtime.threaded_server import ThreadedHTTPServer


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Named(ThreadedHTTPServer):
    thread_name = "threaded-server-test"


def _get(port: int) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_start_answers_and_stop_releases_the_port_and_ends_the_thread() -> None:
    server = _Named(("127.0.0.1", 0), _Hello)
    try:
        assert server.port != 0  # the port the OS picked, not the 0 asked for
        thread = server.start()
        assert thread.name == "threaded-server-test" and thread.daemon and thread.is_alive()
        assert _get(server.port) == (200, b"hello\n")
    finally:
        server.stop()
    assert not thread.is_alive()
    assert thread not in threading.enumerate()
    assert _port_is_free(server.port)
    server.stop()  # idempotent: a second call returns at once, from any cleanup path
    with pytest.raises(OSError):
        _get(server.port)


def test_stop_before_start_and_a_start_after_stop_never_hang() -> None:
    never_served = _Named(("127.0.0.1", 0), _Hello)
    never_served.stop()  # ``shutdown`` alone would wait forever for a loop that never ran
    late = never_served.start()
    late.join(timeout=5)
    assert not late.is_alive()  # ``serve_forever`` saw the stop and returned at once


def test_the_context_manager_stops_a_started_server() -> None:
    with _Named(("127.0.0.1", 0), _Hello) as server:
        thread = server.start()
        assert _get(server.port)[0] == 200
    assert not thread.is_alive()
    assert _port_is_free(server.port)


def test_a_colon_in_the_host_binds_ipv6() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this environment")
    try:
        server = ThreadedHTTPServer(("::1", 0), _Hello)
    except OSError:
        pytest.skip("no IPv6 loopback in this environment")
    try:
        assert server.address_family == socket.AF_INET6
        server.start()
        conn = http.client.HTTPConnection("::1", server.port, timeout=5)
        try:
            conn.request("GET", "/")
            assert conn.getresponse().status == 200
        finally:
            conn.close()
    finally:
        server.stop()
