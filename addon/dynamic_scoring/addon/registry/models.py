"""Typed views of DynamicScorer and DynamicScoringConfig objects, after spelling normalisation.

The apiserver has already applied the CRD's schema (types, enums, formats, defaults), so these models
mostly give the hub typed access.  They still validate, because an object stored under an older CRD
may not satisfy the current one; ``parse_scorer`` turns that into a problem naming the field instead
of an exception in a reconcile loop.

Field names are the CRD's (camelCase JSON aliases); the pieces that map one to one onto the agent's
summary reuse ``dynamic_scoring.contract.wire`` models, so the two cannot disagree on their shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from dynamic_scoring.addon.registry.spellings import normalise_config_spec, normalise_scorer_spec
from dynamic_scoring.contract.score_size import MAX_SCORE_BYTES_SETTING, MIN_SCORE_BYTES_SETTING
from dynamic_scoring.contract.validation import describe_validation
from dynamic_scoring.contract.wire import (
    DEFAULT_DIMENSION_FORMAT,
    MAX_HORIZON_SECONDS,
    EndpointAuth,
    OtelSpec,
    ScoreNormalization,
    ScorerConfig,
    ScoreStabilization,
    SecretKeyRef,
    check_dimension_labels,
)
from dynamic_scoring.outbound.addresses import metadata_header

GROUP = "dynamic-scoring.open-cluster-management.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

SyncMode = Literal["Full", "None"]
SourceType = Literal["Prometheus", "None"]
SourceEntryType = Literal["Prometheus", "OpenTelemetry"]
OnSourceError = Literal["Fail", "ScoreWithAvailable"]
Location = Literal["Internal", "External"]
Destination = Literal["AddOnPlacementScore", "None"]
HealthStatus = Literal["Active", "Inactive", "Unknown"]
MaskPolicy = Literal["Skip", "Score"]


class _Spec(BaseModel):
    """CR sub-objects: camelCase names, unknown keys ignored (the apiserver prunes them anyway)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True, strict=True
    )


class SpecAuth(EndpointAuth):
    """``spec.source.auth`` / ``spec.scoring.auth``: upstream's token and the agent's auth options.

    Upstream's ``tokenSecretRef`` and the ``EndpointAuth`` fields sit side by side in one object.

    ``tokenSecretRef`` becomes the upstream ``*EndpointAuthName/Key`` pair of the summary; the other
    fields become the ``sourceAuth``/``scoringAuth`` extension, unchanged.
    """

    token_secret_ref: SecretKeyRef | None = None

    @model_validator(mode="after")
    def _no_metadata_headers(self) -> SpecAuth:
        # The agent refuses these on every call; refusing them here too puts the reason on the
        # DynamicScorer's own status instead of on every cluster's AddOnPlacementScore.
        found = metadata_header(h.name for h in self.headers or ())
        if found is not None:
            raise ValueError(
                f"header {found} is a cloud metadata-service header, which the agent never sends"
            )
        return self

    def extension(self) -> EndpointAuth | None:
        """The ``EndpointAuth`` extension part, or None when only the upstream token is set."""
        data = self.model_dump(mode="json", exclude={"token_secret_ref"})
        data = {k: v for k, v in data.items() if v not in (None, False)}
        if not data:
            return None
        return EndpointAuth.model_validate(data)


class SourceParamsSpec(_Spec):
    """``spec.source.params`` (also the blog's ``spec.source.query``)."""

    query: str | None = None
    queries: list[str] | None = None
    range: int | None = Field(default=None, ge=1)
    step: int | None = Field(default=None, ge=1)


class SourceSpec(_Spec):
    """``spec.source``: where the agent fetches series (``type`` defaults as in the CRD)."""

    type: SourceType = "Prometheus"
    host: str | None = None
    path: str | None = None
    params: SourceParamsSpec | None = None
    auth: SpecAuth | None = None


class SourceEntrySpec(_Spec):
    """One entry of ``spec.sources``: a named source with its own endpoint, auth and queries."""

    name: str = Field(min_length=1, max_length=63)
    type: SourceEntryType = "Prometheus"
    host: str | None = None
    path: str | None = None
    queries: list[str] = Field(default_factory=list)
    range: int = Field(default=3600, ge=1)
    step: int = Field(default=60, ge=1)
    auth: SpecAuth | None = None
    otel: OtelSpec | None = None
    """Selectors of an OpenTelemetry source; the wire model, so the CRD and the summary agree."""


