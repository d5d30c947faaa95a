"""The scoring-API conformance check: what ``dynamic-scoring scorer validate`` and the pytest helper run.

It asks a running scorer what the hub and the agent ask, and a few things they would only learn
the hard way, and reports each problem as a ``Finding``: its severity, what was seen, what to fix.

* ``GET /healthz``: a 2xx (the hub marks the scorer Inactive otherwise).
* ``GET /config``: 2xx JSON that ``ScorerConfig`` accepts, with the checks the hub's Full-mode sync
  adds (source type Prometheus or None in any case, no negative numbers, http(s) hosts), and a
  score name and interval, without which Full sync has nothing to distribute.
* ``POST <scoring path>`` with empty, small (3 series of 20 points), non-finite (Prometheus'
  ``"NaN"``/``"+Inf"`` strings) and large (10,000 series of 60 points, about 16 MB, the agent's
  design load) inputs: a 2xx within the deadline, the agent's response schema, finite scores,
  string labels, results whose AddOnPlacementScore fits the agent's default limit (estimated from
  their dimension labels), and dimension labels that name items apart, under the DynamicScorer's
  ``scoreDimensionFormat`` when given (else the default ``${scoreName}``).  Every bad result of an
  answer is reported (index, labels, what is wrong; up to ``MAX_LISTED_RESULTS``), and a failing
  HTTP answer with its status, an excerpt of its body and a hint that fits the status.  The series
  are labelled like per-pod CPU unless ``series_labels`` gives label sets to send in turn (a scorer
  that reads particular metrics, such as the DCGM exporter's, refuses series it does not know).
* Latency: p50 and max per input size.
* The token: with one, a request without it or with a wrong one must be refused (401/403); without
  one, a scorer that refuses is reported so the operator knows to configure a token.

It never imports the hub or the agent (an import contract keeps it so): the rules are the wire
models' and the documented limits, restated where the hub's module cannot be shared.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import ssl
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from dynamic_scoring.contract.validation import describe_validation, validation_issues
from dynamic_scoring.contract.wire import (
    DEFAULT_DIMENSION_FORMAT,
    MAX_SCORING_PARAMS_BYTES,
    RESERVED_SCORING_PARAMS,
    ScorerConfig,
    ScoreResult,
    ScoringResponse,
    escape_control,
    params_size,
)
from dynamic_scoring.outbound.transport_errors import TRANSPORT_EXCEPTIONS, FailureKind, classify
from dynamic_scoring.outbound.urls import url_problem
from dynamic_scoring.scorer.results import DIMENSION_LABELS, MAX_SCORE_BYTES, estimated_score_bytes

ERROR = "error"
WARNING = "warning"

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""The agent abandons a scoring answer past 8 MiB (``ScorerResponseTooLarge``)."""
LARGE_SERIES = 10_000
LARGE_POINTS = 60
T0 = 1_800_000_000

BODY_EXCERPT_CHARS = 200
"""How much of a failing answer's body a finding quotes (one line, control characters escaped)."""
MAX_LISTED_RESULTS = 50
"""Bad results listed one by one per answer; the rest are counted in one more finding."""
_LABELS_CHARS = 120


class UnreachableError(Exception):
    """Nothing answered at the URL (connection refused, DNS, TLS): there is nothing to check."""


@dataclass(frozen=True)
class Finding:
    """One problem: which check, how bad, what was seen and what to do about it.

    ``index`` and ``labels`` name the result of a scoring answer the finding is about, when it is
    about one.
    """

    check: str
    severity: str
    seen: str
    fix: str
    index: int | None = None
    labels: dict[str, str] | None = None


@dataclass(frozen=True)
class RaisedError:
    """An exception the score function raised while a check ran (``testing.check_app`` fills these).

    ``type`` is the exception's qualified class name, ``traceback`` the last frames, as text.
    """

    check: str
    type: str
    message: str
    traceback: str = ""

    def __str__(self) -> str:
        return f"[{self.check}] {self.type}: {self.message}"


@dataclass(frozen=True)
class Latency:
    """Seconds per scoring request of one input size."""

    input: str
    series: int
    requests: int
    p50: float
    max: float


