"""The hub's two requests to a scorer: ``GET /healthz`` and, in Full mode, ``GET <configURL>``.

Both take an ``httpx.Client`` the caller owns (TLS verification on, connection reuse, a bounded pool)
and return a typed result instead of raising, so that one broken scorer is a status condition, never a
stuck or crashed loop.  Upstream used Go's default client (no timeout), ignored the status code of
``/config`` and sent no credentials.  Here:

* every request has a total deadline (``timeout``), checked while the body streams in;
* ``/healthz`` needs a 2xx answer; ``/config`` needs a 2xx answer, at most ``max_bytes`` of JSON, and a
  document that ``dynamic_scoring.contract.wire.ScorerConfig`` accepts plus the checks in ``check_config``;
* a bearer token (the value of the hub-side Secret named in ``spec.probe.tokenSecretRef``) is sent when
  given, redirects are not followed (a token never goes to another host), and neither the token nor a
  response body appears in a message.

The person who writes a DynamicScorer chooses these URLs and reads the outcome back from its status,
so the probe is built to tell them as little about the hub's network as it can while still being
useful:

* where it may connect is decided by ``dynamic_scoring.addon.registry.transport`` (resolve once,
  check every address against ``dynamic_scoring.addon.registry.addresses``, connect to the checked
  address); a refused address is reason ``AddressNotAllowed``;
* it asks for ``Accept-Encoding: identity`` and reads the raw bytes; a server that compresses anyway
  (gzip or deflate) is inflated here with the size cap applied to the *decoded* bytes as they come
  out of the inflater, so a small gzip bomb costs at most ``max_bytes`` of memory; other encodings
  are refused;
* ``/config`` must be declared ``application/json``; only the fields of ``ScorerConfig`` are kept
  (unknown keys are dropped by the model), and strings and the free-form ``scoring.params`` are
  bounded by ``check_config`` before anything reaches ``status.lastSyncedConfig``;
* a failure message is classified (``connection refused``, ``TLS certificate verification failed``,
  ``host name does not resolve`` ...); an exception's own text (errno strings, library internals,
  response bytes) never reaches a condition or an Event.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
from pydantic import ValidationError

from dynamic_scoring.addon.registry.models import DynamicScorerSpec
from dynamic_scoring.addon.registry.spellings import canonical
from dynamic_scoring.contract.validation import describe_validation
from dynamic_scoring.contract.wire import MAX_SCORING_PARAMS_BYTES, ScorerConfig, params_size
from dynamic_scoring.outbound.guarded_transport import AddressNotAllowed
from dynamic_scoring.outbound.inflate import InflateTooLarge, decompressor, inflate_chunk
from dynamic_scoring.outbound.transport_errors import TRANSPORT_EXCEPTIONS, causes
from dynamic_scoring.outbound.transport_errors import classify as classify_transport
from dynamic_scoring.outbound.urls import origin, url_problem

DEFAULT_TIMEOUT = 5.0
MAX_CONFIG_BYTES = 256 << 10
"""The largest ``/config`` body read.  A document that passes ``check_config`` is under 90 KiB (one
64 KiB query, 16 KiB of parameters, bounded strings); parsing a body into Python objects costs about
ten times its size, so the cap is kept near what a valid document can need."""
MAX_HEALTH_BYTES = 64 << 10
HEALTH_PATH = "/healthz"
MAX_SCORING_PARAM_KEYS = 64
"""Keys of ``scoring.params`` a ``/config`` document may carry besides ``name`` and ``interval``."""
MAX_SCORING_PARAM_DEPTH = 16
"""How deeply the values of ``scoring.params`` may nest (objects and arrays)."""
CONFIG_STRING_LIMITS: tuple[tuple[str, int], ...] = (
    ("name", 253),
    ("description", 1024),
    ("source.type", 64),
    ("source.host", 2048),
    ("source.path", 1024),
    ("source.params.query", 65536),
    ("scoring.host", 2048),
    ("scoring.path", 1024),
    ("scoring.params.name", 253),
)
"""The longest value each string of a ``/config`` document may have (the DynamicScorer spec's limits)."""
JSON_TYPES = ("application/json",)


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of one request.

    Attributes:
        ok: whether the check passed.
        reason: a CamelCase condition reason: ``Healthy``, ``ConfigFetched``, ``HTTPStatus``, ``Timeout``,
            ``Unreachable``, ``AddressNotAllowed``, ``TLSError``, ``InvalidURL``, ``InvalidToken``,
            ``Redirected``, ``TooLarge``, ``InvalidEncoding``, ``InvalidContentType``, ``InvalidJSON``
            or ``InvalidSchema``.
        message: one line for the condition and the Event, naming the URL and what was wrong.
        status_code: the HTTP status, when an answer came.
        elapsed: seconds the request took.
    """

    ok: bool
    reason: str
    message: str
    status_code: int | None = None
    elapsed: float = 0.0


@dataclass(frozen=True)
class ConfigResult:
    """A ``/config`` fetch: the ``ProbeResult`` and, when it passed, the normalised document."""

    result: ProbeResult
    config: ScorerConfig | None = None


def health_url(spec: DynamicScorerSpec) -> str | None:
    """Where the hub probes: ``/healthz`` at the origin of ``configURL``, else of ``scoring.host``.

    The blog's example has no configURL; its scoring host is then the only address the hub knows.
    """
    for candidate in (spec.config_url, spec.scoring.host if spec.scoring else None):
        if candidate and url_problem(candidate) is None:
            return origin(candidate) + HEALTH_PATH
    return None


def _headers(token: str | None) -> tuple[dict[str, str] | None, ProbeResult | None]:
    # identity: a compressed answer would have to be inflated, and inflation is what a bomb abuses
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    if token is None:
        return headers, None
    value = token.strip()
    if not value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value) or not value.isascii():
        return None, ProbeResult(
            False, "InvalidToken", "the probe token is empty or contains control or non-ASCII characters"
        )
    headers["Authorization"] = f"Bearer {value}"
    return headers, None


class _RefusedError(Exception):
    """A body the probe stops reading: its reason and message (never the body itself)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _decoded(raw: Iterator[bytes], coding: str, max_bytes: int) -> Iterator[bytes]:
    """The body after ``Content-Encoding``, failing as soon as more than ``max_bytes`` come out.

    The inflation is the one the agent uses (``dynamic_scoring.outbound.inflate``): the decoded size is
    checked before more is buffered, so memory stays near ``max_bytes`` however well the body compresses.
    The compressed size is capped too, and a truncated stream is refused.
    """
    coding = coding.strip().lower()
    if coding in ("", "identity"):
        total = 0
        for chunk in raw:
            total += len(chunk)
            if total > max_bytes:
                raise _RefusedError("TooLarge", f"the answer is larger than {max_bytes} bytes")
            yield chunk
        return
    try:
        inflater = decompressor(coding)
    except ValueError:
        raise _RefusedError(
            "InvalidEncoding",
            f"the answer uses Content-Encoding {_shown(coding)}; the probe asks for identity and "
            "accepts gzip or deflate",
        ) from None
    assert inflater is not None  # identity was handled above
    produced = 0
    received = 0
    try:
        for chunk in raw:
            received += len(chunk)
            if received > max_bytes:
                raise _RefusedError("TooLarge", f"the compressed answer is larger than {max_bytes} bytes")
            for out in inflate_chunk(inflater, chunk, max_bytes - produced):
                produced += len(out)
                if out:
                    yield out
        tail = inflater.flush(max_bytes + 1 - produced)
    except InflateTooLarge:
        raise _RefusedError("TooLarge", f"the answer inflates to more than {max_bytes} bytes") from None
    except zlib.error:
        raise _RefusedError("InvalidEncoding", f"the {coding} body is corrupt") from None
    produced += len(tail)
    if produced > max_bytes:
        raise _RefusedError("TooLarge", f"the answer inflates to more than {max_bytes} bytes")
    if not inflater.eof:
        raise _RefusedError("InvalidEncoding", f"the {coding} body is truncated")
    if tail:
        yield tail


_TOKEN = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,39}(/[a-z0-9][a-z0-9.+-]{0,59})?\Z")


