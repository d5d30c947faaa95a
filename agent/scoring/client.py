"""The scoring API call: ``POST {"data": [...]}`` built from raw series, answer read with a size limit.

The request body is spliced from the raw ``data.result`` arrays of the Prometheus answers: the
opening and closing brackets of each array are dropped and the insides are joined with commas,
so the series are sent byte for byte as Prometheus produced them, in query order, without being
decoded or re-encoded.  The body is streamed in slices of the original buffers with an explicit
``Content-Length`` (no chunked encoding, which some small scorers cannot read).  With no series the
body is ``{"data":[]}``, never ``null`` (upstream A-16).

The answer is read incrementally and abandoned past the size limit, then validated against
``dynamic_scoring.wire.ScoringResponse``; any 2xx status is accepted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
from pydantic import ValidationError

from agent.errors import (
    ScorerHTTPError,
    ScorerResponseInvalid,
    ScorerResponseTooLarge,
    ScorerTimeout,
    ScorerUnavailable,
)
from agent.http import printable_excerpt, read_limited, redact_url
from dynamic_scoring.wire import ScoringResponse

SLICE = 1024 * 1024
_WHITESPACE = b" \t\r\n"


def _inner(raw: Any) -> memoryview | None:
    """The inside of one raw JSON array, or ``None`` when the array is empty."""
    view = memoryview(raw).cast("B")
    start, end = 0, len(view)
    while start < end and view[start] in _WHITESPACE:
        start += 1
    while end > start and view[end - 1] in _WHITESPACE:
        end -= 1
    if end - start < 2 or view[start] != ord("[") or view[end - 1] != ord("]"):
        raise ValueError("raw series are not a JSON array")
    start, end = start + 1, end - 1
    while start < end and view[start] in _WHITESPACE:
        start += 1
    return view[start:end] if start < end else None


def scoring_body(series: Sequence[Any]) -> tuple[int, list[memoryview | bytes]]:
    """The request body as pieces that reference the raw arrays, and its total length.

    Args:
        series: raw JSON arrays of Prometheus matrix series (``msgspec.Raw``, bytes or anything
            exposing the buffer protocol), in the order they should appear.
    """
    pieces: list[memoryview | bytes] = [b'{"data":[']
    first = True
    for raw in series:
        inner = _inner(raw)
        if inner is None:
            continue
        if not first:
            pieces.append(b",")
        pieces.append(inner)
        first = False
    pieces.append(b"]}")
    return sum(len(p) for p in pieces), pieces


async def _stream(pieces: Sequence[memoryview | bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        view = memoryview(piece)
        for offset in range(0, len(view), SLICE):
            # Zero-copy slices: h11 joins what it sends into one bytes object per slice anyway, and
            # accepts any buffer; bounded slices bound that copy.  (httpx types content as bytes.)
            yield view[offset : offset + SLICE]  # type: ignore[misc]


def _excerpt(body: bytes | bytearray, headers: Mapping[str, str] | None) -> str:
    sent = list((headers or {}).values())
    sent += [v.split(" ", 1)[1] for v in sent if " " in v]  # the token without its scheme
    return printable_excerpt(body, scrub=sent)


async def call_scorer(
    client: httpx.AsyncClient,
    endpoint: str,
    series: Sequence[Any],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    max_bytes: int = 8 * 1024 * 1024,
) -> ScoringResponse:
    """POST the series to the scoring API and return its validated answer.

    Raises:
        ScorerUnavailable: connection failure (transient).
        ScorerTimeout: no complete answer within ``timeout`` (transient).
        ScorerHTTPError: a status outside 2xx (transient for 5xx, 408, 429).
        ScorerResponseTooLarge: the body exceeded ``max_bytes``.
        ScorerResponseInvalid: the body is not a valid scoring response.
    """
    length, pieces = scoring_body(series)
    request_headers = {"Content-Type": "application/json", "Content-Length": str(length)}
    request_headers.update(headers or {})
    where = redact_url(endpoint)
    try:
        async with client.stream(
            "POST", endpoint, content=_stream(pieces), headers=request_headers, timeout=timeout
        ) as response:
            status = response.status_code
            body = await read_limited(response, max_bytes)
    except httpx.TimeoutException as exc:
        raise ScorerTimeout(f"scoring API {where} did not answer within {timeout:.3g}s") from exc
    except httpx.HTTPError as exc:
        raise ScorerUnavailable(f"scoring API {where} unreachable: {exc}") from exc
    if body is None:
        raise ScorerResponseTooLarge(f"scoring API {where} answered with more than {max_bytes} bytes")
    if not 200 <= status < 300:
        raise ScorerHTTPError(
            f"scoring API {where} answered HTTP {status}: {_excerpt(body, headers)}", status=status
        )
    try:
        return ScoringResponse.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where_in = ".".join(str(p) for p in first["loc"]) or "body"
        raise ScorerResponseInvalid(
            f"scoring API {where} answered with an invalid scoring response: {where_in}: {first['msg']}"
            + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
        ) from exc


__all__ = ["call_scorer", "scoring_body"]
