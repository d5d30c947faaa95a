"""Serving a ``ScorerApp`` with the standard library: a threaded HTTP server, no dependency.

One agent per cluster calls once per interval, and the hub probes every 30 s, so a thread per
request is plenty; authors who want more can run the same app under any ASGI server.  What one
client can make the process hold is bounded in three ways:

* the token is checked (``ScorerApp.answer_head``) before a byte of the body is read, so a client
  without it costs its headers and no more; the connection is then half-closed and at most
  ``LINGER_BYTES`` of what the client already sent are discarded (in a fixed buffer, for at most
  ``LINGER_SECONDS``) so that it reads the 401 instead of a connection reset;
* the body must come with ``Content-Length`` and is refused before it is read when that is over
  the app's ``max_body_bytes``;
* at most ``max_concurrent`` requests are handled at once (``DEFAULT_MAX_CONCURRENT``); one more is
  answered ``503`` with ``Retry-After`` from the accepting thread, without reading it and without
  a thread of its own.  The agent retries a 503 after ``Retry-After`` within its interval, so a
  refusal costs a retry, where waiting would have tied up a socket and, unbounded, memory.

A silent client is dropped after ``CLIENT_TIMEOUT`` seconds of silence, and the request line and
headers must arrive within ``HEAD_TIMEOUT_SECONDS`` of the accept however slowly their bytes come:
without that deadline, 16 clients sending a header byte every 29 s would hold every slot for as
long as they liked, and the agents would get nothing but 503.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from typing import Any

from dynamic_scoring.contract.wire import display_name
from dynamic_scoring.runtime.threaded_server import HeadDeadlineHandler, ThreadedHTTPServer
from dynamic_scoring.scorer.app import Response, ScorerApp, _json

log = logging.getLogger("dynamic_scoring.scorer")

CLIENT_TIMEOUT = 30
"""Seconds a client may stay silent before its connection is dropped."""

HEAD_TIMEOUT_SECONDS = 10.0
"""Seconds from the accept for the request line and headers to arrive.  An agent sends its head at
once, a few hundred bytes; 10 s frees a slot held by a silent or dripping client well before an
agent's retries run out."""

DEFAULT_MAX_CONCURRENT = 16
"""Requests handled at once by default.

Scoring is CPU work under one GIL, so more threads add no throughput; 16 leaves room for the hub's
probes and several agents' calls at once, and bounds buffered bodies to 16 x ``max_body_bytes``
(for clients that hold the token)."""

RETRY_AFTER_SECONDS = 1
"""The ``Retry-After`` of the 503 sent to a request over ``max_concurrent``."""

LINGER_BYTES = 256 * 1024
"""Bytes of an unread body discarded after an early answer (401, 413, 404...), before closing."""

LINGER_SECONDS = 1.0
"""How long at most that discarding may take."""

_BUSY_BODY = b'{"error": "too many requests at once; retry later"}'
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    + f"Retry-After: {RETRY_AFTER_SECONDS}\r\nContent-Length: {len(_BUSY_BODY)}\r\n".encode()
    + b"Connection: close\r\n\r\n"
    + _BUSY_BODY
)


class _BoundedServer(ThreadedHTTPServer):
    """A thread per request, at most ``max_concurrent`` of them; the others get a 503 at once."""

    thread_name = "scorer-server"

    def __init__(
        self, address: tuple[str, int], handler: type[HeadDeadlineHandler], limit: int, head_timeout: float
    ) -> None:
        self._slots = threading.BoundedSemaphore(limit)
        super().__init__(address, handler, head_timeout_seconds=head_timeout)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._busy(request, client_address)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # the thread did not start: its slot is free again
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _busy(self, request: socket.socket, client_address: Any) -> None:
        # The accepting thread must never wait on a client: the answer is a few hundred bytes into
        # an empty send buffer, written without blocking, and the request is never read.
        try:
            request.setblocking(False)
            request.send(_BUSY)
        except OSError:
            pass
        log.warning("a request from %s -> 503: more than the concurrency cap at once", client_address[0])
        self.shutdown_request(request)


