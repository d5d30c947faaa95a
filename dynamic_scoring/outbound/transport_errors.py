"""The one map from a failed HTTP exchange (httpx, h11, ssl, OS errors) to what went wrong.

The hub's scorer probe (sync ``httpx.Client``), the agent's Prometheus and scorer clients (async
``httpx.AsyncClient``) and the scorer library's conformance check all call a peer and have to say
why it failed.  Each used to sort httpx's exception tree itself; they disagreed on what a TLS error
was, and one of them found it by searching the message for "SSL".  ``classify`` is the one
decision: it walks the exception and its causes by *type* and returns a ``TransportFailure``, a
kind from a small closed set plus a summary from a fixed vocabulary.  The summary never carries the
exception's own text, so it can go where a less trusted reader looks (a DynamicScorer's status);
a caller that logs the detail for its own operator adds it, scrubbed, itself.

httpx's exception tree, for reference: ``TimeoutException``, ``ConnectError``,
``RemoteProtocolError``, ``LocalProtocolError`` and ``UnsupportedProtocol`` are ``TransportError``s;
``DecodingError`` and ``TooManyRedirects`` are ``RequestError``s; ``InvalidURL`` is none of those.
The SSL and socket errors arrive as the ``__cause__``/``__context__`` of a ``ConnectError``.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

import httpx


class FailureKind(StrEnum):
    """What went wrong, in the words the callers' reasons are built from."""

    TIMEOUT = "Timeout"
    """No answer within the deadline (connect, write, read, or the caller's whole-exchange bound)."""
    INVALID_REQUEST = "InvalidRequest"
    """The request could not be formed or sent as asked (bad URL, scheme, header): fix the caller's side."""
    UNDECODABLE = "InvalidEncoding"
    """An answer arrived but its body could not be decoded (broken gzip/deflate, bad chunking)."""
    TLS = "TLSError"
    """The TLS handshake failed, certificate verification included."""
    UNREACHABLE = "Unreachable"
    """No usable connection: refused, reset, unresolvable, closed early, protocol broken by the peer."""


@dataclass(frozen=True)
class TransportFailure:
    """A classified failure: its kind and a fixed-vocabulary summary (never the exception's text)."""

    kind: FailureKind
    summary: str


_ERRNO_TEXT = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ECONNABORTED: "connection aborted",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "timed out",
    errno.EPIPE: "connection closed",
}


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its ``__cause__``/``__context__`` chain, each once (a cycle ends the walk)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and not any(current is s for s in seen):
        seen.append(current)
        yield current
        current = current.__cause__ or current.__context__


def classify(exc: BaseException) -> TransportFailure:
    """What ``exc``, raised by an HTTP exchange, means; by exception type only, never by message.

    Timeouts (httpx's and ``asyncio.timeout``'s ``TimeoutError``) come first: a timed-out connect is
    a timeout, whatever socket error lies under it.  Then the request's own faults, then what the
    chain of causes says (TLS, name resolution, a socket errno), then httpx's own classes.
    """
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return TransportFailure(FailureKind.TIMEOUT, "no answer within the deadline")
    if isinstance(exc, httpx.InvalidURL | httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return TransportFailure(
            FailureKind.INVALID_REQUEST, f"the request cannot be sent ({type(exc).__name__})"
        )
    if isinstance(exc, httpx.DecodingError):
        return TransportFailure(FailureKind.UNDECODABLE, "the answer could not be decoded")
    for cause in causes(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            detail = str(cause.verify_message or "")[:80]
            return TransportFailure(
                FailureKind.TLS, "TLS certificate verification failed" + (f" ({detail})" if detail else "")
            )
        if isinstance(cause, ssl.SSLError):
            return TransportFailure(FailureKind.TLS, "TLS handshake failed")
        if isinstance(cause, socket.gaierror):
            return TransportFailure(FailureKind.UNREACHABLE, "host name does not resolve")
        if isinstance(cause, OSError) and cause.errno in _ERRNO_TEXT:
            return TransportFailure(FailureKind.UNREACHABLE, _ERRNO_TEXT[cause.errno])
    if isinstance(exc, httpx.RemoteProtocolError):
        return TransportFailure(
            FailureKind.UNREACHABLE, "the server broke the HTTP protocol or closed the connection early"
        )
    if isinstance(exc, httpx.ConnectError):
        return TransportFailure(FailureKind.UNREACHABLE, "connection failed")
    return TransportFailure(FailureKind.UNREACHABLE, f"request failed ({type(exc).__name__})")


TRANSPORT_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.RequestError,
    httpx.InvalidURL,
    OSError,
    TimeoutError,
)
"""What an HTTP exchange raises when the exchange itself fails: catch these, then ``classify``.

``httpx.HTTPStatusError`` is not one: an answer with any status is an answer, which each caller judges.
"""

__all__ = ["TRANSPORT_EXCEPTIONS", "FailureKind", "TransportFailure", "causes", "classify"]
