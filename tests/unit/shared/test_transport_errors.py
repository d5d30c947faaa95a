from __future__ import annotations

import errno
import socket
import ssl

import httpx
import pytest

from dynamic_scoring.outbound.transport_errors import (
    TRANSPORT_EXCEPTIONS,
    FailureKind,
    TransportFailure,
    causes,
    classify,
)


def _raised_from(outer: Exception, inner: BaseException) -> Exception:
    """``outer`` with ``inner`` as its cause, the way httpx wraps what the socket or ssl raised."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except Exception as chained:
        return chained


def test_tls_is_told_by_the_exception_type_not_by_the_message() -> None:
    verify = ssl.SSLCertVerificationError(1, "whatever")
    verify.verify_message = "certificate has expired"
    failure = classify(_raised_from(httpx.ConnectError("no mention of it here"), verify))
    assert failure.kind is FailureKind.TLS
    assert failure.summary == "TLS certificate verification failed (certificate has expired)"
    handshake = classify(_raised_from(httpx.ConnectError("x"), ssl.SSLError(1, "wrong version")))
    assert (handshake.kind, handshake.summary) == (FailureKind.TLS, "TLS handshake failed")
    # a message that says SSL is not a TLS failure when nothing in the chain is one
    assert classify(httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED]")).kind is FailureKind.UNREACHABLE


@pytest.mark.parametrize(
    ("exc", "kind", "summary"),
    [
        (httpx.ReadTimeout("x"), FailureKind.TIMEOUT, "no answer within the deadline"),
        (TimeoutError(), FailureKind.TIMEOUT, "no answer within the deadline"),
        (httpx.InvalidURL("x"), FailureKind.INVALID_REQUEST, "the request cannot be sent (InvalidURL)"),
        (
            httpx.UnsupportedProtocol("x"),
            FailureKind.INVALID_REQUEST,
            "the request cannot be sent (UnsupportedProtocol)",
        ),
        (httpx.DecodingError("x"), FailureKind.UNDECODABLE, "the answer could not be decoded"),
        (
            httpx.RemoteProtocolError("x"),
            FailureKind.UNREACHABLE,
            "the server broke the HTTP protocol or closed the connection early",
        ),
        (httpx.ConnectError("x"), FailureKind.UNREACHABLE, "connection failed"),
        (httpx.ReadError("x"), FailureKind.UNREACHABLE, "request failed (ReadError)"),
    ],
)
def test_httpx_classes_map_to_one_kind_each(exc: Exception, kind: FailureKind, summary: str) -> None:
    assert isinstance(exc, TRANSPORT_EXCEPTIONS)
    assert classify(exc) == TransportFailure(kind, summary)


def test_socket_causes_give_a_fixed_summary_never_the_errno_text() -> None:
    refused = classify(
        _raised_from(
            httpx.ConnectError("[Errno 111] secret detail"), ConnectionRefusedError(errno.ECONNREFUSED, "x")
        )
    )
    assert (refused.kind, refused.summary) == (FailureKind.UNREACHABLE, "connection refused")
    dns = classify(_raised_from(httpx.ConnectError("x"), socket.gaierror(socket.EAI_NONAME, "x")))
    assert dns.summary == "host name does not resolve"


def test_a_timeout_wins_over_the_socket_error_under_it() -> None:
    assert (
        classify(_raised_from(httpx.ConnectTimeout("x"), OSError(errno.ECONNREFUSED, "x"))).kind
        is FailureKind.TIMEOUT
    )


def test_a_cyclic_cause_chain_ends() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    assert list(causes(a)) == [a, b]
