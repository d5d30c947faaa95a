"""Bounded inflation of a gzip or deflate body: the decoded size is checked while it is produced.

Both the agent (Prometheus and scorer answers) and the hub probe (``/healthz``, ``/config``) read
bodies from peers they do not control.  A small gzip body can inflate to gigabytes, and
``httpx``'s own decoder inflates each network chunk completely before anyone can look at its size.
So both read the raw bytes and inflate them here, asking zlib for at most the room that is left
(plus one byte, to notice the overflow) and, optionally, at most ``step`` bytes at a time: memory
stays near the limit however well the body compresses.  What a caller does on an overflow or a
corrupt stream (an exception of its own family, a condition reason) stays with the caller.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

GZIP_CODINGS = ("gzip", "x-gzip")
DEFLATE_CODING = "deflate"


class InflateTooLarge(Exception):  # noqa: N818 - an outcome each caller maps to its own error
    """The decoded output would exceed the room the caller gave."""


def decompressor(coding: str) -> zlib._Decompress | None:
    """A decompressor for one ``Content-Encoding`` token; None for identity (or no encoding).

    Raises:
        ValueError: any other coding (the callers ask for identity, gzip or deflate only).
    """
    coding = coding.strip().lower()
    if coding in ("", "identity"):
        return None
    if coding in GZIP_CODINGS:
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if coding == DEFLATE_CODING:
        return zlib.decompressobj(wbits=zlib.MAX_WBITS)
    raise ValueError(f"unsupported content coding {coding!r}")


def inflate_chunk(
    inflater: zlib._Decompress, chunk: bytes, room: int, *, step: int | None = None
) -> Iterator[bytes]:
    """Inflate one network chunk in pieces, producing at most ``room`` bytes in all.

    Each piece is at most ``step`` bytes (unbounded when None), so an async caller can yield to its
    event loop between pieces; a piece as long as ``step`` means more may follow.

    Raises:
        InflateTooLarge: the chunk inflates to more than ``room`` bytes (nothing past that is made).
        zlib.error: the stream is corrupt.
    """
    produced = 0
    data = chunk
    while data and not inflater.eof:
        wanted = room + 1 - produced
        out = inflater.decompress(data, wanted if step is None else min(step, wanted))
        produced += len(out)
        if produced > room:
            raise InflateTooLarge(f"more than {room} bytes")
        yield out
        data = inflater.unconsumed_tail


__all__ = ["DEFLATE_CODING", "GZIP_CODINGS", "InflateTooLarge", "decompressor", "inflate_chunk"]
