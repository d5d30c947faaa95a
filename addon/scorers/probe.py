"""The hub's two requests to a scorer: ``GET /healthz`` and, in Full mode, ``GET <configURL>``.

Both take an ``httpx.Client`` the caller owns (TLS verification on, connection reuse, a bounded pool)
and return a typed result instead of raising, so that one broken scorer is a status condition, never a
stuck or crashed loop.  Upstream used Go's default client (no timeout, W-1), ignored the status code of
``/config`` (W-3) and sent no credentials (W-24).  Here:

* every request has a total deadline (``timeout``), checked while the body streams in;
* ``/healthz`` needs a 2xx answer; ``/config`` needs a 2xx answer, at most ``max_bytes`` of JSON, and a
  document that ``dynamic_scoring.wire.ScorerConfig`` accepts plus the checks in ``check_config``;
* a bearer token (the value of the hub-side Secret named in ``spec.probe.tokenSecretRef``) is sent when
  given, redirects are not followed (a token never goes to another host), and neither the token nor a
  response body appears in a message.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx
from pydantic import ValidationError

from addon.scorers.models import DynamicScorerSpec
from addon.scorers.spellings import canonical
from addon.scorers.urls import origin, url_problem
from dynamic_scoring.wire import ScorerConfig

DEFAULT_TIMEOUT = 5.0
MAX_CONFIG_BYTES = 1 << 20
HEALTH_PATH = "/healthz"


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of one request.

    Attributes:
        ok: whether the check passed.
        reason: a CamelCase condition reason: ``Healthy``, ``ConfigFetched``, ``HTTPStatus``, ``Timeout``,
            ``Unreachable``, ``TLSError``, ``InvalidURL``, ``InvalidToken``, ``Redirected``,
            ``TooLarge``, ``InvalidJSON`` or ``InvalidSchema``.
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
    headers = {"Accept": "application/json"}
    if token is None:
        return headers, None
    value = token.strip()
    if not value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value) or not value.isascii():
        return None, ProbeResult(
            False, "InvalidToken", "the probe token is empty or contains control or non-ASCII characters"
        )
    headers["Authorization"] = f"Bearer {value}"
    return headers, None


def _get(
    client: httpx.Client, url: str, token: str | None, timeout: float, max_bytes: int
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
            body = bytearray()
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > max_bytes:
                    return ProbeResult(
                        False,
                        "TooLarge",
                        f"GET {url}: the answer is larger than {max_bytes} bytes",
                        code,
                        time.monotonic() - started,
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
    except httpx.ConnectError as exc:
        reason = "TLSError" if "SSL" in str(exc) or "certificate" in str(exc).lower() else "Unreachable"
        return ProbeResult(
            False, reason, f"GET {url} failed: {_brief(exc)}", None, time.monotonic() - started
        ), b""
    except httpx.HTTPError as exc:
        return ProbeResult(
            False, "Unreachable", f"GET {url} failed: {_brief(exc)}", None, time.monotonic() - started
        ), b""


def _brief(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def probe_health(
    client: httpx.Client, url: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> ProbeResult:
    """``GET url`` (a ``/healthz``); any 2xx answer within ``timeout`` is healthy, the body is ignored."""
    result, _ = _get(client, url, token, timeout, max_bytes=64 << 10)
    if not result.ok:
        return result
    return ProbeResult(True, "Healthy", result.message, result.status_code, result.elapsed)


def check_config(doc: ScorerConfig) -> tuple[ScorerConfig | None, list[str]]:
    """What the schema cannot say about a ``/config`` document; returns it normalised, or the problems.

    ``source.type`` is read case-insensitively (the design document's own example says ``prometheus``,
    which upstream stored and the agent then silently skipped, W-11); any other type is an error.
    Negative numbers and hosts that are not http(s) URLs are errors.
    """
    problems: list[str] = []
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


def fetch_config(
    client: httpx.Client,
    url: str,
    *,
    token: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = MAX_CONFIG_BYTES,
) -> ConfigResult:
    """``GET url`` (the scorer's ``configURL``) and validate the document."""
    result, body = _get(client, url, token, timeout, max_bytes)
    if not result.ok:
        return ConfigResult(result)
    try:
        data = json.loads(body)
    except ValueError as exc:
        return ConfigResult(
            ProbeResult(
                False, "InvalidJSON", f"GET {url}: not JSON ({exc})", result.status_code, result.elapsed
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
                f"GET {url}: {_schema_errors(exc)}",
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


def _schema_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err["loc"]) or "document"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


__all__ = [
    "DEFAULT_TIMEOUT",
    "HEALTH_PATH",
    "MAX_CONFIG_BYTES",
    "ConfigResult",
    "ProbeResult",
    "check_config",
    "fetch_config",
    "health_url",
    "probe_health",
]
