"""The placement policies compared, each a real scoring API on loopback registered as a DynamicScorer.

A policy is judged through the whole product path (Prometheus query with ``${cluster}``, the agent's
scoring call, its items pipeline, an integer score), so each scored policy is an HTTP scoring API
built with the project's scorer library (``ScorerApp`` served by ``ScorerServer``) around a sample
scorer's own score function, and a DynamicScorer object (``configSyncMode: None``, like
``samples/crs/cpu-forecast-scorer.yaml``) that the hub's own parsing and resolution turn into the
agent's plan.  Every policy queries ``trace_cpu_utilization_percent{cluster="${cluster}"}``: the
agent fills in its cluster name inside the quoted matcher (``agent.source.placeholders``), so one
query serves every cluster.  Capacity is 100, so headroom = 100 - load (percent).

Windows.  The samples ship for a 30 s interval (``cpu``: range 300 s, step 15 s; ``predict``: range
600 s, step 15 s, horizon one interval).  The traces have one point per 300 s, so every duration is
multiplied by 10 (300 s / 30 s): the interval becomes 300 s, the step 300 s (the series' own), and
the windows keep their length in intervals: ``cpu`` averages 3000 s (11 points, the last 50
minutes), ``predict`` fits a line to 6000 s (21 points) and forecasts 300 s ahead.  ``seasonal``
ships for a 300 s step already (a day and an hour of history, a one-hour horizon) and runs as shipped.

===========  ===============================================  ======  ======  =========
policy       score of a cluster                               range   step    interval
===========  ===============================================  ======  ======  =========
static       none: no AddOnPlacementScore, OCM's own order     -       -       -
reactive     headroom of the latest point only                300 s   300 s   300 s
cpu          ``samples.scorers.cpu.score``: headroom of the   3000 s  300 s   300 s
             window's mean
predict      ``samples.scorers.predict.score``: headroom of   6000 s  300 s   300 s
             the least-squares forecast 300 s ahead
seasonal     ``samples.scorers.seasonal.score`` as shipped:    90000 s 300 s   300 s
             headroom of the next hour's mean load from the
             same hour of the day before, at today's level
===========  ===============================================  ======  ======  =========

Stabilized variants use the agent's ``Stabilizer`` with :data:`STABILIZATION`: tolerance 3 points,
a rise must hold 900 s (3 steps), falls are published at once (window 0), the HPA-like default
direction the stabilization docs recommend.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bench.quality.prometheus import METRIC
from bench.quality.traces import STEP_SECONDS
from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.models import SpecProblem, parse_scorer
from dynamic_scoring.agent.items.stabilization import Stabilization
from dynamic_scoring.agent.plan import ScorerPlan, plan_summary
from dynamic_scoring.samples.scorers import cpu, predict, seasonal
from dynamic_scoring.samples.scorers.formulas import headroom_score
from dynamic_scoring.scorer import ScoreFn, ScorerApp, ScoreResult, ScorerServer, ScoringRequest, result

CAPACITY = 100.0
"""Load (percent) that scores 0: headroom = 100 - load."""

QUERY = f'{METRIC}{{cluster="${{cluster}}"}}'
"""The one query every scored policy sends; the agent fills in ``${cluster}``."""

SCALE = STEP_SECONDS // 30
"""How much longer the traces' step is than the samples' shipped interval (300 s / 30 s = 10)."""

STABILIZATION = Stabilization(tolerance=3, rise_window_seconds=3 * STEP_SECONDS, fall_window_seconds=0)
"""What the stabilized variants use: tolerance 3 points, rise held 900 s, falls at once."""

VALID_FOR_SECONDS = 4 * STEP_SECONDS
"""``validForSeconds`` of every DynamicScorer (the agent refreshes an unchanged score at half of it)."""


def reactive_score(request: ScoringRequest, capacity: float) -> list[ScoreResult]:
    """Headroom of each series' latest point: what a scorer that only reads "now" would say."""
    return [result(headroom_score(s.last(), capacity), s.labels) for s in request.with_points()]


@dataclass(frozen=True)
class Policy:
    """One placement policy: a score function and its window, or none (``static``)."""

    name: str
    description: str
    score: ScoreFn | None = None
    range: int = 0
    step: int = STEP_SECONDS

    @property
    def scored(self) -> bool:
        """True when the policy publishes scores (it has a scoring API to run)."""
        return self.score is not None

    @property
    def score_name(self) -> str:
        """The score (and item) name its DynamicScorer publishes, e.g. ``quality_cpu``."""
        return f"quality_{self.name}"


