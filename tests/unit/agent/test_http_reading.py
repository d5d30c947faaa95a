"""Bounded body reading and the transport-error map, on in-memory responses (pure logic, no sockets).

The same code is exercised against real loopback servers in tests/component/test_hostile_peers.py.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator

import httpx
import pytest

from dynamic_scoring.agent.errors import (
    AgentError,
    ScorerRequestInvalid,
    ScorerResponseInvalid,
    ScorerTimeout,
    ScorerUnavailable,
)
from dynamic_scoring.agent.http import BodyTooLarge, read_limited, transport_errors
from dynamic_scoring.agent.scorer_client.client import SCORER_ERRORS

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def response(body: bytes, **headers: str) -> httpx.Response:
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]

    class Chunks(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

    return httpx.Response(200, headers={k.replace("_", "-"): v for k, v in headers.items()}, stream=Chunks())


def bomb(mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join([packer.compress(b"\0" * MIB) for _ in range(mib)] + [packer.flush()])


async def test_identity_bodies_up_to_the_limit_are_read_whole() -> None:
    assert await read_limited(response(b"x" * 1000), 1000) == b"x" * 1000
    with pytest.raises(BodyTooLarge):
        await read_limited(response(b"x" * 1001), 1000)


async def test_a_declared_length_over_the_limit_fails_before_reading() -> None:
    with pytest.raises(BodyTooLarge, match="declared length"):
        await read_limited(response(b"", content_length="5000"), 1000)


async def test_gzip_and_deflate_are_inflated_and_the_limit_counts_the_inflated_size() -> None:
    data = b'{"results": []}' * 1000
    assert await read_limited(response(gzip.compress(data), content_encoding="gzip"), len(data)) == data
    assert await read_limited(response(zlib.compress(data), content_encoding="deflate"), len(data)) == data
    with pytest.raises(BodyTooLarge, match="after decompression"):
        await read_limited(response(gzip.compress(data), content_encoding="gzip"), len(data) - 1)


async def test_a_bomb_is_stopped_one_step_past_the_limit() -> None:
    packed = bomb(256)  # 256 MiB of zeros in about 250 KB
    assert len(packed) < MIB
    with pytest.raises(BodyTooLarge):
        await read_limited(response(packed, content_encoding="gzip"), 4 * MIB)


@pytest.mark.parametrize(
    ("encoding", "body", "match"),
    [
        ("br", b"xx", "unsupported content encoding"),
        ("gzip, gzip", b"xx", "stacked"),
        ("gzip", b"not gzip at all", "corrupt gzip"),
    ],
)
async def test_unusable_encodings_are_decoding_errors(encoding: str, body: bytes, match: str) -> None:
    with pytest.raises(httpx.DecodingError, match=match):
        await read_limited(response(body, content_encoding=encoding), MIB)


async def map_error(exc: BaseException, url: str = "http://h/p") -> AgentError:
    with pytest.raises(AgentError) as caught:
        async with transport_errors(SCORER_ERRORS, what="scoring API X", seconds=5, url=url):
            raise exc
    return caught.value


@pytest.mark.parametrize(
    ("exc", "kind", "transient"),
    [
        (httpx.ReadTimeout("slow"), ScorerTimeout, True),
        (TimeoutError(), ScorerTimeout, True),
        (httpx.ConnectError("refused"), ScorerUnavailable, True),
        (
            httpx.RemoteProtocolError("peer closed connection without sending complete message body"),
            ScorerUnavailable,
            True,
        ),
        (ConnectionResetError(104, "reset"), ScorerUnavailable, True),
        (httpx.DecodingError("bad gzip"), ScorerResponseInvalid, False),
        (httpx.InvalidURL("bad"), ScorerRequestInvalid, False),
        (httpx.UnsupportedProtocol("ftp"), ScorerRequestInvalid, False),
    ],
)
async def test_every_transport_failure_maps_to_one_typed_error(
    exc: BaseException, kind: type[AgentError], transient: bool
) -> None:
    error = await map_error(exc)
    assert type(error) is kind and error.transient == transient
    assert error.__cause__ is exc and error.stage == "score"


async def test_mapped_messages_lose_the_urls_secrets() -> None:
    error = await map_error(
        httpx.ConnectError("cannot reach http://u:pw-123@h/p?key=k-456"), "http://u:pw-123@h/p?key=k-456"
    )
    assert "pw-123" not in str(error) and "k-456" not in str(error) and "<redacted>" in str(error)


async def test_agent_errors_pass_through_untouched() -> None:
    original = ScorerResponseInvalid("mine")
    assert await map_error(original) is original


async def test_the_deadline_covers_the_whole_exchange() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ScorerTimeout, match=r"did not answer within 0\.05s"):
        async with transport_errors(SCORER_ERRORS, what="scoring API X", seconds=0.05):
            for _ in range(100):  # a peer that keeps sending a little: no single wait is long
                await asyncio.sleep(0.01)
    assert loop.time() - started < 0.5
