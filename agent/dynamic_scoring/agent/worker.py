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
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from dynamic_scoring.agent.cycle import Attempt, CycleEnv, CycleObserver, CycleResult, ScoringCycle
from dynamic_scoring.agent.errors import AgentError, PublishError, Stage
from dynamic_scoring.agent.http import escape_control
from dynamic_scoring.agent.items.dimensions import describe_empty_placeholders
from dynamic_scoring.agent.items.stabilization import ItemState, Stabilizer
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.plan import ScorerPlan, SourcePlan
from dynamic_scoring.agent.ports import (
    CONDITION_TYPE,
    SCORED_REASON,
    STABILIZED_REASON,
    CycleCondition,
    PublishRequest,
    ScoreItem,
    ScorePublisher,
)
from dynamic_scoring.agent.retry import retrying

T = TypeVar("T")

logger = logging.getLogger(__name__)

MESSAGE_LIMIT = 1024
PARTIAL_REASON = "ScoredWithSourceErrors"
EMPTY_PLACEHOLDER_REASON = "ScoredWithEmptyPlaceholders"
"""Published, but a format's label placeholder was empty for some results (items.dimensions)."""
NOTHING_NAMED_REASON = "EmptyPlaceholder"
"""Nothing published: every result's name rendered empty because a placeholder had no value."""
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


class _WorkerObserver(CycleObserver):
    """The cycle's stages as metrics: each stage's duration, and each failure of a named source."""

    def __init__(self, metrics: AgentMetrics, score_name: str) -> None:
        self._metrics = metrics
        self._score_name = score_name

    @contextlib.contextmanager
    def stage(self, stage: Stage) -> Iterator[None]:
        """Record a stage's duration, labelled by whether it raised."""
        began = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            self._metrics.add_stage_seconds(self._score_name, stage, time.monotonic() - began, success=ok)

    def source_failed(self, source: SourcePlan, error: AgentError, *, tolerated: bool) -> None:
        """Count it under the source's name (the unnamed upstream source is the cycle's failure)."""
        if source.name:
            self._metrics.count_source_failure(self._score_name, source.name, error.reason)


