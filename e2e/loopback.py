"""Small HTTP servers on loopback for tests: a scoring API, a gateway, a hostile peer.

Tests stand up many tiny servers whose only interesting part is what they answer.  What they share
is here once: a handler base that stays quiet and answers with a body and a content type, and a
server that binds ``127.0.0.1`` on a free port, serves from a daemon thread and releases the port on
``stop()`` (or at the end of a ``with`` block), so every test stops what it started.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers in one call."""

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request line ``http.server`` writes to stderr."""
        del format, args

    def body(self) -> bytes:
        """The request body (``Content-Length`` bytes; none without the header)."""
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def reply(self, code: int, payload: bytes | Any, content_type: str = "application/json") -> None:
        """Answer ``code`` with ``payload``: bytes as they are, anything else encoded as JSON."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LoopbackServer:
    """``handler`` served on ``127.0.0.1`` at a free port from a daemon thread, until ``stop()``.

    Args:
        handler: the request handler class (usually a ``QuietHandler``).
        name: the serving thread's name, for thread dumps.
        start: serve at once; ``False`` leaves it to ``start()``.
    """

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], *, name: str = "loopback", start: bool = True
    ) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        """The base URL, without a trailing slash."""
        self._thread = threading.Thread(target=self.server.serve_forever, name=name, daemon=True)
        if start:
            self.start()

    def start(self) -> None:
        """Serve in the background thread (once)."""
        if not self._thread.is_alive():
            self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread.is_alive():
            self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


__all__ = ["LoopbackServer", "QuietHandler"]
