"""Replay past days through the agent's own scoring cycle and OCM Placement's ranking, then judge them.

Why the real cycle.  A policy's quality depends on what the product does with its scorer's answer:
the Prometheus window the agent asks for, the placeholder filled in, the normalisation and rounding
to an integer item, the stabilizer.  So every score here comes from ``ScoringCycle`` (the class the
agent's worker runs) against a real Prometheus and a real scoring API, with the cycle's injectable
``clock`` set to the step being replayed, so the query window ends at that step as it would have
then.  Only the clock differs from a live agent; the HTTP clients, the address policy (loopback
allowed, as ``--allow-cidr 127.0.0.1/32`` would) and the items pipeline are the agent's.

Steps, and why a decision never sees its own life.  Step ``j`` of a cluster is its sample at
``SERIES_START + 300 j``.  A decision at judged step ``j`` uses the scores the agent computed at the
sample *before* it, ``j - 1 - lag`` (the query window ends there), and a workload placed then lives over
``[j, j + life)``: the last sample any policy saw is never one of the samples its placement is judged
on.  (A sample is a 5-minute mean; letting the decision see sample ``j`` and judging it over ``[j, ...)``
would hand every policy a 5-minute look into its workload's life, most of all the reactive scorer,
whose score *is* that sample.)  ``lag`` is extra staleness on top of that minimum: the benchmark
reports 0, 1 and 2 steps, because a live agent's score is up to one interval old and the metrics
behind it lag their scrape.  :class:`Timeline` holds this arithmetic, and the warm-up is derived from
the longest window of any policy and asserted (:func:`warmup_steps`), so no judged decision sees a
truncated window.

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
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.placement_quality.ranking import Form, placement, rank
from dynamic_scoring.agent.cycle import CycleEnv, ScoringCycle
from dynamic_scoring.agent.http import ClientPool
from dynamic_scoring.agent.items.stabilization import Stabilization, Stabilizer
from dynamic_scoring.agent.plan import ScorerPlan
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.ctl.explain_cycle import FileTokens
from dynamic_scoring.outbound.addresses import AddressPolicy

LIFE_STEPS = 12
"""A workload lives one hour (12 steps of 300 s)."""
OVERLOAD_PERCENTILE = 90.0
CYCLE_TIMEOUT = 60.0
"""Seconds one replayed cycle may take; far above what loopback needs, so only a hang trips it."""

LOOPBACK = AddressPolicy.parse(["127.0.0.1/32"])

# httpcore asks ``import sniffio`` on every request; without the package installed each ask is a failed
# import that searches sys.path again (a fifth of a replayed cycle's CPU).  A None entry makes the
# import fail at once, with the same outcome (asyncio), so the cycles run as before, only faster.
sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]

Scores = NDArray[np.int64]
"""``scores[cluster][step]``: one integer score per cluster and replayed step."""

CONCURRENCY = 4
"""Replayed cycles in flight at once.  The agent's client pool keeps at most 16 idle connections in
all, shared by Prometheus and the scorer; more than 8 cycles in flight hold more than 16 between them,
so finished ones are closed and new ones opened, and that churn costs the agent's process (the
bottleneck: the cycle's Python side uses a core, Prometheus and the scorers half of the other).  On
2 cores 4 replayed 15 to 30 % more cycles a second than 16 (54 clusters, 6 scorers)."""

LAGS = (0, 1, 2)
"""Extra staleness, in steps, beyond the causal minimum (the sample before the decision)."""


def warmup_steps(
    ranges: Sequence[int], step_seconds: int, *, max_lag: int = max(LAGS), whole_days: bool = True
) -> int:
    """The first judged step: after the longest window of any policy, at the largest lag, has filled.

    A score computed at sample ``s`` queries ``[s - range, s]``, which needs sample ``s - range / step``
    to exist; the first judged decision uses the score of sample ``warmup - 1 - max_lag``.  With
    ``whole_days`` the warm-up is rounded up to whole days, so judged days start at midnight of the
    series and the day plot's hours are the series' own.
    """
    if step_seconds <= 0:
        raise ValueError(f"step_seconds must be positive, got {step_seconds}")
    longest = max((-(-int(r) // step_seconds) for r in ranges), default=0)
    needed = longest + 1 + max_lag
    if whole_days:
        per_day = 86_400 // step_seconds
        needed = -(-needed // per_day) * per_day
    return needed


@dataclass(frozen=True)
class Timeline:
    """Which samples are scored and which score each judged decision uses (see the module docstring).

    ``loads[:, warmup : warmup + judged]`` are the judged steps.  Scores are computed at the samples
    :attr:`scored` (from ``warmup - 1 - max_lag``), and :meth:`aligned` cuts out, for a lag, the score
    each judged step's decision uses: judged step ``j`` gets the score of sample ``warmup + j - 1 - lag``.
    """

    warmup: int
    judged: int
    max_lag: int = max(LAGS)

    def __post_init__(self) -> None:
        if self.max_lag < 0 or self.judged < 1 or self.warmup < 1 + self.max_lag:
            raise ValueError(
                f"no causal timeline: warm-up {self.warmup}, {self.judged} judged steps, lag {self.max_lag}"
            )

    @property
    def first_scored(self) -> int:
        """The first sample a score is computed at."""
        return self.warmup - 1 - self.max_lag

    @property
    def scored(self) -> range:
        """Every sample a score is computed at, in order (the last judged sample is never scored)."""
        return range(self.first_scored, self.warmup + self.judged - 1)

    def score_sample(self, j: int, lag: int = 0) -> int:
        """The sample whose score judged step ``j``'s decision uses: always before sample ``warmup + j``."""
        self._check_lag(lag)
        return self.warmup + j - 1 - lag

    def aligned(self, scores: Scores, lag: int = 0) -> Scores:
        """``scores`` (clusters x :attr:`scored`) cut to clusters x judged steps for ``lag``."""
        self._check_lag(lag)
        if scores.shape[1] != len(self.scored):
            raise ValueError(f"{scores.shape[1]} scored samples, the timeline has {len(self.scored)}")
        start = self.max_lag - lag
        return scores[:, start : start + self.judged]

    def _check_lag(self, lag: int) -> None:
        if not 0 <= lag <= self.max_lag:
            raise ValueError(f"lag {lag} is outside [0, {self.max_lag}]")


