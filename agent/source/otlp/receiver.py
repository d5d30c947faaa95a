"""The OTLP/HTTP metrics receiver: ``POST /v1/metrics`` on a port of its own.

It runs on threads of its own, like the health server, so decoding a push never runs on the event
loop the scoring cycles use; each request is also bounded (``max_body_bytes`` before and after
inflation) and at most ``max_concurrent`` requests (one by default) decode at once; the others
wait up to ``max_wait_seconds`` for their turn and are then answered 429 with ``Retry-After``, so
a burst of pushes costs bounded CPU and memory.  Connections are bounded
too (``max_connections``; the excess is closed at once).

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
import logging
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse

from agent.source.otlp.access import BearerToken, ReceiverAccess, ThrottledLog, TlsFiles
from agent.source.otlp.decoding import BodyError, Encoding, encoding_of, inflate, parse
from agent.source.otlp.store import IngestResult, SeriesStore
from agent.source.otlp.translation import flatten

logger = logging.getLogger("agent.otlp")

MIB = 1024 * 1024
_DISCARD_LIMIT = MIB
"""Most body bytes read and dropped after a 401, so the pusher gets the answer, not a reset."""
STATUS_CODES: tuple[int, ...] = (200, 400, 401, 404, 405, 408, 411, 413, 415, 429, 500)
"""The only values of the ``code`` label of ``dynamic_scoring_otlp_requests_total``."""
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], receiver: OtlpReceiver) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.receiver = receiver
        # The socket timeout cuts off a connection that idles or drips its body.
        handler = type("_TimedHandler", (_Handler,), {"timeout": receiver.read_timeout_seconds})
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.receiver._enter_connection():
            self.shutdown_request(request)  # over the connection bound: close it at once
            return
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A pusher that resets its connection is routine; never a traceback on stderr.
        logger.debug("OTLP connection from %s ended with an error", client_address, exc_info=True)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.receiver._leave_connection()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse one connection for every push
    server: _Server
    discard_bytes = 0
    """Body bytes to read and drop after a refusal, before closing (see ``finish``)."""

    def setup(self) -> None:
        tls = self.server.receiver._tls
        if tls is not None:
            # The handshake runs here, on this connection's thread, under the read timeout.
            self.request.settimeout(self.timeout)
            context = tls.context()
            if context is None:
                raise ConnectionAbortedError("no usable TLS certificate")
            try:
                self.request = context.wrap_socket(self.request, server_side=True)
            except (ssl.SSLError, OSError) as exc:
                self.server.receiver._tls_failed(self.client_address[0], exc)
                raise
        super().setup()

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
        self.read_timeout_seconds = read_timeout_seconds
        self._on_ingest = on_ingest
        self._decoding = threading.BoundedSemaphore(max_concurrent)
        self.max_wait_seconds = max_wait_seconds
        self._count_lock = threading.Lock()
        self._connections = 0
        self.responses: Counter[int] = Counter({code: 0 for code in STATUS_CODES})
        """Responses by status code since start (``telemetry`` exports them)."""
        self._server = _Server((host, port), self)
        self._thread: threading.Thread | None = None

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return "https" if self._tls is not None else "http"

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Serve from a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    # -- connections ----------------------------------------------------------------------------

    def _enter_connection(self) -> bool:
        with self._count_lock:
            if self._connections >= self.max_connections:
                return False
            self._connections += 1
            return True

    def _leave_connection(self) -> None:
        with self._count_lock:
            self._connections -= 1

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


__all__ = ["STATUS_CODES", "OtlpReceiver"]
