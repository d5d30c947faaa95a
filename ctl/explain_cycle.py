"""One scoring cycle, stage by stage, with the agent's own functions, writing nothing.

``dynamic-scoring explain`` must show what the agent *would* do, so every stage calls what the
agent calls: ``plan_summary`` checks the summary, ``resolve_credentials`` builds headers,
``expand_queries`` fills ``${cluster}``, ``query_range`` fetches, ``label_series`` labels named
sources, ``call_scorer`` posts the series, ``score_value`` and ``build_items`` turn results into
items (or ``default_item_names`` names the ``missingDataScore`` items when no series came back,
and the scorer is not called, as in the worker), ``valid_until`` dates them.

Two deliberate differences from a worker, both documented in docs/cli.md: one attempt per request
(no retries, so a failure shows at once), and nothing is published.  The trace records what each
stage saw (counts, bytes, seconds) so the command can print it; the stage that fails ends the
trace with the agent's own error text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from agent.auth import resolve_credentials
from agent.errors import (
    AgentError,
    PrometheusRequestInvalid,
    PrometheusResponseError,
    PrometheusUnavailable,
    ScorerUnavailable,
    SecretNotFound,
)
from agent.http import ClientPool
from agent.plan import InvalidSummary, ScorerPlan, plan_summary, scoring_secret
from agent.ports import ScoreItem, SecretContents, SecretReader
from agent.scoring.answer import ScoringAnswer
from agent.scoring.client import call_scorer, check_scores_fit, has_series
from agent.scoring.dimensions import build_items, default_item_names, render_name
from agent.scoring.maths import NonFiniteScore, clamp, normalise, score_value, valid_until
from agent.settings import AgentSettings
from agent.source.labelling import label_series
from agent.source.placeholders import PlaceholderError, expand_queries
from agent.source.prometheus import RangeWindow, query_range
from dynamic_scoring.score_size import max_results_for
from dynamic_scoring.wire import ScorerSummary

PREVIEW = 5
"""Scorer results shown in the text output (JSON output shows them all)."""

HINTS: dict[str, str] = {
    "PrometheusQueryError": "fix the query (try it in the Prometheus UI over the same range)",
    "PrometheusUnavailable": "check that Prometheus is up at that URL (--prometheus overrides it)",
    "PrometheusTimeout": "the query is too slow for the timeout: narrow it, or raise spec.timeoutSeconds",
    "PrometheusResponseError": "the endpoint is not a Prometheus query_range API, or the answer is too large",
    "PrometheusRequestInvalid": "the source endpoint or a ${cluster} value cannot be sent; fix the URL",
    "ScorerUnavailable": "start the scoring API, or check scoring.host / configURL",
    "ScorerTimeout": "the scorer is slower than the timeout: speed it up, or raise spec.timeoutSeconds",
    "ScorerHTTPError": "read the scorer's own log for this request; `dynamic-scoring scorer validate` helps",
    "ScorerResponseInvalid": 'answer {"results": [{"metric": {...}, "score": n}]}',
    "ScorerResponseTooLarge": "return fewer or smaller results",
    "ScorerTooManyResults": "aggregate, shorten item names or narrow the query; or raise maxScoreBytes",
    "SecretNotFound": "pass --token-file NAME/KEY=PATH, or --cluster-kubeconfig to read the Secret",
    "SecretNotBound": "the Secret's owner binds it to the host with the annotation the message names",
    "SecretInvalid": "fix the Secret's value (no newline or control characters in a token)",
    "AuthError": "check that the kubeconfig's user may read the Secret",
    "InvalidSummary": "fix the named field of the DynamicScorer (the agent would refuse this summary)",
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
    no_data_default: int | None = None
    """Set when no series came back and ``missingDataScore`` replaced the scorer's answer."""
    failure: StageFailure | None = None


class FileTokens:
    """``SecretReader`` over ``--token-file NAME/KEY=PATH`` options, then an optional cluster reader.

    Tokens come from files or Secrets only, never from the command line itself (shell history and
    ``ps`` would show them), and never appear in any output.  A value from a file is the caller's
    own, handed over for this run: it is not a Secret of the cluster and no allowed-hosts binding
    applies to it.  A Secret read through the cluster reader is checked exactly as the agent checks
    it, so ``explain`` reports ``SecretNotBound`` where the agent would.
    """

    def __init__(self, files: Mapping[tuple[str, str], Path], fallback: SecretReader | None = None) -> None:
        self._files = dict(files)
        self._fallback = fallback

    async def get(self, name: str) -> SecretContents:
        """The files given for ``name`` (one trailing newline removed each), else the fallback's Secret."""
        data: dict[str, bytes] = {}
        for (secret, key), path in self._files.items():
            if secret == name:
                raw = path.read_bytes()
                data[key] = raw[:-1] if raw.endswith(b"\n") else raw
        if data:
            return SecretContents("(--token-file)", name, data, operator_supplied=True)
        if self._fallback is not None:
            return await self._fallback.get(name)
        raise SecretNotFound(f"secret {name!r} is referenced but was not given")


def _fail(trace: Trace, stage: str, exc: AgentError | InvalidSummary) -> Trace:
    reason = exc.reason if isinstance(exc, AgentError) else "InvalidSummary"
    unreachable = isinstance(exc, PrometheusUnavailable | ScorerUnavailable)
    hint = HINTS.get(reason, "")
    trace.failure = StageFailure(stage, reason, str(exc), hint, unreachable)
    return trace


