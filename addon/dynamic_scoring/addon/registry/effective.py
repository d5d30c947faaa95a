"""The effective summary of one DynamicScorer: what the agents are told to run.

Precedence, field by field (docs/scorer-registry.md has the full table):

* ``configSyncMode: Full`` — the last valid ``/config`` document (``status.lastSyncedConfig``) wins for
  every field it can carry (score name, source type/host/path/query/range/step, scoring host/path/
  interval) when its value is non-empty (a string other than ``""``, an integer above 0).  The spec
  fills the gaps, then the defaults below.  This is upstream's order, kept so that existing scorers
  that publish their own query keep working; unlike upstream, the scoring host comes from
  ``scoring.host``, never from ``source.host``.
* ``configSyncMode: None`` — only the spec and the defaults.  A ``lastSyncedConfig`` left from an
  earlier Full period is ignored (upstream let it override the spec), and the controller clears it.
* The item-name formats, as one field: ``scoring.params.scoreDimensionFormats`` (else
  ``...scoreDimensionFormat``) of the synced document when non-empty (Full mode), else the spec's
  ``scoreDimensionFormats`` (else ``scoreDimensionFormat``), else ``${scoreName}``.
* Fields ``/config`` cannot carry (auth, location, destination, the extensions) come from the spec
  only.
* A source that carries the agent's own ServiceAccount token (``source.auth.agentServiceAccountToken``)
  takes nothing from ``/config``: its type, host, path, query, range and step are the spec's.  The
  token reads with the agent's identity and no Secret narrows what it may read, so the scorer's
  operator must not choose the query it runs (``spec.sources`` entries never take ``/config`` values).
* Credentials stay with the host they were written for.  The spec's auth for an endpoint was written
  for the spec's host (``source.host``; ``scoring.host``, else the origin of ``configURL``).  When the
  synced document moves that endpoint to another scheme, host or port, the scorer's operator (who
  answers ``/config``) would otherwise decide where every agent sends the spec's Secrets; so that
  endpoint's auth is withheld from the summary (``Resolution.withheld`` says which and why) unless
  ``spec.sendCredentialsToSyncedHosts`` is true.  Each agent still sends a Secret only to hosts listed
  on the Secret itself (``dynamic_scoring.outbound.secret_binding``); this is the hub's half of that rule.
* Scorer parameters (``scoring.params`` keys other than ``name`` and ``interval``): the spec's, each
  replaced by the synced document's value when ``/config`` publishes that key (Full mode only).
  They travel as ``scoringParams`` and reach the scorer as ``params``.

Defaults: score name = ``scoring.params.name``, else the blog's ``spec.name``, else ``metadata.name``;
interval 30 s; range 3600 s; step 60 s; source type ``Prometheus`` when a query is known, else
``None``; scoring path ``/scoring`` and source path ``/api/v1/query_range`` when the host has no path of
its own; scoring host = the origin of ``configURL``.  A Prometheus source needs an explicit host
(upstream silently used the scorer's host).

Each field that ``/config`` or a default may supply is picked by one call of ``_Origins.pick``, which
also notes where the value came from (``Resolution.origins``): ``dynamic-scoring explain`` shows it, so a
query that is not the spec's can be traced to ``configSyncMode: Full`` and the scorer's ``/config``
without restating this precedence anywhere else.

Whatever still cannot be resolved is a ``FieldProblem`` naming the CRD field, and the scorer is not
distributed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from dynamic_scoring.addon.errors import FieldProblem
from dynamic_scoring.addon.registry.models import (
    DEFAULT_DIMENSION_FORMAT,
    DynamicScorer,
    DynamicScorerSpec,
    ScoringParamsSpec,
    ScoringSpec,
    SourceParamsSpec,
    SpecAuth,
)
from dynamic_scoring.addon.registry.sources import resolve_sources, with_sources
from dynamic_scoring.contract.validation import describe_validation
from dynamic_scoring.contract.wire import (
    MAX_SCORING_PARAMS_BYTES,
    ScorerSummary,
    ScoreStabilization,
    ScoringConfig,
    ScoringParams,
    SourceConfig,
    params_size,
)
from dynamic_scoring.outbound.secret_binding import destination
from dynamic_scoring.outbound.urls import has_path, join_url, origin, url_problem

DEFAULT_INTERVAL = 30
DEFAULT_RANGE = 3600
DEFAULT_STEP = 60
DEFAULT_SCORING_PATH = "/scoring"
DEFAULT_SOURCE_PATH = "/api/v1/query_range"

KNOWN_PLACEHOLDERS = frozenset(
    ["cluster", "node", "device", "namespace", "app", "pod", "container", "meta", "scoreName"]
)
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")

# Origins, as ``dynamic-scoring explain`` prints them (docs/cli.md).
CONFIG = "/config"
SPEC = "spec"
DEFAULT = "default"
SOURCES = "spec.sources"
_SOURCE_FIELDS = ("sourceType", "sourceEndpoint", "sourceQuery", "sourceRange", "sourceStep")
"""The summary fields ``with_sources`` replaces, so ``spec.sources`` is their origin."""

_T = TypeVar("_T")


@dataclass(frozen=True)
class Resolution:
    """The outcome of resolving one scorer.

    Attributes:
        summary: the summary to distribute, or None when ``problems`` is non-empty or the scorer is
            waiting for its first ``/config`` (``pending``).
        problems: fields that make the scorer unusable, each naming the CRD field.
        notes: information for the user that does not block (spellings read, ignored blog fields).
        pending: why a valid scorer has no summary yet (Full mode without a synced ``/config``).
        withheld: the spec's credentials left out of the summary because ``/config`` moved their
            endpoint to another host, one sentence per endpoint (does not block distribution).
        origins: where each summary field (wire name) that ``/config`` or a default may supply came
            from: ``/config``, ``spec``, ``default``, ``spec.sources``, or the fallback named
            (``spec.name``, ``metadata.name``, ``spec.configURL``); every other field is the spec's.
            Empty when there is no summary.  Left out of equality, so that a value that moves from
            the spec to an identical ``/config`` value is not a different outcome for the controller.
    """

    summary: ScorerSummary | None
    problems: tuple[FieldProblem, ...] = ()
    notes: tuple[str, ...] = ()
    pending: str | None = None
    withheld: tuple[str, ...] = ()
    origins: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def message(self) -> str:
        """All problems in one line, for a condition message."""
        return "; ".join(str(p) for p in self.problems)


def _says(value: object) -> bool:
    """Whether a candidate says something: ``None``, ``""`` and a number below 1 leave the field open.

    This is the rule for every field the synced ``/config`` can carry (its document has ``""`` and
    ``0`` for "not published"); the spec's own numbers are at least 1 anyway.  A list is a value even
    when empty: a caller that means "no list" passes None.
    """
    return value is not None and value != "" and not (isinstance(value, int) and value < 1)


def _first(synced: _T | None, spec: _T | None, default: _T, default_from: str = DEFAULT) -> tuple[_T, str]:
    """The synced value if it says something, else the spec's, else ``default``; and its origin."""
    if synced is not None and _says(synced):
        return synced, CONFIG
    if spec is not None and _says(spec):
        return spec, SPEC
    return default, default_from


