"""The scoring API as one framework-free object: ``/healthz``, ``/config`` and the scoring path.

``ScorerApp.handle(method, path, headers, body)`` is the whole contract as a pure function of the
request (no sockets), so it is unit-testable and every server runs the same code: the stdlib
threaded server in ``dynamic_scoring.scorer.serve`` (no dependency; what the samples use) and any
ASGI server (``ScorerApp`` is an ASGI callable, so ``uvicorn module:app`` works; the library
needs no ASGI package for that, the protocol is just three callables).

An author supplies one function from a ``ScoringRequest`` to results and the fields ``/config``
publishes.  Failures answer with ``{"error": ...}`` and one log line, and the app keeps serving:

* 400 for a body that is not a scoring request (the message names the element);
* 401 without the bearer token, when one is configured (``/healthz`` and ``/config`` stay public,
  as the hub probes them without credentials by default);
* 413 for a body over ``max_body_bytes``; 404/405 for other paths and methods;
* 411 (stdlib server only) for a POST without ``Content-Length``;
* 500 when the function raises or returns something that is not a valid result (a NaN score, a
  label that is not a string): the agent would reject the whole answer anyway, so it is better
  refused here, with the cause in this process' log.

Authentication comes before the body.  ``answer_head`` answers every request that can be answered
from its request line and headers alone (the public paths, 404/405, and a missing or wrong token);
both servers call it before they read a byte of the body, and refuse a declared ``Content-Length``
over ``max_body_bytes`` before reading too.  Reading first let anyone who could reach the port make
the process buffer up to the limit per request without a token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dynamic_scoring.contract.wire import (
    MAX_SCORING_PARAMS_BYTES,
    MAX_SOURCE_QUERIES,
    MAX_SOURCES,
    ScorerConfig,
    ScoreResult,
    ScoringConfig,
    ScoringParams,
    ScoringResponse,
    SourceConfig,
    SourceParams,
    display_name,
)
from dynamic_scoring.scorer.auth import BearerToken
from dynamic_scoring.scorer.matrix import RequestError, ScoringRequest, parse_request
from dynamic_scoring.scorer.results import MAX_SCORE_BYTES, estimated_score_bytes

log = logging.getLogger("dynamic_scoring.scorer")

AGENT_SERIES_BYTES = 64 * 1024 * 1024
"""The agent's per-cycle budget for the series it holds and sends (``max_source_bytes_per_cycle``).

It cannot be imported here (the library must not import the agent); a component test keeps the two
equal."""

ENVELOPE_BYTES = (
    len(b'{"data":[')
    + (MAX_SOURCES * MAX_SOURCE_QUERIES - 1)  # one comma between the arrays of two queries
    + len(b'],"params":')
    + MAX_SCORING_PARAMS_BYTES
    + len(b"}")
)
"""What the agent adds around the series: 9 + 511 + 11 + 16,384 + 1 = 16,916 bytes."""

MAX_BODY_BYTES = AGENT_SERIES_BYTES + ENVELOPE_BYTES
"""The largest body the agent can send: 67,108,864 + 16,916 = 67,125,780 bytes (64 MiB + 16.5 KiB).

The agent splices the raw ``data.result`` arrays of every query of a cycle (at most 64 MiB
together) into ``{"data":[...]}``, with a comma between two queries' arrays (16 sources x 32
queries at most), and ``,"params":{...}`` (compact JSON, at most 16 KiB) when the scorer has
``scoringParams``.  A smaller limit would refuse real requests; a larger one buys nothing.  One
exception: with named ``sources`` the agent adds ``"source":"<name>"`` to each series after it
counts the budget, so a scorer with many tiny series from several sources may need a larger limit.
"""

ScoreFn = Callable[[ScoringRequest], Iterable[ScoreResult]]
"""The author's function: every series of one request in, results out."""

Headers = list[tuple[str, str]]


@dataclass(frozen=True)
class Response:
    """What ``handle`` answers: status, headers, body."""

    status: int
    headers: Headers
    body: bytes

    def json(self) -> Any:
        """The body decoded (tests use it)."""
        return json.loads(self.body)


def _json(status: int, document: Any, extra: Headers | None = None) -> Response:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    return Response(status, [("Content-Type", "application/json"), *(extra or [])], body)