class ReplayError(RuntimeError):
    """A replayed cycle did not produce the one score item it should have."""


async def score_once(plan: ScorerPlan, cluster: str, at: float, clients: ClientPool) -> int:
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
    concurrency: int = CONCURRENCY,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Scores]:
    """Every plan's raw score for every cluster at every time: ``out[policy][cluster][j]``.

    At most ``concurrency`` cycles run at once (the scorers and Prometheus share this machine).
    ``progress`` hears of every tenth of the cycles done, with the rate and the time left.
    """
    out = {p: np.zeros((len(names), len(times)), dtype=np.int64) for p in plans}
    gate = asyncio.Semaphore(concurrency)
    clients = ClientPool(policy=LOOPBACK)
    total = len(plans) * len(names) * len(times)
    every = max(1, total // 10)
    done = 0
    began = time.monotonic()

    async def one(policy: str, i: int, j: int) -> None:
        nonlocal done
        async with gate:
            out[policy][i, j] = await score_once(plans[policy], names[i], times[j], clients)
        done += 1
        if done % every == 0:
            rate = done / max(time.monotonic() - began, 1e-9)
            progress(f"replay: {done}/{total} cycles, {rate:.0f}/s, about {(total - done) / rate:.0f} s left")

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


def publish(
    raw: Mapping[str, Scores], times: Sequence[float], timeline: Timeline, settings: Stabilization
) -> dict[tuple[str, str, int], Scores]:
    """Every policy's published scores by ``(policy, variant, lag)``: raw and stabilized with
    ``settings``, each cut to the judged steps at every lag of :data:`LAGS`."""
    published: dict[tuple[str, str, int], Scores] = {}
    for policy, values in raw.items():
        for variant, series in (("raw", values), ("stabilized", stabilize(values, times, settings))):
            for lag in LAGS:
                published[(policy, variant, lag)] = timeline.aligned(series, lag)
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


__all__ = [
    "CONCURRENCY",
    "LAGS",
    "LIFE_STEPS",
    "LOOPBACK",
    "ReplayError",
    "Timeline",
    "aps_writes",
    "decide",
    "decide_static",
    "publish",
    "score_once",
    "score_steps",
    "stabilize",
    "warmup_steps",
]
