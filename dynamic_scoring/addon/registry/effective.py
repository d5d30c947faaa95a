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
* Credentials stay with the host they were written for.  The spec's auth for an endpoint was written
  for the spec's host (``source.host``; ``scoring.host``, else the origin of ``configURL``).  When the
  synced document moves that endpoint to another scheme, host or port, the scorer's operator (who
  answers ``/config``) would otherwise decide where every agent sends the spec's Secrets; so that
  endpoint's auth is withheld from the summary (``Resolution.withheld`` says which and why) unless
  ``spec.sendCredentialsToSyncedHosts`` is true.  Each agent still sends a Secret only to hosts listed
  on the Secret itself (``dynamic_scoring.secret_binding``); this is the hub's half of that rule.
* Scorer parameters (``scoring.params`` keys other than ``name`` and ``interval``): the spec's, each
  replaced by the synced document's value when ``/config`` publishes that key (Full mode only).
  They travel as ``scoringParams`` and reach the scorer as ``params``.

Defaults: score name = ``scoring.params.name``, else the blog's ``spec.name``, else ``metadata.name``;
interval 30 s; range 3600 s; step 60 s; source type ``Prometheus`` when a query is known, else
``None``; scoring path ``/scoring`` and source path ``/api/v1/query_range`` when the host has no path of
its own; scoring host = the origin of ``configURL``.  A Prometheus source needs an explicit host
(upstream silently used the scorer's host).

Whatever still cannot be resolved is a ``FieldProblem`` naming the CRD field, and the scorer is not
distributed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from dynamic_scoring.addon.errors import FieldProblem
from dynamic_scoring.addon.registry.models import (
    DEFAULT_DIMENSION_FORMAT,
    DynamicScorer,
    DynamicScorerSpec,
    SpecAuth,
)
from dynamic_scoring.addon.registry.sources import resolve_sources, with_sources
from dynamic_scoring.secret_binding import destination
from dynamic_scoring.urls import has_path, join_url, origin, url_problem
from dynamic_scoring.validation import describe_validation
from dynamic_scoring.wire import (
    MAX_SCORING_PARAMS_BYTES,
    ScorerSummary,
    ScoreStabilization,
    ScoringParams,
    params_size,
)

DEFAULT_INTERVAL = 30
DEFAULT_RANGE = 3600
DEFAULT_STEP = 60
DEFAULT_SCORING_PATH = "/scoring"
DEFAULT_SOURCE_PATH = "/api/v1/query_range"

KNOWN_PLACEHOLDERS = frozenset(
    ["cluster", "node", "device", "namespace", "app", "pod", "container", "meta", "scoreName"]
)
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


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
    """

    summary: ScorerSummary | None
    problems: tuple[FieldProblem, ...] = ()
    notes: tuple[str, ...] = ()
    pending: str | None = None
    withheld: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """All problems in one line, for a condition message."""
        return "; ".join(str(p) for p in self.problems)


def _text(synced: str | None, spec: str | None) -> tuple[str, str]:
    """The first non-empty of the synced and the spec value, and where it came from."""
    if synced:
        return synced, "status.lastSyncedConfig"
    if spec:
        return spec, "spec"
    return "", ""


def _number(synced: int | None, spec: int | None, default: int) -> int:
    """The first of the synced and the spec value that is above 0, else ``default``."""
    if synced is not None and synced > 0:
        return synced
    if spec is not None and spec > 0:
        return spec
    return default


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


def _dimension_formats(
    spec: DynamicScorerSpec, synced: ScoringParams | None
) -> tuple[list[str], list[str] | None, list[str]]:
    """The item-name formats, the list to send as ``scoreDimensionFormats`` (or None), and notes.

    The formats are one field for the precedence: the synced ``/config``'s (its list, else its
    string) when it publishes a non-empty one (Full mode), else the spec's (list, else string),
    else ``${scoreName}``.  They are never mixed: a spec list does not survive a ``/config`` string.
    """
    if synced is not None and synced.dimension_formats:
        plural = bool(synced.score_dimension_formats)
        where = "status.lastSyncedConfig.scoring.params.scoreDimensionFormat"
        formats = list(synced.dimension_formats)
    else:
        plural = bool(spec.score_dimension_formats)
        where = "spec.scoreDimensionFormat"
        formats = spec.score_dimension_formats or [spec.score_dimension_format or DEFAULT_DIMENSION_FORMAT]
    notes: list[str] = []
    if plural:
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
    src_params = src.params if src and src.params else None
    sc = spec.scoring
    sc_params = sc.params if sc and sc.params else None
    s_src = synced.source if synced else None
    sources = resolve_sources(spec) if spec.sources else None
    if sources is not None:
        if s_src is not None:
            notes.append("status.lastSyncedConfig.source: ignored because spec.sources is set")
        s_src = None
        problems.extend(FieldProblem(where, why) for where, why in sources.problems)
    elif spec.on_source_error is not None:
        problems.append(FieldProblem("spec.onSourceError", "applies to spec.sources only"))
    s_sc = synced.scoring if synced else None

    # Score name and interval.
    score_name, _ = _text(s_sc.params.name if s_sc else None, sc_params.name if sc_params else None)
    if not score_name:
        score_name = spec.name or scorer.name
    interval = _number(
        s_sc.params.interval if s_sc else None, sc_params.interval if sc_params else None, DEFAULT_INTERVAL
    )
    scoring_params = _scorer_params(
        s_sc.params.extra_params if s_sc else {}, sc_params.scorer_params() if sc_params else {}, problems
    )

    # Source.
    synced_query = s_src.params.query if s_src else ""
    query = synced_query or (src_params.query if src_params and src_params.query else "")
    queries = None if synced_query else (src_params.queries if src_params and src_params.queries else None)
    source_type, _ = _text(s_src.type if s_src else None, src.type if src else None)
    if not source_type:
        source_type = "Prometheus" if (query or queries) else "None"
    source_range = _number(
        s_src.params.range if s_src else None, src_params.range if src_params else None, DEFAULT_RANGE
    )
    source_step = _number(
        s_src.params.step if s_src else None, src_params.step if src_params else None, DEFAULT_STEP
    )
    source_endpoint = ""
    host, host_from = "", ""
    if source_type == "Prometheus":
        host, host_from = _text(s_src.host if s_src else None, src.host if src else None)
        path, _ = _text(s_src.path if s_src else None, src.path if src else None)
        if not host:
            problems.append(
                FieldProblem("spec.source.host", "required when source.type is Prometheus (no default host)")
            )
        else:
            where = (
                "status.lastSyncedConfig.source.host"
                if host_from.startswith("status")
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
    sc_host, sc_host_from = _text(s_sc.host if s_sc else None, sc.host if sc else None)
    sc_path, _ = _text(s_sc.path if s_sc else None, sc.path if sc else None)
    scoring_endpoint = ""
    if not sc_host and spec.config_url and url_problem(spec.config_url) is None:
        sc_host, sc_host_from = origin(spec.config_url), "spec.configURL"
    if not sc_host:
        problems.append(
            FieldProblem(
                "spec.scoring.host",
                "required when configURL is not set or not usable (nowhere to send the series)",
            )
        )
    else:
        where = {
            "status.lastSyncedConfig": "status.lastSyncedConfig.scoring.host",
            "spec": "spec.scoring.host",
        }.get(sc_host_from, "spec.configURL")
        if _check_url(sc_host, where, problems):
            if not sc_path and not has_path(sc_host):
                sc_path = DEFAULT_SCORING_PATH
            scoring_endpoint = join_url(sc_host, sc_path)

    # With a list, the upstream key carries its first entry, so an upstream agent writes those items.
    formats, format_list, format_notes = _dimension_formats(spec, s_sc.params if s_sc else None)
    notes.extend(format_notes)
    if problems:
        return Resolution(None, tuple(problems), tuple(notes))

    src_auth = src.auth if src else None
    sc_auth = sc.auth if sc else None
    withheld: list[str] = []
    if not spec.send_credentials_to_synced_hosts:
        spec_src_host = (src.host if src else None) or ""
        if (
            source_type == "Prometheus"
            and src_auth is not None
            and host_from == "status.lastSyncedConfig"
            and not _same_destination(host, spec_src_host)
        ):
            withheld.append(_moved("source", "source.host", spec_src_host, host, "spec.source.auth"))
            src_auth = None
        spec_sc_host = (sc.host if sc else None) or (origin(spec.config_url) if spec.config_url else "")
        if (
            sc_auth is not None
            and sc_host_from == "status.lastSyncedConfig"
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
    except ValidationError as exc:
        # The wire model is the agent's contract and may check more than the CRD does; a value it
        # refuses is a field problem of this scorer, never an exception in the controller's loop.
        problem = FieldProblem(
            "spec", "the agent would reject the summary: " + describe_validation(exc, prefix="summary")
        )
        return Resolution(None, (problem,), tuple(notes))
    return Resolution(summary, (), tuple(notes), withheld=tuple(withheld))


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