def _checked(index: int, item: Any) -> ScoreResult:
    """One result as the agent will read it; a ``ScoreResult`` built without validation is re-checked.

    ``ScoreResult.model_construct`` (or a mutated copy) skips pydantic, and a NaN score then goes out
    as ``null``: the agent reads that as 0, a score nobody computed.
    """
    result = item if isinstance(item, ScoreResult) else ScoreResult.model_validate(item)
    if not math.isfinite(result.score):
        raise ValueError(f"results[{index}].score is not finite")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in result.metric.items()):
        raise TypeError(f"results[{index}].metric: label names and values must be strings")
    return result


@dataclass
class ScorerApp:
    """A scoring API around one score function.

    Attributes mirror the ``/config`` document: ``name`` is the score name (``scoring.params.name``),
    ``query``/``range``/``step`` the Prometheus query and window, ``interval`` the seconds between
    cycles, ``params`` extra ``scoring.params`` keys.  ``dimension_format`` (or ``dimension_formats``,
    several) is the item-name template for the results' labels, e.g. ``"${scoreName}-${node}"`` for
    one result per node: published as ``scoring.params.scoreDimensionFormat`` (``...Formats``), which a
    hub in ``configSyncMode: Full`` uses instead of the DynamicScorer's ``scoreDimensionFormat``; unset,
    nothing is published and the spec's format applies.  ``scoring.host`` is ``advertise_url``, and empty
    when that is: the hub then sends the series to the origin of the DynamicScorer's ``configURL``
    (or its ``spec.scoring.host``), which is where this server answered.  The address the server is
    bound to is not published: it is often ``0.0.0.0`` or a pod address no hub can use, and the
    upstream Go manager mishandles a ``scoring.host`` in ``/config`` (it sends the series to
    ``source.host`` instead; docs/migration.md).
    """

    score: ScoreFn
    name: str
    description: str = ""
    query: str = ""
    range: int = 300
    step: int = 30
    interval: int = 30
    source_type: str = "Prometheus"
    source_host: str = ""
    source_path: str = "/api/v1/query_range"
    scoring_path: str = "/scoring"
    advertise_url: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    dimension_format: str = ""
    dimension_formats: Sequence[str] = ()
    token: BearerToken | None = None
    max_body_bytes: int = MAX_BODY_BYTES

    def __post_init__(self) -> None:
        if not self.scoring_path.startswith("/") or self.scoring_path in ("/healthz", "/config"):
            raise ValueError("scoring_path must start with '/' and differ from /healthz and /config")
        if self.source_type == "Prometheus" and not (
            self.range >= 1 and 1 <= self.step <= self.range and self.query
        ):
            raise ValueError("a Prometheus source needs a query, range >= 1 and 1 <= step <= range")
        if self.interval < 1:
            raise ValueError("interval must be at least 1 second")
        if self.dimension_format and self.dimension_formats:
            raise ValueError("set dimension_format or dimension_formats, not both")
        self.config()  # fail at start, not at the first /config request

    def config(self) -> ScorerConfig:
        """The ``/config`` document."""
        return ScorerConfig(
            name=self.name,
            description=self.description,
            source=SourceConfig(
                type=self.source_type,
                host=self.source_host,
                path=self.source_path if self.source_type == "Prometheus" else "",
                params=SourceParams(query=self.query, range=self.range, step=self.step),
            ),
            scoring=ScoringConfig(
                host=self.advertise_url,
                path=self.scoring_path,
                params=ScoringParams(name=self.name, interval=self.interval, **self._scoring_params()),
            ),
        )

    def _scoring_params(self) -> dict[str, Any]:
        """``params`` and the item-name format(s), when set, as ``scoring.params`` keys."""
        out = dict(self.params)
        if self.dimension_format:
            out["scoreDimensionFormat"] = self.dimension_format
        if self.dimension_formats:
            out["scoreDimensionFormats"] = list(self.dimension_formats)
        return out

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Response:
        """Answer one request; ``headers`` keys are lower-case.  Never raises."""
        early = self.answer_head(method, path, headers)
        if early is not None:
            return early
        return self.handle_body(method, path, body)

    def answer_head(self, method: str, path: str, headers: Mapping[str, str]) -> Response | None:
        """The answer when the request line and headers are enough; ``None`` when the body is needed.

        ``None`` means exactly: an authorised ``POST`` to the scoring path.  Servers call this
        before they read the body (then ``handle_body``), so a client without the token costs no
        more than its headers; ``headers`` keys are lower-case.  Never raises.
        """
        path = path.split("?", 1)[0]
        if path == "/healthz":
            if method not in ("GET", "HEAD"):
                return self._error(405, method, path, "use GET")
            return Response(200, [("Content-Type", "text/plain")], b"ok")
        if path == "/config":
            if method not in ("GET", "HEAD"):
                return self._error(405, method, path, "use GET")
            return _json(200, self.config().model_dump_json().encode())
        if path != self.scoring_path:
            return self._error(
                404, method, path, f"no such path; try /healthz, /config or POST {self.scoring_path}"
            )
        if method != "POST":
            return self._error(405, method, path, f"POST the series to {self.scoring_path}")
        if self.token is not None and not self.token.allows(headers.get("authorization")):
            # Which of "missing" and "wrong" it was is not said: that would help someone guessing.
            return self._error(
                401, method, path, "a valid bearer token is required", [("WWW-Authenticate", "Bearer")]
            )
        return None

    def handle_body(self, method: str, path: str, body: bytes) -> Response:
        """The answer to a request ``answer_head`` let through, given its body.  Never raises."""
        path = path.split("?", 1)[0]
        if len(body) > self.max_body_bytes:
            return self.too_large(method, path)
        return self._score(method, path, body)

    def too_large(self, method: str, path: str) -> Response:
        """The 413 for a body (declared or read) over ``max_body_bytes``."""
        return self._error(413, method, path, f"the body is larger than {self.max_body_bytes} bytes")

    def _score(self, method: str, path: str, body: bytes) -> Response:
        try:
            request = parse_request(body)
        except RequestError as exc:
            return self._error(400, method, path, str(exc))
        # The score function runs to the end first (a generator included), so that what it raises,
        # a ValueError of the author's or of the maths helpers among it, is never taken for a bad
        # result: "scoring failed" is the author's code, "invalid result" what it returned.
        try:
            produced = list(self.score(request))
        except RequestError as exc:  # the score function refused the request (e.g. a bad params value)
            return self._error(400, method, path, str(exc))
        except Exception as exc:  # a bug in the score function: answer, log, keep serving
            log.exception("the score function of %s failed", display_name(self.name))
            return self._error(500, method, path, f"scoring failed: {type(exc).__name__}")
        try:
            results = [_checked(i, r) for i, r in enumerate(produced)]
            response = ScoringResponse(results=results)
            payload = response.model_dump_json().encode()
        except (ValidationError, TypeError, ValueError) as exc:
            log.exception("the score function of %s returned an invalid result", display_name(self.name))
            return self._error(500, method, path, f"invalid result: {type(exc).__name__}")
        # 1,000 results with the longest names are 0.28 MB: only larger answers are worth measuring
        if (
            len(response.results) > 1000
            and (size := estimated_score_bytes(response.results)) > MAX_SCORE_BYTES
        ):
            log.warning(
                "%d results would make an AddOnPlacementScore of about %d bytes; the agent writes at "
                "most %d by default and will fail the cycle",
                len(response.results),
                size,
                MAX_SCORE_BYTES,
            )
        log.info("scored %d series, %d results", len(request.series), len(response.results))
        return _json(200, payload)

    def _error(
        self, status: int, method: str, path: str, message: str, extra: Headers | None = None
    ) -> Response:
        # The path is the client's text: escaped so that it cannot forge a log line.
        log.warning("%s %s -> %d: %s", display_name(method, 10), display_name(path), status, message)
        return _json(status, {"error": message}, extra)

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        """The ASGI 3 entry point (``uvicorn mymodule:app``); the score function runs in a thread."""
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        method, path = str(scope["method"]), str(scope["path"])
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        # Nothing is received before the token is checked: the ASGI server reads the body only as
        # the app asks for it, so an unauthorised client costs no more than its headers.
        response = self.answer_head(method, path, headers)
        if response is None:
            response = await self._asgi_body(method, path, headers, receive)
        if response is None:
            return  # the client went away
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [
                    (k.lower().encode("latin-1"), v.encode("latin-1"))
                    for k, v in [*response.headers, ("Content-Length", str(len(response.body)))]
                ],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    async def _asgi_body(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    ) -> Response | None:
        """Read an authorised body, at most ``max_body_bytes`` of it, and score it off the loop.

        A declared length over the limit is refused before anything is received; a chunked or
        undeclared body is refused as soon as it passes the limit, and the rest is not read (the
        ASGI server closes the connection on an unread body).  ``None`` when the client disconnected.
        """
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            return self.too_large(method, path)
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body.extend(message.get("body", b""))
            more = bool(message.get("more_body", False))
            if len(body) > self.max_body_bytes:
                return self.too_large(method, path)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: self.handle_body(method, path, bytes(body)))


__all__ = ["AGENT_SERIES_BYTES", "ENVELOPE_BYTES", "MAX_BODY_BYTES", "Response", "ScoreFn", "ScorerApp"]
