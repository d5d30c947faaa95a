"""The one reader of a listen address (``--bind-address``, ``--metrics-bind-address``, OTLP's).

Hub and agent took the same flag form with two parsers that disagreed on an empty host and on the
port range; both now read it here.
"""

from __future__ import annotations


def parse_bind_address(address: str) -> tuple[str, int]:
    """``host:port``, ``:port`` (every IPv4 interface, as in Go) or ``[v6]:port`` as (host, port).

    An empty host becomes ``0.0.0.0`` so that logs and the socket say the same thing; port 0 asks
    the kernel for a free port.

    Raises:
        ValueError: not of that form, or a port outside 0-65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"bind address {address!r}: expected host:port, :port or [v6]:port (port 0-65535)")
    return host.strip("[]") or "0.0.0.0", int(port)
