"""The OTLP/HTTP metrics receiver: ``POST /v1/metrics`` on a port of its own.

It runs on threads of its own, like the health server, so decoding a push never runs on the event
loop the scoring cycles use; each request is also bounded (``max_body_bytes`` before and after
inflation) and at most ``max_concurrent`` requests (one by default) decode at once; the others
wait up to ``max_wait_seconds`` for their turn and are then answered 429 with ``Retry-After``, so
a burst of pushes costs bounded CPU and memory.  Connections are bounded
too (``max_connections``; the excess is closed at once).

Slow clients: the socket timeout bounds each recv, not a request, so a peer dripping one header
byte a second would hold its connection for good.  The whole request head (TLS handshake, request
line and headers) therefore has a deadline, ``head_timeout_seconds``, kept by one watchdog thread
that shuts the connection down when it passes, however the bytes trickle in; and one client
address may hold at most ``max_connections_per_peer`` connections, so a single peer cannot take
every slot.  Each refused or cut connection is counted by reason (``CONNECTION_REFUSALS``).

Answers follow the OTLP/HTTP specification: 200 with an ``ExportMetricsServiceResponse`` in the
request's encoding, whose ``partial_success`` counts the data points the agent rejected (invalid
points, or new series beyond the store's limit) and says why; points that no scorer selects are not
rejected, just not kept.  Failures carry a ``google.rpc.Status`` body: 400 (malformed, not to be
retried), 401 (no or a wrong bearer token), 413 (too large), 415 (media type or content coding),
429 (busy, retry after the header's seconds), 404/405 for other paths and methods.

Access (``access``): with a bearer token configured, a request without the right
``Authorization`` header is answered 401 before its body is read or a decoding slot is taken, so
an unauthenticated pusher costs no decoding.  With TLS, each connection's handshake runs on its own
thread; a failed one (with mutual TLS: no client certificate, or one the CA did not sign) closes the
connection and is counted in ``tls_handshake_failures``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any, cast

from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse

from dynamic_scoring.agent.source.otlp.access import BearerToken, ReceiverAccess, ThrottledLog, TlsFiles
from dynamic_scoring.agent.source.otlp.decoding import BodyError, Encoding, encoding_of, inflate, parse
from dynamic_scoring.agent.source.otlp.store import IngestResult, SeriesStore
from dynamic_scoring.agent.source.otlp.translation import flatten
from dynamic_scoring.runtime.threaded_server import HeadDeadlines, ThreadedHTTPServer

logger = logging.getLogger("dynamic_scoring.agent.source.otlp")

MIB = 1024 * 1024
_DISCARD_LIMIT = MIB
"""Most body bytes read and dropped after a 401, so the pusher gets the answer, not a reset."""
STATUS_CODES: tuple[int, ...] = (200, 400, 401, 404, 405, 408, 411, 413, 415, 429, 500)
"""The only values of the ``code`` label of ``dynamic_scoring_otlp_requests_total``."""
CONNECTION_REFUSALS: tuple[str, ...] = ("head_timeout", "peer_cap", "total_cap")
"""The only values of the ``reason`` label of ``dynamic_scoring_otlp_connections_refused_total``:
the request head missed its deadline, the peer held its connection cap, all slots were taken."""
_RPC_CODE = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    404: code_pb2.NOT_FOUND,
    405: code_pb2.UNIMPLEMENTED,
    408: code_pb2.DEADLINE_EXCEEDED,
    411: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.RESOURCE_EXHAUSTED,
    415: code_pb2.INVALID_ARGUMENT,
    429: code_pb2.RESOURCE_EXHAUSTED,
    500: code_pb2.INTERNAL,
}
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


class _Server(ThreadedHTTPServer):
    thread_name = "otlp-receiver"
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], receiver: OtlpReceiver) -> None:
        self.receiver = receiver
        # The socket timeout cuts off a connection that idles or drips its body.
        handler = type("_TimedHandler", (_Handler,), {"timeout": receiver.read_timeout_seconds})
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.receiver._enter_connection(client_address[0]):
            self.shutdown_request(request)  # over a connection bound: close it at once, read nothing
            return
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A pusher that resets its connection is routine; never a traceback on stderr.
        logger.debug("OTLP connection from %s ended with an error", client_address, exc_info=True)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.receiver._leave_connection(client_address[0])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse one connection for every push
    server: _Server
    discard_bytes = 0
    """Body bytes to read and drop after a refusal, before closing (see ``finish``)."""
    _watched: socket.socket | None = None
    """A duplicate of the plain socket, for the head deadline: an ``SSLSocket`` cannot be dup'ed."""
    _head_key: int | None = None

    def setup(self) -> None:
        receiver = self.server.receiver
        # The first head's deadline runs from the accept: the TLS handshake is part of it.
        self._watched = self.request.dup()
        self._head_key = receiver._deadlines.arm(self._watched, receiver.head_timeout_seconds)
        try:
            tls = receiver._tls
            if tls is not None:
                # The handshake runs here, on this connection's thread, under the read timeout.
                self.request.settimeout(self.timeout)
                context = tls.context()
                if context is None:
                    raise ConnectionAbortedError("no usable TLS certificate")
                try:
                    self.request = context.wrap_socket(self.request, server_side=True)
                except (ssl.SSLError, OSError) as exc:
                    if receiver._deadlines.disarm(self._head_key):  # a late one is a head timeout
                        receiver._tls_failed(self.client_address[0], exc)
                    raise
            super().setup()
        except BaseException:
            self._release_watch()  # ``finish`` does not run when ``setup`` fails
            raise

    def _release_watch(self) -> None:
        """Cancel a pending head deadline and close the duplicate socket it watched."""
        self.server.receiver._deadlines.disarm(self._head_key)
        self._head_key = None
        if self._watched is not None:
            self._watched.close()
            self._watched = None

    def handle(self) -> None:
        """Serve requests until one closes the connection, each head under the deadline.

        Between kept-alive requests the connection may idle up to the read timeout (with a token
        configured, only a pusher that passed the check gets that far: every refusal closes the
        connection); the next head's deadline starts at its first byte.
        """
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection:
            try:
                if not cast(io.BufferedReader, self.rfile).peek(1):  # makefile("rb") buffers
                    return  # the pusher closed its idle connection
            except (OSError, ValueError):
                return  # idle beyond the read timeout, or reset
            receiver = self.server.receiver
            watched = self._watched or self.connection
            self._head_key = receiver._deadlines.arm(watched, receiver.head_timeout_seconds)
            self.handle_one_request()

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # reads the headers
        in_time = self.server.receiver._deadlines.disarm(self._head_key)
        self._head_key = None
        if not in_time:  # what was read may be a truncated head; answer nothing
            self.close_connection = True
            return False
        return parsed

    def finish(self) -> None:
        if self.discard_bytes:
            # A refusal answered before the body was read: closing with the body still arriving
            # would reset the connection and the pusher could lose the answer.  Read and drop a
            # bounded amount first, for at most a second.
            left, deadline = self.discard_bytes, time.monotonic() + 1.0
            with contextlib.suppress(OSError, ValueError):
                self.request.settimeout(1.0)
                while left > 0 and time.monotonic() < deadline:  # a dripping pusher gets no more
                    chunk = self.rfile.read1(min(left, 65536))
                    if not chunk:
                        break
                    left -= len(chunk)
        try:
            super().finish()
        finally:
            self._release_watch()
            if isinstance(self.request, ssl.SSLSocket):  # the server only knows the plain socket
                with contextlib.suppress(OSError):
                    self.request.close()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per push would drown the scorer logs; failures are logged by the receiver

    def do_POST(self) -> None:
        self.server.receiver._handle(self)

    def do_GET(self) -> None:
        self.server.receiver._refuse(self, 405 if self.path.split("?")[0] == "/v1/metrics" else 404)

    do_PUT = do_DELETE = do_PATCH = do_GET  # noqa: N815


