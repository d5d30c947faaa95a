"""The set of running workers, converged to the latest summary list.

``apply(summaries)`` is level-triggered: it compares the wanted score names with the running
workers and starts, updates or stops workers until they match, so calling it again with the same
list changes nothing.  The Kubernetes side calls it on every ConfigMap event (and with an empty list
when the ConfigMap or its key disappears).  A malformed or invalid entry is rejected with its name
and a reason and never stops the others; the first entry of a duplicated score name wins.

Stopping a worker because its scorer disappeared also removes its metric series and asks the
publisher to delete its AddOnPlacementScore.  Shutting the agent down (``close``) does neither:
those scores are still true and expire through ``validUntil`` if the agent does not come back.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.http import ClientPool
from agent.metrics import AgentMetrics
from agent.plan import InvalidSummary, ScorerPlan, plan_summary
from agent.ports import PublishRequest, ScorePublisher, SecretReader
from agent.settings import AgentSettings
from agent.worker import ScorerWorker, WorkerContext
from dynamic_scoring.wire import ScorerSummary, parse_summaries

logger = logging.getLogger("agent.supervisor")


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
    ) -> None:
        self.settings = settings or AgentSettings()
        self.metrics = metrics or AgentMetrics()
        self._ctx = WorkerContext(
            cluster_name=cluster_name,
            secrets=secrets,
            publisher=publisher,
            metrics=self.metrics,
            clients=clients
            or ClientPool(extra_ca_files=self.settings.extra_ca_files, user_agent=self.settings.user_agent),
            settings=self.settings,
            slots=asyncio.Semaphore(self.settings.max_concurrent_cycles),
            rng=rng or random.Random(),
        )
        self._workers: dict[str, ScorerWorker] = {}
        self._lock = asyncio.Lock()
        self._applied = False
        self._closed = False

    @property
    def ready(self) -> bool:
        """True once a summary list has been applied (``/readyz``)."""
        return self._applied and not self._closed

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
            wanted: dict[str, ScorerPlan] = {}
            seen: set[str] = set()
            for index, summary in enumerate(summaries):
                key = summary.score_name
                if key in seen:
                    reason = f"duplicate scoreName {key!r}: the first entry is used"
                    logger.error("%s rejected: %s", summary.label, reason)
                    report.rejected.append(Rejection(key, reason, index))
                    continue
                seen.add(key)
                try:
                    wanted[key] = plan_summary(summary, self.settings)
                except InvalidSummary as exc:
                    logger.error("%s rejected: %s", summary.label, exc)
                    report.rejected.append(Rejection(key or summary.name, str(exc), index))

            gone = [name for name in self._workers if name not in wanted]
            await asyncio.gather(*(self._retire(name) for name in gone))
            report.stopped.extend(gone)

            for name, plan in wanted.items():
                worker = self._workers.get(name)
                if worker is None:
                    worker = ScorerWorker(plan, self._ctx)
                    self._workers[name] = worker
                    worker.start()
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

    async def run_once(self, summary: ScorerSummary) -> PublishRequest:
        """Run one cycle of ``summary`` now, outside any schedule, and return its outcome.

        The cycle is the one a worker runs (same clients, semaphore, metrics and publisher), which
        is what a dry-run command or a benchmark needs.

        Raises:
            InvalidSummary: the summary cannot be run.
        """
        plan = plan_summary(summary, self.settings)
        worker = ScorerWorker(plan, self._ctx)
        async with self._ctx.slots:
            return await worker.run_cycle(plan)

    async def _retire(self, name: str) -> None:
        worker = self._workers.pop(name)
        await worker.stop(self.settings.stop_timeout_seconds)
        self.metrics.forget(name)
        try:
            async with asyncio.timeout(self.settings.publish_timeout_seconds):
                await self._ctx.publisher.remove(worker.plan.aps_name)
        except Exception as exc:
            logger.warning(
                "%s: removing AddOnPlacementScore %s failed (%s: %s)",
                worker.plan.label,
                worker.plan.aps_name,
                type(exc).__name__,
                exc,
            )
        logger.info("%s stopped", worker.plan.label)

    async def close(self, timeout: float = 4.0) -> None:
        """Stop every worker and close the HTTP clients within ``timeout`` seconds.

        Published scores and metric series are left alone: the process is going away, and the
        scores expire by themselves if it does not come back.
        """
        self._closed = True
        workers = list(self._workers.values())
        self._workers.clear()
        per_worker = max(0.1, timeout * 0.75)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(w.stop(per_worker) for w in workers))
                await self._ctx.clients.aclose()
        except TimeoutError:
            logger.error("shutdown did not finish within %.1fs", timeout)


__all__ = ["ApplyReport", "Rejection", "Supervisor"]
