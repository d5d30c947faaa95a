"""Replay past days through the agent's own scoring cycle and OCM Placement's ranking, then judge them.

Why the real cycle.  A policy's quality depends on what the product does with its scorer's answer:
the Prometheus window the agent asks for, the placeholder filled in, the normalisation and rounding
to an integer item, the stabilizer.  So every score here comes from ``ScoringCycle`` (the class the
agent's worker runs) against a real Prometheus and a real scoring API, with the cycle's injectable
``clock`` set to the step being replayed, so the query window ends at that step as it would have
then.  Only the clock differs from a live agent; the HTTP clients, the address policy (loopback
allowed, as ``--allow-cidr 127.0.0.1/32`` would) and the items pipeline are the agent's.

Steps.  Step ``j`` of a cluster is its sample at ``SERIES_START + 300 j``; a decision at step ``j``
sees the samples up to and including ``j`` (the window ends at that sample) and a workload placed
then lives over ``[j, j + life)``.  The first :data:`WARMUP_DAYS` day is skipped so every scorer has
its whole window; decisions and judging cover the remaining steps only.

Order of work.  Raw scores are computed once per (policy, cluster, step), concurrently, and kept in
an array; the stabilized variant replays the same raw values through the agent's ``Stabilizer``
(one per cluster, as one agent per cluster has one per scorer) without calling the scorer again.
Decisions then walk the steps in order, carrying the previous decision forward for Steady.

APS writes.  Counted as the steps at which a cluster's published integer score differs from the one
before (the first publication is not counted).  The real agent also rewrites an unchanged score at
half of ``validForSeconds``; that adds the same count to every scored policy (here 86400 / 600 = 144
per cluster and day) and is not included.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.quality import metrics
from bench.quality.ranking import Form, placement, rank
from dynamic_scoring.addresses import AddressPolicy
from dynamic_scoring.agent.cycle import CycleEnv, ScoringCycle
from dynamic_scoring.agent.http import ClientPool
from dynamic_scoring.agent.items.stabilization import Stabilization, Stabilizer
from dynamic_scoring.agent.plan import ScorerPlan
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.ctl.explain_cycle import FileTokens

WARMUP_DAYS = 1
LIFE_STEPS = 12
"""A workload lives one hour (12 steps of 300 s)."""
LEAD_WINDOW = 12
OVERLOAD_PERCENTILE = 90.0
CYCLE_TIMEOUT = 60.0
"""Seconds one replayed cycle may take; far above what loopback needs, so only a hang trips it."""

LOOPBACK = AddressPolicy.parse(["127.0.0.1/32"])

Scores = NDArray[np.int64]
"""``scores[cluster][step]``: one integer score per cluster and replayed step."""


class ReplayError(RuntimeError):
    """A replayed cycle did not produce the one score item it should have."""


async def _one_score(plan: ScorerPlan, cluster: str, at: float, clients: ClientPool) -> int:
    """One real cycle of ``plan`` for ``cluster`` with the window ending at ``at``; its item's value."""
    env = CycleEnv(cluster, FileTokens({}), clients, AgentSettings(address_policy=LOOPBACK), clock=lambda: at)
    outcome = await ScoringCycle(plan, env).run(time.monotonic() + CYCLE_TIMEOUT)
    values = [item.value for item in outcome.items if item.name == plan.score_name]
    if outcome.kind != "Scored" or len(values) != 1:
        raise ReplayError(f"{plan.score_name} on {cluster} at {at}: {outcome.kind} with {outcome.items}")
    return int(values[0])


async def score_steps(
    plans: Mapping[str, ScorerPlan],
    names: Sequence[str],
    times: Sequence[float],
    *,
    concurrency: int = 16,
) -> dict[str, Scores]:
    """Every plan's raw score for every cluster at every time: ``out[policy][cluster][j]``.

    At most ``concurrency`` cycles run at once (the scorers and Prometheus share this machine).
    """
    out = {p: np.zeros((len(names), len(times)), dtype=np.int64) for p in plans}
    gate = asyncio.Semaphore(concurrency)
    clients = ClientPool(policy=LOOPBACK)

    async def one(policy: str, i: int, j: int) -> None:
        async with gate:
            out[policy][i, j] = await _one_score(plans[policy], names[i], times[j], clients)

    try:
        await asyncio.gather(
            *(one(p, i, j) for j in range(len(times)) for p in plans for i in range(len(names)))
        )
    finally:
        await clients.aclose()
    return out


def stabilize(raw: Scores, times: Sequence[float], settings: Stabilization) -> Scores:
    """What the agent publishes from ``raw`` with ``settings``: one ``Stabilizer`` per cluster."""
    published = np.zeros_like(raw)
    for i in range(raw.shape[0]):
        stabilizer = Stabilizer(settings)
        for j, at in enumerate(times):
            published[i, j] = stabilizer.apply(float(at), [("score", int(raw[i, j]))])["score"].published
    return published