class ScorerServer:
    """``app`` listening on ``host:port`` in this process; ``port`` 0 picks a free one (see ``.port``)."""

    def __init__(
        self,
        app: ScorerApp,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        head_timeout_seconds: float = HEAD_TIMEOUT_SECONDS,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")

        class Handler(HeadDeadlineHandler):
            server_version = "dynamic-scoring-scorer"
            # HTTP/1.0: one request per connection.  With keep-alive, a connection idle for as long as
            # the agent's interval races the server's idle timeout, and a request sent as the server
            # closes fails; the agent calls once per interval, so reuse saves nothing worth that.
            protocol_version = "HTTP/1.0"
            timeout = CLIENT_TIMEOUT
            disable_nagle_algorithm = True  # headers and body go out in separate writes: no ACK wait

            def _answer(self, response: Response) -> None:
                self.send_response(response.status)
                for name, value in response.headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(response.body)

            def _dispatch(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                early = app.answer_head(self.command, self.path, headers)
                if early is not None:  # no token, or no body needed: the body is never read
                    self._answer(early)
                    self._close_unread()
                    return
                length = self.headers.get("Content-Length")
                if length is None or not length.isdigit():
                    self._refuse(411, "a Content-Length header is required")
                    self._close_unread()
                    return
                if int(length) > app.max_body_bytes:
                    self._answer(app.too_large(self.command, self.path.split("?", 1)[0]))
                    self._close_unread()
                    return
                body = self.rfile.read(int(length))
                self._answer(app.handle_body(self.command, self.path, body))

            def _close_unread(self) -> None:
                """End the connection after an answer sent without reading the body.

                The unread bytes must not be parsed as a next request, so the connection is done.
                Closing a socket with unread input makes the kernel send a reset, which can destroy
                the answer before the client reads it; so the answer is flushed, the sending side
                shut, and a bounded amount of input discarded first (never kept: a fixed buffer).
                A request that announced no body is just closed: there is nothing to discard.
                """
                self.close_connection = True
                if (
                    self.headers.get("Content-Length", "0") in ("", "0")
                    and "Transfer-Encoding" not in self.headers
                ):
                    return
                try:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_WR)
                    deadline = time.monotonic() + LINGER_SECONDS
                    scratch = bytearray(64 * 1024)
                    left = LINGER_BYTES
                    while left > 0 and (remaining := deadline - time.monotonic()) > 0:
                        self.connection.settimeout(remaining)
                        got = self.connection.recv_into(scratch, min(left, len(scratch)))
                        if not got:
                            break
                        left -= got
                except OSError:
                    pass  # the client is gone or too slow: closing is all that is left

            def _refuse(self, status: int, message: str) -> None:
                log.warning("%s %s -> %d: %s", self.command, display_name(self.path), status, message)
                self._answer(_json(status, {"error": message}))

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = _dispatch  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the app logs one line per failure instead of an access log

        self.app = app
        self.max_concurrent = max_concurrent
        self._httpd = _BoundedServer((host, port), Handler, max_concurrent, head_timeout_seconds)
        shown = "127.0.0.1" if host in ("", "0.0.0.0") else host
        self.base_url = f"http://{shown}:{self.port}"

    @property
    def port(self) -> int:
        """The bound port."""
        return self._httpd.port

    def serve_forever(self) -> None:
        """Serve until ``shutdown`` (from another thread or a signal handler)."""
        self._httpd.serve_forever()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` (call it from another thread) and release the port; idempotent."""
        self._httpd.stop()

    def start_in_thread(self) -> threading.Thread:
        """Serve from a daemon thread (tests, notebooks); stop with ``shutdown``."""
        return self._httpd.start()


CONTAINER_MARKERS: tuple[str, ...] = ("/run/.containerenv", "/.dockerenv")
"""Files container engines create in every container (podman, Docker)."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def in_container(markers: tuple[str, ...] | None = None) -> str | None:
    """Why this process runs in a pod or container (the evidence), or None on a plain host.

    A pod is known by ``KUBERNETES_SERVICE_HOST``, which the kubelet sets in every container.
    """
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "in a Kubernetes pod (KUBERNETES_SERVICE_HOST is set)"
    found = next((m for m in (CONTAINER_MARKERS if markers is None else markers) if os.path.exists(m)), None)
    return f"in a container ({found} exists)" if found else None


def default_host(markers: tuple[str, ...] | None = None) -> str:
    """Where ``serve`` listens when not told: every interface in a container, else loopback.

    In a pod, loopback is reachable from nothing but the pod itself, so neither the agents nor the hub
    could call the scorer; on a developer's machine every interface would expose an unauthenticated
    scorer to the network, so loopback stays the default there.
    """
    return "0.0.0.0" if in_container(markers) else "127.0.0.1"


def serve(
    app: ScorerApp,
    host: str | None = None,
    port: int = 8000,
    *,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
) -> None:
    """Serve ``app`` until SIGTERM or Ctrl-C.

    ``host`` defaults to every interface in a pod or container and to loopback elsewhere
    (``default_host``); a loopback host given explicitly inside a container logs a warning, because
    the agents could not reach it. ``max_concurrent`` caps the requests handled at once; the next one
    is answered 503.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    where = in_container()
    if host is None:
        host = default_host()
    elif host in LOOPBACK_HOSTS and where:
        log.warning(
            "listening on %s %s: nothing outside this container can reach the scorer, so agents and the "
            "hub cannot call it; serve on host='0.0.0.0' (or leave host unset)",
            host,
            where,
        )
    server = ScorerServer(app, host, port, max_concurrent=max_concurrent)

    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info(
        "%s listening on http://%s:%d (POST %s)", display_name(app.name), host, server.port, app.scoring_path
    )
    server.serve_forever()


__all__ = [
    "CLIENT_TIMEOUT",
    "CONTAINER_MARKERS",
    "DEFAULT_MAX_CONCURRENT",
    "HEAD_TIMEOUT_SECONDS",
    "LINGER_BYTES",
    "LINGER_SECONDS",
    "RETRY_AFTER_SECONDS",
    "ScorerServer",
    "default_host",
    "in_container",
    "serve",
]
