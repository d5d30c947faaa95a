"""One scoring cycle of one summary on one cluster: fetch every source, call the scorer, build the items.

This is the only place the stages are put together.  The agent's worker runs it every interval and
adds retries, metrics and publishing; ``dynamic-scoring explain`` runs it once and adds a trace.  The
two differ only in what they plug in, so what ``explain`` shows is what the agent does:

- ``attempt`` runs each request: the worker retries transient failures while the next attempt still
  fits in the interval (``dynamic_scoring.agent.retry.retrying``); ``explain`` makes one attempt
  (``one_attempt``).
- ``observer`` hears each stage: its duration, each query sent and answered, a source that failed
  under ``ScoreWithAvailable``, the scorer's answer.  The worker turns these into metrics and log
  lines; ``explain`` into the trace it prints.

Budget.  Each request's timeout is the plan's or the time left before ``deadline``, whichever is
smaller.  The Prometheus and OpenTelemetry answers of one cycle share a byte budget
(``max_source_bytes_per_cycle``), since all are held until the scoring call; with several sources
each may use an equal share of it.  With ``ScoreWithAvailable`` the sources share the first half of
the time left in slots (source ``i`` of ``n`` must be done by ``start + half * (i + 1) / n``), so a
hanging source costs only its own slot and the scoring call keeps the other half.

Outcome.  ``run`` returns a ``CycleResult``: ``Scored`` with the items built from the scorer's
answer (when two results render to one item name the cycle fails with ``ItemNameCollision``
instead, since neither is that item's value), or a stated default (``NoData``: the sources
returned no series and the summary states a ``missingDataScore``, so the scorer is not called;
``Masked``: the hub masked this scorer on this cluster, nothing is queried).  A failure raises the
``AgentError`` with its stage set; ``stage`` says where an unexpected exception happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypeVar

import msgspec

from dynamic_scoring.agent.auth import resolve_credentials
from dynamic_scoring.agent.errors import (
    AgentError,
    ItemNameCollision,
    PrometheusRequestInvalid,
    PrometheusResponseError,
    Stage,
)
from dynamic_scoring.agent.http import ClientPool
from dynamic_scoring.agent.items.dimensions import (
    ItemsOutcome,
    build_items,
    default_item_names,
    describe_collisions,
)
from dynamic_scoring.agent.items.maths import valid_until
from dynamic_scoring.agent.plan import ScorerPlan, SourcePlan, scoring_secret
from dynamic_scoring.agent.ports import ScoreItem, SecretReader
from dynamic_scoring.agent.scorer_client.answer import ScoringAnswer
from dynamic_scoring.agent.scorer_client.client import call_scorer, check_scores_fit, has_series
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.source.labelling import label_series
from dynamic_scoring.agent.source.otlp.fetching import read_selected
from dynamic_scoring.agent.source.otlp.store import SeriesStore
from dynamic_scoring.agent.source.placeholders import PlaceholderError, expand_queries
from dynamic_scoring.agent.source.prometheus import RangeWindow, query_range
from dynamic_scoring.contract.score_size import max_results_for

T = TypeVar("T")

LABEL_ON_LOOP_BYTES = 256 * 1024
"""Answers of a named source larger than this are labelled in a worker thread, off the event loop."""

logger = logging.getLogger(__name__)


class Attempt(Protocol):
    """How one request is run: ``call(timeout)`` once, or again after transient failures."""

    async def __call__(
        self, call: Callable[[float], Awaitable[T]], stage: Stage, *, deadline: float, timeout: float
    ) -> T:
        """Run ``call`` with a timeout; ``stage`` names the request in metrics and logs."""
        ...


async def one_attempt(
    call: Callable[[float], Awaitable[T]], stage: Stage, *, deadline: float, timeout: float
) -> T:
    """One try with the plan's timeout or the time left, whichever is smaller; a failure is final."""
    del stage  # part of the hook's signature: the retrying attempt names the stage in its metrics
    return await call(max(0.001, min(timeout, deadline - time.monotonic())))


