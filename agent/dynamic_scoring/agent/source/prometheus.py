"""Prometheus ``query_range`` as upstream called it, without turning the series into Python objects.

The request is upstream's: ``GET <sourceEndpoint>?end=<end>&query=<q>&start=<start>&step=<step>``
with integer Unix seconds, form-encoded parameters sorted by key (spaces become ``+``), and the same
``start``/``end`` for every query of a cycle.  Unlike upstream, an endpoint that already carries a
query string gets the parameters appended with ``&``.

The answer can be large (10,000 series x 60 points is about 17 MB).  The agent only forwards the
series to the scorer, so the body is read once into a buffer and validated with ``msgspec``: the
envelope (``status``, ``data.resultType``) is decoded and ``data.result`` stays a ``msgspec.Raw``,
a zero-copy view of the matrix bytes that the scoring client splices into its request.  That is
the reason for the ``msgspec`` dependency: a full JSON decode of such a body takes ten times longer
and several times the memory, for objects nobody looks at.

Failures are reported in a fixed vocabulary: the status code and its phrase, and Prometheus'
``errorType`` when it is one of the values the Prometheus API defines (``bad_data``, ``execution``
...).  Prometheus' free-text ``error`` and any other part of the body are never repeated: whatever
listens at the author's URL writes them, and the message lands in conditions the author can read.
The query itself (the author's own text) is named, so a rejected query can still be found.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import httpx
import msgspec

from dynamic_scoring.agent.errors import (
    AgentError,
    PrometheusAccessDenied,
    PrometheusAddressRefused,
    PrometheusQueryError,
    PrometheusRequestInvalid,
    PrometheusResponseError,
    PrometheusTimeout,
    PrometheusUnavailable,
)
from dynamic_scoring.agent.exchange import bounded_exchange
from dynamic_scoring.agent.http import (
    ErrorFamily,
    escape_control,
    header_secrets,
    refuse_metadata_headers,
    scrub,
    status_phrase,
)
from dynamic_scoring.agent.source.access import access_denied_message
from dynamic_scoring.outbound.urls import redact_url, url_secrets

QUERY_DISPLAY_LENGTH = 120
ERROR_TEXT_LENGTH = 300

PROMETHEUS_ERRORS = ErrorFamily(
    timeout=PrometheusTimeout,
    unavailable=PrometheusUnavailable,
    invalid_response=PrometheusResponseError,
    invalid_request=PrometheusRequestInvalid,
    address_refused=PrometheusAddressRefused,
)

ERROR_TYPES = frozenset(
    ("timeout", "canceled", "execution", "bad_data", "internal", "unavailable", "not_found", "not_acceptable")
)
"""The ``errorType`` values the Prometheus HTTP API defines: the only part of an error body repeated."""
RESULT_TYPES = frozenset(("matrix", "vector", "scalar", "string"))
"""How transport failures of a Prometheus exchange are named (see
``dynamic_scoring.agent.http.transport_errors``)."""


@dataclass(frozen=True)
class RangeWindow:
    """The ``start``/``end``/``step`` of one cycle, in integer seconds, shared by all its queries."""

    start: int
    end: int
    step: int

    @classmethod
    def ending_at(cls, now: float, range_seconds: int, step_seconds: int) -> RangeWindow:
        """The window of ``range_seconds`` that ends at ``now`` (truncated to whole seconds)."""
        end = int(now)
        return cls(start=end - range_seconds, end=end, step=step_seconds)


class _Data(msgspec.Struct):
    resultType: str  # noqa: N815 - Prometheus' JSON name
    result: msgspec.Raw


class _Envelope(msgspec.Struct):
    status: str
    data: _Data | None = None
    errorType: str = ""  # noqa: N815 - Prometheus' JSON name
    error: str = ""


class _ErrorEnvelope(msgspec.Struct):
    status: str = ""
    errorType: str = ""  # noqa: N815 - Prometheus' JSON name
    error: str = ""


def display_query(query: str, index: int) -> str:
    """How messages name a query: its 1-based number and its text, shortened to one line."""
    text = escape_control(" ".join(query.split()))
    if len(text) > QUERY_DISPLAY_LENGTH:
        text = text[: QUERY_DISPLAY_LENGTH - 1] + "…"
    return f"query #{index + 1} `{text}`"


def query_url(endpoint: str, query: str, window: RangeWindow) -> str:
    """The ``query_range`` URL: upstream's sorted, form-encoded parameters appended to ``endpoint``."""
    params = urlencode(
        [("end", str(window.end)), ("query", query), ("start", str(window.start)), ("step", str(window.step))]
    )
    separator = "&" if "?" in endpoint else "?"
    if endpoint.endswith(("?", "&")):
        separator = ""
    return f"{endpoint}{separator}{params}"