@dataclass
class Report:
    """Everything one run found; ``ok`` when no finding is an error."""

    url: str
    findings: list[Finding] = field(default_factory=list)
    latency: list[Latency] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    config: dict[str, Any] | None = None
    exceptions: list[RaisedError] = field(default_factory=list)
    """What the score function raised, when the app ran in this process (``testing.check_app``)."""
    params: dict[str, Any] | None = None
    """The ``params`` sent with every scoring request (None when none were)."""

    @property
    def ok(self) -> bool:
        """Whether no finding is an error."""
        return not self.errors

    @property
    def errors(self) -> list[Finding]:
        """The error findings."""
        return [f for f in self.findings if f.severity == ERROR]

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON-ready document (``-o json``)."""
        return {
            "url": self.url,
            "ok": self.ok,
            "checks": self.checks,
            "findings": [asdict(f) for f in self.findings],
            "latency": [asdict(lat) for lat in self.latency],
            "config": self.config,
            "exceptions": [asdict(e) for e in self.exceptions],
            "params": self.params,
        }

    @property
    def warnings(self) -> list[Finding]:
        """The warning findings."""
        return [f for f in self.findings if f.severity == WARNING]

    def text(self) -> str:
        """The report for people: checks, latency, each finding with its fix, exceptions, verdict."""
        lines = [f"scorer {self.url}", f"checks: {', '.join(self.checks)}"]
        if self.params:
            lines.append(f"params sent: {json.dumps(self.params, sort_keys=True)}")
        if self.latency:
            lines.append("latency (seconds):")
            lines.append(f"  {'input':<11} {'series':>7} {'requests':>8} {'p50':>8} {'max':>8}")
            lines.extend(
                f"  {lat.input:<11} {lat.series:>7} {lat.requests:>8} {lat.p50:>8.3f} {lat.max:>8.3f}"
                for lat in self.latency
            )
        for f in self.findings:
            lines.append(f"{f.severity.upper():<7} [{f.check}] {f.seen}")
            lines.append(f"        fix: {f.fix}")
        for e in self.exceptions:
            lines.append(f"RAISED  [{e.check}] {e.type}: {e.message}")
            lines.extend(f"        {line}" for line in e.traceback.splitlines())
        verdict = "conforms" if self.ok else "does not conform"
        lines.append(f"{verdict}: {len(self.errors)} error(s), {len(self.warnings)} warning(s)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


LabelSets = tuple[tuple[tuple[str, str], ...], ...]
"""Label sets the requests' series carry in turn (hashable, so a large body is built once per set)."""


def label_sets(sets: Sequence[Mapping[str, str]] | None) -> LabelSets:
    """``sets`` as ``LabelSets``; ``ValueError`` for an empty one or a value that is not a string."""
    if not sets:
        return ()
    for i, labels in enumerate(sets):
        if not isinstance(labels, Mapping) or not labels:
            raise ValueError(f"series labels [{i}]: expected a non-empty object of labels")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            raise ValueError(f"series labels [{i}]: every label name and value must be a string")
    return tuple(tuple(sorted(labels.items())) for labels in sets)


def _labels(i: int, sets: LabelSets = ()) -> dict[str, str]:
    if sets:
        return dict(sets[i % len(sets)])
    return {"node": f"node-{i % 50}", "namespace": f"ns-{i % 20}", "pod": f"pod-{i}", "container": "app"}


def _values(i: int, points: int, start: float, step: int) -> list[list[Any]]:
    return [[start + step * j, f"{0.1 + (i % 7) * 0.05 + j * 0.001:.4f}"] for j in range(points)]


def matrix(
    series: int, points: int, *, start: float = T0, step: int = 15, sets: LabelSets = ()
) -> list[dict[str, Any]]:
    """``series`` Prometheus matrix series of ``points`` points each, labelled like per-pod CPU.

    With ``sets``, series ``i`` carries label set ``i % len(sets)`` instead: a scorer that reads
    particular metrics (the DCGM exporter's, say) is sent series it recognises.
    """
    return [{"metric": _labels(i, sets), "values": _values(i, points, start, step)} for i in range(series)]


