"""Check a summary and derive what the worker will actually do with it.

Upstream trusted the hub: an interval of 0 panicked the agent, a lowercase ``prometheus``
silently skipped the fetch, an empty query segment failed every cycle.  Here every
summary is checked before a worker runs it; a summary that fails is rejected with a reason naming
the field, and the others keep running.  The resulting ``ScorerPlan`` is what each cycle reads.

Interpretation rules (documented in ``docs/agent.md``):

* ``sourceType`` is case-insensitive: ``Prometheus`` fetches; ``None`` or empty sends
  ``{"data": []}``; anything else is rejected.
* ``scoreDestination`` is case-insensitive: ``AddOnPlacementScore`` publishes; ``None`` or empty
  exports metrics only; anything else is rejected.
* ``sourceQueries`` (extension) wins over ``sourceQuery``, which is split on top-level ``;``.
* An empty ``scoreDimensionFormat`` means ``${scoreName}`` (the hub's upstream default).
* ``sources`` (extension), when present, replaces every upstream ``source*`` key: each entry is one
  named source with its own endpoint, auth, queries, range and step, fetched in order.  Without it,
  the upstream keys make one unnamed source.  ``onSourceError`` is ``Fail`` unless it says
  ``ScoreWithAvailable``.
* A query may hold ``${cluster}`` only inside a quoted PromQL string
(``dynamic_scoring.agent.source.placeholders``);
  anywhere else the summary is rejected, naming the source and the query.

Across the list (``plan_summaries``), the first entry wins: a later entry with the same
``scoreName`` is a duplicate, and a later *publishing* entry whose ``scoreName`` sanitises to an
AddOnPlacementScore name already taken (``col_a``, ``col-a`` and ``COL.A.`` all become ``col-a``)
is a collision.  Both are rejected with a reason naming the entry that won; without this, two
workers would overwrite one APS in turn and its scores would flip every cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from dynamic_scoring.agent.items.dimensions import DEFAULT_FORMAT
from dynamic_scoring.agent.items.stabilization import Stabilization
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.source.otlp.selection import Selector, SelectorError, from_spec, parse_selector
from dynamic_scoring.agent.source.placeholders import PlaceholderError, check_query
from dynamic_scoring.agent.source.splitting import split_queries
from dynamic_scoring.contract.score_size import MAX_SCORE_BYTES
from dynamic_scoring.contract.wire import EndpointAuth, ScorerSummary, SourceSpec, display_name
from dynamic_scoring.ocm.naming import aps_name


class InvalidSummary(ValueError):  # noqa: N818 - reads better at the raise site
    """The summary cannot be run; the message names the field and the reason."""


@dataclass(frozen=True)
class SourcePlan:
    """One source a cycle fetches from, checked.

    Attributes:
        name: the entry's name in ``sources``; ``""`` for the unnamed source of the upstream keys.
        type: ``Prometheus`` or ``OpenTelemetry``.
        endpoint: the ``query_range`` URL (Prometheus).
        auth: the extension auth of this endpoint.
        legacy_secret: upstream's ``sourceEndpointAuthName/Key`` bearer pair (unnamed source only).
        queries: the queries in order, placeholders not yet substituted.
        range: seconds of history.
        step: resolution in seconds.
    """

    name: str
    type: str
    endpoint: str
    auth: EndpointAuth | None
    legacy_secret: tuple[str, str] | None
    queries: tuple[str, ...]
    range: int
    step: int
    selectors: tuple[Selector, ...] = ()
    """The compiled selectors of an ``OpenTelemetry`` source
    (``dynamic_scoring.agent.source.otlp.selection``)."""

    @property
    def labelled(self) -> bool:
        """Named sources label their series with ``source=<name>``; the upstream source does not."""
        return bool(self.name)

    @property
    def display(self) -> str:
        """How messages name it: ``source "<name>"``, or ``the source`` for the unnamed one."""
        return f'source "{self.name}"' if self.name else "the source"


@dataclass(frozen=True)
class ScorerPlan:
    """A checked summary plus everything derived from it that a cycle needs."""

    summary: ScorerSummary
    sources: tuple[SourcePlan, ...]
    """The sources to fetch, in order; empty when the source type is ``None``."""
    publish: bool
    """Write an AddOnPlacementScore (``scoreDestination: AddOnPlacementScore``)."""
    dimension_format: str
    aps_name: str
    timeout_seconds: float
    """Per-request timeout: ``timeoutSeconds`` or the agent default, never more than the interval."""
    max_score_bytes: int = MAX_SCORE_BYTES
    """Largest JSON of the scores written: the agent's limit, or the summary's ``maxScoreBytes`` if lower."""

    @property
    def score_name(self) -> str:
        """The worker key."""
        return self.summary.score_name

    @property
    def interval(self) -> int:
        """Seconds between cycle starts."""
        return self.summary.scoring_interval

    @property
    def queries(self) -> tuple[str, ...]:
        """Every query of every source, in fetch order (as written, placeholders unfilled)."""
        return tuple(q for source in self.sources for q in source.queries)

    @property
    def fetch(self) -> bool:
        """True when the cycle fetches from at least one source."""
        return bool(self.sources)

    @property
    def score_with_available(self) -> bool:
        """``onSourceError: ScoreWithAvailable``: a failing source does not fail the cycle."""
        return self.summary.on_source_error == "ScoreWithAvailable"

    @property
    def label(self) -> str:
        """``scorer=<name> score=<scoreName>`` for log lines."""
        return self.summary.label

    @property
    def stabilization(self) -> Stabilization:
        """``stabilization`` as the worker applies it; all zero (none) when the summary has none."""
        wire = self.summary.stabilization
        if wire is None:
            return Stabilization()
        return Stabilization(wire.tolerance, float(wire.rise_window_seconds), float(wire.fall_window_seconds))


def _check_url(value: str, field: str) -> None:
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise InvalidSummary(f"{field}: not a valid URL") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # The scheme only: the URL itself may carry credentials and goes into logs and Events.
        shown = display_name(parts.scheme, 20) or "none"
        raise InvalidSummary(f"{field}: expected an http or https URL with a host (scheme: {shown})")


def _legacy_pair(name: str, key: str) -> tuple[str, str] | None:
    return (name, key) if name and key else None


def _check_placeholders(queries: tuple[str, ...], field: str) -> None:
    for index, query in enumerate(queries):
        try:
            check_query(query)
        except PlaceholderError as exc:
            raise InvalidSummary(f"{field}: query #{index + 1}: {exc}") from exc


def _plan_upstream_source(summary: ScorerSummary) -> tuple[SourcePlan, ...]:
    """The one unnamed source of upstream's ``source*`` keys (none for type ``None``)."""
    source_type = summary.source_type.lower()
    if source_type in ("none", ""):
        return ()
    if source_type == "opentelemetry":
        return (_plan_upstream_otel(summary),)
    if source_type != "prometheus":
        raise InvalidSummary(
            "sourceType: expected Prometheus, OpenTelemetry or None, "
            f"got {display_name(summary.source_type)!r}"
        )
    _check_url(summary.source_endpoint, "sourceEndpoint")
    if summary.source_queries:
        queries = tuple(q.strip() for q in summary.source_queries if q.strip())
    else:
        queries = tuple(split_queries(summary.source_query))
    if not queries:
        raise InvalidSummary("sourceQuery: no query given for source type Prometheus")
    if summary.source_step < 1:
        raise InvalidSummary(f"sourceStep: must be at least 1 second, got {summary.source_step}")
    if summary.source_range < 0:
        raise InvalidSummary(f"sourceRange: must not be negative, got {summary.source_range}")
    _check_placeholders(queries, "sourceQuery" if not summary.source_queries else "sourceQueries")
    return (
        SourcePlan(
            name="",
            type="Prometheus",
            endpoint=summary.source_endpoint,
            auth=summary.source_auth,
            legacy_secret=_legacy_pair(summary.source_endpoint_auth_name, summary.source_endpoint_auth_key),
            queries=queries,
            range=summary.source_range,
            step=summary.source_step,
        ),
    )


