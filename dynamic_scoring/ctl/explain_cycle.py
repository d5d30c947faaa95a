"""One scoring cycle, stage by stage: the agent's own cycle, run once, traced, writing nothing.

``dynamic-scoring explain`` must show what the agent *would* do, so it runs the agent's
``ScoringCycle`` itself (``dynamic_scoring.agent.cycle``): the same fetch with the same byte budget and
``onSourceError`` rule, the same scoring call, the same items, the same ``missingDataScore`` rule.
It plugs in two things of its own, both documented in docs/cli.md: one attempt per request (no
retries, so a failure shows at once) and a trace that records what each stage saw (counts, bytes,
seconds) so the command can print it.  Nothing is published; the stage that fails ends the trace
with the agent's own error text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import msgspec

from dynamic_scoring.agent.cycle import CycleEnv, CycleKind, CycleObserver, ScoringCycle
from dynamic_scoring.agent.errors import AgentError, PrometheusUnavailable, ScorerUnavailable, SecretNotFound
from dynamic_scoring.agent.http import ClientPool
from dynamic_scoring.agent.items.dimensions import ItemsOutcome, render_name
from dynamic_scoring.agent.items.maths import NonFiniteScore, clamp, normalise, score_value
from dynamic_scoring.agent.own_token import OwnToken
from dynamic_scoring.agent.plan import InvalidSummary, ScorerPlan, SourcePlan, plan_summary
from dynamic_scoring.agent.ports import SecretContents, SecretReader
from dynamic_scoring.agent.scorer_client.answer import ScoringAnswer
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.source.prometheus import RangeWindow
from dynamic_scoring.contract.wire import ScorerSummary
from dynamic_scoring.outbound.addresses import STRICT, AddressPolicy
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION

TOKEN_FILE_NAMESPACE = "(--token-file)"
"""Where a ``--token-file`` value says it comes from, in messages."""

PREVIEW = 5
"""Scorer results shown in the text output (JSON output shows them all)."""

HINTS: dict[str, str] = {
    "PrometheusQueryError": "fix the query (try it in the Prometheus UI over the same range)",
    "PrometheusUnavailable": "check that Prometheus is up at that URL (--prometheus overrides it)",
    "PrometheusTimeout": "the query is too slow for the timeout: narrow it, or raise spec.timeoutSeconds",
    "PrometheusResponseError": "the endpoint is not a Prometheus query_range API, or the answer is too large",
    "PrometheusRequestInvalid": "the source endpoint or a ${cluster} value cannot be sent; fix the URL",
    "PrometheusAccessDenied": "grant the token's identity what the message names, or check the token; "
    "agents get the same answer",
    "PrometheusAddressRefused": "agents refuse it too (ADC AgentAllowCIDRs allows it); here, --allow-cidr",
    "ScorerUnavailable": "start the scoring API, or check scoring.host / configURL",
    "ScorerTimeout": "the scorer is slower than the timeout: speed it up, or raise spec.timeoutSeconds",
    "ScorerHTTPError": "read the scorer's own log for this request; `dynamic-scoring scorer validate` helps",
    "ScorerAddressRefused": "agents refuse it too (ADC AgentAllowCIDRs allows it); here, --allow-cidr",
    "ScorerResponseInvalid": 'answer {"results": [{"metric": {...}, "score": n}]}',
    "ScorerResponseTooLarge": "return fewer or smaller results",
    "ScorerTooManyResults": "aggregate, shorten item names or narrow the query; or raise maxScoreBytes",
    "ItemNameCollision": "set scoreDimensionFormat as the message suggests (or publish it in /config), "
    "or aggregate the results in the scorer",
    "SecretNotFound": "pass --token-file NAME/KEY=PATH, or --cluster-kubeconfig to read the Secret",
    "SecretNotBound": "the Secret's owner binds it to the host with the annotation the message names; "
    "for a --token-file value, list where it may go with --token-allowed-hosts (the annotation's syntax); "
    "for the agent's own token, pass --agent-token-file with --token-allowed-hosts",
    "SecretInvalid": "fix the Secret's value (no newline or control characters in a token)",
    "AuthError": "check that the kubeconfig's user may read the Secret",
    "InvalidSummary": "fix the named field of the DynamicScorer (the agent would refuse this summary)",
    "OtlpReceiverDisabled": "OpenTelemetry series are pushed to the agent: explain cannot read them here",
}


@dataclass
class Query:
    """One query as sent and what came back."""

    source: str
    index: int
    query: str
    endpoint: str
    series: int = 0
    bytes: int = 0
    seconds: float = 0.0
    answered: bool = False
    """False while in flight, and for the query a failure stopped at."""


@dataclass
class Item:
    """One scorer result on its way to an item: raw, normalised, clamped, rounded, named."""

    index: int
    metric: dict[str, str]
    raw: float
    normalised: float | None
    clamped: float | None
    value: int | None
    names: list[str]
    problem: str = ""


@dataclass
class StageFailure:
    """The stage that ended the cycle, with the agent's own error and what to do."""

    stage: str
    reason: str
    message: str
    hint: str
    unreachable: bool


