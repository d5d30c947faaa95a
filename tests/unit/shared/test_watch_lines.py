"""Watch stream framing: however the bytes are chunked, the same lines come out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.kube.api import split_lines

lines = st.lists(st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")), max_size=8)


@given(lines, st.lists(st.integers(1, 7), max_size=30), st.binary(max_size=5))
def test_property_chunking_does_not_change_the_lines(want: list[bytes], cuts: list[int], tail: bytes) -> None:
    stream = b"".join(line + b"\n" for line in want) + tail.replace(b"\n", b"")
    chunks, pos = [], 0
    for size in cuts:
        chunks.append(stream[pos : pos + size])
        pos += size
    chunks.append(stream[pos:])
    assert list(split_lines(c for c in chunks if c)) == want  # an unterminated tail is not a line


def test_one_line_in_many_chunks_and_many_lines_in_one_chunk() -> None:
    assert list(split_lines([b'{"a":', b"1", b"}\n{", b'"b":2}\n\n'])) == [b'{"a":1}', b'{"b":2}', b""]