def _otel_selectors(queries: tuple[str, ...], field: str) -> tuple[Selector, ...]:
    selectors = []
    for index, query in enumerate(queries):
        try:
            selectors.append(parse_selector(query))
        except SelectorError as exc:
            raise InvalidSummary(f"{field}: query #{index + 1}: {exc}") from exc
    return tuple(selectors)


def _plan_upstream_otel(summary: ScorerSummary) -> SourcePlan:
    """``sourceType: OpenTelemetry``: ``sourceQuery`` holds selectors split on ``;``."""
    field = "sourceQueries" if summary.source_queries else "sourceQuery"
    if summary.source_queries:
        queries = tuple(q.strip() for q in summary.source_queries if q.strip())
    else:
        queries = tuple(split_queries(summary.source_query))
    if not queries:
        raise InvalidSummary(f"{field}: no selector given for source type OpenTelemetry")
    if summary.source_step < 1:
        raise InvalidSummary(f"sourceStep: must be at least 1 second, got {summary.source_step}")
    return SourcePlan(
        name="",
        type="OpenTelemetry",
        endpoint="",
        auth=None,
        legacy_secret=None,
        queries=queries,
        range=summary.source_range,
        step=summary.source_step,
        selectors=_otel_selectors(queries, field),
    )


def _plan_source(index: int, entry: SourceSpec) -> SourcePlan:
    """One entry of ``sources``, checked; errors name it as ``sources[i] (name)``."""
    where = f"sources[{index}] ({entry.name})"
    queries = tuple(q.strip() for q in entry.queries if q.strip())
    if entry.type == "Prometheus":
        _check_url(entry.endpoint, f"{where}.endpoint")
        if not queries:
            raise InvalidSummary(f"{where}.queries: no query given for type Prometheus")
        if entry.step < 1:
            raise InvalidSummary(f"{where}.step: must be at least 1 second, got {entry.step}")
    selectors: tuple[Selector, ...] = ()
    if entry.type == "OpenTelemetry":
        if entry.step < 1:
            raise InvalidSummary(f"{where}.step: must be at least 1 second, got {entry.step}")
        if entry.otel is not None:
            selectors = tuple(from_spec(spec) for spec in entry.otel.selectors)
        selectors += _otel_selectors(queries, f"{where}.queries")
        if not selectors:
            raise InvalidSummary(f"{where}.otel.selectors: no selector given for type OpenTelemetry")
    _check_placeholders(queries, f"{where}.queries")
    return SourcePlan(
        name=entry.name,
        type=entry.type,
        endpoint=entry.endpoint,
        auth=entry.auth,
        legacy_secret=None,
        queries=queries,
        range=entry.range,
        step=entry.step,
        selectors=selectors,
    )