class _Origins:
    """The origin of each summary field, noted by ``resolve`` as it picks the value.

    Picking and noting are one call, so the origin ``explain`` shows is the branch that supplied the
    value, not a second description of the precedence that could drift from it.
    """

    def __init__(self) -> None:
        self.by_field: dict[str, str] = {"name": "metadata.name"}

    def pick(
        self, name: str, synced: _T | None, spec: _T | None, default: _T, default_from: str = DEFAULT
    ) -> _T:
        """Resolve summary field ``name`` by the precedence (``_first``) and note where it came from."""
        value, self.by_field[name] = _first(synced, spec, default, default_from)
        return value

    def from_sources(self) -> None:
        """The sources extension replaced every source field of the summary."""
        self.by_field.update(dict.fromkeys(_SOURCE_FIELDS, SOURCES))


def _auth_pair(auth: SpecAuth | None) -> tuple[str, str]:
    if auth is None or auth.token_secret_ref is None:
        return "", ""
    return auth.token_secret_ref.name, auth.token_secret_ref.key


def _same_destination(a: str, b: str) -> bool:
    """True when both URLs reach the same scheme, host and port (paths do not matter)."""
    try:
        return destination(a) == destination(b)
    except ValueError:
        return False


def _moved(what: str, field: str, spec_host: str, synced_host: str, auth: str) -> str:
    """The sentence for a withheld endpoint: where it moved, what is kept back, how to opt in."""

    def shown(url: str) -> str:
        try:
            return str(destination(url))  # scheme://host:port: no user info, path or query
        except ValueError:
            return "an unusable URL"

    before = shown(spec_host) if spec_host else "no host in the spec"
    return (
        f"status.lastSyncedConfig.{field} moves the {what} endpoint from {before} to {shown(synced_host)}: "
        f"{auth} is not sent there (set spec.sendCredentialsToSyncedHosts: true to let the scorer's "
        f"/config choose where these credentials go)"
    )