def _shown(value: str) -> str:
    """A header value for a message: quoted when it is a short media type or coding, else withheld.

    The probe may have reached any service on the hub's network; its header values are not echoed
    into a status the DynamicScorer's author reads unless they look like what the header should hold.
    """
    return repr(value) if _TOKEN.match(value) else "(an unexpected value)"


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _is_json(content_type: str | None) -> bool:
    media = _media_type(content_type)
    return media in JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


def _get(
    client: httpx.Client,
    url: str,
    token: str | None,
    timeout: float,
    max_bytes: int,
    *,
    want_json: bool = False,
) -> tuple[ProbeResult, bytes]:
    """GET ``url`` within ``timeout`` seconds in total; returns a failed result or the 2xx body."""
    why = url_problem(url)
    if why is not None:
        return ProbeResult(False, "InvalidURL", why), b""
    headers, bad = _headers(token)
    if bad is not None or headers is None:
        return bad or ProbeResult(False, "InvalidToken", "no headers"), b""
    started = time.monotonic()
    deadline = started + timeout
    try:
        with client.stream(
            "GET", url, headers=headers, timeout=httpx.Timeout(timeout), follow_redirects=False
        ) as response:
            code = response.status_code
            if 300 <= code < 400:
                return ProbeResult(
                    False,
                    "Redirected",
                    f"GET {url} answered HTTP {code}; redirects are not followed",
                    code,
                    time.monotonic() - started,
                ), b""
            if not 200 <= code < 300:
                return ProbeResult(
                    False, "HTTPStatus", f"GET {url} answered HTTP {code}", code, time.monotonic() - started
                ), b""
            if want_json and not _is_json(response.headers.get("content-type")):
                media = _media_type(response.headers.get("content-type"))
                shown = _shown(media) if media else "missing"
                return ProbeResult(
                    False,
                    "InvalidContentType",
                    f"GET {url}: Content-Type is {shown}, expected application/json",
                    code,
                    time.monotonic() - started,
                ), b""
            body = bytearray()
            coding = response.headers.get("content-encoding", "")
            try:
                for piece in _decoded(response.iter_raw(), coding, max_bytes):
                    body.extend(piece)
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("total deadline exceeded")
            except _RefusedError as refused:
                return ProbeResult(
                    False, refused.reason, f"GET {url}: {refused.message}", code, time.monotonic() - started
                ), b""
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("total deadline exceeded")
            elapsed = time.monotonic() - started
            return ProbeResult(True, "OK", f"GET {url} answered HTTP {code}", code, elapsed), bytes(body)
    except httpx.TimeoutException:
        return ProbeResult(
            False,
            "Timeout",
            f"GET {url} did not answer within {timeout:g}s",
            None,
            time.monotonic() - started,
        ), b""
    except TRANSPORT_EXCEPTIONS as exc:
        reason, what = classify(exc)
        return ProbeResult(False, reason, f"GET {url} failed: {what}", None, time.monotonic() - started), b""


