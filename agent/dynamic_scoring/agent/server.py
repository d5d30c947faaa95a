"""The agent's small HTTP endpoint: ``/metrics``, ``/healthz`` and ``/readyz``.

It runs in a thread of its own, so a scrape never competes with the scoring loop for the event
loop.  ``/healthz`` answers 200 while the agent's health checks find no problem and 503 with one
line per problem otherwise (the summaries watch down too long, a worker task dead); it never
depends on a scorer's own failures, which are reported on its APS instead.  ``/readyz`` answers
200 once the supervisor has applied a summary list.

It listens on the pod's network (the kubelet probes it, Prometheus scrapes it), so anything that
can reach the pod can connect.  It is built on the project's threaded server base with the same
bounds as the manager's health server: at most `HEALTH_MAX_CONNECTIONS` connections (and
`HEALTH_MAX_CONNECTIONS_PER_PEER` from one address), a request head within
`HEALTH_HEAD_TIMEOUT_SECONDS`, and no read or write blocked longer than
`HEALTH_CLIENT_TIMEOUT_SECONDS`.  Before, each idle connection held a thread for as long as the
client kept it open.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.runtime.threaded_server import (
    HEALTH_CLIENT_TIMEOUT_SECONDS,
    HEALTH_HEAD_TIMEOUT_SECONDS,
    HEALTH_MAX_CONNECTIONS,
    HEALTH_MAX_CONNECTIONS_PER_PEER,
    HeadDeadlineHandler,
    ThreadedHTTPServer,
)

CONTENT_TYPE_METRICS = "text/plain; version=0.0.4; charset=utf-8"


class _Server(ThreadedHTTPServer):
    thread_name = "health-server"
    owner: HealthServer


class _Handler(HeadDeadlineHandler):
    server: _Server
    timeout = HEALTH_CLIENT_TIMEOUT_SECONDS

    def do_GET(self) -> None:
        status, content_type, body = self.server.owner.answer(self.path.split("?", 1)[0])
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds would drown the scorer logs


class HealthServer:
    """Serves metrics and probes on ``host:port`` from a background thread.

    Args:
        metrics: whose registry ``/metrics`` exposes.
        ready: returns True when the agent is ready (``Supervisor.ready``).
        host: bind host; loopback by default, ``0.0.0.0`` in the Deployment.
        port: bind port; 0 picks a free one (see ``port``).
        problems: returns the current health problems (``Health.problems``); none means healthy.
        live: returns the problems that make the agent not alive (``/livez``).
        max_connections, max_connections_per_peer, head_timeout_seconds: the bounds on idle or
            slow clients (the defaults suit a Deployment; tests pass smaller ones).
    """

    def __init__(
        self,
        metrics: AgentMetrics,
        ready: Callable[[], bool],
        host: str = "127.0.0.1",
        port: int = 8080,
        problems: Callable[[], list[str]] = list,
        live: Callable[[], list[str]] = list,
        *,
        max_connections: int = HEALTH_MAX_CONNECTIONS,
        max_connections_per_peer: int = HEALTH_MAX_CONNECTIONS_PER_PEER,
        head_timeout_seconds: float = HEALTH_HEAD_TIMEOUT_SECONDS,
    ) -> None:
        self._metrics = metrics
        self._ready = ready
        self._problems = problems
        self._live = live
        self._server = _Server(
            (host, port),
            _Handler,
            max_connections=max_connections,
            max_connections_per_peer=max_connections_per_peer,
            head_timeout_seconds=head_timeout_seconds,
        )
        self._server.owner = self

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.port

    @property
    def server(self) -> ThreadedHTTPServer:
        """The underlying server (its refusal counters, for tests and diagnostics)."""
        return self._server

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of ``path``."""
        if path == "/metrics":
            return 200, CONTENT_TYPE_METRICS, self._metrics.exposition()
        if path in ("/healthz", "/livez"):
            problems = self._problems() if path == "/healthz" else self._live()
            if not problems:
                return 200, "text/plain", b"ok\n"
            return (
                503,
                "text/plain; charset=utf-8",
                "".join(f"{p}\n" for p in problems).encode("utf-8", "replace"),
            )
        if path == "/readyz":
            if self._ready():
                return 200, "text/plain", b"ok\n"
            return 503, "text/plain", b"no configuration applied yet\n"
        return 404, "text/plain", b"not found\n"

    def start(self) -> None:
        """Serve from a daemon thread."""
        self._server.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.stop()


__all__ = ["HealthServer"]