def plan_summary(summary: ScorerSummary, settings: AgentSettings | None = None) -> ScorerPlan:
    """Check ``summary`` and derive its plan.

    Raises:
        InvalidSummary: the summary cannot be run; the message says which field and why.
    """
    settings = settings or AgentSettings()
    if not summary.score_name:
        raise InvalidSummary("scoreName: must not be empty")
    if summary.scoring_interval < 1:
        raise InvalidSummary(f"scoringInterval: must be at least 1 second, got {summary.scoring_interval}")
    _check_url(summary.scoring_endpoint, "scoringEndpoint")

    sources = (
        tuple(_plan_source(i, entry) for i, entry in enumerate(summary.sources))
        if summary.sources
        else _plan_upstream_source(summary)
    )

    destination = summary.score_destination.lower()
    if destination not in ("addonplacementscore", "none", ""):
        raise InvalidSummary(
            "scoreDestination: expected AddOnPlacementScore or None, "
            f"got {display_name(summary.score_destination)!r}"
        )

    wanted = summary.timeout_seconds or settings.default_timeout_seconds
    return ScorerPlan(
        summary=summary,
        sources=sources,
        publish=destination == "addonplacementscore",
        dimension_format=summary.score_dimension_format or DEFAULT_FORMAT,
        aps_name=aps_name(summary.score_name),
        timeout_seconds=min(wanted, float(summary.scoring_interval)),
        max_score_bytes=min(settings.max_score_bytes, summary.max_score_bytes or settings.max_score_bytes),
    )


@dataclass(frozen=True)
class PlanRejection:
    """An entry of the summary list that is not run: its position, its name for messages, and why."""

    index: int
    name: str
    reason: str


@dataclass(frozen=True)
class PlannedSummaries:
    """The plans to run, by score name in list order, and the entries rejected on the way."""

    plans: dict[str, ScorerPlan] = field(default_factory=dict)
    rejected: list[PlanRejection] = field(default_factory=list)


def plan_summaries(
    summaries: Sequence[ScorerSummary], settings: AgentSettings | None = None
) -> PlannedSummaries:
    """Check every summary and resolve duplicates and APS-name collisions; the first entry wins.

    A duplicate ``scoreName`` is rejected even when the first entry was itself invalid, so that
    fixing one of two conflicting entries never silently switches which one runs.
    """
    out = PlannedSummaries()
    seen: set[str] = set()
    aps_owner: dict[str, str] = {}
    for index, summary in enumerate(summaries):
        key = summary.score_name
        shown = display_name(key or summary.name)
        if key in seen:
            out.rejected.append(
                PlanRejection(
                    index, shown, f"duplicate scoreName {display_name(key)!r}: the first entry is used"
                )
            )
            continue
        seen.add(key)
        try:
            plan = plan_summary(summary, settings)
        except InvalidSummary as exc:
            out.rejected.append(PlanRejection(index, shown, str(exc)))
            continue
        if plan.publish:
            owner = aps_owner.get(plan.aps_name)
            if owner is not None:
                reason = (
                    f"scoreName {display_name(key)!r} becomes AddOnPlacementScore {plan.aps_name!r}, "
                    f"already written for scoreName {display_name(owner)!r}: the first entry is used"
                )
                out.rejected.append(PlanRejection(index, shown, reason))
                continue
            aps_owner[plan.aps_name] = key
        out.plans[key] = plan
    return out


def scoring_secret(plan: ScorerPlan) -> tuple[str, str] | None:
    """Upstream's scoring bearer-token Secret reference, when both name and key are set."""
    s = plan.summary
    return _legacy_pair(s.scoring_endpoint_auth_name, s.scoring_endpoint_auth_key)


__all__ = [
    "InvalidSummary",
    "PlanRejection",
    "PlannedSummaries",
    "ScorerPlan",
    "SourcePlan",
    "plan_summaries",
    "plan_summary",
    "scoring_secret",
]