class ScoringParamsSpec(_Spec):
    """``spec.scoring.params``: the score name and interval, and the scorer's own parameters.

    Every key other than ``name`` and ``interval`` (the blog's ``model`` and ``horizon``, or any
    other the scorer documents) belongs to the scorer and is sent in each scoring request as
    ``params``; the CRD keeps unknown keys here so that they reach the hub.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True, strict=True
    )

    name: str | None = None
    interval: int | None = Field(default=None, ge=1)
    model: str | None = None
    horizon: int | None = Field(default=None, ge=0, le=MAX_HORIZON_SECONDS)

    def scorer_params(self) -> dict[str, Any]:
        """The keys other than ``name`` and ``interval`` that are set, as written in the spec."""
        return self.model_dump(mode="json", by_alias=True, exclude={"name", "interval"}, exclude_none=True)


class MissingDataSpec(_Spec):
    """``spec.missingData``: the score written when the sources return no series (or a masked pair)."""

    score: int = Field(ge=-100, le=100)


class ScoringSpec(_Spec):
    """``spec.scoring``: the scoring API the agent POSTs to."""

    host: str | None = None
    path: str | None = None
    params: ScoringParamsSpec | None = None
    auth: SpecAuth | None = None

    @model_validator(mode="after")
    def _no_agent_token(self) -> ScoringSpec:
        # The CRD refuses it too; this puts the reason on the status of a CR the CRD let through
        # (an older CRD, or a hub without CEL validation).
        if self.auth is not None and self.auth.agent_service_account_token:
            raise ValueError(
                "auth.agentServiceAccountToken: the agent's own ServiceAccount token is sent only to "
                "metrics sources, never to a scoring API"
            )
        return self


class SelectorRequirement(_Spec):
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(_Spec):
    """A standard Kubernetes label selector; an empty one matches everything."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[SelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every requirement (Kubernetes semantics)."""
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In" and not (present and labels[req.key] in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True


class ProbeSpec(_Spec):
    """``spec.probe`` (hub-only): credentials, CA and timeout of the hub's /healthz and /config requests."""

    token_secret_ref: SecretKeyRef | None = None
    ca_secret_ref: SecretKeyRef | None = None
    timeout_seconds: float | None = Field(default=None, gt=0, le=60)


class DynamicScorerSpec(_Spec):
    """``spec`` of a DynamicScorer, with the CRD's defaults applied when a key is absent."""

    description: str = ""
    config_url: str | None = Field(default=None, alias="configURL")
    config_sync_mode: SyncMode = "None"
    send_credentials_to_synced_hosts: bool = False
    """Full mode: keep the spec's auth when ``/config`` moves an endpoint to another host."""
    location: Location = "Internal"
    score_destination: Destination = "AddOnPlacementScore"
    score_dimension_format: str = DEFAULT_DIMENSION_FORMAT
    name: str | None = None
    source: SourceSpec | None = None
    sources: list[SourceEntrySpec] | None = None
    on_source_error: OnSourceError | None = None
    scoring: ScoringSpec | None = None
    score_normalization: ScoreNormalization | None = None
    valid_for_seconds: int | None = Field(default=None, ge=1)
    timeout_seconds: float | None = Field(default=None, gt=0)
    max_score_bytes: int | None = Field(default=None, ge=MIN_SCORE_BYTES_SETTING, le=MAX_SCORE_BYTES_SETTING)
    missing_data: MissingDataSpec | None = None
    score_dimension_formats: list[str] | None = Field(default=None, min_length=1)
    score_dimension_labels: dict[str, str] | None = None
    cluster_selector: LabelSelector | None = None
    probe: ProbeSpec | None = None
    stabilization: ScoreStabilization | None = None

    @field_validator("score_dimension_labels")
    @classmethod
    def _label_placeholders(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        # The CRD checks the same; this names the field for a CR an older CRD let through.
        if value is not None:
            check_dimension_labels(value)
        return value


class DynamicScorerStatus(_Spec):
    """The parts of ``status`` the hub reads back (health and the last synced /config)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True, strict=False
    )

    observed_generation: int | None = None
    health_status: HealthStatus | None = None
    consecutive_failures: int = 0
    last_synced_config: ScorerConfig | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)


@dataclass(frozen=True)
class DynamicScorer:
    """A DynamicScorer object as the hub uses it."""

    name: str
    namespace: str
    generation: int
    creation_timestamp: str
    spec: DynamicScorerSpec
    status: DynamicScorerStatus
    notes: tuple[str, ...] = ()
    """How accepted alternate spellings were read (for the status message)."""

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class SpecProblem:
    """A stored object that does not fit the model (e.g. written under an older CRD)."""

    name: str
    namespace: str
    message: str


def parse_scorer(obj: Mapping[str, Any]) -> DynamicScorer | SpecProblem:
    """Read a DynamicScorer JSON object; a spec the model rejects becomes a ``SpecProblem``."""
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    spec_raw, notes = normalise_scorer_spec(obj.get("spec") or {})
    try:
        spec = DynamicScorerSpec.model_validate(spec_raw)
    except ValidationError as exc:
        return SpecProblem(name, namespace, describe_validation(exc, prefix="spec"))
    try:
        status = DynamicScorerStatus.model_validate(obj.get("status") or {})
    except ValidationError:
        # A status we cannot read is one we will overwrite: start from nothing.
        status = DynamicScorerStatus()
    return DynamicScorer(
        name=name,
        namespace=namespace,
        generation=int(meta.get("generation") or 0),
        creation_timestamp=str(meta.get("creationTimestamp") or ""),
        spec=spec,
        status=status,
        notes=tuple(notes),
    )


class Mask(_Spec):
    """One ``spec.masks`` entry: do not send ``scoreName`` to ``clusterName``."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True, strict=True
    )

    cluster_name: str = Field(min_length=1)
    score_name: str = Field(min_length=1)