def classify(exc: BaseException) -> tuple[str, str]:
    """A failed request as (condition reason, fixed message): never the exception's own text.

    The message comes from a small fixed vocabulary (plus, for certificate failures, OpenSSL's fixed
    verification message such as ``certificate has expired``), so the status of a DynamicScorer
    cannot be used to read errno strings, library internals or bytes the server sent.  The hub's own
    address policy is checked first; every other failure is sorted by the map the agent uses too
    (``dynamic_scoring.outbound.transport_errors``), and its kind is the reason.
    """
    for cause in causes(exc):
        if isinstance(cause, AddressNotAllowed):
            return "AddressNotAllowed", (
                f"address not allowed: the host resolves to a {cause.category} address, which the "
                "probe does not connect to (the manager's --scorer-probe-allow-cidr can allow it)"
            )
    failure = classify_transport(exc)
    return failure.kind.value, failure.summary


def probe_health(
    client: httpx.Client, url: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> ProbeResult:
    """``GET url`` (a ``/healthz``); any 2xx answer within ``timeout`` is healthy, the body is ignored."""
    result, _ = _get(client, url, token, timeout, max_bytes=MAX_HEALTH_BYTES)
    if not result.ok:
        return result
    return ProbeResult(True, "Healthy", result.message, result.status_code, result.elapsed)


def check_config(doc: ScorerConfig) -> tuple[ScorerConfig | None, list[str]]:
    """What the schema cannot say about a ``/config`` document; returns it normalised, or the problems.

    ``source.type`` is read case-insensitively (the design document's own example says ``prometheus``,
    which upstream stored and the agent then silently skipped); any other type is an error.
    Negative numbers and hosts that are not http(s) URLs are errors.  Every string is bounded by the
    DynamicScorer spec's own limit (``CONFIG_STRING_LIMITS``), and ``scoring.params`` (free-form by
    the upstream contract: the scorer's own ``model``, ``horizon`` ...) by key count and JSON size, so
    that a scorer cannot park a large document in the CR's status or in every cluster's ConfigMap.
    """
    problems: list[str] = []
    for where, limit in CONFIG_STRING_LIMITS:
        value: object = doc
        for part in where.split("."):
            value = getattr(value, part)
        if isinstance(value, str) and len(value) > limit:
            problems.append(f"{where}: {len(value)} characters, at most {limit}")
    extra = doc.scoring.params.extra_params
    if len(extra) > MAX_SCORING_PARAM_KEYS:
        problems.append(f"scoring.params: {len(extra)} keys, at most {MAX_SCORING_PARAM_KEYS}")
    elif _depth(extra) > MAX_SCORING_PARAM_DEPTH:
        problems.append(f"scoring.params: nested more than {MAX_SCORING_PARAM_DEPTH} levels deep")
    else:
        try:
            size = params_size(extra)
        except ValueError as exc:
            problems.append(f"scoring.params: {exc}")
        else:
            if size > MAX_SCORING_PARAMS_BYTES:
                problems.append(f"scoring.params: {size} bytes as JSON, at most {MAX_SCORING_PARAMS_BYTES}")
    if problems:  # before the checks below, whose messages quote values that are bounded now
        return None, problems
    source_type = doc.source.type
    if source_type:
        fixed = canonical("source.type", source_type)
        if fixed is None:
            problems.append(f"source.type: {source_type!r} is neither Prometheus nor None")
        else:
            source_type = fixed
    for where, number in (
        ("source.params.range", doc.source.params.range),
        ("source.params.step", doc.source.params.step),
        ("scoring.params.interval", doc.scoring.params.interval),
    ):
        if number < 0:
            problems.append(f"{where}: {number} is negative")
    for where, host in (("source.host", doc.source.host), ("scoring.host", doc.scoring.host)):
        if host:
            why = url_problem(host)
            if why is not None:
                problems.append(f"{where}: {why}")
    if problems:
        return None, problems
    source = doc.source.model_copy(update={"type": source_type})
    return doc.model_copy(update={"source": source}), []


def _depth(value: object, limit: int = MAX_SCORING_PARAM_DEPTH + 1) -> int:
    """How deeply ``value`` nests, counted up to ``limit`` (so a hostile depth costs little)."""
    if limit <= 0 or not isinstance(value, dict | list):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(c, limit - 1) for c in children), default=0)