@dataclass
class Trace:
    """Everything ``explain`` shows, filled stage by stage."""

    cluster: str
    summary: ScorerSummary
    plan: ScorerPlan | None = None
    window: dict[str, int] = field(default_factory=dict)
    queries: list[Query] = field(default_factory=list)
    response: ScoringAnswer | None = None
    score_seconds: float = 0.0
    items: list[Item] = field(default_factory=list)
    published: list[tuple[str, int]] = field(default_factory=list)
    collisions: dict[str, list[int]] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    clamped: int = 0
    valid_until: datetime | None = None
    outcome: CycleKind | None = None
    """How the cycle ended when it did not fail: ``Scored``, ``NoData`` or ``Masked``."""
    no_data_default: int | None = None
    """Set when ``missingDataScore`` replaced the scorer's answer (no series, or masked)."""
    skipped_sources: list[StageFailure] = field(default_factory=list)
    """Sources that failed under ``onSourceError: ScoreWithAvailable``; the cycle went on without them."""
    failure: StageFailure | None = None


class FileTokens:
    """``SecretReader`` over ``--token-file NAME/KEY=PATH`` options, then an optional cluster reader.

    Tokens come from files or Secrets only, never from the command line itself (shell history and
    ``ps`` would show them), and never appear in any output.  A value from a file is the caller's
    own, but the URLs it would go to are the inspected scorer's, which its author chose: so a file's
    value is bound, like a Secret, to the destinations the caller lists with
    ``--token-allowed-hosts`` (the annotation's syntax), and goes nowhere else.  A Secret read
    through the cluster reader is checked exactly as the agent checks it, so ``explain`` reports
    ``SecretNotBound`` where the agent would.
    """

    def __init__(
        self,
        files: Mapping[tuple[str, str], Path],
        fallback: SecretReader | None = None,
        *,
        allowed_hosts: str = "",
    ) -> None:
        self._files = dict(files)
        self._fallback = fallback
        self._allowed_hosts = allowed_hosts

    async def get(self, name: str) -> SecretContents:
        """The files given for ``name`` (one trailing newline removed each), else the fallback's Secret."""
        data: dict[str, bytes] = {}
        for (secret, key), path in self._files.items():
            if secret == name:
                raw = path.read_bytes()
                data[key] = raw[:-1] if raw.endswith(b"\n") else raw
        if data:
            binding = {ALLOWED_HOSTS_ANNOTATION: self._allowed_hosts} if self._allowed_hosts else {}
            return SecretContents(TOKEN_FILE_NAMESPACE, name, data, binding)
        if self._fallback is not None:
            return await self._fallback.get(name)
        raise SecretNotFound(f"secret {name!r} is referenced but was not given")


def _stage_failure(stage: str, exc: AgentError | InvalidSummary) -> StageFailure:
    reason = exc.reason if isinstance(exc, AgentError) else "InvalidSummary"
    unreachable = isinstance(exc, PrometheusUnavailable | ScorerUnavailable)
    return StageFailure(stage, reason, str(exc), HINTS.get(reason, ""), unreachable)


def _fail(trace: Trace, stage: str, exc: AgentError | InvalidSummary) -> Trace:
    trace.failure = _stage_failure(stage, exc)
    return trace


