"""The scoring API call: ``POST {"data": [...]}`` built from raw series, answer read with a size limit.

The request body is spliced from the raw ``data.result`` arrays of the Prometheus answers: the
opening and closing brackets of each array are dropped and the insides are joined with commas,
so the series are sent byte for byte as Prometheus produced them, in query order, without being
decoded or re-encoded.  The body is streamed in slices of the original buffers with an explicit
``Content-Length`` (no chunked encoding, which some small scorers cannot read).  With no series the
body is ``{"data":[]}``, never ``null`` (upstream sent ``null``).  A scorer with ``scoringParams`` also
gets ``"params": {...}`` after ``data``; upstream scorers ignore the key.

The answer is read incrementally and abandoned past the size limit (decompressed size), its
results are counted against the per-scorer limit before anything else is built from them, and it
is then validated against ``dynamic_scoring.contract.wire.ScoringResponse`` (through the fast decoder of
`dynamic_scoring.agent.scorer_client.answer`); any 2xx status is accepted.  Any other status is reported by
its code and a fixed phrase: the body of an error answer is read (bounded) and dropped, never echoed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
import msgspec
from pydantic import ValidationError

from dynamic_scoring.agent.errors import (
    ScorerAddressRefused,
    ScorerHTTPError,
    ScorerRequestInvalid,
    ScorerResponseInvalid,
    ScorerResponseTooLarge,
    ScorerTimeout,
    ScorerTooManyResults,
    ScorerUnavailable,
)
from dynamic_scoring.agent.exchange import bounded_exchange
from dynamic_scoring.agent.http import ErrorFamily, refuse_metadata_headers, status_phrase
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.scorer_client.answer import ScoringAnswer, decode_answer
from dynamic_scoring.contract.score_size import MAX_SCORE_BYTES, max_results_for, scores_bytes
from dynamic_scoring.contract.validation import describe_validation
from dynamic_scoring.outbound.urls import redact_url

SLICE = 1024 * 1024
OFF_LOOP_BYTES = 64 * 1024
"""Answers larger than this are validated in a worker thread, not on the event loop."""
_SCAN = 1024 * 1024

SCORER_ERRORS = ErrorFamily(
    timeout=ScorerTimeout,
    unavailable=ScorerUnavailable,
    invalid_response=ScorerResponseInvalid,
    invalid_request=ScorerRequestInvalid,
    address_refused=ScorerAddressRefused,
)
"""How transport failures of a scoring-API exchange are named (see
``dynamic_scoring.agent.http.transport_errors``)."""


def _skip_ws(view: memoryview, start: int, end: int) -> int:
    """The first index in ``[start, end)`` that is not whitespace (``end`` if none).

    Scans in 1 MiB slices with ``bytes.lstrip()`` (C speed, about 1 GB/s): a Prometheus answer
    padded with hundreds of megabytes of whitespace must not be walked byte by byte in Python on
    the event loop (that took 52 s for 500 MB).  The argument-less strip also removes VT and
    FF, which cannot occur here: outside strings, valid JSON (``msgspec`` checked it) has only
    space, tab, CR and LF.
    """
    while start < end:
        piece = bytes(view[start : min(end, start + _SCAN)])
        kept = len(piece.lstrip())
        if kept:
            return start + len(piece) - kept
        start += len(piece)
    return end


def _skip_ws_back(view: memoryview, start: int, end: int) -> int:
    """One past the last index in ``[start, end)`` that is not whitespace (``start`` if none)."""
    while end > start:
        piece = bytes(view[max(start, end - _SCAN) : end])
        kept = len(piece.rstrip())
        if kept:
            return end - len(piece) + kept
        end -= len(piece)
    return start


def _inner(raw: Any) -> memoryview | None:
    """The inside of one raw JSON array, or ``None`` when the array is empty."""
    view = memoryview(raw).cast("B")
    start = _skip_ws(view, 0, len(view))
    end = _skip_ws_back(view, start, len(view))
    if end - start < 2 or view[start] != ord("[") or view[end - 1] != ord("]"):
        raise ValueError("raw series are not a JSON array")
    start = _skip_ws(view, start + 1, end - 1)
    end = _skip_ws_back(view, start, end - 1)
    return view[start:end] if start < end else None


def has_series(series: Sequence[Any]) -> bool:
    """Whether any of the raw arrays holds at least one series (the source returned data)."""
    return any(_inner(raw) is not None for raw in series)


def scoring_body(
    series: Sequence[Any], params: Mapping[str, Any] | None = None
) -> tuple[int, list[memoryview | bytes]]:
    """The request body as pieces that reference the raw arrays, and its total length.

    ``params`` (the summary's ``scoringParams``) follows ``data`` as a small JSON object; it is
    encoded once here and bounded by the summary's own check (``MAX_SCORING_PARAMS_BYTES``), so the
    series are still streamed as they are.  Without ``params`` the body is exactly upstream's.

    Args:
        series: raw JSON arrays of Prometheus matrix series (``msgspec.Raw``, bytes or anything
            exposing the buffer protocol), in the order they should appear.
        params: the scorer's parameters, or ``None`` to send none.
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
    if params is None:
        pieces.append(b"]}")
    else:
        pieces.append(b'],"params":' + msgspec.json.encode(dict(params)) + b"}")
    return sum(len(p) for p in pieces), pieces


async def _stream(pieces: Sequence[memoryview | bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        view = memoryview(piece)
        for offset in range(0, len(view), SLICE):
            # Zero-copy slices: h11 joins what it sends into one bytes object per slice anyway, and
            # accepts any buffer; bounded slices bound that copy.  (httpx types content as bytes.)
            yield view[offset : offset + SLICE]  # type: ignore[misc]


class _Count(msgspec.Struct):
    results: list[msgspec.Raw] | None = None


def _count_results(body: bytes | bytearray) -> int | None:
    """How many results the body holds, found without building them (``None``: not countable)."""
    try:
        return len(msgspec.json.decode(body, type=_Count).results or ())
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # the full validation below names the problem


async def call_scorer(
    client: httpx.AsyncClient,
    endpoint: str,
    series: Sequence[Any],
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    max_bytes: int = 8 * 1024 * 1024,
    max_results: int = max_results_for(MAX_SCORE_BYTES),
    params: Mapping[str, Any] | None = None,
) -> ScoringAnswer:
    """POST the series to the scoring API and return its validated answer.

    Raises:
        ScorerUnavailable: connection failure (transient).
        ScorerTimeout: no complete answer within ``timeout``, for the whole exchange (transient).
        ScorerHTTPError: a status outside 2xx (transient for 5xx, 408, 429); ``retry_after`` is set
            from a ``Retry-After`` header on 429 and 503.
        ScorerResponseTooLarge: the (decompressed) body exceeded ``max_bytes``.
        ScorerTooManyResults: more than ``max_results`` results (``max_results_for`` the scores' byte
            limit: more could not fit whatever their names).
        ScorerResponseInvalid: the body is not a valid scoring response, or cannot be decoded.
        ScorerRequestInvalid: the URL cannot be sent, or ``headers`` hold a metadata-service header.
        ScorerAddressRefused: the host is an address the client pool's policy refuses (not connected).
    """
    where = redact_url(endpoint)
    refuse_metadata_headers(SCORER_ERRORS, headers, f"scoring API {where}")
    length, pieces = scoring_body(series, params)
    request_headers = {"Content-Type": "application/json", "Content-Length": str(length)}
    request_headers.update(headers or {})
    body = await bounded_exchange(
        client,
        "POST",
        endpoint,
        errors=SCORER_ERRORS,
        what=f"scoring API {where}",
        seconds=timeout,
        max_bytes=max_bytes,
        too_large=lambda: ScorerResponseTooLarge(
            f"scoring API {where} answered with more than {max_bytes} bytes"
        ),
        status_error=lambda status, _body: ScorerHTTPError(
            f"scoring API {where} answered HTTP {status} ({status_phrase(status)})", status=status
        ),
        headers=request_headers,
        content=_stream(pieces),
    )
    count = _count_results(body)
    if count is not None and count > max_results:
        raise ScorerTooManyResults(
            f"scoring API {where} answered with {count} results; at most {max_results} can fit in one "
            "AddOnPlacementScore even with one-character item names"
        )
    try:
        if len(body) <= OFF_LOOP_BYTES:
            return decode_answer(body)
        # Validating a few MiB takes a hundred milliseconds of CPU or more; in a worker thread the
        # event loop keeps running other scorers (msgspec and pydantic-core release the GIL between).
        return await asyncio.to_thread(decode_answer, body)
    except ValidationError as exc:
        raise ScorerResponseInvalid(
            f"scoring API {where} answered with an invalid scoring response: "
            + describe_validation(exc, whole="body", limit=1)
        ) from exc


def check_scores_fit(items: Sequence[ScoreItem], limit: int) -> None:
    """Refuse items whose JSON would not fit in ``limit`` bytes of one AddOnPlacementScore.

    The apiserver would refuse the write anyway (etcd's request limit), but only after the cycle's
    work and with an error that names no scorer; here the condition says how large and what to do.

    Raises:
        ScorerTooManyResults: the items' JSON is larger than ``limit``.
    """
    size = scores_bytes(items)  # ScoreItems are (name, value) tuples
    if size > limit:
        raise ScorerTooManyResults(
            f"{len(items)} score items are {size} bytes as an AddOnPlacementScore; at most {limit} "
            "fit (maxScoreBytes, or the agent's MaxScoreBytes): aggregate, shorten the item names, "
            "or narrow the query",
            stage="score",
        )


__all__ = ["SCORER_ERRORS", "call_scorer", "check_scores_fit", "has_series", "scoring_body"]