class DynamicScoringConfigSpec(_Spec):
    """``spec`` of a DynamicScoringConfig after ``mask:`` was merged into ``masks:``.

    ``maskPolicy`` says what a mask does: ``Skip`` (the default, upstream's) leaves the pair out;
    ``Score`` still sends it, marked ``masked``, so that the agent writes the scorer's
    ``missingData.score`` instead of leaving a gap that Placement would read as 0.
    """

    masks: list[Mask] = Field(default_factory=list)
    mask_policy: MaskPolicy = "Skip"

    @field_validator("mask_policy", mode="before")
    @classmethod
    def _policy_case(cls, value: Any) -> Any:
        # The CRD also accepts the lowercase spelling (``maskPolicy: score``).
        return value.capitalize() if isinstance(value, str) else value


@dataclass(frozen=True)
class DynamicScoringConfig:
    """A DynamicScoringConfig object as the hub uses it."""

    name: str
    namespace: str
    generation: int
    spec: DynamicScoringConfigSpec
    notes: tuple[str, ...] = ()


def parse_config(obj: Mapping[str, Any]) -> DynamicScoringConfig | SpecProblem:
    """Read a DynamicScoringConfig JSON object; a spec the model rejects becomes a ``SpecProblem``."""
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    spec_raw, notes = normalise_config_spec(obj.get("spec") or {})
    try:
        spec = DynamicScoringConfigSpec.model_validate(spec_raw)
    except ValidationError as exc:
        return SpecProblem(name, namespace, describe_validation(exc, prefix="spec"))
    return DynamicScoringConfig(name, namespace, int(meta.get("generation") or 0), spec, tuple(notes))


__all__ = [
    "API_VERSION",
    "DEFAULT_DIMENSION_FORMAT",
    "GROUP",
    "VERSION",
    "Destination",
    "DynamicScorer",
    "DynamicScorerSpec",
    "DynamicScorerStatus",
    "DynamicScoringConfig",
    "DynamicScoringConfigSpec",
    "HealthStatus",
    "LabelSelector",
    "Location",
    "Mask",
    "MaskPolicy",
    "MissingDataSpec",
    "OnSourceError",
    "ProbeSpec",
    "ScoringParamsSpec",
    "ScoringSpec",
    "SelectorRequirement",
    "SourceEntrySpec",
    "SourceEntryType",
    "SourceParamsSpec",
    "SourceSpec",
    "SourceType",
    "SpecAuth",
    "SpecProblem",
    "SyncMode",
    "parse_config",
    "parse_scorer",
]