def _clean(text: str, secrets: list[str]) -> str:
    """Prometheus' own text, made safe for a log line and a condition: scrubbed, escaped, bounded."""
    text = escape_control(scrub(text, secrets))
    return text if len(text) <= ERROR_TEXT_LENGTH else text[: ERROR_TEXT_LENGTH - 1] + "…"


def known_error_type(error_type: str) -> str:
    """``error_type`` when the Prometheus API defines it, else ``""`` (free text is never repeated)."""
    return error_type if error_type in ERROR_TYPES else ""


def _prometheus_error_type(body: bytes | bytearray) -> str:
    with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
        return known_error_type(msgspec.json.decode(body, type=_ErrorEnvelope).errorType)
    return ""


async def query_range(
    client: httpx.AsyncClient,
    endpoint: str,
    query: str,
    window: RangeWindow,
    *,
    index: int = 0,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    max_bytes: int = 32 * 1024 * 1024,
) -> msgspec.Raw:
    """Run one range query and return ``data.result`` as raw JSON bytes (a JSON array).

    Args:
        client: the HTTP client for this endpoint's TLS settings.
        endpoint: the full ``query_range`` URL (``sourceEndpoint``).
        query: the PromQL text.
        window: start, end and step.
        index: the query's position in the scorer's list, used to name it in errors.
        headers: auth and custom headers.
        timeout: seconds for the whole exchange (connect, request, every byte of the body).
        max_bytes: largest body accepted, after decompression.

    Raises:
        PrometheusUnavailable: connection failure, 5xx, 408 or 429 (transient); ``retry_after`` is
            set from a ``Retry-After`` header on 429 and 503.
        PrometheusTimeout: no complete answer within ``timeout`` (transient).
        PrometheusAccessDenied: 401 or 403: the credentials were refused (the message names the
            missing permission when kube-rbac-proxy said which).
        PrometheusQueryError: Prometheus rejected the query; carries its ``errorType`` when the
            Prometheus API defines it (never its free-text ``error``).
        PrometheusResponseError: the body is not a successful matrix response, too large, or
            undecodable.
        PrometheusRequestInvalid: the URL cannot be sent, or ``headers`` hold a metadata-service header.
        PrometheusAddressRefused: the host is an address the client pool's policy refuses.
    """
    name = display_query(query, index)
    url = query_url(endpoint, query, window)
    where = redact_url(endpoint)
    refuse_metadata_headers(PROMETHEUS_ERRORS, headers, f"{name}: Prometheus at {where}")
    secrets = header_secrets(headers) + url_secrets(endpoint)

    def refused(status: int, body: bytearray) -> AgentError:
        phrase = status_phrase(status)
        if status in (401, 403):
            return PrometheusAccessDenied(
                f"{name}: " + access_denied_message(where, status, phrase, body, secrets)
            )
        error_type = _prometheus_error_type(body)
        detail = f"HTTP {status} ({phrase})" + (f", errorType {error_type}" if error_type else "")
        if status >= 500 or status in (408, 429):
            return PrometheusUnavailable(f"{name}: Prometheus at {where} answered {detail}")
        return PrometheusQueryError(
            f"{name} rejected by Prometheus at {where}: {detail}",
            query_index=index,
            query=query,
            error_type=error_type,
        )

    body = await bounded_exchange(
        client,
        "GET",
        url,
        errors=PROMETHEUS_ERRORS,
        what=f"{name}: Prometheus at {where}",
        seconds=timeout,
        max_bytes=max_bytes,
        too_large=lambda: PrometheusResponseError(
            f"{name}: response from {where} is larger than {max_bytes} bytes"
        ),
        status_error=refused,
        headers=headers,
    )
    try:
        envelope = msgspec.json.decode(body, type=_Envelope)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PrometheusResponseError(
            f"{name}: response from {where} is not a Prometheus API answer: {_clean(str(exc), secrets)}"
        ) from exc
    if envelope.status != "success":
        error_type = known_error_type(envelope.errorType)
        raise PrometheusQueryError(
            f"{name} failed in Prometheus at {where}: status is not success"
            + (f", errorType {error_type}" if error_type else ""),
            query_index=index,
            query=query,
            error_type=error_type,
        )
    if envelope.data is None:
        raise PrometheusResponseError(f"{name}: response from {where} has no data")
    if envelope.data.resultType != "matrix":
        got = envelope.data.resultType if envelope.data.resultType in RESULT_TYPES else "another type"
        raise PrometheusResponseError(f"{name}: expected resultType matrix from a range query, got {got}")
    raw = envelope.data.result
    if not bytes(memoryview(raw)[:1]) == b"[":
        raise PrometheusResponseError(f"{name}: data.result is not a JSON array")
    return raw


__all__ = [
    "ERROR_TYPES",
    "PROMETHEUS_ERRORS",
    "RangeWindow",
    "display_query",
    "known_error_type",
    "query_range",
    "query_url",
]
