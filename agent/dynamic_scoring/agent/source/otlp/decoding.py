"""An OTLP/HTTP request body to an ``ExportMetricsServiceRequest``, within stated limits.

Both encodings of the OTLP/HTTP specification are accepted: binary protobuf
(``application/x-protobuf``) and protobuf JSON (``application/json``), optionally gzip-compressed
(``Content-Encoding: gzip``).  Decoding uses the message classes of ``opentelemetry-proto``; JSON
goes through protobuf's ``json_format``, which accepts OTLP JSON's lowerCamelCase names, integer
enum values, and 64-bit integers given as strings or numbers.  Exemplars are removed from JSON
before parsing: OTLP JSON writes their trace and span ids in hex where protobuf JSON expects
base64, and the agent does not use exemplars.

Inflation is bounded: the decompressed body may not exceed ``max_bytes`` however small the
compressed one is, so a gzip bomb costs at most ``max_bytes`` of memory and is answered 413.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any, Literal

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

Encoding = Literal["protobuf", "json"]

CONTENT_TYPES: dict[str, Encoding] = {"application/x-protobuf": "protobuf", "application/json": "json"}


@dataclass
class BodyError(Exception):
    """A request the receiver refuses, with the HTTP status the OTLP/HTTP specification asks for."""

    status: int
    message: str

    def __str__(self) -> str:
        return self.message


def encoding_of(content_type: str | None) -> Encoding:
    """The body encoding named by a ``Content-Type`` header (parameters such as charset ignored).

    Raises:
        BodyError: 415 for any other media type.
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    found = CONTENT_TYPES.get(media)
    if found is None:
        raise BodyError(415, "expected Content-Type application/x-protobuf or application/json")
    return found


def inflate(body: bytes, content_encoding: str | None, max_bytes: int) -> bytes:
    """The body after ``Content-Encoding`` (``gzip`` or none), at most ``max_bytes`` long.

    Raises:
        BodyError: 415 for another encoding, 400 for a corrupt gzip stream, 413 past ``max_bytes``.
    """
    coding = (content_encoding or "identity").strip().lower()
    if coding in ("identity", ""):
        return body
    if coding != "gzip":
        raise BodyError(415, "expected Content-Encoding gzip or none")
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error:
        raise BodyError(400, "the gzip body is corrupt") from None
    if len(out) > max_bytes:
        raise BodyError(413, f"the body inflates to more than {max_bytes} bytes")
    if not inflater.eof:
        raise BodyError(400, "the gzip body is truncated")
    return out


def _drop_exemplars(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("exemplars", None)
        for value in node.values():
            _drop_exemplars(value)
    elif isinstance(node, list):
        for value in node:
            _drop_exemplars(value)


def parse(body: bytes, encoding: Encoding) -> ExportMetricsServiceRequest:
    """Decode the (inflated) body.

    Raises:
        BodyError: 400 when the body is not a valid message in that encoding.
    """
    request = ExportMetricsServiceRequest()
    if encoding == "protobuf":
        try:
            request.ParseFromString(body)
        except DecodeError:
            raise BodyError(400, "the body is not a valid protobuf ExportMetricsServiceRequest") from None
        return request
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BodyError(400, "the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BodyError(400, "the JSON body must be an ExportMetricsServiceRequest object")
    _drop_exemplars(data)
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        # The parser names the field path; it quotes at most a short value from the pusher.
        raise BodyError(
            400, f"the JSON body is not a valid ExportMetricsServiceRequest: {exc}"[:300]
        ) from None
    return request


__all__ = ["CONTENT_TYPES", "BodyError", "Encoding", "encoding_of", "inflate", "parse"]