def fetch_config(
    client: httpx.Client,
    url: str,
    *,
    token: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = MAX_CONFIG_BYTES,
) -> ConfigResult:
    """``GET url`` (the scorer's ``configURL``) and validate the document."""
    result, body = _get(client, url, token, timeout, max_bytes, want_json=True)
    if not result.ok:
        return ConfigResult(result)
    try:
        data = json.loads(body)
    except RecursionError:  # a megabyte of "[[[[": the decoder recurses once per level
        return ConfigResult(
            ProbeResult(
                False, "InvalidJSON", f"GET {url}: JSON nested too deeply", result.status_code, result.elapsed
            )
        )
    except ValueError as exc:
        # the position only: the decoder's message can quote the document
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        return ConfigResult(
            ProbeResult(
                False, "InvalidJSON", f"GET {url}: not valid JSON{where}", result.status_code, result.elapsed
            )
        )
    if not isinstance(data, dict):
        return ConfigResult(
            ProbeResult(
                False,
                "InvalidSchema",
                f"GET {url}: expected a JSON object, got {type(data).__name__}",
                result.status_code,
                result.elapsed,
            )
        )
    try:
        doc = ScorerConfig.model_validate(data)
    except ValidationError as exc:
        return ConfigResult(
            ProbeResult(
                False,
                "InvalidSchema",
                f"GET {url}: {describe_validation(exc)}",
                result.status_code,
                result.elapsed,
            )
        )
    checked, problems = check_config(doc)
    if checked is None:
        return ConfigResult(
            ProbeResult(
                False,
                "InvalidSchema",
                f"GET {url}: {'; '.join(problems)}",
                result.status_code,
                result.elapsed,
            )
        )
    return ConfigResult(
        ProbeResult(True, "ConfigFetched", result.message, result.status_code, result.elapsed), checked
    )


__all__ = [
    "DEFAULT_TIMEOUT",
    "HEALTH_PATH",
    "MAX_CONFIG_BYTES",
    "MAX_HEALTH_BYTES",
    "MAX_SCORING_PARAM_DEPTH",
    "MAX_SCORING_PARAM_KEYS",
    "ConfigResult",
    "ProbeResult",
    "check_config",
    "classify",
    "fetch_config",
    "health_url",
    "probe_health",
]