@functools.lru_cache(maxsize=2)
def matrix_body(series: int, points: int, sets: LabelSets = ()) -> bytes:
    """The request body of ``matrix(series, points)``, built from seven encoded value rows.

    Encoding 10,000 series point by point took 6 s on a busy two-core machine; the rows repeat
    every seven series, so each is encoded once, and the body is built once per process.
    """
    rows = [json.dumps(_values(k, points, T0, 15), separators=(",", ":")) for k in range(7)]
    parts = [
        f'{{"metric":{json.dumps(_labels(i, sets), separators=(",", ":"))},"values":{rows[i % 7]}}}'
        for i in range(series)
    ]
    return ('{"data":[' + ",".join(parts) + "]}").encode()


def non_finite_matrix(sets: LabelSets = ()) -> list[dict[str, Any]]:
    """Three series carrying the non-finite values Prometheus writes (``NaN``, ``+Inf``, ``-Inf``)."""
    data = matrix(3, 10, sets=sets)
    data[0]["values"][3][1] = "NaN"
    data[1]["values"][-1][1] = "+Inf"
    data[2]["values"] = [[T0, "NaN"], [T0 + 15, "-Inf"]]
    return data


def _excerpt(body: bytes, secret: str | None) -> str:
    """At most ``BODY_EXCERPT_CHARS`` of a body, on one line, escaped, the token (if echoed) hidden."""
    text = " ".join(body.decode("utf-8", "replace").split())
    if secret:
        text = text.replace(secret, "***")
    if len(text) > BODY_EXCERPT_CHARS:
        text = text[:BODY_EXCERPT_CHARS] + "…"
    return escape_control(text)