class _Tracer(CycleObserver):
    """Fills a ``Trace`` from the cycle's hooks."""

    def __init__(self, trace: Trace, plan: ScorerPlan) -> None:
        self._trace = trace
        self._plan = plan

    def window(self, source: SourcePlan, window: RangeWindow) -> None:
        """Every source of a summary has the same window rule; the last one is shown."""
        self._trace.window = {"start": window.start, "end": window.end, "step": window.step}

    def query_sent(self, source: SourcePlan, index: int, query: str, endpoint: str) -> None:
        """A query row, unanswered until ``query_answered``."""
        self._trace.queries.append(Query(source.name, index, query, endpoint))

    def query_answered(self, source: SourcePlan, raw: msgspec.Raw | bytes, seconds: float) -> None:
        """Size, series count and time of the answer to the last query sent."""
        entry = self._trace.queries[-1]
        entry.seconds = seconds
        entry.bytes = len(memoryview(raw))
        entry.series = len(msgspec.json.decode(raw))
        entry.answered = True

    def source_failed(self, source: SourcePlan, error: AgentError, *, tolerated: bool) -> None:
        """A source the cycle went on without (a failure that ends the cycle is the trace's failure)."""
        if tolerated:
            self._trace.skipped_sources.append(_stage_failure("fetch", error))

    def scored(self, answer: ScoringAnswer, seconds: float) -> None:
        """The scorer's answer and how long it took."""
        self._trace.response = answer
        self._trace.score_seconds = seconds

    def items_built(self, built: ItemsOutcome) -> None:
        """Each result's way to an item, and what the agent's rules dropped or clamped."""
        _breakdown(self._trace, self._plan)
        self._trace.rejected = [f"result {r.index}: {r.name!r}: {r.reason}" for r in built.rejected]
        self._trace.clamped = built.clamped


def _breakdown(trace: Trace, plan: ScorerPlan) -> None:
    """Every result raw, normalised, clamped, rounded and named, and the names two results share."""
    assert trace.response is not None  # items are built from an answer
    summary = plan.summary
    spec = summary.score_normalization
    collisions: dict[str, list[int]] = {}
    for index, result in enumerate(trace.response.results):
        names = [
            render_name(
                fmt,
                cluster=trace.cluster,
                score_name=plan.score_name,
                metric=result.metric,
                labels=summary.dimension_labels,
            )
            for fmt in summary.dimension_formats
        ]
        normalised = normalise(result.score, spec)
        item = Item(index, dict(result.metric), result.score, normalised, None, None, names)
        try:
            item.value, _ = score_value(result.score, spec)
            item.clamped = clamp(normalised)
        except NonFiniteScore as exc:
            item.problem = str(exc)
        trace.items.append(item)
        for name in names:
            collisions.setdefault(name, []).append(index)
    trace.collisions = {n: i for n, i in collisions.items() if len(i) > 1}


async def run_cycle(
    summary: ScorerSummary,
    cluster: str,
    secrets: SecretReader,
    *,
    prometheus: str | None = None,
    extra_ca_files: tuple[Path, ...] = (),
    policy: AddressPolicy = STRICT,
    own_token: OwnToken | None = None,
) -> Trace:
    """Run every stage of one cycle of ``summary`` for ``cluster`` and return what each saw.

    ``policy`` is the agent's address policy (default: the agent's default), so a scorer that the
    agent would refuse to call is refused here too, and with the same reason.
    """
    trace = Trace(cluster, summary)
    try:
        plan = plan_summary(summary)
    except InvalidSummary as exc:
        return _fail(trace, "summary", exc)
    trace.plan = plan
    clients = ClientPool(extra_ca_files=extra_ca_files, policy=policy)
    settings = AgentSettings(address_policy=policy, own_token=own_token)
    env = CycleEnv(cluster, secrets, clients, settings, prometheus=prometheus)
    cycle = ScoringCycle(plan, env, observer=_Tracer(trace, plan))
    try:
        result = await cycle.run(time.monotonic() + plan.interval)
    except AgentError as exc:
        return _fail(trace, exc.stage or cycle.stage, exc)
    finally:
        await clients.aclose()
    trace.outcome = result.kind
    trace.published = [(i.name, i.value) for i in result.items]
    trace.valid_until = result.valid_until
    trace.no_data_default = result.default_score
    return trace


__all__ = ["HINTS", "FileTokens", "Item", "Query", "StageFailure", "Trace", "run_cycle"]
