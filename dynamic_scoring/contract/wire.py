"""Wire contracts shared by the hub manager and the agent: the summary list, the scoring API's documents.

The hub (``dynamic_scoring.addon``) and the agent (``dynamic_scoring.agent``) never import each other;
what both need of the other's wire format lives here (``.importlinter`` enforces it).
Everything here follows the upstream Go implementation's JSON exactly, because existing hubs, agents
and scorers must keep understanding each other:

* ``ScorerSummary``: one element of the ConfigMap key ``summaries``.  The 16 upstream keys are always
  emitted, in upstream order; missing keys decode to zero values, ``null`` counts as missing, and
  unknown keys are ignored (as Go's ``encoding/json`` does).  A value of the wrong JSON type is an
  error for that entry only.  Our additions are optional camelCase keys that upstream agents ignore
  and that are omitted when unset.
* ``ScoringResponse``: what ``POST <scoringEndpoint>`` returns.  Scalar label values are coerced to
  strings (upstream rejected them), a missing ``results`` means no results, a missing ``score`` means
  0, and NaN or infinite scores make the whole response invalid.
* ``ScorerConfig``: the ``GET /config`` document, used by the hub.

Python attribute names are snake_case; the JSON names are the camelCase aliases, and both are
accepted on input.

Ranges and formats are checked here, at the boundary, so that a hostile or mistaken value is one
entry's error with a reason instead of a failure in every cycle: names at most 253 characters (the
AddOnPlacementScore name limit), every Secret name a DNS subdomain (a name such as
``../../other/secrets/x`` would otherwise become part of an API path), Secret keys in the
Kubernetes key alphabet, intervals and durations within stated bounds, endpoint URLs without
whitespace or control characters and with a valid port.  Messages never quote the offending value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from dynamic_scoring.contract.regex import RegexError, compile_label_regex
from dynamic_scoring.contract.score_size import MAX_SCORE_BYTES_SETTING, MIN_SCORE_BYTES_SETTING
from dynamic_scoring.contract.validation import describe_validation

UPSTREAM_SUMMARY_KEYS: tuple[str, ...] = (
    "name",
    "scoreName",
    "sourceType",
    "sourceEndpoint",
    "sourceEndpointAuthName",
    "sourceEndpointAuthKey",
    "sourceQuery",
    "sourceRange",
    "sourceStep",
    "scoringEndpoint",
    "scoringInterval",
    "scoringEndpointAuthName",
    "scoringEndpointAuthKey",
    "location",
    "scoreDestination",
    "scoreDimensionFormat",
)
"""The keys every upstream hub emits for each summary, in upstream order."""

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_RESERVED_HEADERS = frozenset(
    {
        # Host picks the virtual host: behind a shared ingress or gateway, "Host: my-own.example"
        # would route a request (and the Secrets bound to the ingress's host) to another backend.
        "host",
        # Framing and hop-by-hop headers belong to the HTTP client; a second Content-Length or
        # Transfer-Encoding would desynchronise the connection with a proxy in between.
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "expect",
        "proxy-authorization",
        "proxy-connection",
    }
)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+\Z")

DEFAULT_DIMENSION_FORMAT = "${scoreName}"
"""The item-name format when a DynamicScorer names none: one item per answer, named by the score."""
MAX_NAME_LENGTH = 253
"""``name`` and ``scoreName``: the AddOnPlacementScore (and any Kubernetes object) name limit."""
MAX_INTERVAL_SECONDS = 86_400
"""``scoringInterval`` and ``sourceStep``: one day."""
MAX_SOURCE_RANGE_SECONDS = 366 * 86_400
"""``sourceRange``: a year (Prometheus itself refuses more than 11,000 points per series)."""
MAX_VALID_FOR_SECONDS = 7 * 86_400
"""``validForSeconds``: a week."""
MAX_HORIZON_SECONDS = 30 * 86_400
"""``params.horizon`` (the blog's parameter, seconds ahead to forecast): 30 days.  A scorer's work
must not grow with a number its caller picks; the bound keeps one request cheap even for a
forecast written without that care, and no placement looks further ahead than a month."""
MAX_TIMEOUT_SECONDS = 3_600.0
"""``timeoutSeconds``: an hour (it is further bounded by the interval)."""
MAX_URL_LENGTH = 2_048
"""Endpoint URLs."""


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_control(text: str) -> str:
    """``text`` with every non-printable character (newline, ESC, NUL, U+2028, ...) written as an escape.

    Anything from outside (names, Prometheus and scorer error text) goes through this before it
    reaches a log line or a condition, so that it cannot forge a log line or drive a terminal.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in text)