def _series_count(raw: Any) -> int:
    return len(msgspec.json.decode(raw))


def _labelled(raw: Any, source: str) -> bytes:
    """``source=<name>`` on every series, as the worker labels a named source's answer."""
    try:
        return label_series(raw, source)[0]
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PrometheusResponseError(
            f'source "{source}": data.result is not a list of series ({type(exc).__name__})', stage="fetch"
        ) from exc


async def _fetch(
    trace: Trace,
    plan: ScorerPlan,
    secrets: SecretReader,
    clients: ClientPool,
    prometheus: str | None,
    now: float,
) -> list[Any]:
    settings = AgentSettings()
    out: list[Any] = []
    for source in plan.sources:
        if source.type != "Prometheus":
            raise PrometheusRequestInvalid(
                f"{source.display}: type {source.type} is pushed to the agent, explain cannot fetch it",
                stage="fetch",
            )
        try:
            queries = expand_queries(source.queries, trace.cluster)
        except PlaceholderError as exc:
            raise PrometheusRequestInvalid(str(exc), stage="fetch") from exc
        endpoint = prometheus or source.endpoint
        creds = await resolve_credentials(
            source.auth, source.legacy_secret, secrets, url=endpoint, stage="fetch", scorer=plan.summary.name
        )
        client = clients.client_for(creds.tls)
        window = RangeWindow.ending_at(now, source.range, source.step)
        trace.window = {"start": window.start, "end": window.end, "step": window.step}
        for index, query in enumerate(queries):
            entry = Query(source.name, index, query, endpoint)
            trace.queries.append(entry)
            began = time.monotonic()
            raw = await query_range(
                client,
                endpoint,
                query,
                window,
                index=index,
                headers=creds.headers,
                timeout=plan.timeout_seconds,
                max_bytes=settings.max_source_bytes,
            )
            entry.seconds = time.monotonic() - began
            entry.bytes = len(memoryview(raw))
            entry.series = _series_count(raw)
            entry.answered = True
            out.append(_labelled(raw, source.name) if source.labelled else raw)
    return out


def _items(trace: Trace, plan: ScorerPlan, response: ScoringAnswer) -> None:
    summary = plan.summary
    formats = list(summary.dimension_formats)
    spec = summary.score_normalization
    for index, result in enumerate(response.results):
        names = [
            render_name(fmt, cluster=trace.cluster, score_name=plan.score_name, metric=result.metric)
            for fmt in formats
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
            trace.collisions.setdefault(name, []).append(index)
    trace.collisions = {n: i for n, i in trace.collisions.items() if len(i) > 1}
    outcome = build_items(
        response.results, fmt=formats, cluster=trace.cluster, score_name=plan.score_name, normalization=spec
    )
    trace.published = [(i.name, i.value) for i in outcome.items]
    trace.rejected = [f"result {r.index}: {r.name!r}: {r.reason}" for r in outcome.rejected]
    trace.clamped = outcome.clamped


async def run_cycle(
    summary: ScorerSummary,
    cluster: str,
    secrets: SecretReader,
    *,
    prometheus: str | None = None,
    extra_ca_files: tuple[Path, ...] = (),
) -> Trace:
    """Run every stage of one cycle of ``summary`` for ``cluster`` and return what each saw."""
    trace = Trace(cluster, summary)
    try:
        plan = plan_summary(summary)
    except InvalidSummary as exc:
        return _fail(trace, "summary", exc)
    trace.plan = plan
    settings = AgentSettings()
    clients = ClientPool(extra_ca_files=extra_ca_files)
    try:
        now = time.time()
        try:
            series = await _fetch(trace, plan, secrets, clients, prometheus, now) if plan.fetch else []
        except AgentError as exc:
            return _fail(trace, "fetch", exc)
        if plan.fetch and summary.missing_data_score is not None and not has_series(series):
            # The worker's rule: no series and a stated default means the scorer is not called.
            score = summary.missing_data_score
            names = default_item_names(summary.dimension_formats, cluster=cluster, score_name=plan.score_name)
            trace.no_data_default = score
            trace.published = [(n, score) for n in names]
            trace.valid_until = valid_until(datetime.now(UTC), plan.interval, summary.valid_for_seconds)
            return trace
        try:
            creds = await resolve_credentials(
                summary.scoring_auth,
                scoring_secret(plan),
                secrets,
                url=summary.scoring_endpoint,
                stage="score",
                scorer=summary.name,
            )
            began = time.monotonic()
            trace.response = await call_scorer(
                clients.client_for(creds.tls),
                summary.scoring_endpoint,
                series,
                headers=creds.headers,
                timeout=plan.timeout_seconds,
                max_bytes=settings.max_response_bytes,
                max_results=max_results_for(plan.max_score_bytes),
                params=summary.scoring_params,
            )
            trace.score_seconds = time.monotonic() - began
        except AgentError as exc:
            return _fail(trace, "score", exc)
        _items(trace, plan, trace.response)
        if plan.publish:
            try:  # the worker's rule: scores that cannot be stored fail the cycle before the write
                check_scores_fit([ScoreItem(n, v) for n, v in trace.published], plan.max_score_bytes)
            except AgentError as exc:
                return _fail(trace, "score", exc)
        trace.valid_until = valid_until(datetime.now(UTC), plan.interval, summary.valid_for_seconds)
        return trace
    finally:
        await clients.aclose()


__all__ = ["HINTS", "FileTokens", "Item", "Query", "StageFailure", "Trace", "run_cycle"]
