"""A TCP proxy on loopback that a test can cut, to break a connection in the middle of a body.

It forwards bytes both ways between a client and one upstream address.  `cut()` resets every open
connection at once (a crashed peer or a dropped NAT entry, as the client sees it); `refuse()` makes
new connections fail until `accept()`; `mute()` swallows what the upstream answers once the client
has spoken twice on a connection (after the TLS handshake, so a request still reaches the server
but its answer never reaches the client: a request that times out after it took effect).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading


class TcpProxy:
    """Forward `127.0.0.1:<port>` to `upstream`; start with `start()`, end with `close()`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._refusing = False
        self._muted = False
        self._closed = threading.Event()
        self.connections = 0
        """Connections accepted so far; a reconnect shows up here."""

    def start(self) -> TcpProxy:
        """Accept and forward in daemon threads."""
        threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True).start()
        return self

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refusing:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._pairs.append((client, server))
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        client_flights = 0  # reads from the client: ClientHello, then Finished and the request
        with selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ, server)
            sel.register(server, selectors.EVENT_READ, client)
            while not self._closed.is_set():
                try:
                    events = sel.select(timeout=0.5)
                    for key, _ in events:
                        source = key.fileobj
                        assert isinstance(source, socket.socket)
                        data = source.recv(65536)
                        if not data:
                            raise ConnectionError("closed")
                        if source is client:
                            client_flights += 1
                        elif self._muted and client_flights >= 2:
                            continue
                        key.data.sendall(data)
                except (OSError, ValueError, ConnectionError):
                    break
        self._drop(client, server)

    def _drop(self, client: socket.socket, server: socket.socket) -> None:
        with self._lock:
            if (client, server) in self._pairs:
                self._pairs.remove((client, server))
        _reset(client)
        _reset(server)

    def cut(self) -> int:
        """Reset every open connection now; returns how many there were."""
        with self._lock:
            pairs = list(self._pairs)
        for client, server in pairs:
            self._drop(client, server)
        return len(pairs)

    def refuse(self) -> None:
        """Reset new connections as they arrive (the path to the server is down)."""
        self._refusing = True

    def accept(self) -> None:
        """Forward new connections again."""
        self._refusing = False

    def mute(self, muted: bool = True) -> None:
        """Drop (`True`) or forward (`False`) what the upstream sends."""
        self._muted = muted

    def close(self) -> None:
        """Stop accepting and reset every connection."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()


def _reset(sock: socket.socket) -> None:
    """Close with RST rather than FIN, as a crashed peer does."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
