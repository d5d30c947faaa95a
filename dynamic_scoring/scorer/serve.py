"""Serving a ``ScorerApp`` with the standard library: a threaded HTTP server, no dependency.

One agent per cluster calls once per interval, and the hub probes every 30 s, so a thread per
connection is plenty; authors who want more can run the same app under any ASGI server.  The body
must come with ``Content-Length`` and is refused before it is read when it is over the app's
``max_body_bytes``, so a client cannot make the process buffer without bound; a silent client is
dropped after ``CLIENT_TIMEOUT`` seconds.
"""

from __future__ import annotations

import logging
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dynamic_scoring.scorer.app import Response, ScorerApp, _json
from dynamic_scoring.wire import display_name

log = logging.getLogger("dynamic_scoring.scorer")

CLIENT_TIMEOUT = 30
"""Seconds a client may stay silent before its connection is dropped."""


class ScorerServer:
    """``app`` listening on ``host:port`` in this process; ``port`` 0 picks a free one (see ``.port``)."""

    def __init__(self, app: ScorerApp, host: str = "127.0.0.1", port: int = 8000) -> None:
        class Handler(BaseHTTPRequestHandler):
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
                body = b""
                if self.command == "POST":
                    length = self.headers.get("Content-Length")
                    if length is None or not length.isdigit():
                        self.close_connection = True
                        self._refuse(411, "a Content-Length header is required")
                        return
                    if int(length) > app.max_body_bytes:
                        self.close_connection = True  # the body stays unread, so the connection is done
                        self._refuse(413, f"the body is larger than {app.max_body_bytes} bytes")
                        return
                    body = self.rfile.read(int(length))
                self._answer(app.handle(self.command, self.path, headers, body))

            def _refuse(self, status: int, message: str) -> None:
                log.warning("%s %s -> %d: %s", self.command, display_name(self.path), status, message)
                self._answer(_json(status, {"error": message}))

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = _dispatch  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the app logs one line per failure instead of an access log

        self.app = app
        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        shown = "127.0.0.1" if host in ("", "0.0.0.0") else host
        self.base_url = f"http://{shown}:{self.port}"

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._httpd.server_address[1])

    def serve_forever(self) -> None:
        """Serve until ``shutdown`` (from another thread or a signal handler)."""
        self._httpd.serve_forever()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` (call it from another thread) and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def start_in_thread(self) -> threading.Thread:
        """Serve from a daemon thread (tests, notebooks); stop with ``shutdown``."""
        thread = threading.Thread(target=self.serve_forever, name="scorer-server", daemon=True)
        thread.start()
        return thread


def serve(app: ScorerApp, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve ``app`` until SIGTERM or Ctrl-C; loopback unless told otherwise (``0.0.0.0`` in a pod)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    server = ScorerServer(app, host, port)

    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info(
        "%s listening on http://%s:%d (POST %s)", display_name(app.name), host, server.port, app.scoring_path
    )
    server.serve_forever()


__all__ = ["CLIENT_TIMEOUT", "ScorerServer", "serve"]
