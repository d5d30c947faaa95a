"""The one threaded HTTP server base that the project's hand-written servers derive from.

The manager's health endpoint, the scorer library's server, the agent's OTLP receiver and the
replay command's Prometheus stand-in all run on the standard library's ``http.server`` (each
module says why), and all need the same plumbing around it: a thread per request that never holds
the process open, IPv6 when the host says so, the port actually bound after asking for port 0,
``serve_forever`` on a named daemon thread, and a stop that can be called from any cleanup path
without hanging.  That plumbing lives here once; each server keeps only its own handlers and
any limits peculiar to it.

A thread per connection is also what a client that connects and sends nothing costs, for as long
as it likes: the standard library sets no time limit and no cap.  So the base offers both, to be
switched on by a server reachable by untrusted clients:

* ``max_connections`` and ``max_connections_per_peer`` bound the connections (and so the threads)
  held at once, in total and per client address; one over a bound is closed at once by the
  accepting thread (``refuse_connection``), without a thread of its own.  The per-address bound is
  what keeps one client from taking every slot, so a probe from elsewhere still gets in.
* ``head_timeout_seconds`` bounds the time from the accept to the end of the request head (request
  line and headers).  A socket timeout cannot do that: it restarts at every recv, so a client
  dripping one byte a second would hold its connection for good.  One watchdog thread
  (``HeadDeadlines``) shuts down each connection whose head is late; the handler must derive from
  ``HeadDeadlineHandler``, which arms and cancels the deadline around each head.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

CONNECTION_REFUSALS: tuple[str, ...] = ("head_timeout", "peer_cap", "total_cap")
"""The reasons ``ThreadedHTTPServer.connections_refused`` counts: the request head missed its
deadline, the client address held its connection cap, every slot was taken."""


# Limits for the health and metrics servers of the manager and the agent: probes and scrapes only.
HEALTH_MAX_CONNECTIONS = 32
"""Connections a health server (the manager's, the agent's) holds at once; more are closed at
once, without a thread.

The kubelet's probes and a Prometheus scrape need a few at a time, each for milliseconds; 32 leaves
room for several scrapers and probes arriving together, and bounds what idle clients can make the
process hold to 32 threads."""

HEALTH_MAX_CONNECTIONS_PER_PEER = 8
"""Connections one client address may hold at once, so one client cannot take every slot and the
kubelet's probes (from the node's address) still get in while it holds its share."""

HEALTH_HEAD_TIMEOUT_SECONDS = 10.0
"""Seconds from the accept for the request line and headers to arrive; the connection is closed
otherwise.  A probe's head is a few hundred bytes sent at once, so 10 s is ample, and it frees a
slot held by a silent or dripping client long before a probe's retries run out."""

HEALTH_CLIENT_TIMEOUT_SECONDS = 30.0
"""Seconds any one read or write may block: a client that stops reading a ``/metrics`` answer
cannot hold its thread for longer than this."""


class HeadDeadlines:
    """One thread that shuts down connections whose request head is late.

    A socket timeout restarts at every recv, so it cannot bound a head that arrives a byte at a
    time; a deadline kept outside the reading thread can.  ``shutdown`` (not ``close``) wakes the
    recv blocked in the connection's thread, which then sees the end of the stream and lets the
    connection go; the connection's own thread still closes the socket, so no descriptor is closed
    under it.  One thread for all connections, not a timer each: the connection cap bounds the
    pending deadlines, and a scan of them is cheap.
    """

    def __init__(
        self, on_expired: Callable[[], None] = lambda: None, *, name: str = "head-deadlines"
    ) -> None:
        self._on_expired = on_expired
        self._name = name
        self._changed = threading.Condition()
        self._pending: dict[int, tuple[float, socket.socket]] = {}
        self._keys = itertools.count()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Keep deadlines from a daemon thread until ``stop``."""
        with self._changed:
            self._stopped = False
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the watchdog thread; deadlines still pending are dropped."""
        with self._changed:
            self._stopped = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def arm(self, sock: socket.socket, seconds: float) -> int:
        """Shut ``sock`` down ``seconds`` from now unless ``disarm`` comes first; returns the key."""
        with self._changed:
            key = next(self._keys)
            self._pending[key] = (time.monotonic() + seconds, sock)
            self._changed.notify()
            return key

    def disarm(self, key: int | None) -> bool:
        """Cancel a deadline; False when it had already passed (the connection is shut down)."""
        if key is None:
            return True
        with self._changed:
            return self._pending.pop(key, None) is not None

    def _run(self) -> None:
        with self._changed:
            while not self._stopped:
                now = time.monotonic()
                for key in [k for k, (deadline, _) in self._pending.items() if deadline <= now]:
                    _, sock = self._pending.pop(key)
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    self._on_expired()
                soonest = min((deadline for deadline, _ in self._pending.values()), default=None)
                self._changed.wait(None if soonest is None else max(soonest - now, 0.0))


class ThreadedHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` bound at construction, served by ``start`` and released by ``stop``.

    Subclasses name their serving thread (``thread_name``: logs and thread dumps show it) and add
    their own bounds by overriding the ``socketserver`` hooks as usual.  The connection caps and
    the head deadline (see the module docstring) are off unless given.
    """

    daemon_threads = True  # a client that never finishes must not keep the process alive at exit
    thread_name = "http-server"
    """The name of the thread ``start`` serves from."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        max_connections: int | None = None,
        max_connections_per_peer: int | None = None,
        head_timeout_seconds: float | None = None,
    ) -> None:
        for name, bound in (
            ("max_connections", max_connections),
            ("max_connections_per_peer", max_connections_per_peer),
        ):
            if bound is not None and bound < 1:
                raise ValueError(f"{name} must be at least 1")
        if head_timeout_seconds is not None:
            if head_timeout_seconds <= 0:
                raise ValueError("head_timeout_seconds must be positive")
            if not issubclass(handler, HeadDeadlineHandler):  # nothing else would arm the deadline
                raise TypeError("a head deadline needs a handler derived from HeadDeadlineHandler")
        # A colon can only be an IPv6 literal (hosts come without brackets); the default is IPv4.
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.max_connections = max_connections
        self.max_connections_per_peer = max_connections_per_peer
        self.head_timeout_seconds = head_timeout_seconds
        self.connections_refused: Counter[str] = Counter({reason: 0 for reason in CONNECTION_REFUSALS})
        """Connections refused or cut, by reason (``CONNECTION_REFUSALS``), since construction."""
        self._counts = threading.Lock()  # not ``_state``: the watchdog counts under its own lock
        self._connections = 0
        self._per_peer: Counter[str] = Counter()
        self._deadlines = (
            HeadDeadlines(lambda: self._refused("head_timeout"), name=f"{self.thread_name} head deadlines")
            if head_timeout_seconds is not None
            else None
        )
        self._state = threading.Lock()
        self._serving = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        super().__init__(address, handler)

    @property
    def port(self) -> int:
        """The bound port: the one the OS picked when the address asked for port 0."""
        return int(self.server_address[1])

    @property
    def connections(self) -> int:
        """Connections open now, each with its thread."""
        with self._counts:
            return self._connections

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until ``stop`` (or ``shutdown``); returns at once when ``stop`` came first.

        Recording that serving began, under the same lock ``stop`` takes, is what lets ``stop``
        know whether ``shutdown`` has a loop to wait for: on a server that never served it
        would block forever.  The head deadlines' watchdog starts here, so it runs exactly while
        connections can arrive, however the server is served.
        """
        with self._state:
            if self._stopped:
                return
            self._serving = True
            if self._deadlines is not None:
                self._deadlines.start()
        super().serve_forever(poll_interval)

    def start(self) -> threading.Thread:
        """Serve from a daemon thread named ``thread_name``; the thread, for callers that join it."""
        self._thread = threading.Thread(target=self.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, release the port and wait up to ``timeout`` seconds for the serving thread.

        Idempotent, so every cleanup path (a signal, a ``finally``, a context manager) may call it;
        only the first call does the work.  Call it from another thread than the one serving.
        ``server_close`` waits for the connections' threads, so the watchdog stops only after it:
        until then it is what ends a connection stuck in its head.
        """
        with self._state:
            if self._stopped:
                return
            self._stopped = True
            serving = self._serving
        if serving:
            self.shutdown()
        self.server_close()
        if self._deadlines is not None:
            self._deadlines.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def __exit__(self, *args: object) -> None:
        """Stop, not only close: a closed socket under a running ``serve_forever`` would spin."""
        self.stop()

    # -- connections ----------------------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        """Start a connection's thread, or refuse the connection when it is over a cap."""
        reason = self._enter(str(client_address[0]))
        if reason is not None:
            self._refused(reason)
            self.refuse_connection(request, client_address, reason)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # the thread did not start: its slot is free again
            self._leave(str(client_address[0]))
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve the connection on its thread and free its slot when it ends, however it ends."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._leave(str(client_address[0]))

    def refuse_connection(self, request: Any, client_address: Any, reason: str) -> None:
        """Close a connection over a cap at once, on the accepting thread, reading nothing.

        A subclass may answer first (a ``503``, say), as long as it never waits on the client:
        the accepting thread serves every other connection too.
        """
        self.shutdown_request(request)

    def _enter(self, peer: str) -> str | None:
        """Take a slot for a connection from ``peer``; why not, when it is over a cap."""
        with self._counts:
            if self.max_connections is not None and self._connections >= self.max_connections:
                return "total_cap"
            if (
                self.max_connections_per_peer is not None
                and self._per_peer[peer] >= self.max_connections_per_peer
            ):
                return "peer_cap"
            self._connections += 1
            self._per_peer[peer] += 1
            return None

    def _leave(self, peer: str) -> None:
        with self._counts:
            self._connections -= 1
            self._per_peer[peer] -= 1
            if self._per_peer[peer] <= 0:
                del self._per_peer[peer]  # the table holds live peers only, never every address seen

    def _refused(self, reason: str) -> None:
        with self._counts:
            self.connections_refused[reason] += 1

    def arm_head_deadline(self, sock: socket.socket) -> int | None:
        """Start the head deadline of ``sock``; its key, or None when the server keeps none."""
        if self._deadlines is None or self.head_timeout_seconds is None:
            return None
        return self._deadlines.arm(sock, self.head_timeout_seconds)

    def disarm_head_deadline(self, key: int | None) -> bool:
        """Cancel a head deadline; False when it had passed and the connection is shut down."""
        return True if self._deadlines is None else self._deadlines.disarm(key)


class HeadDeadlineHandler(BaseHTTPRequestHandler):
    """A request handler whose every request head must arrive within the server's head deadline.

    The first head's deadline runs from the connection's start; on a kept-alive connection each
    next one runs from the first byte of that head, so an idle connection between requests is
    bounded by the handler's ``timeout`` (a socket timeout), as a client reusing it expects.  A
    head completed too late is not answered: what was read may be a truncated head.
    """

    server: ThreadedHTTPServer
    _head_key: int | None = None

    def setup(self) -> None:
        """Arm the first head's deadline before anything else can block."""
        self._head_key = self.server.arm_head_deadline(self.request)
        try:
            super().setup()
        except BaseException:
            self._disarm_head()  # ``finish`` does not run when ``setup`` fails
            raise

    def handle(self) -> None:
        """Serve requests until one closes the connection, each head under the deadline."""
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection:
            try:
                if not cast(io.BufferedReader, self.rfile).peek(1):  # makefile("rb") buffers
                    return  # the client closed its idle connection
            except (OSError, ValueError):
                return  # idle beyond the socket timeout, or reset
            self._head_key = self.server.arm_head_deadline(self.request)
            self.handle_one_request()

    def parse_request(self) -> bool:
        """Parse the head as usual, then refuse it when its deadline passed meanwhile."""
        try:
            parsed = super().parse_request()  # reads the headers
        except OSError:  # an error answer could not be sent: the connection is gone (or cut)
            self.close_connection = True
            parsed = False
        if not self._disarm_head():
            self.close_connection = True
            return False
        return parsed

    def finish(self) -> None:
        """Cancel a deadline still pending (a head that never parsed), then flush as usual."""
        try:
            super().finish()
        finally:
            self._disarm_head()

    def _disarm_head(self) -> bool:
        in_time = self.server.disarm_head_deadline(self._head_key)
        self._head_key = None
        return in_time


__all__ = [
    "CONNECTION_REFUSALS",
    "HEALTH_CLIENT_TIMEOUT_SECONDS",
    "HEALTH_HEAD_TIMEOUT_SECONDS",
    "HEALTH_MAX_CONNECTIONS",
    "HEALTH_MAX_CONNECTIONS_PER_PEER",
    "HeadDeadlineHandler",
    "HeadDeadlines",
    "ThreadedHTTPServer",
]