def _shown_labels(labels: Mapping[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in labels.items())
    if len(text) > _LABELS_CHARS:
        text = text[: _LABELS_CHARS - 1] + "…"
    return "{" + escape_control(text) + "}"


def status_hint(
    status: int,
    method: str,
    path: str,
    case: str = "",
    *,
    body: bytes = b"",
    params: Mapping[str, Any] | None = None,
) -> str:
    """What to do about ``method path`` answering HTTP ``status`` (not 2xx) on input ``case``.

    A refusal whose ``body`` mentions a parameter is about the ``params`` sent (or their absence).
    """
    if status in (401, 403):
        return (
            "the scorer refused the credentials: give the token the agent sends (--token-file); "
            "/healthz and /config must stay public (the hub probes them without a token by default)"
        )
    if status == 404:
        return (
            f"nothing answers {method} {path}: check the base URL and the path "
            "(--scoring-path, or scoring.path in /config)"
        )
    if status == 405:
        return f"the scorer does not take {method} at {path}: serve {method} there"
    if status == 413:
        return "the body was refused as too large: accept the agent's requests (up to 64 MiB of series)"
    if status >= 500:
        hint = f"the scorer failed on its own: see its logs for the error behind HTTP {status}"
        extra = {
            "non-finite": '; this input carries Prometheus\' "NaN", "+Inf", "-Inf" strings, '
            "which it must score (or skip)",
            "empty": "; an empty data list must give an empty results list",
            "large": "; this input is 10,000 series (about 14 MB): check its memory and time limits",
        }
        return hint + extra.get(case, "")
    if 400 <= status < 500 and b"param" in body.lower():
        sent = f"sent: {', '.join(sorted(params))}" if params else "none were sent"
        return (
            f"the scorer refused the request's params ({sent}): give the DynamicScorer's scoring.params "
            "with --param KEY=JSON or --params-from FILE (params= for check_app)"
        )
    if 400 <= status < 500:
        return (
            "the scorer refused a well-formed request: accept the agent's body "
            "(Prometheus sends NaN/Inf as strings, empty data as []); a scorer that reads particular "
            "metrics or labels is sent series it recognises with --series-labels (series_labels=)"
        )
    return "answer 2xx"


@dataclass
class _Call:
    status: int | None
    body: bytes
    seconds: float
    error: str = ""
    failure: FailureKind | None = None
    """Why no answer came (the map the agent and the hub use); None when one did."""


class Checker:
    """One run against ``url`` (the scorer's base URL, e.g. ``http://127.0.0.1:8000``)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        scoring_path: str | None = None,
        timeout: float = 30.0,
        large: bool = True,
        repeats: int = 5,
        client: httpx.Client | None = None,
        ca_file: str | None = None,
        dimension_format: str | None = None,
        dimension_labels: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        config_params: bool = True,
        series_labels: Sequence[Mapping[str, str]] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {escape_control(url)}")
        last = parts.path.rstrip("/").rpartition("/")[2]
        if last in ("config", "scoring", "healthz"):
            base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/').rpartition('/')[0]}"
            raise ValueError(
                f"{escape_control(url)} is the /{escape_control(last)} endpoint, not the scorer's base "
                f"URL: give {escape_control(base)}"
            )
        self.params = dict(params or {})
        reserved = sorted(RESERVED_SCORING_PARAMS & set(self.params))
        if reserved:
            raise ValueError(
                f"params {', '.join(reserved)}: the agent reads these and never sends them to the scorer"
            )
        if params_size(self.params) > MAX_SCORING_PARAMS_BYTES:  # ValueError when not JSON
            raise ValueError(
                f"params: more than {MAX_SCORING_PARAMS_BYTES} bytes as JSON (the agent's limit)"
            )
        self.config_params = config_params
        self.sets = label_sets(series_labels)
        self._config_extras: dict[str, Any] = {}
        self.base = url.rstrip("/")
        self.token = token
        self.scoring_path = scoring_path
        self.timeout = timeout
        self.large = large
        self.repeats = repeats
        self.dimension_format = dimension_format
        # scoreDimensionLabels: the result label each placeholder reads, when not its own name.
        self.dimension_labels = dict(dimension_labels or {})
        self._published_formats: tuple[str, ...] = ()
        self._format_warned = False
        # TLS is always verified: against ``ca_file`` (a private CA) when given, else the system's CAs.
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
        self._client = client or httpx.Client(timeout=timeout, follow_redirects=False, verify=verify)
        self._own_client = client is None
        self.report = Report(url=self.base)

    # -- plumbing -----------------------------------------------------------------------------------

    def _find(
        self,
        check: str,
        severity: str,
        seen: str,
        fix: str,
        index: int | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        finding = Finding(check, severity, seen, fix, index, labels)
        if finding not in self.report.findings:  # a repeated request repeats its findings
            self.report.findings.append(finding)

    def _answered(self, call: _Call) -> str:
        """``HTTP <status>`` and an excerpt of the body (never the headers)."""
        excerpt = _excerpt(call.body, self.token)
        return f"HTTP {call.status}: {excerpt}" if excerpt else f"HTTP {call.status} (empty body)"

    def _request(self, method: str, path: str, body: bytes | None = None, token: str | None = None) -> _Call:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        started = time.monotonic()
        try:
            response = self._client.request(method, self.base + path, content=body, headers=headers)
            return _Call(response.status_code, response.content, time.monotonic() - started)
        except TRANSPORT_EXCEPTIONS as exc:
            failure = classify(exc).kind
            if failure is FailureKind.TIMEOUT:
                error = f"no answer within {self.timeout:g}s"
            else:  # the scorer's own operator runs this: the exception's text helps and reveals nothing
                text = str(exc).splitlines()[0][:200] if str(exc) else ""
                error = f"{type(exc).__name__}: {text}"
            return _Call(None, b"", time.monotonic() - started, error, failure)

    # -- checks -------------------------------------------------------------------------------------

    def run(self) -> Report:
        """Every check in order; raises ``UnreachableError`` when ``/healthz`` cannot even connect."""
        try:
            self._healthz()
            path = self._config()
            if self._token(path):
                self._scoring(path)
        finally:
            if self._own_client:
                self._client.close()
        return self.report

    def _healthz(self) -> None:
        self.report.checks.append("healthz")
        call = self._request("GET", "/healthz")
        if call.status is None and call.failure is not FailureKind.TIMEOUT:
            raise UnreachableError(f"GET {self.base}/healthz: {call.error}")
        if call.status is None:
            self._find(
                "healthz", ERROR, f"GET /healthz: {call.error}", "answer /healthz quickly, without work"
            )
        elif not 200 <= call.status < 300:
            hint = (
                status_hint(call.status, "GET", "/healthz")
                if call.status in (401, 403, 404, 405)
                else "answer 2xx while the scorer can score; the hub marks it Inactive otherwise"
            )
            self._find("healthz", ERROR, f"GET /healthz answered {self._answered(call)}", hint)

    def _config(self) -> str:
        """Check ``/config``; returns the scoring path to use."""
        self.report.checks.append("config")
        fallback = self.scoring_path or "/scoring"
        call = self._request("GET", "/config")
        if call.status is None or not 200 <= call.status < 300:
            if call.status is None:
                seen, hint = call.error, "answer /config quickly"
            else:
                seen, hint = f"answered {self._answered(call)}", status_hint(call.status, "GET", "/config")
            self._find(
                "config",
                ERROR,
                f"GET /config {seen}" if call.status is not None else f"GET /config: {seen}",
                f"{hint}; serve the ScorerConfig document at /config (needed for configSyncMode Full)",
            )
            return fallback
        try:
            data = json.loads(call.body)
        except (ValueError, UnicodeDecodeError):
            self._find("config", ERROR, "GET /config: the body is not JSON", "answer the document as JSON")
            return fallback
        if not isinstance(data, dict):
            self._find("config", ERROR, f"GET /config: a JSON {type(data).__name__}", "answer a JSON object")
            return fallback
        try:
            doc = ScorerConfig.model_validate(data)
        except ValidationError as exc:
            for where, what in validation_issues(exc):
                self._find(
                    "config",
                    ERROR,
                    f"/config {where}: {what}",
                    f"give {where} the type the contract names (docs/scorer-library.md, /config)",
                )
            return fallback
        self.report.config = doc.model_dump(mode="json")
        # scoring.params.scoreDimensionFormat(s): what a hub in configSyncMode Full uses
        self._published_formats = doc.scoring.params.dimension_formats
        self._config_extras = doc.scoring.params.extra_params
        self._config_rules(doc)
        path = self.scoring_path or doc.scoring.path or "/scoring"
        if not path.startswith("/"):
            path = "/" + path
        return path

    def _config_rules(self, doc: ScorerConfig) -> None:
        source_type = doc.source.type.lower()
        if source_type not in ("", "prometheus", "none"):
            self._find(
                "config",
                ERROR,
                f"source.type is {escape_control(doc.source.type)!r}",
                "use Prometheus or None",
            )
        if doc.source.type and doc.source.type not in ("Prometheus", "None"):
            self._find(
                "config",
                WARNING,
                f"source.type is spelt {escape_control(doc.source.type)!r}",
                "spell it Prometheus or None: the hub accepts other cases, upstream's agent skips the scorer",
            )
        params = doc.source.params
        for where, number in (
            ("source.params.range", params.range),
            ("source.params.step", params.step),
            ("scoring.params.interval", doc.scoring.params.interval),
        ):
            if number < 0:
                self._find(
                    "config", ERROR, f"{where} is {number}", f"make {where} a positive number of seconds"
                )
        if source_type == "prometheus":
            if not params.query:
                self._find("config", ERROR, "source.params.query is empty", "publish the PromQL query")
            if params.range <= 0 or params.step <= 0 or params.step > params.range:
                self._find(
                    "config",
                    ERROR,
                    f"source.params range {params.range}, step {params.step}",
                    "give range and step in seconds, 1 <= step <= range",
                )
        for where, host in (("source.host", doc.source.host), ("scoring.host", doc.scoring.host)):
            problem = url_problem(host) if host else None
            if problem:  # the hub's own rule: Full-mode sync refuses the same hosts
                self._find("config", ERROR, f"{where} {problem}", f"set {where} to http(s)://host[:port]")
        if not doc.scoring.params.name:
            self._find(
                "config",
                ERROR,
                "scoring.params.name is empty",
                "publish the score name: in Full sync mode it names the AddOnPlacementScore",
            )
        if doc.scoring.params.interval <= 0:
            self._find(
                "config",
                WARNING,
                "scoring.params.interval is not set",
                "publish the seconds between scoring cycles (Full sync mode uses it)",
            )

    def _token(self, path: str) -> bool:
        """Check the token handling; False when the scorer refuses us, so scoring cannot be checked."""
        self.report.checks.append("token")
        body = json.dumps({"data": matrix(1, 5, sets=self.sets)}).encode()
        bare = self._request("POST", path, body)
        if self.token is None:
            if bare.status in (401, 403):
                self._find(
                    "token",
                    ERROR,
                    f"POST {path} without a token answered HTTP {bare.status}",
                    "pass the token the agent will send (--token-file); the scoring checks were skipped",
                )
                return False
            return True
        if bare.status not in (401, 403):
            self._find(
                "token",
                ERROR,
                f"POST {path} without a token answered {bare.status or bare.error}",
                "refuse requests without the bearer token with 401 (or 403)",
            )
        wrong = self._request("POST", path, body, token=self.token + "-wrong")
        if wrong.status not in (401, 403):
            self._find(
                "token",
                ERROR,
                f"POST {path} with a wrong token answered {wrong.status or wrong.error}",
                "compare the whole token (constant-time) and refuse a wrong one with 401 (or 403)",
            )
        return True

    @property
    def sent_params(self) -> dict[str, Any]:
        """The ``params`` of each scoring request.

        The given ones, each replaced by ``/config``'s when it publishes the key and ``config_params``
        is on: what a hub in ``configSyncMode: Full`` sends.
        """
        return {**self.params, **(self._config_extras if self.config_params else {})}

    def _scoring(self, path: str) -> None:
        params = self.sent_params
        self.report.params = params or None

        def body(data: list[dict[str, Any]]) -> bytes:
            return json.dumps({"data": data, "params": params} if params else {"data": data}).encode()

        cases: list[tuple[str, int, Callable[[], bytes], int]] = [
            ("empty", 0, lambda: body([]), self.repeats),
            ("small", 3, lambda: body(matrix(3, 20, sets=self.sets)), self.repeats),
            ("non-finite", 3, lambda: body(non_finite_matrix(self.sets)), 1),
        ]
        if self.large:  # seconds per request, so once

            def large() -> bytes:
                # {"data":[...]}, cached without params
                whole = matrix_body(LARGE_SERIES, LARGE_POINTS, self.sets)
                return whole[:-1] + b',"params":' + json.dumps(params).encode() + b"}" if params else whole

            cases.append(("large", LARGE_SERIES, large, 1))
        for name, n_series, make, repeats in cases:
            self.report.checks.append(f"scoring:{name}")
            payload = make()
            times: list[float] = []
            for _ in range(repeats):
                call = self._request("POST", path, payload, token=self.token)
                times.append(call.seconds)
                if not self._answer(name, path, call, n_series):
                    break
            self.report.latency.append(
                Latency(name, n_series, len(times), statistics.median(times), max(times))
            )

    def _answer(self, case: str, path: str, call: _Call, n_series: int) -> bool:
        """Check one scoring answer; False when it failed (so it is not repeated)."""
        check = f"scoring:{case}"
        size = f"{case} input ({n_series} series)"
        if call.status is None:
            self._find(
                check,
                ERROR,
                f"POST {path} with {size}: {call.error}",
                f"answer within {self.timeout:g}s (the agent waits timeoutSeconds)",
            )
            return False
        if not 200 <= call.status < 300:
            self._find(
                check,
                ERROR,
                f"POST {path} with {size} answered {self._answered(call)}",
                status_hint(call.status, "POST", path, case, body=call.body, params=self.sent_params),
            )
            return False
        if len(call.body) > MAX_RESPONSE_BYTES:
            self._find(check, ERROR, f"{size}: answer of {len(call.body)} bytes", "answer at most 8 MiB")
            return False
        try:
            data = json.loads(call.body)  # Python's decoder reads NaN and Infinity, so they can be named
        except (ValueError, UnicodeDecodeError):
            self._find(check, ERROR, f"{size}: the answer is not JSON", 'answer {"results": [...]} as JSON')
            return False
        if not isinstance(data, dict):
            self._find(
                check,
                ERROR,
                f"{size}: the answer is a JSON {type(data).__name__}",
                'answer {"results": [...]}',
            )
            return False
        results = data.get("results")
        if results is None:
            if "results" not in data:
                self._find(
                    check, WARNING, f"{size}: no results key", 'send {"results": []} when there is nothing'
                )
            return True
        if not isinstance(results, list):
            self._find(check, ERROR, f"{size}: results is a {type(results).__name__}", "make results a list")
            return False
        return self._results(check, size, results, case)

    def _results(self, check: str, size: str, results: list[Any], case: str) -> bool:
        """Check every result; each bad one is a finding of its own (up to ``MAX_LISTED_RESULTS``)."""
        bad: list[tuple[int, dict[str, str] | None, str, str]] = []  # index, labels, what, fix
        missing: list[int] = []
        clamped: list[int] = []
        coerced: set[str] = set()
        for i, item in enumerate(results):
            if not isinstance(item, dict):
                bad.append(
                    (
                        i,
                        None,
                        f"is a JSON {type(item).__name__}, not an object",
                        "send {metric, score} objects",
                    )
                )
                continue
            metric = item.get("metric")
            labels = (
                {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in metric.items()}
                if isinstance(metric, dict)
                else None
            )
            score = item.get("score")
            if "score" not in item:
                missing.append(i)
            elif isinstance(score, bool) or not isinstance(score, int | float):
                bad.append((i, labels, f"score is a {type(score).__name__}", "send a number"))
            elif not math.isfinite(score):
                bad.append(
                    (
                        i,
                        labels,
                        f"score is {score}",
                        "send finite scores: one NaN or Infinity makes the agent reject the whole answer",
                    )
                )
            elif not -100 <= score <= 100:
                clamped.append(i)
            if metric is not None and not isinstance(metric, dict):
                bad.append((i, None, f"metric is a {type(metric).__name__}", "send labels as an object"))
            for label, value in (metric or {}).items() if isinstance(metric, dict) else ():
                if isinstance(value, dict | list):
                    bad.append(
                        (
                            i,
                            labels,
                            f"metric.{escape_control(label)} is a {type(value).__name__}",
                            "label values must be strings",
                        )
                    )
                elif not isinstance(value, str):
                    coerced.add(label)
        for i, labels, what, fix in bad[:MAX_LISTED_RESULTS]:
            shown = f" {_shown_labels(labels)}" if labels else ""
            self._find(check, ERROR, f"{size}: results[{i}]{shown} {what}", fix, i, labels)
        if len(bad) > MAX_LISTED_RESULTS:
            rest = bad[MAX_LISTED_RESULTS:]
            self._find(
                check,
                ERROR,
                f"{size}: {len(rest)} more problem(s) in {len({b[0] for b in rest})} more result(s)",
                "fix the ones listed first: the rest are likely the same mistake",
            )
        if missing:
            self._find(
                check,
                WARNING,
                f"{size}: {_indices(missing)} no score",
                "send a score (missing means 0)",
            )
        if clamped:
            self._find(
                check,
                WARNING,
                f"{size}: {_indices(clamped)} a score outside [-100, 100]",
                "scores are clamped to [-100, 100]",
            )
        if coerced:
            self._find(
                check,
                WARNING,
                f"{size}: label(s) {', '.join(sorted(escape_control(c) for c in coerced))} are not strings",
                "send label values as strings; this agent coerces them, upstream's rejected the answer",
            )
        if bad:
            return False
        try:
            response = ScoringResponse.model_validate({"results": results})
        except ValidationError as exc:
            self._find(
                check,
                ERROR,
                f"{size}: {describe_validation(exc, whole='answer', limit=1)}",
                "follow the response schema",
            )
            return False
        self._dimensions(check, size, response, case)
        return True

    def _dimensions(self, check: str, size: str, response: ScoringResponse, case: str) -> None:
        results = response.results
        estimated = estimated_score_bytes(results)
        if estimated > MAX_SCORE_BYTES:
            self._find(
                check,
                WARNING if case == "large" else ERROR,
                f"{size}: {len(results)} results, about {estimated} bytes as an AddOnPlacementScore",
                f"the agent writes at most {MAX_SCORE_BYTES} bytes of scores by default and fails the cycle "
                "otherwise: aggregate, shorten the dimension labels, or narrow the query",
            )
        if len(results) < 2:
            return
        keys = {tuple((d, r.metric.get(d, "")) for d in DIMENSION_LABELS) for r in results}
        if len(keys) == 1:
            self._find(
                check,
                WARNING,
                f"{size}: {len(results)} results with the same dimension labels "
                f"({', '.join(DIMENSION_LABELS)})",
                "set the dimension labels that tell results apart (result(..., pod=...)), and name them in "
                "scoreDimensionFormat; otherwise the agent fails the cycle (ItemNameCollision)",
            )
        elif len(keys) < len(results) and case != "large":
            self._find(
                check,
                WARNING,
                f"{size}: {len(results) - len(keys)} results repeat another's dimension labels",
                "results that render to the same item name make the agent fail the cycle (ItemNameCollision)",
            )
        if len(keys) > 1:
            self._format_collisions(check, size, results)

    def _format_collisions(self, check: str, size: str, results: list[ScoreResult]) -> None:
        """Warn (once per run) when results the dimension labels tell apart get one item name.

        The agent names items by ``scoreDimensionFormat``, substituting only the dimension labels it
        names (``${cluster}`` and ``${scoreName}`` are the same for every result of an answer), so
        results that differ only in labels the format leaves out collide, and the agent then fails the
        cycle (``ItemNameCollision``).
        """
        if self._format_warned:
            return
        formats: tuple[str, ...]
        if self.dimension_format:
            formats, origin = (self.dimension_format,), ""
        elif self._published_formats:
            formats, origin = self._published_formats, " (published in /config)"
        else:
            formats, origin = (DEFAULT_DIMENSION_FORMAT,), " (the default)"
        source = self.dimension_labels
        for fmt in formats:
            named = [d for d in DIMENSION_LABELS if "${" + d + "}" in fmt]
            groups: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
            for r in results:
                name = tuple(r.metric.get(source.get(d, d), "") for d in named)
                groups.setdefault(name, set()).add(tuple(r.metric.get(d, "") for d in DIMENSION_LABELS))
            colliding = [g for g in groups.values() if len(g) > 1]
            if colliding:
                self._warn_collisions(check, size, fmt, origin, named, colliding)
                return

    def _warn_collisions(
        self,
        check: str,
        size: str,
        fmt: str,
        origin: str,
        named: list[str],
        colliding: list[set[tuple[str, ...]]],
    ) -> None:
        ignored = [
            d
            for i, d in enumerate(DIMENSION_LABELS)
            if d not in named and any(len({key[i] for key in g}) > 1 for g in colliding)
        ]
        self._format_warned = True
        suggestion = fmt + "-${" + ignored[0] + "}"
        self._find(
            check,
            WARNING,
            f"{size}: results with different labels render to {len(colliding)} item name(s) under "
            f"scoreDimensionFormat {escape_control(fmt)!r}{origin}; it ignores {', '.join(ignored)}",
            "name the labels that tell the results apart, e.g. scoreDimensionFormat: "
            f'"{escape_control(suggestion)}" (check yours with --dimension-format); '
            "otherwise the agent fails the cycle (ItemNameCollision)",
        )


def _indices(indices: list[int]) -> str:
    """``results[3]`` has, ``results[1, 4, 9 and 12 more]`` have."""
    shown = ", ".join(str(i) for i in indices[:10])
    if len(indices) > 10:
        shown += f" and {len(indices) - 10} more"
    return f"results[{shown}] {'has' if len(indices) == 1 else 'have'}"


def check(url: str, **options: Any) -> Report:
    """Run every check against the scorer at ``url``; see ``Checker`` for the options."""
    return Checker(url, **options).run()


def main(argv: list[str] | None = None) -> int:
    """``python -m dynamic_scoring.scorer.conformance URL``: the check without the CLI's extra.

    The base install (the scorer library alone) has no ``dynamic-scoring scorer validate``, so an
    author can still run the same checks; the CLI adds the token, TLS, params and item-name options.
    Exit 0 when nothing is an error, 1 on an error finding, 2 for bad arguments, 3 when nothing answers.
    """
    parser = argparse.ArgumentParser(
        prog="python -m dynamic_scoring.scorer.conformance",
        description="Check the scoring API at URL (its base, e.g. http://127.0.0.1:8000) against the "
        "contract; `dynamic-scoring scorer validate` (the cli extra) runs the same checks with more options.",
    )
    parser.add_argument("url", metavar="URL")
    parser.add_argument("--no-large", action="store_true", help="skip the 10,000-series input")
    args = parser.parse_args(argv)
    try:
        report = check(args.url, large=not args.no_large)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except UnreachableError as exc:
        print(f"error: {exc}\nhint: is the scorer running and listening on that address?", file=sys.stderr)
        return 3
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "BODY_EXCERPT_CHARS",
    "DEFAULT_DIMENSION_FORMAT",
    "ERROR",
    "LARGE_SERIES",
    "MAX_LISTED_RESULTS",
    "WARNING",
    "Checker",
    "Finding",
    "LabelSets",
    "Latency",
    "RaisedError",
    "Report",
    "UnreachableError",
    "check",
    "label_sets",
    "matrix",
    "matrix_body",
    "non_finite_matrix",
    "status_hint",
]
