"""The agent's small HTTP endpoint: ``/metrics``, ``/healthz`` and ``/readyz``.

It runs in a thread with the standard library's WSGI server, so a scrape never competes with the
scoring loop for the event loop.  ``/healthz`` answers 200 while the agent's health checks find no
problem and 503 with one line per problem otherwise (the summaries watch down too long, a worker
task dead); it never depends on a scorer's own failures, which are reported on its APS instead.
``/readyz`` answers 200 once the supervisor has applied a summary list.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from dynamic_scoring.agent.metrics import AgentMetrics

CONTENT_TYPE_METRICS = "text/plain; version=0.0.4; charset=utf-8"


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds would drown the scorer logs


class HealthServer:
    """Serves metrics and probes on ``host:port`` from a background thread.

    Args:
        metrics: whose registry ``/metrics`` exposes.
        ready: returns True when the agent is ready (``Supervisor.ready``).
        problems: returns the current health problems (``Health.problems``); none means healthy.
        host: bind host; loopback by default, ``0.0.0.0`` in the Deployment.
        port: bind port; 0 picks a free one (see ``port``).
    """

    def __init__(
        self,
        metrics: AgentMetrics,
        ready: Callable[[], bool],
        host: str = "127.0.0.1",
        port: int = 8080,
        problems: Callable[[], list[str]] = list,
        live: Callable[[], list[str]] = list,
    ) -> None:
        self._metrics = metrics
        self._ready = ready
        self._problems = problems
        self._live = live
        server_class = _ThreadingServer6 if ":" in host else _ThreadingServer
        self._server = make_server(
            host, port, self._app, server_class=server_class, handler_class=_QuietHandler
        )
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            body = self._metrics.exposition()
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_METRICS)])
            return [body]
        if path in ("/healthz", "/livez"):
            problems = self._problems() if path == "/healthz" else self._live()
            if not problems:
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"ok\n"]
            start_response("503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8")])
            return ["".join(f"{p}\n" for p in problems).encode("utf-8", "replace")]
        if path == "/readyz":
            if self._ready():
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"ok\n"]
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"no configuration applied yet\n"]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]

    def start(self) -> None:
        """Serve from a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="health-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()


__all__ = ["HealthServer"]