def decide(
    published: Scores | None, names: Sequence[str], k: int, form: Form, resource: str, score: str
) -> list[tuple[int, ...]]:
    """The Placement's decision at every step, each step seeing the previous decision (Steady).

    ``published`` None is the static policy: no cluster publishes a score.  Decisions are cluster
    indices into ``names``, best first.
    """
    obj = placement(k, form, resource, score)
    index = {n: i for i, n in enumerate(names)}
    steps = 0 if published is None else published.shape[1]
    decisions: list[tuple[int, ...]] = []
    previous: tuple[str, ...] = ()
    for j in range(steps):
        assert published is not None
        scores = {n: int(published[i, j]) for i, n in enumerate(names)}
        previous = rank(obj, names, scores, previous)
        decisions.append(tuple(index[n] for n in previous))
    return decisions


def decide_static(steps: int, names: Sequence[str], k: int, form: Form) -> list[tuple[int, ...]]:
    """The static policy's decisions: no scores at all, OCM's order alone."""
    obj = placement(k, form, "none", "none")
    index = {n: i for i, n in enumerate(names)}
    decisions: list[tuple[int, ...]] = []
    previous: tuple[str, ...] = ()
    for _ in range(steps):
        previous = rank(obj, names, None, previous)
        decisions.append(tuple(index[n] for n in previous))
    return decisions


def aps_writes(published: Scores) -> int:
    """Score changes over all clusters: steps whose published value differs from the step before."""
    if published.shape[1] < 2:
        return 0
    return int(np.count_nonzero(np.diff(published, axis=1)))


@dataclass(frozen=True)
class LeadSummary:
    """Upward threshold crossings by how the decisions treated the cluster (shares of all crossings)."""

    crossings: int
    before: float | None  # left lead > 0 steps before the crossing
    at: float | None  # left exactly at the crossing step
    after: float | None  # left only after the crossing
    stayed: float | None  # held and never left
    not_held: float | None  # not picked in the hour before
    median_lead: float | None  # over the crossings left (steps; negative: after)


def summarize_leads(crossings: Sequence[metrics.Crossing]) -> LeadSummary:
    """Shares of :func:`metrics.lead_times` outcomes and the median lead of those that left."""
    n = len(crossings)
    leads = [c.lead for c in crossings if c.status == "left" and c.lead is not None]

    def share(count: int) -> float | None:
        return count / n if n else None

    return LeadSummary(
        crossings=n,
        before=share(sum(1 for x in leads if x > 0)),
        at=share(sum(1 for x in leads if x == 0)),
        after=share(sum(1 for x in leads if x < 0)),
        stayed=share(sum(1 for c in crossings if c.status == "stayed")),
        not_held=share(sum(1 for c in crossings if c.status == "not_held")),
        median_lead=float(statistics.median(leads)) if leads else None,
    )


@dataclass(frozen=True)
class Outcome:
    """Every measure of one policy x variant x Placement form x k over the replayed steps."""

    policy: str
    variant: str  # "raw", "stabilized", or "-" for static
    form: str
    k: int
    regret_mean: float | None
    regret_p95: float | None
    exposure: float | None
    leads: LeadSummary
    changes_per_day: float
    writes_per_cluster_day: float | None  # None for static (it writes nothing)


def judge(
    policy: str,
    variant: str,
    form: str,
    k: int,
    loads: NDArray[np.float64],
    decisions: Sequence[metrics.Decision],
    step_seconds: int,
    published: Scores | None,
) -> Outcome:
    """The measures of ``decisions`` against ``loads`` (the replayed steps only, clusters x steps)."""
    thresholds = metrics.percentile_thresholds(loads, OVERLOAD_PERCENTILE)
    regret = metrics.lifetime_regret(loads, decisions, LIFE_STEPS)
    exposure = metrics.overload_exposure(loads, decisions, LIFE_STEPS, thresholds)
    crossings = metrics.lead_times(loads, decisions, thresholds, window=LEAD_WINDOW)
    days = loads.shape[1] * step_seconds / metrics.SECONDS_PER_DAY
    writes = None if published is None else aps_writes(published) / (published.shape[0] * days)
    return Outcome(
        policy=policy,
        variant=variant,
        form=form,
        k=k,
        regret_mean=regret.mean,
        regret_p95=regret.p95,
        exposure=exposure.share,
        leads=summarize_leads(crossings),
        changes_per_day=metrics.changes_per_day(decisions, step_seconds),
        writes_per_cluster_day=writes,
    )


__all__ = [
    "LIFE_STEPS",
    "LOOPBACK",
    "WARMUP_DAYS",
    "LeadSummary",
    "Outcome",
    "ReplayError",
    "aps_writes",
    "decide",
    "decide_static",
    "judge",
    "score_steps",
    "stabilize",
    "summarize_leads",
]