def display_name(text: str, limit: int = 80) -> str:
    """A name as messages show it: control characters escaped, at most ``limit`` characters."""
    text = escape_control(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _secret_name(value: str) -> str:
    if len(value) > MAX_NAME_LENGTH or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            "a Secret name must be a DNS subdomain (lowercase letters, digits, '-' and '.', "
            f"at most {MAX_NAME_LENGTH} characters)"
        )
    return value


def _secret_key(value: str) -> str:
    if len(value) > MAX_NAME_LENGTH or not _SECRET_KEY.match(value):
        raise ValueError(
            f"a Secret key must be letters, digits, '-', '_' and '.', at most {MAX_NAME_LENGTH} characters"
        )
    return value


def _or_empty(check: Any) -> Any:
    def allow_empty(value: str) -> str:
        return value if value == "" else check(value)

    return allow_empty


def _endpoint(value: str) -> str:
    """An endpoint URL that an HTTP client can send as is (the scheme is checked by the agent's plan)."""
    if value == "":
        return value
    if len(value) > MAX_URL_LENGTH:
        raise ValueError(f"a URL must be at most {MAX_URL_LENGTH} characters")
    if not value.isprintable() or any(ch in value for ch in " \x7f"):
        raise ValueError("a URL must not contain spaces or control characters (CR, LF, tab, ...)")
    try:
        port = urlsplit(value).port
    except ValueError as exc:  # an out-of-range or non-numeric port, a malformed IPv6 host
        raise ValueError("not a valid URL (check the host and the port, 1-65535)") from exc
    if port == 0:
        raise ValueError("not a valid URL (port 0)")
    return value


SecretName = Annotated[str, AfterValidator(_secret_name)]
SecretKey = Annotated[str, AfterValidator(_secret_key)]
LegacySecretName = Annotated[str, AfterValidator(_or_empty(_secret_name))]
LegacySecretKey = Annotated[str, AfterValidator(_or_empty(_secret_key))]
Endpoint = Annotated[str, AfterValidator(_endpoint)]


class _Wire(BaseModel):
    """Common model settings: camelCase JSON names, strict JSON types, unknown keys ignored.

    Strict types mirror Go's decoder: ``"30"`` is not an integer and ``30.5`` is not either.  The
    models are frozen because a worker reads the summary it was handed while the supervisor may
    already hold a newer one; sharing immutable values needs no lock.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="ignore",
        strict=True,
        frozen=True,
    )

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Every serialisation path (model_dump, model_dump_json, nested models) produces the wire
        # form: optional fields that are unset are omitted rather than sent as null.
        data = handler(self)
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @model_validator(mode="before")
    @classmethod
    def _null_is_missing(cls, data: Any) -> Any:
        # Go decodes `null` into a string or int field as its zero value; do the same.
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if v is not None}
        return data


class SecretKeyRef(_Wire):
    """One key of a Secret in the agent's install namespace."""

    name: SecretName
    key: SecretKey


class BasicAuthSecretRef(_Wire):
    """A Secret holding a username and a password for HTTP basic authentication."""

    name: SecretName
    username_key: SecretKey = "username"
    password_key: SecretKey = "password"


class ClientCertSecretRef(_Wire):
    """A Secret holding a PEM client certificate (chain) and its private key, for mutual TLS."""

    name: SecretName
    cert_key: SecretKey = "tls.crt"
    key_key: SecretKey = "tls.key"