def _check_url(value: str, where: str, problems: list[FieldProblem]) -> bool:
    why = url_problem(value)
    if why is not None:
        problems.append(FieldProblem(where, why))
        return False
    return True


def dimension_format_notes(fmt: str, where: str = "spec.scoreDimensionFormat") -> list[str]:
    """Placeholders the agent does not know stay literal in every item name; say so."""
    unknown = sorted({m for m in _PLACEHOLDER.findall(fmt) if m not in KNOWN_PLACEHOLDERS})
    if not unknown:
        return []
    names = ", ".join("${" + u + "}" for u in unknown)
    return [f"{where}: {names} is not a placeholder and stays literal in every item name"]


def _spec_queries(params: SourceParamsSpec) -> tuple[str, list[str] | None] | None:
    """The spec's ``query`` and ``queries`` as one candidate for ``sourceQuery``; None when it has neither.

    ``/config`` publishes only ``query``, and a synced one replaces both, so they are picked together.
    A ``queries: []`` the spec writes still makes the spec the origin, as ``explain`` always showed it.
    """
    if not params.query and params.queries is None:
        return None
    return params.query or "", params.queries or None


def _dimension_formats(
    spec: DynamicScorerSpec, synced: ScoringParams, origins: _Origins
) -> tuple[list[str], list[str] | None, list[str]]:
    """The item-name formats, the list to send as ``scoreDimensionFormats`` (or None), and notes.

    The formats are one field for the precedence: the synced ``/config``'s (its list, else its
    string) when it publishes a non-empty one (Full mode), else the spec's (list, else string),
    else ``${scoreName}``.  They are never mixed: a spec list does not survive a ``/config`` string.
    """
    spec_formats = spec.score_dimension_formats or (
        [spec.score_dimension_format] if spec.score_dimension_format else None
    )
    formats = origins.pick(
        "scoreDimensionFormat",
        list(synced.dimension_formats) or None,
        spec_formats,
        [DEFAULT_DIMENSION_FORMAT],
    )
    if origins.by_field["scoreDimensionFormat"] == CONFIG:
        plural = bool(synced.score_dimension_formats)
        where = "status.lastSyncedConfig.scoring.params.scoreDimensionFormat"
    else:
        plural = bool(spec.score_dimension_formats)
        where = "spec.scoreDimensionFormat"
    notes: list[str] = []
    if plural:
        origins.by_field["scoreDimensionFormats"] = origins.by_field["scoreDimensionFormat"]
        for i, fmt in enumerate(formats):
            notes.extend(dimension_format_notes(fmt, f"{where}s[{i}]"))
    else:
        notes.extend(dimension_format_notes(formats[0], where))
    return formats, (formats if plural else None), notes


def _scorer_params(
    synced: Mapping[str, Any], spec: Mapping[str, Any], problems: list[FieldProblem]
) -> dict[str, Any] | None:
    """The parameters sent to the scorer: the spec's keys, each replaced by ``/config``'s when it has it.

    This is the precedence of every other field (the synced document wins where it says something),
    applied key by key, so a spec can add a parameter the scorer does not publish.  ``None`` when
    there are none, so that the summary stays upstream's.
    """
    merged = {**spec, **synced}
    if not merged:
        return None
    try:
        size = params_size(merged)
    except ValueError as exc:
        problems.append(FieldProblem("spec.scoring.params", str(exc)))
        return None
    if size > MAX_SCORING_PARAMS_BYTES:
        problems.append(
            FieldProblem(
                "spec.scoring.params",
                f"the parameters are {size} bytes as JSON; at most {MAX_SCORING_PARAMS_BYTES} are sent",
            )
        )
        return None
    return merged


