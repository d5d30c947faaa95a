"""The one bounded HTTP exchange of the agent's outbound calls (Prometheus and scoring APIs).

Both client families used to spell out the same steps: stream the response under the family's
``transport_errors``, note the status and ``Retry-After``, read the body with ``read_limited``,
refuse a body past the limit with the family's "too large" error, and turn a status outside 2xx into
the family's error carrying the pause ``Retry-After`` asked for.  Two copies of a security-relevant
sequence drift apart (a limit enforced in one and not the other, a pause honoured by one family
only), so the sequence lives here once, and each family supplies only what differs: its error
classes (``ErrorFamily``), its limit, and the wording of the "too large" and status errors.

What a family does with a 2xx body (Prometheus' envelope, the scoring answer) stays in its client:
that is where the families really differ.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping

import httpx

from dynamic_scoring.agent.errors import AgentError
from dynamic_scoring.agent.http import (
    BodyTooLarge,
    ErrorFamily,
    read_limited,
    retry_after_seconds,
    transport_errors,
)

RETRY_AFTER_STATUSES = frozenset((429, 503))
"""Statuses whose ``Retry-After`` header sets the least pause before the next attempt."""

StatusError = Callable[[int, bytearray], AgentError]
"""Builds a family's error for a status outside 2xx from the status and the (bounded) body read."""


async def bounded_exchange(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    errors: ErrorFamily,
    what: str,
    seconds: float,
    max_bytes: int,
    too_large: Callable[[], AgentError],
    status_error: StatusError,
    headers: Mapping[str, str] | None = None,
    content: AsyncIterator[bytes] | None = None,
) -> bytearray:
    """Send one request and return the body of its 2xx answer, read with a size limit.

    The whole exchange (connect, send, status line, every byte of the body) is bounded by
    ``seconds`` and its transport failures become ``errors``' typed errors (``transport_errors``,
    which names the peer by ``what`` and scrubs ``url``'s credentials).  The body is read even for
    an error status, bounded the same way, so ``status_error`` may look at it (Prometheus'
    ``errorType``); a body past ``max_bytes`` is refused first, whatever the status.

    Args:
        client: the client for the endpoint's TLS settings (``ClientPool.client_for``).
        method: ``GET`` or ``POST``.
        url: the full request URL.
        errors: the family's error classes for transport failures.
        what: how messages name the peer (``scoring API <url>``, ``query #1 ...: Prometheus at <url>``).
        seconds: the deadline of the whole exchange.
        max_bytes: the largest body accepted, after decompression.
        too_large: the family's error for a body past ``max_bytes`` (its wording names the limit).
        status_error: the family's error for a status outside 2xx; on 429 and 503 its
            ``retry_after`` is then set from the ``Retry-After`` header.
        headers: request headers (credentials included; never repeated in messages).
        content: the request body, streamed.

    Raises:
        AgentError: of ``errors``' family for a transport failure; ``too_large()``; or
            ``status_error(...)`` for a status outside 2xx.
    """
    too_big = False
    body = bytearray()
    async with (
        transport_errors(errors, what=what, seconds=seconds, url=url),
        client.stream(method, url, content=content, headers=headers, timeout=seconds) as response,
    ):
        status = response.status_code
        retry_after = response.headers.get("retry-after")
        try:
            body = await read_limited(response, max_bytes)
        except BodyTooLarge:
            too_big = True
    # Raised outside transport_errors: these are the family's verdicts, not transport failures.
    if too_big:
        raise too_large()
    if not 200 <= status < 300:
        error = status_error(status, body)
        if status in RETRY_AFTER_STATUSES:
            error.retry_after = retry_after_seconds(retry_after)
        raise error
    return body


__all__ = ["RETRY_AFTER_STATUSES", "StatusError", "bounded_exchange"]