class CycleObserver:
    """Hooks called as a cycle runs; each does nothing here.  Override the ones you need.

    The hooks see what the cycle saw, never change it, and must not raise.
    """

    @contextlib.contextmanager
    def stage(self, stage: Stage) -> Iterator[None]:
        """Wraps the ``fetch`` and ``score`` stages (for their durations)."""
        del stage
        yield

    def window(self, source: SourcePlan, window: RangeWindow) -> None:
        """The range a source is queried over."""

    def query_sent(self, source: SourcePlan, index: int, query: str, endpoint: str) -> None:
        """Query ``index`` of ``source``, placeholders filled, is about to be sent."""

    def query_answered(self, source: SourcePlan, raw: msgspec.Raw | bytes, seconds: float) -> None:
        """The last query sent was answered with ``raw`` (a JSON array of series)."""

    def source_failed(self, source: SourcePlan, error: AgentError, *, tolerated: bool) -> None:
        """``source`` failed; ``tolerated`` under ``ScoreWithAvailable`` (the cycle goes on)."""

    def scored(self, answer: ScoringAnswer, seconds: float) -> None:
        """The scorer answered."""

    def items_built(self, built: ItemsOutcome) -> None:
        """The answer became items (before the size check that may still fail the cycle)."""


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


@dataclass
class CycleEnv:
    """What a cycle reads from outside: the cluster, its Secrets, HTTP clients and limits."""

    cluster_name: str
    secrets: SecretReader
    clients: ClientPool
    settings: AgentSettings
    otlp_store: SeriesStore | None = None
    """What the OTLP receiver keeps; ``None`` without one (an OpenTelemetry source then fails)."""
    wall_clock: Callable[[], datetime] = utc_now
    clock: Callable[[], float] = time.time
    """Unix seconds at which a cycle's query window ends; ``time.time`` (now) except in a replay
    (``bench.placement_quality.replay``), which sets it to each past step so Prometheus answers that
    window."""
    prometheus: str | None = None
    """A ``query_range`` URL used instead of every Prometheus source's own (``explain --prometheus``)."""


CycleKind = Literal["Scored", "NoData", "Masked"]


@dataclass
class CycleResult:
    """What one cycle produced, before anything is written."""

    kind: CycleKind
    items: list[ScoreItem]
    valid_until: datetime
    answer: ScoringAnswer | None = None
    """The scorer's answer (``Scored`` only)."""
    built: ItemsOutcome | None = None
    """How the answer became items: rejected results, duplicates, clamped scores (``Scored`` only)."""
    failed_sources: list[tuple[SourcePlan, AgentError]] = field(default_factory=list)
    """Sources that failed under ``ScoreWithAvailable``; the cycle went on without them."""
    label_collisions: int = 0
    """Series that had a ``source`` label of their own, kept as ``exported_source``."""
    default_score: int | None = None
    """The ``missingDataScore`` written (``NoData`` and ``Masked``)."""


