"""The one threaded HTTP server base that the project's hand-written servers derive from.

The manager's health endpoint, the scorer library's server, the agent's OTLP receiver and the
replay command's Prometheus stand-in all run on the standard library's ``http.server`` (each
module says why), and all need the same plumbing around it: a thread per request that never holds
the process open, IPv6 when the host says so, the port actually bound after asking for port 0,
``serve_forever`` on a named daemon thread, and a stop that can be called from any cleanup path
without hanging.  That plumbing lives here once; each server keeps only its own limits and
handlers.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ThreadedHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` bound at construction, served by ``start`` and released by ``stop``.

    Subclasses name their serving thread (``thread_name``: logs and thread dumps show it) and add
    their own bounds by overriding the ``socketserver`` hooks as usual.
    """

    daemon_threads = True  # a client that never finishes must not keep the process alive at exit
    thread_name = "http-server"
    """The name of the thread ``start`` serves from."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        # A colon can only be an IPv6 literal (hosts come without brackets); the default is IPv4.
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self._state = threading.Lock()
        self._serving = False
        self._stopped = False
        self._thread: threading.Thread | None = None
        super().__init__(address, handler)

    @property
    def port(self) -> int:
        """The bound port: the one the OS picked when the address asked for port 0."""
        return int(self.server_address[1])

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until ``stop`` (or ``shutdown``); returns at once when ``stop`` came first.

        Recording that serving began, under the same lock ``stop`` takes, is what lets ``stop``
        know whether ``shutdown`` has a loop to wait for: on a server that never served it
        would block forever.
        """
        with self._state:
            if self._stopped:
                return
            self._serving = True
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
        """
        with self._state:
            if self._stopped:
                return
            self._stopped = True
            serving = self._serving
        if serving:
            self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout)

    def __exit__(self, *args: object) -> None:
        """Stop, not only close: a closed socket under a running ``serve_forever`` would spin."""
        self.stop()


__all__ = ["ThreadedHTTPServer"]
