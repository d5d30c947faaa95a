"""Wire contracts shared by the hub manager and the agent: the summary list, the scoring API's documents.

This is the only module the hub (``addon/``) imports from ``agent/``; ``.importlinter`` enforces it.
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
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import (
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

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


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

    name: str
    key: str


class BasicAuthSecretRef(_Wire):
    """A Secret holding a username and a password for HTTP basic authentication."""

    name: str
    username_key: str = "username"
    password_key: str = "password"


class ClientCertSecretRef(_Wire):
    """A Secret holding a PEM client certificate (chain) and its private key, for mutual TLS."""

    name: str
    cert_key: str = "tls.crt"
    key_key: str = "tls.key"


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
    """

    bearer_token_secret_ref: SecretKeyRef | None = None
    basic_auth_secret_ref: BasicAuthSecretRef | None = None
    headers: list[HeaderSpec] | None = None
    ca_secret_ref: SecretKeyRef | None = None
    client_cert_secret_ref: ClientCertSecretRef | None = None
    insecure_skip_verify: bool = False

    @model_validator(mode="after")
    def _one_authorization(self) -> EndpointAuth:
        if self.bearer_token_secret_ref is not None and self.basic_auth_secret_ref is not None:
            raise ValueError("bearerTokenSecretRef and basicAuthSecretRef exclude each other")
        return self


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
        return self


class ScorerSummary(_Wire):
    """One scorer as the agent of one cluster must run it (an element of ``summaries``).

    The first 16 fields are upstream's and keep its zero-value defaults.  The remaining fields are
    optional extensions, omitted from the JSON when unset.  See ``docs/agent.md`` for semantics.
    """

    name: str = ""
    score_name: str = ""
    source_type: str = ""
    source_endpoint: str = ""
    source_endpoint_auth_name: str = ""
    source_endpoint_auth_key: str = ""
    source_query: str = ""
    source_range: int = 0
    source_step: int = 0
    scoring_endpoint: str = ""
    scoring_interval: int = 0
    scoring_endpoint_auth_name: str = ""
    scoring_endpoint_auth_key: str = ""
    location: str = ""
    score_destination: str = ""
    score_dimension_format: str = ""
    # Extensions (omitted when None).
    source_queries: list[str] | None = None
    source_auth: EndpointAuth | None = None
    scoring_auth: EndpointAuth | None = None
    score_normalization: ScoreNormalization | None = None
    valid_for_seconds: int | None = Field(default=None, gt=0)
    timeout_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object: all 16 upstream keys in upstream order, then the extensions that are set."""
        return self.model_dump(mode="json")

    @property
    def label(self) -> str:
        """How logs name this scorer: ``scorer=<name> score=<scoreName>``."""
        return f"scorer={self.name or '-'} score={self.score_name or '-'}"


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


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"]) or "entry"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


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
                    name = entry[key]
                    break
        else:
            errors.append(SummaryError(index, "", f"expected an object, got {type(entry).__name__}"))
            continue
        try:
            summaries.append(ScorerSummary.model_validate(entry))
        except ValidationError as exc:
            errors.append(SummaryError(index, name, _describe(exc)))
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


class ScoringParams(_Wire):
    """``scoring.params`` of the ``/config`` document."""

    name: str = ""
    interval: int = 0


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
    "UPSTREAM_SUMMARY_KEYS",
    "BasicAuthSecretRef",
    "ClientCertSecretRef",
    "EndpointAuth",
    "HeaderSpec",
    "ScoreNormalization",
    "ScoreResult",
    "ScorerConfig",
    "ScorerSummary",
    "ScoringConfig",
    "ScoringParams",
    "ScoringResponse",
    "SecretKeyRef",
    "SourceConfig",
    "SourceParams",
    "SummaryError",
    "dump_summaries",
    "parse_summaries",
]