def resolve(scorer: DynamicScorer) -> Resolution:
    """The effective summary of ``scorer`` (pure: reads the spec and ``status.lastSyncedConfig``)."""
    spec = scorer.spec
    full = spec.config_sync_mode == "Full"
    synced = scorer.status.last_synced_config if full else None
    notes = list(scorer.notes)
    problems: list[FieldProblem] = []

    if spec.config_url:
        _check_url(spec.config_url, "spec.configURL", problems)
    if full and synced is None:
        if problems:
            return Resolution(None, tuple(problems), tuple(notes))
        return Resolution(None, (), tuple(notes), pending="waiting for the first valid /config document")

    src = spec.source
    src_params = (src.params if src else None) or SourceParamsSpec()
    sc = spec.scoring or ScoringSpec()
    sc_params = sc.params or ScoringParamsSpec()
    # A part the synced document lacks publishes nothing: its "" and 0 leave each field to the spec.
    s_src = synced.source if synced else SourceConfig()
    s_sc = synced.scoring if synced else ScoringConfig()
    sources = resolve_sources(spec) if spec.sources else None
    if sources is not None:
        if synced is not None:
            notes.append("status.lastSyncedConfig.source: ignored because spec.sources is set")
        s_src = SourceConfig()
        problems.extend(FieldProblem(where, why) for where, why in sources.problems)
    elif spec.on_source_error is not None:
        problems.append(FieldProblem("spec.onSourceError", "applies to spec.sources only"))
    if sources is None and src is not None and src.auth is not None and src.auth.agent_service_account_token:
        # The agent's own token reads whatever the query asks with the agent's identity, and no
        # Secret narrows it: so only the DynamicScorer's author picks what it runs and where.
        if synced is not None and s_src != SourceConfig():
            notes.append(
                "status.lastSyncedConfig.source: ignored because spec.source.auth.agentServiceAccountToken "
                "is set (only the DynamicScorer chooses what runs with the agent's own token)"
            )
        s_src = SourceConfig()
    origins = _Origins()
    pick = origins.pick

    # Score name and interval.
    name_from = "spec.name" if spec.name else "metadata.name"
    score_name = pick("scoreName", s_sc.params.name, sc_params.name, spec.name or scorer.name, name_from)
    interval = pick("scoringInterval", s_sc.params.interval, sc_params.interval, DEFAULT_INTERVAL)
    scoring_params = _scorer_params(s_sc.params.extra_params, sc_params.scorer_params(), problems)

    # Source (the query first: the type's default depends on it).
    synced_query = (s_src.params.query, None) if s_src.params.query else None
    query, queries = pick("sourceQuery", synced_query, _spec_queries(src_params), ("", None))
    source_type = pick(
        "sourceType", s_src.type, src.type if src else None, "Prometheus" if (query or queries) else "None"
    )
    source_range = pick("sourceRange", s_src.params.range, src_params.range, DEFAULT_RANGE)
    source_step = pick("sourceStep", s_src.params.step, src_params.step, DEFAULT_STEP)
    # Picked whatever the type, so that every source field has an origin (None: each value is empty).
    host = pick("sourceEndpoint", s_src.host, src.host if src else None, "")
    path, _ = _first(s_src.path, src.path if src else None, "")
    source_endpoint = ""
    if source_type == "Prometheus":
        if not host:
            problems.append(
                FieldProblem("spec.source.host", "required when source.type is Prometheus (no default host)")
            )
        else:
            where = (
                "status.lastSyncedConfig.source.host"
                if origins.by_field["sourceEndpoint"] == CONFIG
                else "spec.source.host"
            )
            if _check_url(host, where, problems):
                if not path and not has_path(host):
                    path = DEFAULT_SOURCE_PATH
                source_endpoint = join_url(host, path)
        if not query and not queries:
            problems.append(
                FieldProblem("spec.source.params.query", "required when source.type is Prometheus")
            )
        if source_step > source_range:
            problems.append(
                FieldProblem(
                    "spec.source.params.step", f"step {source_step}s is larger than range {source_range}s"
                )
            )

    # Scoring endpoint.
    config_origin = (
        origin(spec.config_url) if spec.config_url and url_problem(spec.config_url) is None else ""
    )
    url_from = "spec.configURL" if spec.config_url else DEFAULT
    sc_host = pick("scoringEndpoint", s_sc.host, sc.host, config_origin, url_from)
    sc_path, _ = _first(s_sc.path, sc.path, "")
    scoring_endpoint = ""
    if not sc_host:
        problems.append(
            FieldProblem(
                "spec.scoring.host",
                "required when configURL is not set or not usable (nowhere to send the series)",
            )
        )
    else:
        where = {
            CONFIG: "status.lastSyncedConfig.scoring.host",
            SPEC: "spec.scoring.host",
        }.get(origins.by_field["scoringEndpoint"], "spec.configURL")
        if _check_url(sc_host, where, problems):
            if not sc_path and not has_path(sc_host):
                sc_path = DEFAULT_SCORING_PATH
            scoring_endpoint = join_url(sc_host, sc_path)

    # With a list, the upstream key carries its first entry, so an upstream agent writes those items.
    formats, format_list, format_notes = _dimension_formats(spec, s_sc.params, origins)
    notes.extend(format_notes)
    if problems:
        return Resolution(None, tuple(problems), tuple(notes))

    src_auth = src.auth if src else None
    sc_auth = sc.auth
    withheld: list[str] = []
    if not spec.send_credentials_to_synced_hosts:
        spec_src_host = (src.host if src else None) or ""
        if (
            source_type == "Prometheus"
            and src_auth is not None
            and origins.by_field["sourceEndpoint"] == CONFIG
            and not _same_destination(host, spec_src_host)
        ):
            withheld.append(_moved("source", "source.host", spec_src_host, host, "spec.source.auth"))
            src_auth = None
        spec_sc_host = sc.host or (origin(spec.config_url) if spec.config_url else "")
        if (
            sc_auth is not None
            and origins.by_field["scoringEndpoint"] == CONFIG
            and not _same_destination(sc_host, spec_sc_host)
        ):
            withheld.append(_moved("scoring", "scoring.host", spec_sc_host, sc_host, "spec.scoring.auth"))
            sc_auth = None
    src_name, src_key = _auth_pair(src_auth) if source_type == "Prometheus" else ("", "")
    sc_name, sc_key = _auth_pair(sc_auth)
    try:
        summary = ScorerSummary(
            name=scorer.name,
            score_name=score_name,
            source_type=source_type,
            source_endpoint=source_endpoint,
            source_endpoint_auth_name=src_name,
            source_endpoint_auth_key=src_key,
            source_query=query if source_type == "Prometheus" else "",
            source_range=source_range if source_type == "Prometheus" else 0,
            source_step=source_step if source_type == "Prometheus" else 0,
            scoring_endpoint=scoring_endpoint,
            scoring_interval=interval,
            scoring_endpoint_auth_name=sc_name,
            scoring_endpoint_auth_key=sc_key,
            location=spec.location,
            score_destination=spec.score_destination,
            score_dimension_format=formats[0],
            source_queries=queries if source_type == "Prometheus" else None,
            source_auth=src_auth.extension() if src_auth and source_type == "Prometheus" else None,
            scoring_auth=sc_auth.extension() if sc_auth else None,
            score_normalization=spec.score_normalization,
            valid_for_seconds=spec.valid_for_seconds,
            timeout_seconds=spec.timeout_seconds,
            max_score_bytes=spec.max_score_bytes,
            scoring_params=scoring_params,
            missing_data_score=spec.missing_data.score if spec.missing_data else None,
            score_dimension_formats=format_list,
            score_dimension_labels=spec.score_dimension_labels or None,
            # all zero is no stabilization: leave it out, so the summary is what it was without it
            stabilization=spec.stabilization if spec.stabilization != ScoreStabilization() else None,
        )
        if sources is not None:
            summary = with_sources(summary, sources, spec.on_source_error)
            origins.from_sources()
    except ValidationError as exc:
        # The wire model is the agent's contract and may check more than the CRD does; a value it
        # refuses is a field problem of this scorer, never an exception in the controller's loop.
        problem = FieldProblem(
            "spec", "the agent would reject the summary: " + describe_validation(exc, prefix="summary")
        )
        return Resolution(None, (problem,), tuple(notes))
    return Resolution(summary, (), tuple(notes), withheld=tuple(withheld), origins=origins.by_field)


__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_RANGE",
    "DEFAULT_SCORING_PATH",
    "DEFAULT_SOURCE_PATH",
    "DEFAULT_STEP",
    "Resolution",
    "dimension_format_notes",
    "resolve",
]
