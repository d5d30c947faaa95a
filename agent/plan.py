"""Check a summary and derive what the worker will actually do with it.

Upstream trusted the hub: an interval of 0 panicked the agent (A-26), a lowercase ``prometheus``
silently skipped the fetch (W-11), an empty query segment failed every cycle (A-13).  Here every
summary is checked before a worker runs it; a summary that fails is rejected with a reason naming
the field, and the others keep running.  The resulting ``ScorerPlan`` is what each cycle reads.

Interpretation rules (documented in ``docs/agent.md``):

* ``sourceType`` is case-insensitive: ``Prometheus`` fetches; ``None`` or empty sends
  ``{"data": []}``; anything else is rejected.
* ``scoreDestination`` is case-insensitive: ``AddOnPlacementScore`` publishes; ``None`` or empty
  exports metrics only; anything else is rejected.
* ``sourceQueries`` (extension) wins over ``sourceQuery``, which is split on top-level ``;``.
* An empty ``scoreDimensionFormat`` means ``${scoreName}`` (the hub's upstream default).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.scoring.dimensions import DEFAULT_FORMAT
from agent.scoring.naming import aps_name
from agent.settings import AgentSettings
from agent.source.splitting import split_queries
from dynamic_scoring.wire import ScorerSummary


class InvalidSummary(ValueError):  # noqa: N818 - reads better at the raise site
    """The summary cannot be run; the message names the field and the reason."""


@dataclass(frozen=True)
class ScorerPlan:
    """A checked summary plus everything derived from it that a cycle needs."""

    summary: ScorerSummary
    queries: tuple[str, ...]
    """Prometheus queries in order; empty when the source type is ``None``."""
    publish: bool
    """Write an AddOnPlacementScore (``scoreDestination: AddOnPlacementScore``)."""
    dimension_format: str
    aps_name: str
    timeout_seconds: float
    """Per-request timeout: ``timeoutSeconds`` or the agent default, never more than the interval."""

    @property
    def score_name(self) -> str:
        """The worker key."""
        return self.summary.score_name

    @property
    def interval(self) -> int:
        """Seconds between cycle starts."""
        return self.summary.scoring_interval

    @property
    def fetch(self) -> bool:
        """True when the cycle queries Prometheus."""
        return bool(self.queries)

    @property
    def label(self) -> str:
        """``scorer=<name> score=<scoreName>`` for log lines."""
        return self.summary.label


def _check_url(value: str, field: str) -> None:
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise InvalidSummary(f"{field}: not a valid URL") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidSummary(f"{field}: expected an http or https URL with a host, got {value!r}")


def _legacy_pair(name: str, key: str) -> tuple[str, str] | None:
    return (name, key) if name and key else None


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

    source_type = summary.source_type.lower()
    queries: tuple[str, ...] = ()
    if source_type == "prometheus":
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
    elif source_type not in ("none", ""):
        raise InvalidSummary(f"sourceType: expected Prometheus or None, got {summary.source_type!r}")

    destination = summary.score_destination.lower()
    if destination not in ("addonplacementscore", "none", ""):
        raise InvalidSummary(
            f"scoreDestination: expected AddOnPlacementScore or None, got {summary.score_destination!r}"
        )

    wanted = summary.timeout_seconds or settings.default_timeout_seconds
    return ScorerPlan(
        summary=summary,
        queries=queries,
        publish=destination == "addonplacementscore",
        dimension_format=summary.score_dimension_format or DEFAULT_FORMAT,
        aps_name=aps_name(summary.score_name),
        timeout_seconds=min(wanted, float(summary.scoring_interval)),
    )


def source_secret(plan: ScorerPlan) -> tuple[str, str] | None:
    """Upstream's source bearer-token Secret reference, when both name and key are set."""
    s = plan.summary
    return _legacy_pair(s.source_endpoint_auth_name, s.source_endpoint_auth_key)


def scoring_secret(plan: ScorerPlan) -> tuple[str, str] | None:
    """Upstream's scoring bearer-token Secret reference, when both name and key are set."""
    s = plan.summary
    return _legacy_pair(s.scoring_endpoint_auth_name, s.scoring_endpoint_auth_key)


__all__ = ["InvalidSummary", "ScorerPlan", "plan_summary", "scoring_secret", "source_secret"]