POLICIES: list[Policy] = [
    Policy("static", "no scores: OCM's default order (name; Balance and Steady as the Placement says)"),
    Policy(
        "reactive",
        "headroom of the latest point",
        functools.partial(reactive_score, capacity=CAPACITY),
        range=STEP_SECONDS,
    ),
    Policy(
        "cpu",
        "cpu sample: headroom of the mean over 11 points (3000 s)",
        functools.partial(cpu.score, capacity=CAPACITY),
        range=cpu.DEFAULTS.range * SCALE,
    ),
    Policy(
        "predict",
        "predict sample: least-squares forecast 300 s ahead over 21 points (6000 s)",
        functools.partial(predict.score, capacity=CAPACITY, horizon=float(STEP_SECONDS)),
        range=predict.DEFAULTS.range * SCALE,
    ),
    Policy(
        "seasonal",
        "seasonal sample: the next hour's mean load from the same hour a day earlier, at today's level",
        functools.partial(
            seasonal.score,
            capacity=CAPACITY,
            horizon=float(seasonal.HOUR),
            season=float(seasonal.DAY),
            level=float(seasonal.HOUR),
        ),
        range=seasonal.DEFAULTS.range,
    ),
]
"""Every policy, in report order."""


def dynamic_scorer(policy: Policy, scorer_url: str, prometheus_url: str) -> dict[str, Any]:
    """The DynamicScorer object registering ``policy``'s scoring API (``configSyncMode: None``)."""
    return {
        "apiVersion": "dynamic-scoring.open-cluster-management.io/v1alpha1",
        "kind": "DynamicScorer",
        "metadata": {"name": f"quality-{policy.name}", "namespace": "dynamic-scoring"},
        "spec": {
            "description": policy.description,
            "configURL": f"{scorer_url}/config",
            "configSyncMode": "None",
            "location": "Internal",
            "scoreDestination": "AddOnPlacementScore",
            "scoreDimensionFormat": "${scoreName}",
            "source": {
                "type": "Prometheus",
                "host": prometheus_url,
                "path": "/api/v1/query_range",
                "params": {"query": QUERY, "range": policy.range, "step": policy.step},
            },
            "scoring": {
                "host": scorer_url,
                "path": "/scoring",
                "params": {"name": policy.score_name, "interval": STEP_SECONDS},
            },
            "validForSeconds": VALID_FOR_SECONDS,
            "timeoutSeconds": 30,
        },
    }


def plan_for(obj: dict[str, Any]) -> ScorerPlan:
    """The agent's plan for a DynamicScorer object, by the path ``dynamic-scoring explain`` takes.

    Raises:
        ValueError: the object is not a valid DynamicScorer or resolves to no summary.
    """
    parsed = parse_scorer(obj)
    if isinstance(parsed, SpecProblem):
        raise ValueError(f"DynamicScorer: {parsed.message}")
    resolution = resolve(parsed)
    if resolution.summary is None:
        raise ValueError(f"DynamicScorer resolves to no summary: {resolution.message or resolution.pending}")
    return plan_summary(resolution.summary)


def scorer_app(policy: Policy) -> ScorerApp:
    """``policy``'s scoring API; its ``/config`` matches the DynamicScorer's spec."""
    if policy.score is None:
        raise ValueError(f"policy {policy.name} has no score function")
    return ScorerApp(
        policy.score,
        name=policy.score_name,
        description=policy.description,
        query=QUERY,
        range=policy.range,
        step=policy.step,
        interval=STEP_SECONDS,
    )


@contextlib.contextmanager
def serving(policies: Sequence[Policy], prometheus_url: str) -> Iterator[dict[str, ScorerPlan]]:
    """Serve every scored policy on 127.0.0.1 (a free port each) and yield its plan by policy name."""
    servers: list[ScorerServer] = []
    try:
        plans: dict[str, ScorerPlan] = {}
        for policy in policies:
            if not policy.scored:
                continue
            server = ScorerServer(scorer_app(policy), "127.0.0.1", 0, max_concurrent=64)
            server.start_in_thread()
            servers.append(server)
            plans[policy.name] = plan_for(dynamic_scorer(policy, server.base_url, prometheus_url))
        yield plans
    finally:
        for server in servers:
            server.shutdown()


__all__ = [
    "CAPACITY",
    "POLICIES",
    "QUERY",
    "STABILIZATION",
    "Policy",
    "dynamic_scorer",
    "plan_for",
    "reactive_score",
    "scorer_app",
    "serving",
]
