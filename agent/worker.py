"""One scorer's loop: fetch, score, publish, every interval, whatever happens to the others.

Timing.  The first cycle starts after a random delay in ``[0, min(5 s, interval)]`` (upstream waited
a whole interval); later cycles start one interval after the previous *start*.  A cycle that
overruns is followed immediately by the next one, never by a backlog.  Each cycle runs inside a
slot of the supervisor's semaphore, so only a bounded number of cycles run at once.

Hot reload.  The supervisor hands a new plan to ``update()``; the next cycle reads it, and a worker
waiting for its next start re-computes the start from the new interval (upstream never applied a
changed summary).

Budget.  A cycle may use one interval: each attempt's deadline is the plan's timeout or the time
left, whichever is smaller, and it bounds the whole exchange, body included, so a peer that drips
bytes cannot keep a slot past the interval.  Transient failures (connection errors, timeouts, 5xx,
408, 429) are retried with backoff, never sooner than a ``Retry-After`` asks, and only while the
next attempt still fits.  Other failures are final for the cycle.  The Prometheus answers of one
cycle share a byte budget (``max_source_bytes_per_cycle``), since all are held until the scoring
call; with several sources each may use an equal share of it.

Sources.  A scorer's sources are fetched in order and their series concatenated; named sources
(``sources``) label each series ``source=<name>``.  When one fails, ``onSourceError`` decides:
``Fail`` fails the cycle with the source named in the condition, ``ScoreWithAvailable`` scores what
arrived and says which source is missing (reason ``ScoredWithSourceErrors``).  Each failure of a
named source is also counted in ``dynamic_scoring_source_failures_total{source=...}``.

Outcome.  Every cycle of a publishing scorer ends with exactly one ``ScorePublisher.publish`` call:
after a success with the new items and a new ``validUntil``; after a failure with ``items=None`` so
the last scores stay until they expire, and a condition naming the failed stage and reason.  When
the last success has expired, the scorer's ``dynamic_score`` series are dropped as well, so that
neither Placement nor a dashboard sees a stale value as current.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from agent.auth import EndpointCredentials, resolve_credentials
from agent.errors import (
    AgentError,
    PrometheusRequestInvalid,
    PrometheusResponseError,
    PublishError,
    Stage,
)
from agent.http import ClientPool, escape_control
from agent.metrics import AgentMetrics
from agent.plan import ScorerPlan, SourcePlan, scoring_secret
from agent.ports import (
    CONDITION_TYPE,
    CycleCondition,
    PublishRequest,
    ScoreItem,
    ScorePublisher,
    SecretReader,
)
from agent.retry import retrying
from agent.scoring.answer import ScoringAnswer
from agent.scoring.client import call_scorer, check_scores_fit, has_series
from agent.scoring.dimensions import build_items, default_item_names
from agent.scoring.maths import valid_until
from agent.settings import AgentSettings
from agent.source.labelling import label_series
from agent.source.otlp.fetching import read_selected
from agent.source.otlp.store import SeriesStore
from agent.source.placeholders import PlaceholderError, expand_queries
from agent.source.prometheus import RangeWindow, query_range
from dynamic_scoring.score_size import max_results_for

logger = logging.getLogger("agent.worker")

MESSAGE_LIMIT = 1024
LABEL_ON_LOOP_BYTES = 256 * 1024
"""Answers of a named source larger than this are labelled in a worker thread, off the event loop."""
PARTIAL_REASON = "ScoredWithSourceErrors"
"""The condition reason of a cycle that scored without some sources (``ScoreWithAvailable``)."""


class InternalError(AgentError):
    """An unexpected exception inside the agent (a bug); reported like any failure, logged in full."""


class _ScorerLog(logging.LoggerAdapter[logging.Logger]):
    """Prefixes the scorer's label and escapes control characters in the whole line.

    Names, queries and error texts come from the ConfigMap, Prometheus or a scorer; a newline or an
    ANSI escape in any of them must not forge a log line.  The line is formatted here, escaped, and
    handed on as a constant, so no argument reaches the handler unescaped.
    """

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):  # a bad format must not end the cycle (logging would not either)
            text = f"{msg} {args!r}"
        label = self.extra["label"] if self.extra else ""
        kwargs.setdefault("stacklevel", 2)
        self.logger.log(level, "%s %s", label, escape_control(text), **kwargs)


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


@dataclass
class WorkerContext:
    """What every worker of one agent shares; built by the ``Supervisor``."""

    cluster_name: str
    secrets: SecretReader
    publisher: ScorePublisher
    metrics: AgentMetrics
    clients: ClientPool
    settings: AgentSettings
    slots: asyncio.Semaphore
    rng: random.Random = field(default_factory=random.Random)
    wall_clock: Callable[[], datetime] = utc_now
    otlp_store: SeriesStore | None = None
    """What the OTLP receiver keeps; ``None`` when the agent runs without one."""


def _truncate(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """A condition message: control characters escaped, at most ``limit`` characters."""
    text = escape_control(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ScorerWorker:
    """Runs the cycles of one score name as one asyncio task.

    Args:
        plan: the checked summary to start with.
        ctx: shared clients, ports, metrics and settings.
    """

    def __init__(self, plan: ScorerPlan, ctx: WorkerContext) -> None:
        self._plan = plan
        self._ctx = ctx
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._valid_until: datetime | None = None
        self._published = False
        self._stage: Stage = "fetch"
        # Per cycle: sources that failed under ScoreWithAvailable, bytes fetched, source-label renames.
        self._failed_sources: list[tuple[SourcePlan, AgentError]] = []
        self._fetched = 0
        self._label_collisions = 0
        self.cycles = 0
        """Finished cycles (successful or not); for status reports and tests."""
        self.last_outcome: PublishRequest | None = None
        """The outcome of the latest finished cycle, whether or not it was published."""

    @property
    def plan(self) -> ScorerPlan:
        """The plan the next cycle will use."""
        return self._plan

    @property
    def score_name(self) -> str:
        """The worker key."""
        return self._plan.score_name

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger that names this scorer on every line."""
        return _ScorerLog(logger, {"label": self._plan.label})

    def start(self) -> None:
        """Start the loop as a task."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"scorer:{self.score_name}")

    def update(self, plan: ScorerPlan) -> None:
        """Use ``plan`` from the next cycle on; a pending wait is re-timed to the new interval.

        Failure series of sources the new plan no longer has are dropped, so the ``source`` label
        stays bounded by the scorer's current sources however often they are renamed.
        """
        gone = {s.name for s in self._plan.sources} - {s.name for s in plan.sources} - {""}
        if gone:
            self._ctx.metrics.forget_sources(plan.score_name, gone)
        self._plan = plan
        self._wake.set()

    async def stop(self, timeout: float) -> None:
        """Cancel the loop and wait up to ``timeout`` seconds for it to end."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:
            self.log.error("did not stop within %.1fs; abandoning it", timeout)
        elif not task.cancelled() and task.exception() is not None:
            self.log.error("loop had ended with %r", task.exception())

    # -- loop ---------------------------------------------------------------------------------------

    async def _run(self) -> None:
        jitter = self._ctx.rng.uniform(0, min(self._ctx.settings.initial_jitter_seconds, self._plan.interval))
        await asyncio.sleep(jitter)
        while True:
            started = time.monotonic()
            plan = self._plan
            try:
                async with self._ctx.slots:
                    await self.run_cycle(plan)
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must survive any bug in one cycle
                self.log.exception("cycle crashed")
            await self._wait_next(started)

    async def _wait_next(self, started: float) -> None:
        while True:
            delay = started + self._plan.interval - time.monotonic()
            if delay <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except TimeoutError:
                return

    # -- one cycle ----------------------------------------------------------------------------------

    async def run_cycle(self, plan: ScorerPlan) -> PublishRequest:
        """Run one cycle with ``plan`` and return its outcome (also published when the plan says so)."""
        ctx = self._ctx
        name = plan.score_name
        if self._published and not plan.publish:
            await self._remove_published(plan)
        deadline = time.monotonic() + plan.interval
        self._failed_sources = []
        self._fetched = 0
        self._label_collisions = 0
        outcome: PublishRequest
        try:
            if plan.summary.masked:
                outcome = self._stated_default(plan, "Masked")
            elif (response := await self._fetch_and_score(plan, deadline)) is None:
                outcome = self._stated_default(plan, "NoData")
            else:
                outcome = self._success(plan, response)
        except AgentError as exc:
            outcome = self._failure(plan, exc)
        except Exception as exc:
            self.log.exception("unexpected error in cycle")
            # Only the type goes on the hub: the text of an unexpected exception is not vetted.
            error = InternalError(
                f"internal error ({type(exc).__name__}); see the agent log", stage=self._stage
            )
            outcome = self._failure(plan, error)
        wrote = await self._write(plan, outcome)
        ok = outcome.succeeded and wrote
        ctx.metrics.count_cycle(name, success=ok)
        if ok and outcome.valid_until is not None:
            now = ctx.wall_clock()
            ctx.metrics.set_freshness(name, now.timestamp(), outcome.valid_until.timestamp())
        self.cycles += 1
        self.last_outcome = outcome
        await ctx.clients.collect()
        return outcome

    async def _credentials(self, plan: ScorerPlan, stage: Stage) -> EndpointCredentials:
        s = plan.summary
        return await resolve_credentials(
            s.scoring_auth,
            scoring_secret(plan),
            self._ctx.secrets,
            url=s.scoring_endpoint,
            stage=stage,
            scorer=s.name,
        )

    @contextlib.contextmanager
    def _timed(self, score_name: str, stage: Stage) -> Iterator[None]:
        """Record a stage's duration, labelled by whether it raised."""
        began = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            self._ctx.metrics.add_stage_seconds(score_name, stage, time.monotonic() - began, success=ok)

    def _on_retry(self, plan: ScorerPlan, stage: Stage) -> Callable[[AgentError, float], None]:
        def note(exc: AgentError, pause: float) -> None:
            self._ctx.metrics.count_retry(plan.score_name, stage)
            self.log.info("%s: retrying in %.2fs after %s: %s", stage, pause, exc.reason, exc)

        return note

    async def _stage_client(self, plan: ScorerPlan, stage: Stage) -> tuple[Any, EndpointCredentials]:
        creds = await self._credentials(plan, stage)
        try:
            client = self._ctx.clients.client_for(creds.tls)
        except AgentError as exc:
            exc.stage = stage
            raise
        return client, creds

    async def _fetch_and_score(self, plan: ScorerPlan, deadline: float) -> ScoringAnswer | None:
        """The scorer's answer, or ``None`` when a stated default replaces it.

        ``None`` means the source returned no series and the summary states a ``missingDataScore``:
        the scorer is then not called, as there is nothing to score.
        """
        ctx = self._ctx
        settings = ctx.settings
        name = plan.score_name
        series: list[Any] = []
        self._stage = "fetch"
        if plan.fetch:
            with self._timed(name, "fetch"):
                series = await self._fetch_sources(plan, deadline)

        if plan.fetch and plan.summary.missing_data_score is not None and not has_series(series):
            return None

        self._stage = "score"
        with self._timed(name, "score"):
            client, creds = await self._stage_client(plan, "score")

            async def post(timeout: float) -> ScoringAnswer:
                return await call_scorer(
                    client,
                    plan.summary.scoring_endpoint,
                    series,
                    headers=creds.headers,
                    timeout=timeout,
                    max_bytes=settings.max_response_bytes,
                    max_results=max_results_for(plan.max_score_bytes),
                    params=plan.summary.scoring_params,
                )

            response = await retrying(
                post,
                deadline=deadline,
                timeout=plan.timeout_seconds,
                policy=settings.retry,
                on_retry=self._on_retry(plan, "score"),
            )
        return response

    async def _fetch_sources(self, plan: ScorerPlan, deadline: float) -> list[Any]:
        """Every source's series in source order; applies ``onSourceError`` to a failing source.

        Each source may hold at most an equal share of the cycle's byte budget, so a large answer
        from the first source cannot starve the later ones.  With ``ScoreWithAvailable`` the
        sources share the first half of the time left, in slots: source ``i`` of ``n`` must be done
        by ``start + half * (i + 1) / n``, so a hanging source costs only its own slot (time a
        quick source leaves over goes to the next) and the scoring call keeps the other half.
        """
        ctx = self._ctx
        count = len(plan.sources)
        share = ctx.settings.max_source_bytes_per_cycle // count
        tolerant = plan.score_with_available
        started = time.monotonic()
        half = (deadline - started) / 2
        now = time.time()
        series: list[Any] = []
        failed: list[tuple[SourcePlan, AgentError]] = []
        for index, source in enumerate(plan.sources):
            slot_end = started + half * (index + 1) / count if tolerant else deadline
            try:
                series.extend(await self._fetch_source(plan, source, now, slot_end, share))
            except AgentError as exc:
                exc.stage = "fetch"
                if source.name:
                    exc.message = f"{source.display}: {exc.message}"
                    ctx.metrics.count_source_failure(plan.score_name, source.name, exc.reason)
                if not tolerant:
                    raise
                self.log.warning("fetch from %s failed (%s): %s", source.display, exc.reason, exc)
                failed.append((source, exc))
        if failed and len(failed) == len(plan.sources):
            first = failed[0][1]
            first.message = f"every source failed; first: {first.message}"
            raise first
        self._failed_sources = failed
        return series

    async def _fetch_source(
        self, plan: ScorerPlan, source: SourcePlan, now: float, deadline: float, budget: int
    ) -> list[Any]:
        """One source's answers (raw JSON arrays), labelled with its name when it has one."""
        ctx = self._ctx
        settings = ctx.settings
        if source.type == "OpenTelemetry":
            return await self._read_otel(source, now, budget)
        if source.type != "Prometheus":
            raise PrometheusRequestInvalid(
                f"{source.display}: type {source.type} is not fetched by this agent", stage="fetch"
            )
        try:
            queries = expand_queries(source.queries, ctx.cluster_name)
        except PlaceholderError as exc:
            raise PrometheusRequestInvalid(str(exc), stage="fetch") from exc
        creds = await resolve_credentials(
            source.auth,
            source.legacy_secret,
            ctx.secrets,
            url=source.endpoint,
            stage="fetch",
            scorer=plan.summary.name,
        )
        try:
            client = ctx.clients.client_for(creds.tls)
        except AgentError as exc:
            exc.stage = "fetch"
            raise
        window = RangeWindow.ending_at(now, source.range, source.step)
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
                    source.endpoint,
                    query,
                    window,
                    index=index,
                    headers=creds.headers,
                    timeout=timeout,
                    max_bytes=max(0, limit),
                )

            raw = await retrying(
                one,
                deadline=deadline,
                timeout=plan.timeout_seconds,
                policy=settings.retry,
                on_retry=self._on_retry(plan, "fetch"),
            )
            size = len(memoryview(raw))
            fetched += size
            self._fetched += size
            out.append(await self._labelled(raw, source) if source.labelled else raw)
        return out

    async def _read_otel(self, source: SourcePlan, now: float, budget: int) -> list[Any]:
        """An OpenTelemetry source: the pushed series its selectors match, from the agent's store."""
        window = RangeWindow.ending_at(now, source.range, source.step)
        limit = min(budget, self._ctx.settings.max_source_bytes_per_cycle - self._fetched)
        out: list[Any] = []
        for raw in await read_selected(self._ctx.otlp_store, source.selectors, window, max_bytes=limit):
            self._fetched += len(raw)
            out.append(await self._labelled(msgspec.Raw(raw), source) if source.labelled else raw)
        return out

    async def _labelled(self, raw: msgspec.Raw, source: SourcePlan) -> bytes:
        try:
            if len(memoryview(raw)) <= LABEL_ON_LOOP_BYTES:
                labelled, collisions = label_series(raw, source.name)
            else:  # decoding the label maps of megabytes of series would stall the other scorers
                labelled, collisions = await asyncio.to_thread(label_series, raw, source.name)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise PrometheusResponseError(
                f"{source.display}: data.result is not a list of series ({type(exc).__name__})"
            ) from exc
        if collisions:
            self._label_collisions += collisions
        return labelled

    def _success(self, plan: ScorerPlan, response: ScoringAnswer) -> PublishRequest:
        ctx = self._ctx
        name = plan.score_name
        outcome = build_items(
            response.results,
            fmt=plan.summary.score_dimension_formats or plan.dimension_format,
            cluster=ctx.cluster_name,
            score_name=name,
            normalization=plan.summary.score_normalization,
        )
        if plan.publish:
            check_scores_fit(outcome.items, plan.max_score_bytes)
        ctx.metrics.set_scores(ctx.cluster_name, name, response.results)
        ctx.metrics.count_items(name, rejected=len(outcome.rejected), clamped=outcome.clamped)
        notes = []
        if outcome.rejected:
            first = outcome.rejected[0]
            count = len(outcome.rejected)
            notes.append(f"{count} result(s) rejected, e.g. result {first.index}: item name {first.reason}")
            self.log.warning("%s", notes[-1])
        if outcome.duplicates:
            notes.append(f"{outcome.duplicates} duplicate item name(s), the last result won")
        if outcome.clamped:
            notes.append(f"{outcome.clamped} score(s) clamped to [-100, 100]")
        if self._label_collisions:
            notes.append(
                f"{self._label_collisions} series had a source label of their own, kept as exported_source"
            )
        reason = "Scored"
        if self._failed_sources:
            reason = PARTIAL_REASON
            missing = "; ".join(f"{exc.reason}: {exc}" for _, exc in self._failed_sources)
            names = ", ".join(src.name for src, _ in self._failed_sources)
            notes.insert(0, f"without source(s) {names} (onSourceError: ScoreWithAvailable): {missing}")
        until = valid_until(ctx.wall_clock(), plan.interval, plan.summary.valid_for_seconds)
        self._valid_until = until
        message = f"scorer {plan.summary.name or name} produced {len(outcome.items)} score(s)"
        if notes:
            message += "; " + "; ".join(notes)
        return PublishRequest(
            score_name=name,
            aps_name=plan.aps_name,
            items=outcome.items,
            valid_until=until,
            condition=CycleCondition(CONDITION_TYPE, "True", reason, _truncate(message)),
            interval_seconds=plan.interval,
        )

    def _stated_default(self, plan: ScorerPlan, reason: str) -> PublishRequest:
        """The summary's ``missingDataScore`` as this cycle's scores, with a condition saying why.

        ``NoData``: the source answered with no series.  ``Masked``: the hub masked this scorer on
        this cluster under ``maskPolicy: Score``, and nothing was queried or scored.  Writing the
        stated score matters because Placement treats a missing score as 0, which outranks every
        negative score.  The ``dynamic_score`` series are dropped: no series was scored.
        """
        ctx = self._ctx
        name = plan.score_name
        score = plan.summary.missing_data_score
        assert score is not None  # the summary model requires it for masked; the caller checks NoData
        ctx.metrics.clear_scores(name)
        names = default_item_names(plan.summary.dimension_formats, cluster=ctx.cluster_name, score_name=name)
        until = valid_until(ctx.wall_clock(), plan.interval, plan.summary.valid_for_seconds)
        self._valid_until = until
        why = (
            "the source returned no series"
            if reason == "NoData"
            else "the scorer is masked on this cluster (maskPolicy: Score)"
        )
        if reason == "NoData" and self._failed_sources:
            # Under ScoreWithAvailable the failed sources might have had the series: say so.
            failed = ", ".join(src.name for src, _ in self._failed_sources)
            why = f"the sources that answered returned no series (failed: {failed})"
        message = f"scorer {plan.summary.name or name}: {why}; wrote the missing-data score {score}"
        return PublishRequest(
            score_name=name,
            aps_name=plan.aps_name,
            items=[ScoreItem(n, score) for n in names],
            valid_until=until,
            condition=CycleCondition(CONDITION_TYPE, "True", reason, _truncate(message)),
            interval_seconds=plan.interval,
        )

    def _failure(self, plan: ScorerPlan, exc: AgentError) -> PublishRequest:
        ctx = self._ctx
        name = plan.score_name
        stage: Stage = exc.stage or self._stage
        ctx.metrics.count_failure(name, stage, exc.reason)
        self.log.warning("%s failed (%s): %s", stage, exc.reason, exc)
        if self._valid_until is not None and ctx.wall_clock() >= self._valid_until:
            ctx.metrics.clear_scores(name)
        message = f"{stage} failed for scorer {plan.summary.name or name}: {exc}"
        return PublishRequest(
            score_name=name,
            aps_name=plan.aps_name,
            items=None,
            valid_until=self._valid_until,
            condition=CycleCondition(CONDITION_TYPE, "False", exc.reason, _truncate(message)),
            interval_seconds=plan.interval,
        )

    async def _write(self, plan: ScorerPlan, outcome: PublishRequest) -> bool:
        ctx = self._ctx
        name = plan.score_name
        if not plan.publish:
            if outcome.succeeded:
                ctx.metrics.add_stage_seconds(name, "write", 0.0, success=True)
            return True
        began = time.monotonic()
        try:
            async with asyncio.timeout(ctx.settings.publish_timeout_seconds):
                await ctx.publisher.publish(outcome)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ctx.metrics.add_stage_seconds(name, "write", time.monotonic() - began, success=False)
            error = (
                exc
                if isinstance(exc, PublishError)
                else PublishError(_truncate(f"publishing failed: {type(exc).__name__}: {exc}", 300))
            )
            ctx.metrics.count_failure(name, "write", error.reason)
            self.log.warning("write failed for %s: %s", plan.aps_name, error)
            return False
        self._published = True
        ctx.metrics.add_stage_seconds(name, "write", time.monotonic() - began, success=outcome.succeeded)
        return True

    async def _remove_published(self, plan: ScorerPlan) -> None:
        try:
            async with asyncio.timeout(self._ctx.settings.publish_timeout_seconds):
                await self._ctx.publisher.remove(plan.aps_name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.log.warning(
                "removing %s failed (%s); will retry next cycle", plan.aps_name, type(exc).__name__
            )
            return
        self._published = False
        self.log.info("destination is no longer AddOnPlacementScore; removed %s", plan.aps_name)


__all__ = ["InternalError", "ScorerWorker", "WorkerContext", "utc_now"]
