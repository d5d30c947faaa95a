"""The set of running workers, converged to the latest summary list.

``apply(summaries)`` is level-triggered: it compares the wanted score names with the running
workers and starts, updates or stops workers until they match, so calling it again with the same
list changes nothing.  The Kubernetes side calls it on every ConfigMap event (and with an empty list
when the ConfigMap or its key disappears).  A malformed or invalid entry is rejected with its name
and a reason and never stops the others; the first entry of a duplicated score name wins.

Stopping a worker because its scorer disappeared also removes its metric series and asks the
publisher to delete its AddOnPlacementScore.  A delete that fails is retried with backoff (1 s
doubling to 60 s) until it succeeds, so no orphan stays on the hub; a delete that timed out but went
through is confirmed by the retry's 404 and is not reported as a failure.  Scores of scorers removed
while the agent was down are found by label at start (``remove_orphans``).  Shutting the agent down
(``close``) removes nothing: those scores are still true and expire through ``validUntil`` if the
agent does not come back.

Each worker runs as one asyncio task, which catches every failure of a cycle; a task that ends
anyway is a bug.  The supervisor keeps the task it saw each worker start and reports one that has
ended (``dead_workers``), and one that finished no cycle for longer than its scores stay valid
(``starved_workers``: no free slot, or a hang); the agent's health turns both into an unhealthy
``/healthz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dynamic_scoring.agent.http import ClientPool
from dynamic_scoring.agent.items.maths import expiry_window
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.plan import ScorerPlan, plan_summaries, plan_summary
from dynamic_scoring.agent.ports import PublishRequest, ScorePublisher, SecretReader
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.source.otlp.store import SeriesStore
from dynamic_scoring.agent.worker import ScorerWorker, WorkerContext
from dynamic_scoring.contract.wire import ScorerSummary, parse_summaries

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rejection:
    """A summary entry that is not run: which one, and why."""

    name: str
    reason: str
    index: int | None = None


@dataclass(frozen=True)
class ApplyReport:
    """What one ``apply`` changed, for logs, events and tests."""

    started: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


class Supervisor:
    """Runs one ``ScorerWorker`` per score name and keeps them in line with the summaries.

    Args:
        cluster_name: this managed cluster's name (``ds_cluster`` label, ``${cluster}``).
        secrets: reads auth Secrets in the agent's install namespace.
        publisher: writes and removes AddOnPlacementScores on the hub.
        metrics: the agent's metrics; a private registry is created when omitted.
        settings: agent-wide limits.
        clients: HTTP clients; created from ``settings`` when omitted.
        rng: randomness for start-up jitter and backoff (seeded in tests).
        otlp_store: the OTLP receiver's store; told the current selectors on every ``apply``.
    """

    def __init__(
        self,
        *,
        cluster_name: str,
        secrets: SecretReader,
        publisher: ScorePublisher,
        metrics: AgentMetrics | None = None,
        settings: AgentSettings | None = None,
        clients: ClientPool | None = None,
        rng: random.Random | None = None,
        otlp_store: SeriesStore | None = None,
    ) -> None:
        self.settings = settings or AgentSettings()
        self.metrics = metrics or AgentMetrics()
        self._ctx = WorkerContext(
            cluster_name=cluster_name,
            secrets=secrets,
            publisher=publisher,
            metrics=self.metrics,
            clients=clients
            or ClientPool(
                extra_ca_files=self.settings.extra_ca_files,
                user_agent=self.settings.user_agent,
                proxies=self.settings.proxies,
                policy=self.settings.address_policy,
            ),
            settings=self.settings,
            slots=asyncio.Semaphore(self.settings.max_concurrent_cycles),
            rng=rng or random.Random(),
            otlp_store=otlp_store,
        )
        self._workers: dict[str, ScorerWorker] = {}
        self._tasks: dict[str, set[asyncio.Task[Any]]] = {}
        self._progress: dict[str, tuple[int, float]] = {}  # score name -> (cycles, when they last changed)
        self._removals: dict[str, str] = {}  # APS name -> scorer label, deletes still owed to the hub
        self._removal_task: asyncio.Task[None] | None = None
        self._removal_wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._applied = False
        self._closed = False

    @property
    def ready(self) -> bool:
        """True once a summary list has been applied (``/readyz``)."""
        return self._applied and not self._closed

    @property
    def pending_removals(self) -> list[str]:
        """APS names whose delete has not succeeded yet (retried in the background)."""
        return sorted(self._removals)

    def dead_workers(self) -> dict[str, str]:
        """Score names whose worker task ended while the worker should run, with how it ended.

        Safe to call from another thread: it only reads the tasks' state.
        """
        dead: dict[str, str] = {}
        for name, tasks in list(self._tasks.items()):
            for task in list(tasks):
                if not task.done():
                    continue
                if task.cancelled():
                    dead[name] = "cancelled"
                else:
                    exc = task.exception()  # its type only: the text of a bug's exception is not vetted
                    dead[name] = f"raised {type(exc).__name__}" if exc is not None else "returned"
        return dead

    def note_progress(self) -> None:
        """Record which workers finished a cycle since the last call (the agent's watchdog calls it)."""
        now = time.monotonic()
        for name, worker in list(self._workers.items()):
            seen = self._progress.get(name)
            if seen is None or seen[0] != worker.cycles:
                self._progress[name] = (worker.cycles, now)

    def starved_workers(self) -> dict[str, tuple[float, float]]:
        """Workers that finished no cycle for longer than their scores stay valid.

        Returns score name -> (seconds since the last finished cycle or the start, the bound).  The
        bound is the scorer's expiry window (``validForSeconds``, else ``max(3 * interval, interval
        + 60 s)``) plus the start-up jitter: past it, its published scores have expired while its
        condition may still say ``Scored``, whatever holds the worker back (no free slot, a hang).
        Reads only what ``note_progress`` recorded, so it is safe from the health server's thread.
        """
        now = time.monotonic()
        starved: dict[str, tuple[float, float]] = {}
        for name, worker in list(self._workers.items()):
            seen = self._progress.get(name)
            if seen is None:
                continue
            plan = worker.plan
            window = expiry_window(plan.interval, plan.summary.valid_for_seconds).total_seconds()
            bound = window + self.settings.initial_jitter_seconds
            if now - seen[1] > bound:
                starved[name] = (now - seen[1], bound)
        return starved

    @property
    def workers(self) -> dict[str, ScorerWorker]:
        """The running workers by score name (a copy)."""
        return dict(self._workers)

    async def apply_payload(self, payload: str | bytes | None) -> ApplyReport | None:
        """Apply the raw ConfigMap value; ``None`` (ConfigMap or key absent) stops every worker.

        A malformed entry is rejected by name while the others apply.  A payload that is not a JSON
        list at all changes nothing and returns ``None``: a bad write to the ConfigMap must not stop
        scorers that work.
        """
        if payload is None:
            return await self.apply([])
        summaries, errors = parse_summaries(payload)
        for error in errors:
            logger.error("rejected %s", error)
        if any(e.index is None for e in errors):
            logger.error("summary payload unusable; keeping the %d scorers that run", len(self._workers))
            return None
        report = await self.apply(summaries)
        report.rejected[:0] = [Rejection(e.name, e.message, e.index) for e in errors]
        return report

    async def apply(self, summaries: Sequence[ScorerSummary]) -> ApplyReport:
        """Start, update and stop workers so that exactly the valid summaries run."""
        async with self._lock:
            if self._closed:
                raise RuntimeError("supervisor is closed")
            report = ApplyReport()
            planned = plan_summaries(summaries, self.settings)
            wanted: dict[str, ScorerPlan] = planned.plans
            for rejected in planned.rejected:
                logger.error("%s rejected: %s", summaries[rejected.index].label, rejected.reason)
                report.rejected.append(Rejection(rejected.name, rejected.reason, rejected.index))

            self._select_otel(wanted.values())
            gone = [name for name in self._workers if name not in wanted]
            await asyncio.gather(*(self._retire(name) for name in gone))
            report.stopped.extend(gone)

            for name, plan in wanted.items():
                worker = self._workers.get(name)
                if worker is None:
                    worker = ScorerWorker(plan, self._ctx)
                    self._workers[name] = worker
                    self._removals.pop(plan.aps_name, None)  # the scorer is back: its APS is wanted
                    before = asyncio.all_tasks()
                    worker.start()
                    self._tasks[name] = asyncio.all_tasks() - before
                    report.started.append(name)
                    logger.info("%s started (every %ds)", plan.label, plan.interval)
                elif worker.plan != plan:
                    worker.update(plan)
                    report.updated.append(name)
                    logger.info("%s updated; the next cycle uses the new summary", plan.label)
                else:
                    report.unchanged.append(name)
            self._applied = True
            return report

    def _select_otel(self, plans: Iterable[ScorerPlan]) -> None:
        """Tell the OTLP store which series to keep: those some OpenTelemetry source selects."""
        store = self._ctx.otlp_store
        if store is None:
            return
        sources = [src for plan in plans for src in plan.sources if src.type == "OpenTelemetry"]
        store.configure(
            [sel for src in sources for sel in src.selectors],
            longest_range=max((src.range for src in sources), default=0),
            finest_step=min((src.step for src in sources), default=1),
        )

    async def run_once(self, summary: ScorerSummary) -> PublishRequest:
        """Run one cycle of ``summary`` now, outside any schedule, and return its outcome.

        The cycle is the one a worker runs (same clients, semaphore, metrics and publisher), which
        is what a benchmark needs.

        Raises:
            InvalidSummary: the summary cannot be run.
        """
        plan = plan_summary(summary, self.settings)
        worker = ScorerWorker(plan, self._ctx)
        async with self._ctx.slots:
            return await worker.run_cycle(plan)

    async def _retire(self, name: str) -> None:
        worker = self._workers.pop(name)
        self._tasks.pop(name, None)
        self._progress.pop(name, None)
        await worker.stop(self.settings.stop_timeout_seconds)
        self.metrics.forget(name)
        self._removals[worker.plan.aps_name] = worker.plan.label
        await self._remove(worker.plan.aps_name, first=True)
        logger.info("%s stopped", worker.plan.label)

    async def _remove(self, aps_name: str, *, first: bool = False) -> bool:
        """One attempt to delete an owed APS; True when it is gone (now or already)."""
        label = self._removals.get(aps_name, aps_name)
        try:
            async with asyncio.timeout(self.settings.publish_timeout_seconds):
                await self._ctx.publisher.remove(aps_name)
        except TimeoutError:
            # The apiserver may well have done it: the retry's 404 will tell, so no failure here.
            logger.info(
                "%s: deleting AddOnPlacementScore %s got no answer within %.0fs; confirming it shortly",
                label,
                aps_name,
                self.settings.publish_timeout_seconds,
            )
        except Exception as exc:
            logger.warning(
                "%s: removing AddOnPlacementScore %s failed (%s: %s); retrying until it succeeds",
                label,
                aps_name,
                type(exc).__name__,
                exc,
            )
        else:
            self._removals.pop(aps_name, None)
            if not first:
                logger.info("%s: AddOnPlacementScore %s removed", label, aps_name)
            return True
        self._ensure_removal_task()
        return False

    def _ensure_removal_task(self) -> None:
        if self._removal_task is None or self._removal_task.done():
            self._removal_task = asyncio.create_task(self._retry_removals(), name="aps-removals")

    async def _retry_removals(self) -> None:
        """Retry owed deletes with backoff (1 s doubling to 60 s) until none is left."""
        backoff = 1.0
        while self._removals and not self._closed:
            self._removal_wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._removal_wake.wait(), backoff * (0.5 + self._ctx.rng.random() / 2)
                )
            async with self._lock:
                if self._closed:
                    return
                results = [await self._remove(name) for name in list(self._removals)]
            backoff = 1.0 if all(results) else min(backoff * 2, 60.0)

    def retry_removals_now(self) -> None:
        """Attempt the owed deletes at once instead of at the next backoff step (SIGHUP)."""
        self._removal_wake.set()

    async def remove_orphans(self, owned: Sequence[str]) -> list[str]:
        """Delete the APSs in ``owned`` (ours, by label) that no running scorer publishes.

        Called once the first summary list is applied, with the names ``list_owned`` found: they
        are the scores of scorers removed while the agent was down.  Returns the names queued.
        """
        async with self._lock:
            wanted = {w.plan.aps_name for w in self._workers.values() if w.plan.publish}
            orphans = [name for name in owned if name not in wanted]
            for name in orphans:
                logger.info("AddOnPlacementScore %s belongs to no configured scorer; removing it", name)
                self._removals.setdefault(name, name)
            for name in orphans:
                await self._remove(name)
            return orphans

    async def close(self, timeout: float = 4.0) -> None:
        """Stop every worker and close the HTTP clients within ``timeout`` seconds.

        Published scores and metric series are left alone: the process is going away, and the
        scores expire by themselves if it does not come back.
        """
        self._closed = True
        if self._removal_task is not None:
            self._removal_task.cancel()
        workers = list(self._workers.values())
        self._workers.clear()
        self._tasks.clear()
        self._progress.clear()
        per_worker = max(0.1, timeout * 0.75)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(w.stop(per_worker) for w in workers))
                await self._ctx.clients.aclose()
        except TimeoutError:
            logger.error("shutdown did not finish within %.1fs", timeout)


__all__ = ["ApplyReport", "Rejection", "Supervisor"]