class ScoringCycle:
    """One cycle of ``plan`` with ``env``; build one per cycle.

    Args:
        plan: the checked summary.
        env: cluster, Secrets, clients and limits.
        attempt: how each request runs (``one_attempt``, or the worker's retrying one).
        observer: hooks for metrics or a trace.
        log: where a tolerated source failure is logged.
    """

    def __init__(
        self,
        plan: ScorerPlan,
        env: CycleEnv,
        *,
        attempt: Attempt = one_attempt,
        observer: CycleObserver | None = None,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = logger,
    ) -> None:
        self._plan = plan
        self._env = env
        self._attempt = attempt
        self._observer = observer or CycleObserver()
        self._log = log
        self._fetched = 0
        self._collisions = 0
        self.stage: Stage = "fetch"
        """The stage running now, or the one that was running when the cycle ended."""

    async def run(self, deadline: float) -> CycleResult:
        """Fetch, score and build the items; ``deadline`` is a ``time.monotonic()`` value.

        Raises:
            AgentError: the stage that failed, with ``stage`` set.
        """
        plan = self._plan
        if plan.summary.masked:
            return self._default("Masked", [])
        series: list[Any] = []
        failed: list[tuple[SourcePlan, AgentError]] = []
        self.stage = "fetch"
        if plan.fetch:
            with self._observer.stage("fetch"):
                series, failed = await self._fetch_sources(deadline)
            if plan.summary.missing_data_score is not None and not has_series(series):
                return self._default("NoData", failed)
        self.stage = "score"
        with self._observer.stage("score"):
            answer = await self._score(series, deadline)
        built = build_items(
            answer.results,
            fmt=plan.summary.dimension_formats,
            cluster=self._env.cluster_name,
            score_name=plan.score_name,
            normalization=plan.summary.score_normalization,
            labels=plan.summary.dimension_labels,
        )
        self._observer.items_built(built)
        if plan.publish:  # items that collide or cannot be stored fail the cycle before the write
            if built.collisions:
                several = len(plan.summary.dimension_formats) > 1
                raise ItemNameCollision(
                    describe_collisions(built.collisions, answer.results, several_formats=several)
                )
            check_scores_fit(built.items, plan.max_score_bytes)
        return CycleResult(
            "Scored",
            built.items,
            self._valid_until(),
            answer=answer,
            built=built,
            failed_sources=failed,
            label_collisions=self._collisions,
        )

    def _valid_until(self) -> datetime:
        plan = self._plan
        return valid_until(self._env.wall_clock(), plan.interval, plan.summary.valid_for_seconds)

    def _default(self, kind: CycleKind, failed: list[tuple[SourcePlan, AgentError]]) -> CycleResult:
        """The summary's ``missingDataScore`` on the items a result-less cycle is named by."""
        plan = self._plan
        score = plan.summary.missing_data_score
        assert score is not None  # the summary model requires it for masked; run checks it for NoData
        names = default_item_names(
            plan.summary.dimension_formats, cluster=self._env.cluster_name, score_name=plan.score_name
        )
        return CycleResult(
            kind,
            [ScoreItem(n, score) for n in names],
            self._valid_until(),
            failed_sources=failed,
            default_score=score,
        )

    async def _score(self, series: list[Any], deadline: float) -> ScoringAnswer:
        plan, env = self._plan, self._env
        summary = plan.summary
        creds = await resolve_credentials(
            summary.scoring_auth,
            scoring_secret(plan),
            env.secrets,
            url=summary.scoring_endpoint,
            stage="score",
            scorer=summary.name,
        )
        client = self._client(creds.tls, "score")

        async def post(timeout: float) -> ScoringAnswer:
            return await call_scorer(
                client,
                summary.scoring_endpoint,
                series,
                headers=creds.headers,
                timeout=timeout,
                max_bytes=env.settings.max_response_bytes,
                max_results=max_results_for(plan.max_score_bytes),
                params=summary.scoring_params,
            )

        began = time.monotonic()
        answer = await self._attempt(post, "score", deadline=deadline, timeout=plan.timeout_seconds)
        self._observer.scored(answer, time.monotonic() - began)
        return answer

    def _client(self, tls: Any, stage: Stage) -> Any:
        try:
            return self._env.clients.client_for(tls)
        except AgentError as exc:
            exc.stage = stage
            raise

    async def _fetch_sources(self, deadline: float) -> tuple[list[Any], list[tuple[SourcePlan, AgentError]]]:
        """Every source's series in source order, and the sources ``ScoreWithAvailable`` went without.

        Each source may hold at most an equal share of the cycle's byte budget, so a large answer
        from the first source cannot starve the later ones.
        """
        plan = self._plan
        count = len(plan.sources)
        share = self._env.settings.max_source_bytes_per_cycle // count
        tolerant = plan.score_with_available
        started = time.monotonic()
        half = (deadline - started) / 2
        now = self._env.clock()
        series: list[Any] = []
        failed: list[tuple[SourcePlan, AgentError]] = []
        for index, source in enumerate(plan.sources):
            slot_end = started + half * (index + 1) / count if tolerant else deadline
            try:
                series.extend(await self._fetch_source(source, now, slot_end, share))
            except AgentError as exc:
                exc.stage = "fetch"
                if source.name:
                    exc.message = f"{source.display}: {exc.message}"
                self._observer.source_failed(source, exc, tolerated=tolerant)
                if not tolerant:
                    raise
                self._log.warning("fetch from %s failed (%s): %s", source.display, exc.reason, exc)
                failed.append((source, exc))
        if failed and len(failed) == len(plan.sources):
            first = failed[0][1]
            first.message = f"every source failed; first: {first.message}"
            raise first
        return series, failed

    async def _fetch_source(self, source: SourcePlan, now: float, deadline: float, budget: int) -> list[Any]:
        """One source's answers (raw JSON arrays), labelled with its name when it has one."""
        plan, env = self._plan, self._env
        settings = env.settings
        window = RangeWindow.ending_at(now, source.range, source.step)
        self._observer.window(source, window)
        if source.type == "OpenTelemetry":
            return await self._read_otel(source, window, budget)
        if source.type != "Prometheus":
            raise PrometheusRequestInvalid(
                f"{source.display}: type {source.type} is not fetched by this agent", stage="fetch"
            )
        try:
            queries = expand_queries(source.queries, env.cluster_name)
        except PlaceholderError as exc:
            raise PrometheusRequestInvalid(str(exc), stage="fetch") from exc
        endpoint = env.prometheus or source.endpoint
        creds = await resolve_credentials(
            source.auth,
            source.legacy_secret,
            env.secrets,
            url=endpoint,
            stage="fetch",
            scorer=plan.summary.name,
            own_token=settings.own_token,
        )
        client = self._client(creds.tls, "fetch")
        out: list[Any] = []
        fetched = 0
        for index, query in enumerate(queries):
            # All bodies of a cycle stay in memory until the scoring call: bound their sum.
            left = min(budget - fetched, settings.max_source_bytes_per_cycle - self._fetched)
            limit = min(settings.max_source_bytes, left)

            async def one(
                timeout: float, index: int = index, query: str = query, limit: int = limit
            ) -> msgspec.Raw:
                return await query_range(
                    client,
                    endpoint,
                    query,
                    window,
                    index=index,
                    headers=creds.headers,
                    timeout=timeout,
                    max_bytes=max(0, limit),
                )

            self._observer.query_sent(source, index, query, endpoint)
            began = time.monotonic()
            raw = await self._attempt(one, "fetch", deadline=deadline, timeout=plan.timeout_seconds)
            self._observer.query_answered(source, raw, time.monotonic() - began)
            size = len(memoryview(raw))
            fetched += size
            self._fetched += size
            out.append(await self._labelled(raw, source) if source.labelled else raw)
        return out

    async def _read_otel(self, source: SourcePlan, window: RangeWindow, budget: int) -> list[Any]:
        """An OpenTelemetry source: the pushed series its selectors match, from the agent's store."""
        limit = min(budget, self._env.settings.max_source_bytes_per_cycle - self._fetched)
        out: list[Any] = []
        for raw in await read_selected(self._env.otlp_store, source.selectors, window, max_bytes=limit):
            self._fetched += len(raw)
            out.append(await self._labelled(msgspec.Raw(raw), source) if source.labelled else raw)
        return out

    async def _labelled(self, raw: msgspec.Raw, source: SourcePlan) -> bytes:
        """``source=<name>`` on every series of a named source's answer."""
        try:
            if len(memoryview(raw)) <= LABEL_ON_LOOP_BYTES:
                labelled, collisions = label_series(raw, source.name)
            else:  # decoding the label maps of megabytes of series would stall the other scorers
                labelled, collisions = await asyncio.to_thread(label_series, raw, source.name)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise PrometheusResponseError(
                f"{source.display}: data.result is not a list of series ({type(exc).__name__})"
            ) from exc
        self._collisions += collisions
        return labelled


__all__ = [
    "Attempt",
    "CycleEnv",
    "CycleKind",
    "CycleObserver",
    "CycleResult",
    "ScoringCycle",
    "one_attempt",
    "utc_now",
]