class HeaderSpec(_Wire):
    """One extra request header, literal or read from a Secret (e.g. ``X-Scope-OrgID``)."""

    name: str
    value: str | None = None
    secret_key_ref: SecretKeyRef | None = None

    @field_validator("name")
    @classmethod
    def _token(cls, name: str) -> str:
        if not _HEADER_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid HTTP header name")
        if name.lower() in _RESERVED_HEADERS:
            raise ValueError(f"header {name} is set by the HTTP client and cannot be configured")
        return name

    @model_validator(mode="after")
    def _one_source(self) -> HeaderSpec:
        if (self.value is None) == (self.secret_key_ref is None):
            raise ValueError(f"header {self.name}: set exactly one of value and secretKeyRef")
        if self.value is not None and ("\r" in self.value or "\n" in self.value):
            raise ValueError(f"header {self.name}: the value must not contain a line break")
        return self


class EndpointAuth(_Wire):
    """How to authenticate to one endpoint and which TLS peers to trust (an extension field).

    ``bearerTokenSecretRef`` and ``basicAuthSecretRef`` both set ``Authorization`` and so exclude each
    other.  Either one, when present, replaces the upstream ``*EndpointAuthName/Key`` bearer token.
    ``caSecretRef`` replaces the default trust store for this endpoint; ``insecureSkipVerify`` turns
    verification off entirely and must be asked for explicitly.

    ``agentServiceAccountToken`` asks for the agent's own projected ServiceAccount token as the
    bearer token (for a Prometheus behind kube-rbac-proxy, such as OpenShift's Thanos querier).  It
    also sets ``Authorization``, so it excludes the other two.  The scorer author only asks: the
    agent sends it only where the cluster's admin enabled it (AddOnDeploymentConfig
    ``AgentTokenDestinations``, ``dynamic_scoring.agent.own_token``), and only to a source, never
    to a scoring API.
    """

    bearer_token_secret_ref: SecretKeyRef | None = None
    basic_auth_secret_ref: BasicAuthSecretRef | None = None
    headers: list[HeaderSpec] | None = None
    ca_secret_ref: SecretKeyRef | None = None
    client_cert_secret_ref: ClientCertSecretRef | None = None
    insecure_skip_verify: bool = False
    # Emitted only when asked for, so summaries that do not use it stay byte-for-byte as before.
    agent_service_account_token: bool = Field(default=False, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _one_authorization(self) -> EndpointAuth:
        if self.bearer_token_secret_ref is not None and self.basic_auth_secret_ref is not None:
            raise ValueError("bearerTokenSecretRef and basicAuthSecretRef exclude each other")
        if self.agent_service_account_token and (
            self.bearer_token_secret_ref is not None or self.basic_auth_secret_ref is not None
        ):
            raise ValueError(
                "agentServiceAccountToken excludes bearerTokenSecretRef and basicAuthSecretRef: "
                "each sets Authorization"
            )
        if self.agent_service_account_token and self.insecure_skip_verify:
            # The agent's identity must not go to whoever answers on the path: only verified TLS.
            raise ValueError(
                "the agent's own ServiceAccount token is sent only over verified TLS; remove "
                "insecureSkipVerify (trust the server with caSecretRef)"
            )
        return self


SOURCE_TYPES: tuple[str, ...] = ("Prometheus", "OpenTelemetry")
"""The ``type`` values of one entry of ``sources``."""
ON_SOURCE_ERROR: tuple[str, ...] = ("Fail", "ScoreWithAvailable")
"""The ``onSourceError`` policies; ``Fail`` when unset."""
MAX_SOURCES = 16
"""Entries of ``sources``: each is fetched in turn inside one interval, so keep them few."""
MAX_SOURCE_QUERIES = 32
"""Queries of one source (the CRD's ``maxItems``)."""
MAX_SCORING_PARAMS_BYTES = 16 * 1024
"""``scoringParams`` as compact JSON: it rides in every scoring request and in the ConfigMap of
every cluster, so it is for a model name and a horizon, not for data."""
RESERVED_SCORING_PARAMS = frozenset({"name", "interval"})
"""Keys of ``scoring.params`` that configure the agent and are never sent to the scorer."""
MAX_DIMENSION_FORMATS = 16
"""Entries of ``scoreDimensionFormats``: each result yields one item per format."""
MAX_DIMENSION_FORMAT_LENGTH = 1024
"""One item-name format (``scoreDimensionFormat``, each entry of ``scoreDimensionFormats``)."""
DIMENSION_LABEL_PLACEHOLDERS: tuple[str, ...] = (
    "node",
    "device",
    "namespace",
    "app",
    "pod",
    "container",
    "meta",
)
"""The format placeholders filled from a result's labels, and so the keys of ``scoreDimensionLabels``."""
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*\Z")
"""A Prometheus label name (also an OpenTelemetry attribute after translation); each use bounds its length."""
MAX_DIMENSION_LABEL_LENGTH = 128
"""The longest label name ``scoreDimensionLabels`` accepts (the CRD says the same)."""


def check_dimension_labels(value: Mapping[str, str]) -> None:
    """Raise ValueError unless ``value`` maps format placeholders to Prometheus label names."""
    for key, label in value.items():
        if key not in DIMENSION_LABEL_PLACEHOLDERS:
            raise ValueError(
                f"{key!r} is not a label placeholder of scoreDimensionFormat "
                f"(one of {', '.join(DIMENSION_LABEL_PLACEHOLDERS)})"
            )
        too_long = isinstance(label, str) and len(label) > MAX_DIMENSION_LABEL_LENGTH
        if not isinstance(label, str) or too_long or not _LABEL_NAME.match(label):
            raise ValueError(
                f"${{{key}}}: {label!r} is not a label name "
                f"([a-zA-Z_][a-zA-Z0-9_]*, at most {MAX_DIMENSION_LABEL_LENGTH} characters)"
            )


def params_size(params: Mapping[str, Any]) -> int:
    """The size in bytes of ``params`` as the agent sends it (compact JSON, UTF-8)."""
    try:
        text = json.dumps(params, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:  # NaN, infinity, or a value JSON cannot carry
        raise ValueError("scorer parameters must be plain JSON (no NaN or infinity)") from exc
    return len(text.encode())


_SOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def _source_name(value: str) -> str:
    # It becomes a label value on every series and a metric label: keep it a short DNS label.
    if len(value) > 63 or not _SOURCE_NAME.match(value):
        raise ValueError(
            "a source name must be a DNS label (lowercase letters, digits and '-', at most 63 characters)"
        )
    return value


SourceName = Annotated[str, AfterValidator(_source_name)]


MATCH_OPS: tuple[str, ...] = ("=", "!=", "=~", "!~")
"""Attribute matcher operators, with PromQL's meaning (regexes match the whole value)."""
MAX_OTEL_SELECTORS = 32
"""Selectors of one OpenTelemetry source."""


def _metric_name(value: str) -> str:
    # OTel names allow '.', '/' and '-'; they are compared after the receiver's translation.
    if not value or len(value) > 255 or not value.isprintable() or " " in value:
        raise ValueError("a metric name must be 1-255 printable characters without spaces")
    return value


class AttributeMatcher(_Wire):
    """One attribute matcher of an OpenTelemetry selector: ``name op value``, as in PromQL.

    ``name`` is the label name after translation (``service.name`` is ``service_name``).  For
    ``=~`` and ``!~`` the value is a regular expression matched against the whole label value,
    in RE2 syntax as PromQL's (no backreferences or lookaround): pushers choose the values it
    runs on, so it must match in linear time (``dynamic_scoring.contract.regex``).
    """

    name: str
    op: str = "="
    value: str = Field(default="", max_length=1024)

    @field_validator("name")
    @classmethod
    def _label(cls, value: str) -> str:
        if len(value) > 255 or not _LABEL_NAME.match(value):
            raise ValueError("a label name must be letters, digits and '_', not starting with a digit")
        return value

    @field_validator("op")
    @classmethod
    def _op(cls, value: str) -> str:
        if value not in MATCH_OPS:
            raise ValueError(f"expected one of {', '.join(MATCH_OPS)}")
        return value

    @model_validator(mode="after")
    def _regex(self) -> AttributeMatcher:
        if self.op in ("=~", "!~"):
            try:
                compile_label_regex(self.value)
            except RegexError as exc:
                raise ValueError(f"matcher {self.name}: not a valid RE2 regular expression ({exc})") from None
        return self


class OtelSelector(_Wire):
    """Which pushed OpenTelemetry series one query of an OpenTelemetry source selects.

    ``metric`` is compared after translation (dots become underscores); a histogram's base name
    selects its ``_count``, ``_sum`` and ``_bucket`` series.  ``rate`` turns cumulative monotonic
    sums (and histogram counts and buckets) into per-second rates over each step.
    """

    metric: Annotated[str, AfterValidator(_metric_name)]
    matchers: list[AttributeMatcher] | None = Field(default=None, max_length=32)
    rate: bool = False


class OtelSpec(_Wire):
    """The ``otel`` part of a source of type ``OpenTelemetry``: its selectors, in order."""

    selectors: list[OtelSelector] = Field(min_length=1, max_length=MAX_OTEL_SELECTORS)


class SourceSpec(_Wire):
    """One entry of ``sources``: a named metrics source with its own endpoint, auth and queries.

    ``endpoint`` is the full ``query_range`` URL for ``Prometheus`` and unused for
    ``OpenTelemetry`` (the agent's own receiver is that source).  Queries may contain the
    ``${cluster}`` placeholder inside a quoted PromQL string; the agent substitutes it.
    """

    name: SourceName
    type: str = Field(default="Prometheus", max_length=64)
    endpoint: Endpoint = ""
    auth: EndpointAuth | None = None
    queries: list[str] = Field(default_factory=list, max_length=MAX_SOURCE_QUERIES)
    range: int = Field(default=0, ge=0, le=MAX_SOURCE_RANGE_SECONDS)
    step: int = Field(default=0, ge=0, le=MAX_INTERVAL_SECONDS)
    otel: OtelSpec | None = None
    """Selectors of an ``OpenTelemetry`` source (read from the agent's OTLP receiver)."""

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in SOURCE_TYPES:
            raise ValueError(f"expected one of {', '.join(SOURCE_TYPES)}")
        return value


class ScoreNormalization(_Wire):
    """Linear map of the scorer's raw range ``[min, max]`` onto ``[targetMin, targetMax]``.

    Applied before clamping to [-100, 100].  ``min`` may be larger than ``max`` to invert a scale
    where lower raw values are better.
    """

    min: float
    max: float
    target_min: float = 0.0
    target_max: float = 100.0

    @model_validator(mode="after")
    def _usable(self) -> ScoreNormalization:
        values = (self.min, self.max, self.target_min, self.target_max)
        if not all(math.isfinite(v) for v in values):
            raise ValueError("normalisation bounds must be finite numbers")
        if self.min == self.max:
            raise ValueError("normalisation min and max must differ")
        # Bounds near the float limit overflow in the map itself and turn every score into NaN.
        if not (math.isfinite(self.max - self.min) and math.isfinite(self.target_max - self.target_min)):
            raise ValueError(
                "normalisation ranges overflow: max - min and targetMax - targetMin must be finite"
            )
        return self


MAX_STABILIZATION_WINDOW_SECONDS = 86_400
"""A day: a longer hold would outlive any realistic validity and is more likely a unit mistake."""


class ScoreStabilization(_Wire):
    """``stabilization``: when a score change is published (see ``agent.items.stabilization``).

    Read like the HorizontalPodAutoscaler's ``behavior``: a higher score is published once it held
    for ``riseWindowSeconds`` (a cluster must stay better before it attracts work), a lower one after
    ``fallWindowSeconds`` (0 by default: a cluster that got worse loses work at once), and a change
    smaller than ``tolerance`` points is not published at all.  All zero is no stabilization.
    """

    tolerance: int = Field(default=0, ge=0, le=100)
    rise_window_seconds: int = Field(default=0, ge=0, le=MAX_STABILIZATION_WINDOW_SECONDS)
    fall_window_seconds: int = Field(default=0, ge=0, le=MAX_STABILIZATION_WINDOW_SECONDS)


class ScorerSummary(_Wire):
    """One scorer as the agent of one cluster must run it (an element of ``summaries``).

    The first 16 fields are upstream's and keep its zero-value defaults.  The remaining fields are
    optional extensions, omitted from the JSON when unset.  See ``docs/agent.md`` for semantics.
    """

    name: str = Field(default="", max_length=MAX_NAME_LENGTH)
    score_name: str = Field(default="", max_length=MAX_NAME_LENGTH)
    source_type: str = Field(default="", max_length=64)
    source_endpoint: Endpoint = ""
    source_endpoint_auth_name: LegacySecretName = ""
    source_endpoint_auth_key: LegacySecretKey = ""
    source_query: str = ""
    source_range: int = Field(default=0, ge=0, le=MAX_SOURCE_RANGE_SECONDS)
    source_step: int = Field(default=0, ge=0, le=MAX_INTERVAL_SECONDS)
    scoring_endpoint: Endpoint = ""
    scoring_interval: int = Field(default=0, ge=0, le=MAX_INTERVAL_SECONDS)
    scoring_endpoint_auth_name: LegacySecretName = ""
    scoring_endpoint_auth_key: LegacySecretKey = ""
    location: str = ""
    score_destination: str = Field(default="", max_length=64)
    score_dimension_format: str = Field(default="", max_length=1024)
    # Extensions (omitted when None).
    source_queries: list[str] | None = None
    source_auth: EndpointAuth | None = None
    scoring_auth: EndpointAuth | None = None
    score_normalization: ScoreNormalization | None = None
    valid_for_seconds: int | None = Field(default=None, gt=0, le=MAX_VALID_FOR_SECONDS)
    timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SECONDS, allow_inf_nan=False)
    max_score_bytes: int | None = Field(default=None, ge=MIN_SCORE_BYTES_SETTING, le=MAX_SCORE_BYTES_SETTING)
    sources: list[SourceSpec] | None = Field(default=None, min_length=1, max_length=MAX_SOURCES)
    on_source_error: str | None = None
    scoring_params: dict[str, Any] | None = None
    missing_data_score: int | None = Field(default=None, ge=-100, le=100)
    masked: bool | None = None
    score_dimension_formats: list[str] | None = Field(
        default=None, min_length=1, max_length=MAX_DIMENSION_FORMATS
    )
    stabilization: ScoreStabilization | None = None
    score_dimension_labels: dict[str, str] | None = None

    @field_validator("score_dimension_labels")
    @classmethod
    def _known_placeholders(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            check_dimension_labels(value)
        return value

    @field_validator("sources")
    @classmethod
    def _unique_source_names(cls, value: list[SourceSpec] | None) -> list[SourceSpec] | None:
        if value is not None:
            names = [s.name for s in value]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return value

    @field_validator("on_source_error")
    @classmethod
    def _known_policy(cls, value: str | None) -> str | None:
        if value is not None and value not in ON_SOURCE_ERROR:
            raise ValueError(f"expected one of {', '.join(ON_SOURCE_ERROR)}")
        return value

    @field_validator("scoring_params")
    @classmethod
    def _bounded_params(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            reserved = sorted(RESERVED_SCORING_PARAMS & value.keys())
            if reserved:
                raise ValueError(f"{', '.join(reserved)} configure the agent and are not scorer parameters")
            if params_size(value) > MAX_SCORING_PARAMS_BYTES:
                raise ValueError(
                    f"scorer parameters must be at most {MAX_SCORING_PARAMS_BYTES} bytes as JSON"
                )
        return value

    @field_validator("score_dimension_formats")
    @classmethod
    def _bounded_formats(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not f or len(f) > 1024 for f in value):
            raise ValueError("each format must be 1 to 1024 characters")
        return value

    @model_validator(mode="after")
    def _masked_needs_default(self) -> ScorerSummary:
        # A masked pair is sent only so that the agent writes the stated default; without one
        # there is nothing to write, and scoring it anyway would defeat the mask.
        if self.masked and self.missing_data_score is None:
            raise ValueError("masked: a masked scorer needs missingDataScore (nothing else is written)")
        return self

    @property
    def dimension_formats(self) -> tuple[str, ...]:
        """The item-name formats in order: ``scoreDimensionFormats`` when set, else the upstream one."""
        if self.score_dimension_formats:
            return tuple(self.score_dimension_formats)
        return (self.score_dimension_format or DEFAULT_DIMENSION_FORMAT,)

    @property
    def dimension_labels(self) -> tuple[tuple[str, str], ...]:
        """``scoreDimensionLabels`` as sorted (placeholder, label) pairs: the label each one reads."""
        return tuple(sorted((self.score_dimension_labels or {}).items()))

    def to_wire(self) -> dict[str, Any]:
        """The JSON object: all 16 upstream keys in upstream order, then the extensions that are set."""
        return self.model_dump(mode="json")

    @property
    def label(self) -> str:
        """How logs name this scorer: ``scorer=<name> score=<scoreName>``, escaped and shortened."""
        return f"scorer={display_name(self.name) or '-'} score={display_name(self.score_name) or '-'}"


def dump_summaries(summaries: Sequence[ScorerSummary]) -> str:
    """Serialise a summary list to the ConfigMap value (compact JSON, order as given)."""
    return json.dumps([s.to_wire() for s in summaries], separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class SummaryError:
    """One entry of the summary list that could not be decoded.

    Attributes:
        index: position in the list, or ``None`` when the whole payload is unusable.
        name: the entry's ``scoreName`` (or ``name``) when it could be read, else ``""``.
        message: what is wrong, naming the fields.
    """

    index: int | None
    name: str
    message: str

    def __str__(self) -> str:
        if self.index is None:
            return f"summaries: {self.message}"
        who = f" ({self.name})" if self.name else ""
        return f"summaries[{self.index}]{who}: {self.message}"


def parse_summaries(payload: str | bytes) -> tuple[list[ScorerSummary], list[SummaryError]]:
    """Decode the ConfigMap's ``summaries`` value, keeping every entry that is valid.

    A malformed entry becomes a ``SummaryError`` naming it and the others still decode, so that one
    bad scorer never stops the rest.  A payload that is not a JSON list is one error with
    ``index=None``; JSON ``null`` is an empty list, as it is for Go.
    """
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        return [], [SummaryError(None, "", f"not valid JSON: {exc}")]
    if data is None:
        return [], []
    if not isinstance(data, list):
        return [], [SummaryError(None, "", f"expected a JSON list, got {type(data).__name__}")]
    summaries: list[ScorerSummary] = []
    errors: list[SummaryError] = []
    for index, entry in enumerate(data):
        name = ""
        if isinstance(entry, dict):
            for key in ("scoreName", "name"):
                if isinstance(entry.get(key), str) and entry[key]:
                    name = display_name(entry[key])  # it may be the 1 MB or control-character problem
                    break
        else:
            errors.append(SummaryError(index, "", f"expected an object, got {type(entry).__name__}"))
            continue
        try:
            summaries.append(ScorerSummary.model_validate(entry))
        except ValidationError as exc:
            errors.append(SummaryError(index, name, describe_validation(exc, whole="entry")))
    return summaries, errors


def _scalar_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if value is None:
        return ""
    raise ValueError(f"label values must be scalars, got {type(value).__name__}")


class ScoreResult(BaseModel):
    """One scored series: its labels and its score (any finite number; clamping comes later)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    metric: dict[str, str] = Field(default_factory=dict)
    score: float = Field(default=0.0, allow_inf_nan=False, strict=True)

    @field_validator("metric", mode="before")
    @classmethod
    def _coerce_labels(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError("metric must be an object of label names to values")
        return {str(k): _scalar_text(v) for k, v in value.items()}


class ScoringResponse(BaseModel):
    """The body the scoring API returns; a missing or null ``results`` means no results."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    results: list[ScoreResult] = Field(default_factory=list)

    @field_validator("results", mode="before")
    @classmethod
    def _null_results(cls, value: Any) -> Any:
        return [] if value is None else value


class SourceParams(_Wire):
    """``source.params`` of the ``/config`` document."""

    query: str = ""
    range: int = 0
    step: int = 0


class SourceConfig(_Wire):
    """``source`` of the ``/config`` document; ``type`` is ``Prometheus`` or ``None``."""

    type: str = ""
    host: str = ""
    path: str = ""
    params: SourceParams = Field(default_factory=SourceParams)


def _dimension_format(value: str) -> str:
    # The DynamicScorer's spec.scoreDimensionFormat rule (CRD maxLength); empty means "not set".
    if len(value) > MAX_DIMENSION_FORMAT_LENGTH:
        raise ValueError(f"a format must be at most {MAX_DIMENSION_FORMAT_LENGTH} characters")
    return value


def _dimension_formats(value: list[str]) -> list[str]:
    # The spec.scoreDimensionFormats rule: 1-16 entries, each 1-1024 characters.
    if any(not f or len(f) > MAX_DIMENSION_FORMAT_LENGTH for f in value):
        raise ValueError(f"each format must be 1 to {MAX_DIMENSION_FORMAT_LENGTH} characters")
    return value


class ScoringParams(_Wire):
    """``scoring.params`` of the ``/config`` document.

    ``name`` and ``interval`` (upstream's) and ``scoreDimensionFormat`` / ``scoreDimensionFormats``
    (ours, optional) configure the hub and the agent, like the DynamicScorer fields of those names.
    The formats live here rather than beside ``scoring`` because this is the one part of
    ``status.lastSyncedConfig`` whose CRD schema keeps keys it does not list, so an existing CRD
    stores them.  Every other key is the scorer's own parameter (the blog's ``model`` and
    ``horizon``); they are kept, in ``extra_params``, so that the hub can send them back to the
    scorer in every scoring request.
    """

    model_config = ConfigDict(extra="allow")

    name: str = ""
    interval: int = 0
    score_dimension_format: Annotated[str, AfterValidator(_dimension_format)] | None = None
    score_dimension_formats: (
        Annotated[
            list[str],
            Field(min_length=1, max_length=MAX_DIMENSION_FORMATS),
            AfterValidator(_dimension_formats),
        ]
        | None
    ) = None

    @property
    def extra_params(self) -> dict[str, Any]:
        """The scorer's own keys (every key but ``name``, ``interval`` and the formats), as published."""
        return dict(self.model_extra or {})

    @property
    def dimension_formats(self) -> tuple[str, ...]:
        """The item-name formats published: the list when set, else the one format; ``()`` when neither.

        The spec's rule: ``scoreDimensionFormats`` replaces ``scoreDimensionFormat``, and an empty
        format is no format.
        """
        if self.score_dimension_formats:
            return tuple(self.score_dimension_formats)
        return (self.score_dimension_format,) if self.score_dimension_format else ()


class ScoringConfig(_Wire):
    """``scoring`` of the ``/config`` document."""

    host: str = ""
    path: str = ""
    params: ScoringParams = Field(default_factory=ScoringParams)


class ScorerConfig(_Wire):
    """The document a scoring API serves at ``GET /config`` (and the hub stores as lastSyncedConfig)."""

    name: str = ""
    description: str = ""
    source: SourceConfig = Field(default_factory=SourceConfig)
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)


__all__ = [
    "DEFAULT_DIMENSION_FORMAT",
    "MATCH_OPS",
    "MAX_DIMENSION_FORMATS",
    "MAX_DIMENSION_FORMAT_LENGTH",
    "MAX_HORIZON_SECONDS",
    "MAX_INTERVAL_SECONDS",
    "MAX_NAME_LENGTH",
    "MAX_OTEL_SELECTORS",
    "MAX_SCORING_PARAMS_BYTES",
    "MAX_SOURCES",
    "MAX_SOURCE_QUERIES",
    "MAX_SOURCE_RANGE_SECONDS",
    "MAX_STABILIZATION_WINDOW_SECONDS",
    "MAX_TIMEOUT_SECONDS",
    "MAX_URL_LENGTH",
    "MAX_VALID_FOR_SECONDS",
    "ON_SOURCE_ERROR",
    "RESERVED_SCORING_PARAMS",
    "SOURCE_TYPES",
    "UPSTREAM_SUMMARY_KEYS",
    "AttributeMatcher",
    "BasicAuthSecretRef",
    "ClientCertSecretRef",
    "EndpointAuth",
    "HeaderSpec",
    "OtelSelector",
    "OtelSpec",
    "ScoreNormalization",
    "ScoreResult",
    "ScoreStabilization",
    "ScorerConfig",
    "ScorerSummary",
    "ScoringConfig",
    "ScoringParams",
    "ScoringResponse",
    "SecretKeyRef",
    "SourceConfig",
    "SourceParams",
    "SourceSpec",
    "SummaryError",
    "display_name",
    "dump_summaries",
    "escape_control",
    "params_size",
    "parse_summaries",
]