class OtlpReceiver:
    """Accepts OTLP metric pushes into ``store`` on ``host:port`` (0 picks a free port).

    Args:
        store: where the decoded points go.
        host: bind host; loopback by default, the pod's IP in the Deployment.
        port: bind port (4318, OTLP/HTTP's registered port, in the Deployment).
        max_body_bytes: largest body accepted, compressed and after inflation.
        max_concurrent: requests decoding at once.  One: decoding holds the GIL, so a second
            decoding thread adds no throughput, only more competition for the scoring cycles.
        max_wait_seconds: how long a request waits for a decoding slot before it is answered 429.
        max_connections: open connections; more are closed at once.
        max_connections_per_peer: open connections from one client address; more are closed at
            once, so one peer cannot hold every slot.  16: a Collector's ``otlphttp`` exporter
            sends from 10 consumers by default, and four such peers still fit in 64.
        head_timeout_seconds: the whole request head (TLS handshake, request line, headers) must
            arrive within this; the connection is closed otherwise.  10 s is ample for a head of a
            few hundred bytes on a cluster network, and frees a dripped slot six times sooner
            than the read timeout would even if the drip stopped.
        read_timeout_seconds: a connection idle (or a body stalled) this long is closed.
        on_ingest: called after each accepted request (tests and the benchmark count them).
        access: bearer token and TLS files; the default admits every pusher over plain HTTP.
    """

    def __init__(
        self,
        store: SeriesStore,
        *,
        host: str = "127.0.0.1",
        port: int = 4318,
        max_body_bytes: int = 16 * MIB,
        max_concurrent: int = 1,
        max_wait_seconds: float = 2.0,
        max_connections: int = 64,
        max_connections_per_peer: int = 16,
        head_timeout_seconds: float = 10.0,
        read_timeout_seconds: float = 30.0,
        on_ingest: Callable[[IngestResult], None] | None = None,
        access: ReceiverAccess | None = None,
    ) -> None:
        self.store = store
        access = access or ReceiverAccess()
        self.access = access
        self._token = BearerToken(access.bearer_token_file) if access.bearer_token_file else None
        self._tls = (
            TlsFiles(access.tls_cert_file, access.tls_key_file, access.client_ca_file)
            if access.tls_cert_file is not None and access.tls_key_file is not None
            else None
        )
        self.tls_handshake_failures = 0
        """TLS handshakes that failed since start (``telemetry`` exports them)."""
        self._unauthorized_log = ThrottledLog()
        self._tls_log = ThrottledLog()
        self.max_body_bytes = max_body_bytes
        self.max_connections = max_connections
        self.max_connections_per_peer = max_connections_per_peer
        self.head_timeout_seconds = head_timeout_seconds
        self.read_timeout_seconds = read_timeout_seconds
        self._on_ingest = on_ingest
        self._decoding = threading.BoundedSemaphore(max_concurrent)
        self.max_wait_seconds = max_wait_seconds
        self._count_lock = threading.Lock()
        self._connections = 0
        self._per_peer: Counter[str] = Counter()
        self.responses: Counter[int] = Counter({code: 0 for code in STATUS_CODES})
        """Responses by status code since start (``telemetry`` exports them)."""
        self.connections_refused: Counter[str] = Counter({reason: 0 for reason in CONNECTION_REFUSALS})
        """Connections refused or cut, by reason, since start (``telemetry`` exports them)."""
        self._deadlines = HeadDeadlines(lambda: self._refused("head_timeout"), name="otlp-head-deadlines")
        self._server = _Server((host, port), self)

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return "https" if self._tls is not None else "http"

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.port

    def start(self) -> None:
        """Serve from a daemon thread."""
        self._deadlines.start()
        self._server.start()

    def stop(self) -> None:
        """Stop serving and release the port; idempotent."""
        self._server.stop()
        self._deadlines.stop()

    # -- connections ----------------------------------------------------------------------------

    def _enter_connection(self, peer: str) -> bool:
        with self._count_lock:
            if self._connections >= self.max_connections:
                self.connections_refused["total_cap"] += 1
                return False
            if self._per_peer[peer] >= self.max_connections_per_peer:
                self.connections_refused["peer_cap"] += 1
                return False
            self._connections += 1
            self._per_peer[peer] += 1
            return True

    def _leave_connection(self, peer: str) -> None:
        with self._count_lock:
            self._connections -= 1
            self._per_peer[peer] -= 1
            if self._per_peer[peer] <= 0:
                del self._per_peer[peer]  # the table holds live peers only, never every address seen

    def _refused(self, reason: str) -> None:
        with self._count_lock:
            self.connections_refused[reason] += 1

    def _tls_failed(self, peer: str, exc: BaseException) -> None:
        with self._count_lock:
            self.tls_handshake_failures += 1
        reason = getattr(exc, "reason", None) or type(exc).__name__
        self._tls_log.warning("OTLP TLS handshake from %s failed: %s", peer, reason)

    # -- requests -------------------------------------------------------------------------------

    def _count(self, status: int) -> None:
        with self._count_lock:
            self.responses[status if status in _REASONS else 500] += 1

    def _send(
        self,
        handler: _Handler,
        status: int,
        message: Message,
        encoding: Encoding,
        headers: dict[str, str] | None = None,
        *,
        close: bool = False,
    ) -> None:
        if encoding == "json":
            body = json_format.MessageToJson(message, indent=None).encode()
            content_type = "application/json"
        else:
            body = message.SerializeToString()
            content_type = "application/x-protobuf"
        # Counted before the answer leaves: whoever sees the answer sees it counted.
        self._count(status)
        handler.send_response(status, _REASONS.get(status))
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        if close:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        handler.wfile.write(body)

    def _error(
        self,
        handler: _Handler,
        status: int,
        text: str,
        encoding: Encoding = "protobuf",
        headers: dict[str, str] | None = None,
        *,
        close: bool = False,
    ) -> None:
        status_message = status_pb2.Status(code=_RPC_CODE.get(status, code_pb2.UNKNOWN), message=text)
        self._send(handler, status, status_message, encoding, headers, close=close)

    def _refuse(self, handler: _Handler, status: int) -> None:
        text = (
            "only POST /v1/metrics is served here"
            if status == 405
            else "not found; OTLP metrics go to /v1/metrics"
        )
        self._error(handler, status, text, close=True)

    def _handle(self, handler: _Handler) -> None:
        if handler.path.split("?")[0] != "/v1/metrics":
            self._refuse(handler, 404)
            return
        peer = handler.client_address[0]
        try:
            encoding = encoding_of(handler.headers.get("Content-Type"))
        except BodyError as exc:
            logger.warning("OTLP push from %s refused (%d): %s", peer, exc.status, exc.message)
            self._error(handler, exc.status, exc.message, close=True)
            return
        if self._token is not None and not self._token.admits(handler.headers.get("Authorization")):
            # Before the body is read or a decoding slot taken: an unauthenticated push costs nothing.
            self._unauthorized_log.warning("OTLP push from %s refused (401): no or a wrong token", peer)
            declared = handler.headers.get("Content-Length") or ""
            handler.discard_bytes = min(int(declared), _DISCARD_LIMIT) if declared.isdigit() else 0
            self._error(
                handler,
                401,
                "a bearer token is required (Authorization: Bearer <token>)",
                encoding,
                {"WWW-Authenticate": 'Bearer realm="dynamic-scoring-otlp"'},
                close=True,
            )
            return
        length_header = handler.headers.get("Content-Length")
        if length_header is None or not length_header.isdigit():
            self._error(handler, 411, "a Content-Length header is required", encoding, close=True)
            return
        length = int(length_header)
        if length > self.max_body_bytes:
            logger.warning("OTLP push from %s refused: %d bytes, limit %d", peer, length, self.max_body_bytes)
            self._error(handler, 413, f"the body exceeds {self.max_body_bytes} bytes", encoding, close=True)
            return
        if not self._decoding.acquire(timeout=self.max_wait_seconds):
            self._error(handler, 429, "the receiver is busy", encoding, {"Retry-After": "1"}, close=True)
            return
        try:
            try:
                body = handler.rfile.read(length)
            except TimeoutError:
                self._error(handler, 408, "the body did not arrive in time", encoding, close=True)
                return
            if len(body) < length:
                handler.close_connection = True
                return
            result = self._ingest(body, handler.headers.get("Content-Encoding"), encoding)
        except BodyError as exc:
            logger.warning("OTLP push from %s refused (%d): %s", peer, exc.status, exc.message)
            self._error(handler, exc.status, exc.message, encoding, close=exc.status != 400)
            return
        finally:
            self._decoding.release()
        response = ExportMetricsServiceResponse()
        if result.rejected:
            response.partial_success.rejected_data_points = result.rejected
            response.partial_success.error_message = result.message
            logger.warning(
                "OTLP push from %s: %d data point(s) rejected: %s", peer, result.rejected, result.message
            )
        self._send(handler, 200, response, encoding)
        if self._on_ingest is not None:
            self._on_ingest(result)

    def _ingest(self, body: bytes, content_encoding: str | None, encoding: Encoding) -> IngestResult:
        self.store.wait_for_renders(self.max_wait_seconds)  # a scoring cycle's render goes first
        data = inflate(body, content_encoding, self.max_body_bytes)
        request = parse(data, encoding)
        return self.store.ingest(flatten(request))


__all__ = ["CONNECTION_REFUSALS", "STATUS_CODES", "OtlpReceiver"]
