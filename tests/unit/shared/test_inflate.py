"""The one bounded inflater the agent and the hub probe share."""

from __future__ import annotations

import gzip
import zlib

import pytest

from dynamic_scoring.outbound.inflate import InflateTooLarge, decompressor, inflate_chunk


def test_identity_needs_no_decompressor_and_unknown_codings_are_refused() -> None:
    assert decompressor("") is None
    assert decompressor(" Identity ") is None
    assert decompressor("x-gzip") is not None
    with pytest.raises(ValueError, match="br"):
        decompressor("br")


def test_a_bomb_stops_at_the_room_plus_one_byte() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))
    inflater = decompressor("gzip")
    assert inflater is not None
    produced = 0
    with pytest.raises(InflateTooLarge):
        for piece in inflate_chunk(inflater, bomb, 1000):
            produced += len(piece)
    assert produced <= 1000


def test_pieces_are_at_most_one_step_and_add_up_to_the_body() -> None:
    body = bytes(range(256)) * 4096
    inflater = decompressor("deflate")
    assert inflater is not None
    pieces = list(inflate_chunk(inflater, zlib.compress(body), len(body), step=100_000))
    assert max(len(p) for p in pieces) <= 100_000
    assert b"".join(pieces) == body


def test_a_corrupt_stream_raises_zlib_error() -> None:
    inflater = decompressor("gzip")
    assert inflater is not None
    with pytest.raises(zlib.error):
        list(inflate_chunk(inflater, b"not gzip at all", 1000))