@dataclass(kw_only=True)
class WorkerContext(CycleEnv):
    """What every worker of one agent shares; built by the ``Supervisor``.

    The cycle's environment (cluster, Secrets, clients, settings, OTLP store, clock), handed to each
    ``ScoringCycle`` as it is, plus what only the loop around the cycle needs.
    """

    publisher: ScorePublisher
    metrics: AgentMetrics
    slots: asyncio.Semaphore
    rng: random.Random = field(default_factory=random.Random)


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
        self._stabilizer = Stabilizer(plan.stabilization)
        self._seeded = False
        """The stabilizer started from the hub's scores (once per worker, or after a pause)."""
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
        if plan.publish and plan.stabilization.active and not self._seeded:
            await self._seed(plan)
        cycle = ScoringCycle(
            plan,
            ctx,
            attempt=self._retrying(plan),
            observer=_WorkerObserver(ctx.metrics, name),
            log=self.log,
        )
        outcome: PublishRequest
        try:
            outcome = self._success(plan, await cycle.run(time.monotonic() + plan.interval))
        except AgentError as exc:
            outcome = self._failure(plan, exc, cycle.stage)
        except Exception as exc:
            self.log.exception("unexpected error in cycle")
            # Only the type goes on the hub: the text of an unexpected exception is not vetted.
            error = InternalError(
                f"internal error ({type(exc).__name__}); see the agent log", stage=cycle.stage
            )
            outcome = self._failure(plan, error, cycle.stage)
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

    def _retrying(self, plan: ScorerPlan) -> Attempt:
        """The cycle's ``attempt`` hook: transient failures retried while the next try fits."""
        policy = self._ctx.settings.retry

        async def attempt(
            call: Callable[[float], Awaitable[T]], stage: Stage, *, deadline: float, timeout: float
        ) -> T:
            def note(exc: AgentError, pause: float) -> None:
                self._ctx.metrics.count_retry(plan.score_name, stage)
                self.log.info("%s: retrying in %.2fs after %s: %s", stage, pause, exc.reason, exc)

            return await retrying(call, deadline=deadline, timeout=timeout, policy=policy, on_retry=note)

        return attempt

    def _success(self, plan: ScorerPlan, result: CycleResult) -> PublishRequest:
        """The request that publishes a cycle's items, with a condition saying what happened."""
        ctx = self._ctx
        name = plan.score_name
        now = ctx.wall_clock()
        if self._valid_until is not None and now >= self._valid_until:
            # the last published scores expired: a cluster that stopped answering must not come
            # back looking as it did, so nothing is held against those values
            self._stabilizer.clear()
        self._valid_until = result.valid_until
        if result.kind != "Scored":
            # the stated default is published at once, whatever the windows hold, and they start
            # over from it
            self._stabilizer.reset(now.timestamp(), result.items)
            ctx.metrics.set_stabilized(name, {})
            return self._stated_default(plan, result)
        assert result.answer is not None and result.built is not None  # set on every Scored result
        built = result.built
        items, held = self._stabilize(plan, now.timestamp(), result.items)
        ctx.metrics.set_scores(ctx.cluster_name, name, result.answer.results)
        ctx.metrics.count_items(name, rejected=len(built.rejected), clamped=built.clamped)
        notes = []
        if built.rejected:
            first = built.rejected[0]
            count = len(built.rejected)
            notes.append(f"{count} result(s) rejected, e.g. result {first.index}: item name {first.reason}")
            self.log.warning("%s", notes[-1])
        if built.duplicates:
            notes.append(f"{built.duplicates} item name(s) rendered again by another format, written once")
        if built.clamped:
            notes.append(f"{built.clamped} score(s) clamped to [-100, 100]")
        if result.label_collisions:
            notes.append(
                f"{result.label_collisions} series had a source label of their own, kept as exported_source"
            )
        if held:
            item, state = held[0]
            notes.append(
                f"{len(held)} of {len(items)} score(s) held by stabilization, e.g. {item}: {state.explain()}"
            )
        status: Literal["True", "False"] = "True"
        reason = STABILIZED_REASON if held else SCORED_REASON
        if built.empty_placeholders:
            empty = describe_empty_placeholders(built.empty_placeholders, result.answer.results)
            notes.insert(
                0,
                empty + "; name a label the results have in scoreDimensionFormat, or map the "
                "placeholder to one with scoreDimensionLabels (e.g. {node: instance})",
            )
            self.log.warning("%s", notes[0])
            reason = EMPTY_PLACEHOLDER_REASON
            if not result.items:  # every name rendered empty: the scorer's answer reached no one
                status, reason = "False", NOTHING_NAMED_REASON
        # a cycle without some sources says that instead
        if result.failed_sources:
            reason = PARTIAL_REASON if status == "True" else reason
            missing = "; ".join(f"{exc.reason}: {exc}" for _, exc in result.failed_sources)
            names = ", ".join(src.name for src, _ in result.failed_sources)
            notes.insert(0, f"without source(s) {names} (onSourceError: ScoreWithAvailable): {missing}")
        message = f"scorer {plan.summary.name or name} produced {len(result.items)} score(s)"
        if notes:
            message += "; " + "; ".join(notes)
        return PublishRequest(
            score_name=name,
            aps_name=plan.aps_name,
            items=items,
            valid_until=result.valid_until,
            condition=CycleCondition(CONDITION_TYPE, status, reason, _truncate(message)),
            interval_seconds=plan.interval,
        )

    async def _seed(self, plan: ScorerPlan) -> None:
        """Start the windows from the scores the hub holds, so that a restart is not a jump.

        Without this a restarted agent would publish its first raw value at once, which is the
        very jump the rise window exists to hold back.  Expired scores are not a starting point:
        a cluster that stopped answering must not come back looking as it did.
        """
        self._seeded = True
        try:
            async with asyncio.timeout(self._ctx.settings.publish_timeout_seconds):
                current = await self._ctx.publisher.current(plan.aps_name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a starting point only: the cycle goes on from nothing
            self.log.warning(
                "could not read %s to start stabilization from: %s", plan.aps_name, type(exc).__name__
            )
            return
        now = self._ctx.wall_clock()
        expired = current is not None and current.valid_until is not None and current.valid_until <= now
        if current is None or not current.items or expired:
            return
        self._stabilizer.reset(now.timestamp(), current.items)
        self.log.info("stabilization starts from the %d score(s) on the hub", len(current.items))

    def _stabilize(
        self, plan: ScorerPlan, now: float, items: list[ScoreItem]
    ) -> tuple[list[ScoreItem], list[tuple[str, ItemState]]]:
        """The items to publish under the plan's stabilization, and those held back (name, state).

        Without stabilization the items are published as they are and nothing is remembered, so a
        scorer that gains it later starts its windows from the hub's scores again (`_seed`).
        """
        settings = plan.stabilization
        if not settings.active:
            self._stabilizer.clear()
            self._seeded = False
            self._ctx.metrics.set_stabilized(plan.score_name, {})
            return items, []
        self._stabilizer.update(settings)
        states = self._stabilizer.apply(now, items)
        self._ctx.metrics.set_stabilized(plan.score_name, states)
        published = [ScoreItem(item.name, states[item.name].published) for item in items]
        held = [(name, state) for name, state in states.items() if state.published != state.raw]
        return published, held

    def _stated_default(self, plan: ScorerPlan, result: CycleResult) -> PublishRequest:
        """The summary's ``missingDataScore`` as this cycle's scores, with a condition saying why.

        ``NoData``: the source answered with no series.  ``Masked``: the hub masked this scorer on
        this cluster under ``maskPolicy: Score``, and nothing was queried or scored.  Writing the
        stated score matters because Placement treats a missing score as 0, which outranks every
        negative score.  The ``dynamic_score`` series are dropped: no series was scored.
        """
        name = plan.score_name
        self._ctx.metrics.clear_scores(name)
        why = (
            "the source returned no series"
            if result.kind == "NoData"
            else "the scorer is masked on this cluster (maskPolicy: Score)"
        )
        if result.kind == "NoData" and result.failed_sources:
            # Under ScoreWithAvailable the failed sources might have had the series: say so.
            failed = ", ".join(src.name for src, _ in result.failed_sources)
            why = f"the sources that answered returned no series (failed: {failed})"
        message = (
            f"scorer {plan.summary.name or name}: {why}; wrote the missing-data score {result.default_score}"
        )
        return PublishRequest(
            score_name=name,
            aps_name=plan.aps_name,
            items=result.items,
            valid_until=result.valid_until,
            condition=CycleCondition(CONDITION_TYPE, "True", result.kind, _truncate(message)),
            interval_seconds=plan.interval,
        )

    def _failure(self, plan: ScorerPlan, exc: AgentError, current: Stage) -> PublishRequest:
        ctx = self._ctx
        name = plan.score_name
        stage: Stage = exc.stage or current
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


__all__ = ["InternalError", "ScorerWorker", "WorkerContext"]
