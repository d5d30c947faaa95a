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
minutes), ``predict`` fits a line to 6000 s (21 points).  ``seasonal`` ships for a 300 s step already;
here it keeps the day and an hour of history it had before it took three days, so that it fits the
3-day blocks of the real fleet (:data:`HISTORY_POLICIES` are the three-day variants).

Horizons.  A forecast is only fair to judge against the workload life it forecasts, so ``predict`` and
``seasonal`` run once per life of :data:`LIVES` (15 min, 1 h, 4 h, 12 h), named ``predict-4h`` and so
on: ``seasonal-<life>`` forecasts the mean load over the next ``<life>`` (``seasonal-1h`` is the sample
as shipped), ``predict-<life>`` forecasts the line at the middle of the life, which for a line is the
life's mean.  At each life the benchmark reports the policies matched to it, the ones without a
horizon, and ``seasonal-1h`` as shipped (:func:`judged_at`).

===============  ===========================================  =======  ======  =========
policy           score of a cluster                           range    step    interval
===============  ===========================================  =======  ======  =========
static           none: no AddOnPlacementScore, OCM's order     -        -       -
reactive         headroom of the latest point only            300 s    300 s   300 s
cpu              ``samples.scorers.cpu.score``: headroom of   3000 s   300 s   300 s
                 the window's mean
predict-<life>   ``samples.scorers.predict.score``: headroom  6000 s   300 s   300 s
                 of the least-squares line at mid-life
seasonal-<life>  ``samples.scorers.seasonal.score``: headroom 90000 s  300 s   300 s
                 of the life's mean load from the same hours
                 of the day before, at today's level (the
                 sample before it took three days and the
                 blend: ``bench.placement_quality.history``
                 judges those)
===============  ===========================================  =======  ======  =========

Stabilized variants use the agent's ``Stabilizer`` with :data:`STABILIZATION`: tolerance 3 points,
a rise must hold 900 s (3 steps), falls are published at once (window 0), the HPA-like default
direction the stabilization docs recommend.

Free cores.  Clusters differ in size (``bench.placement_quality.fleet.capacities``), and the least utilised
cluster may be a small one with few idle cores.  ``free-cores`` (:data:`CAPACITY_POLICIES`) scores a
cluster by its idle cores at the latest point, ``capacity * (100 - load) / 100`` computed in the query
from :data:`~bench.placement_quality.prometheus.CAPACITY_METRIC`, as 100 points per :data:`FREE_CORES_SCALE`
cores.  It needs a run that stores capacities (the synthetic one), so it is not in :data:`POLICIES`.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

from bench.placement_quality.fleet import CAPACITY_HIGH
from bench.placement_quality.prometheus import CAPACITY_METRIC, METRIC, METRICS
from bench.placement_quality.traces import STEP_SECONDS
from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.models import SpecProblem, parse_scorer
from dynamic_scoring.agent.items.stabilization import Stabilization
from dynamic_scoring.agent.plan import ScorerPlan, plan_summary
from dynamic_scoring.contract.wire import ScoreNormalization
from dynamic_scoring.ctl.margin import band_of, units_per_point
from dynamic_scoring.samples.scorers import cpu, predict, seasonal
from dynamic_scoring.samples.scorers.formulas import headroom_score
from dynamic_scoring.scorer import (
    ScoreFn,
    ScorerApp,
    ScoreResult,
    ScorerServer,
    ScoringRequest,
    recent_weight,
    result,
)

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


FREE_CORES_SCALE = CAPACITY_HIGH
"""Idle cores that score 100 (the largest capacity a fleet draws); fewer score proportionally less."""

FREE_CORES_QUERY = (
    f'{CAPACITY_METRIC}{{cluster="${{cluster}}"}} * (100 - {METRIC}{{cluster="${{cluster}}"}}) / 100'
)
"""Idle cores of the agent's cluster: its capacity times its idle share."""


def free_cores_score(request: ScoringRequest, scale: float) -> list[ScoreResult]:
    """Idle cores at the latest point as a share of ``scale``: bigger idle clusters score higher."""
    return [result(min(100.0, 100.0 * max(s.last(), 0.0) / scale), s.labels) for s in request.with_points()]


LIVES: dict[str, int] = {"15m": 3, "1h": 12, "4h": 48, "12h": 144}
"""Workload lives judged, in steps of 300 s, by label; every forecast runs once per life (its horizon)."""


@dataclass(frozen=True)
class Policy:
    """One placement policy: a score function and its window, or none (``static``).

    ``life`` names the workload life a forecasting policy's horizon is matched to (a key of
    :data:`LIVES`); None for a policy without a horizon, which is judged at every life as it is.
    """

    name: str
    description: str
    score: ScoreFn | None = None
    range: int = 0
    step: int = STEP_SECONDS
    life: str | None = None
    query: str = QUERY
    normalization: Mapping[str, float] | None = None
    """The DynamicScorer's ``scoreNormalization``, applied by the agent before rounding; None for none."""

    @property
    def scored(self) -> bool:
        """True when the policy publishes scores (it has a scoring API to run)."""
        return self.score is not None

    @property
    def family(self) -> str:
        """The policy without its life: ``seasonal`` for ``seasonal-4h`` (plots colour by family)."""
        return self.name.split("-", 1)[0]

    @property
    def score_name(self) -> str:
        """The score (and item) name its DynamicScorer publishes, e.g. ``quality_cpu``."""
        return "quality_" + self.name.replace("-", "_")


def predict_policy(life: str) -> Policy:
    """The predict sample with its horizon matched to ``life``: the forecast at the life's middle.

    A least-squares line's mean over the next ``n`` steps is its value ``(n + 1) / 2`` steps ahead, so
    that horizon makes the point forecast the forecast of the workload's mean load.
    """
    steps = LIVES[life]
    horizon = (steps + 1) * STEP_SECONDS / 2
    return Policy(
        f"predict-{life}",
        f"predict sample: least-squares forecast {horizon:g} s ahead (mid-life of {life}) over 21 points",
        functools.partial(predict.score, capacity=CAPACITY, horizon=horizon),
        range=predict.DEFAULTS.range * SCALE,
        life=life,
    )


PREVIOUS_SEASONAL_RANGE = seasonal.DAY + seasonal.HOUR
"""The seasonal sample's window before it took several days of history: a day and an hour."""


def seasonal_policy(life: str, days: int = 1, blend: bool = False, weight: float | None = None) -> Policy:
    """The seasonal sample with its horizon set to ``life``, ``days`` of history, blended or not.

    ``seasonal-<life>`` (one day, the seasonal forecast alone) is the sample as it was before the blend;
    ``seasonal-1h`` is that sample as it shipped.  ``blend-<life>`` blends with the recent level by the
    horizon's weight (``dynamic_scoring.scorer.maths.recent_weight``): the sample's default now, and
    ``blend-1h`` is it as shipped.  ``even-<life>`` blends half and half whatever the horizon (``weight``
    ½): where the sample does not blend, it shows what blending would cost.  ``seasonal<K>d-<life>`` has
    ``K`` days of history.
    """
    horizon = LIVES[life] * STEP_SECONDS
    kind = "even" if weight is not None else "blend" if blend else "seasonal"
    family = kind + ("" if days == 1 else f"{days}d")
    one_hour = horizon == seasonal.HOUR and days == 1
    shipped = {"blend": " (as shipped)", "seasonal": " (as shipped before the blend)"}
    note = shipped.get(kind, "") if one_hour else ""
    how = (
        f", blended with the last hour at weight {weight:g}"
        if weight is not None
        else ", blended with the last hour by the horizon's weight"
        if blend
        else ""
    )
    return Policy(
        f"{family}-{life}",
        f"seasonal sample{note}: mean load over the next {life} from the same hours of {days} earlier"
        f" day{'s' if days > 1 else ''} at today's level{how}",
        functools.partial(
            seasonal.score,
            capacity=CAPACITY,
            horizon=float(horizon),
            season=float(seasonal.DAY),
            level=float(seasonal.HOUR),
            blend=blend or weight is not None,
            weight=weight,
        ),
        range=days * seasonal.DAY + seasonal.HOUR,
        life=life,
    )


RECIPE_NORMALIZATION: dict[str, float] = {"min": 20.0, "max": 80.0, "targetMin": -100.0, "targetMax": 100.0}
"""The margin recipe's band: headroom 20..80 % onto -100..100, so 10 score points are 3 load points and the
AddOn weight 10 + ``Steady`` 1 margin (10 points) asks a challenger to lead by 3 load points, where the
plain headroom score asks 10.  Loads between 20 and 80 % keep distinct scores; below 20 % every cluster
scores 100 (they tie, and any of them is a good pick)."""

RECIPE_SPREAD = units_per_point(band_of(ScoreNormalization.model_validate(RECIPE_NORMALIZATION)))
"""Load points per score point under :data:`RECIPE_NORMALIZATION` (0.3)."""


def recipe_policy(base: Policy, name: str) -> Policy:
    """``base`` with the recipe's normalization (:data:`RECIPE_NORMALIZATION`), named ``name``."""
    return replace(
        base,
        name=name,
        description=base.description + ", headroom 20..80 % normalized onto -100..100",
        normalization=RECIPE_NORMALIZATION,
    )


BLENDED_LIVES = tuple(life for life, steps in LIVES.items() if recent_weight(steps * STEP_SECONDS) > 0)
"""The lives at which the blend differs from the seasonal forecast alone (15 min and 1 h): from 4 h on
the sample's default is ``seasonal-<life>`` itself, and ``even-<life>`` (half and half) is replayed
there instead, to show what blending would cost."""


PLAIN_POLICIES: list[Policy] = [
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
    *(predict_policy(life) for life in LIVES),
    *(seasonal_policy(life) for life in LIVES),
    *(seasonal_policy(life, blend=True) for life in BLENDED_LIVES),
    *(seasonal_policy(life, weight=0.5) for life in LIVES if life not in BLENDED_LIVES),
]
"""Every policy whose score is published as its scorer answers (no ``scoreNormalization``)."""

DEFAULT_FORECAST = {life: f"blend-{life}" if life in BLENDED_LIVES else f"seasonal-{life}" for life in LIVES}
"""The seasonal sample as it ships now, its horizon matched to each life: blended with the recent level
at 15 min and 1 h; from 4 h on the blend's weight is 0, so it is the seasonal forecast alone."""

_PLAIN = {p.name: p for p in PLAIN_POLICIES}
RECIPE_POLICIES: list[Policy] = [
    recipe_policy(_PLAIN["cpu"], "cpu-recipe"),
    *(recipe_policy(_PLAIN[DEFAULT_FORECAST[life]], f"recipe-{life}") for life in LIVES),
]
"""The cpu sample and the shipped forecast at each life with the recipe's band (``recipe-<life>``):
judged in the margin form against their plain scores in Exact."""

POLICIES: list[Policy] = [*PLAIN_POLICIES, *RECIPE_POLICIES]
"""Every policy, in report order."""

CAPACITY_POLICIES: list[Policy] = [
    Policy(
        "free-cores",
        "idle cores of the latest point (capacity x idle share), 100 points per 2000 cores",
        functools.partial(free_cores_score, scale=FREE_CORES_SCALE),
        range=STEP_SECONDS,
        query=FREE_CORES_QUERY,
    ),
]
"""Policies that read a cluster's capacity: only for runs whose Prometheus stores it."""

HISTORY_LIVES = ("1h", "4h", "12h")
"""The lives at which several days of history are judged (``bench.placement_quality.history``)."""
HISTORY_DAYS = 3

HISTORY_POLICIES: list[Policy] = [seasonal_policy(life, days=HISTORY_DAYS) for life in HISTORY_LIVES]
"""The seasonal sample with three days of history: they need a longer fleet block than
:data:`POLICIES` (three days and an hour of warm-up), so only the history run replays them."""

BY_NAME = {p.name: p for p in (*POLICIES, *CAPACITY_POLICIES, *HISTORY_POLICIES)}

SERVE_TIMEOUT = 30.0
"""Seconds the scorer process may take to start its servers, and to stop them."""

SHIPPED_SEASONAL = "seasonal-1h"
"""The seasonal sample with its shipped horizon: judged at every life, to show what a mismatch costs."""


def judged_at(policy: Policy, life: str) -> bool:
    """Whether ``policy`` is reported at ``life``: no horizon, its own life, or the shipped seasonal."""
    return policy.life is None or policy.life == life or policy.name == SHIPPED_SEASONAL


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
                "params": {"query": policy.query, "range": policy.range, "step": policy.step},
            },
            "scoring": {
                "host": scorer_url,
                "path": "/scoring",
                "params": {"name": policy.score_name, "interval": STEP_SECONDS},
            },
            "validForSeconds": VALID_FOR_SECONDS,
            "timeoutSeconds": 30,
            **({} if policy.normalization is None else {"scoreNormalization": dict(policy.normalization)}),
        },
    }


SCOPE = '{cluster="${cluster}"'
"""How every selector of a stored metric must begin, after its name: the agent's own cluster only."""


def require_cluster_scoped(plan: ScorerPlan) -> None:
    """Refuse a plan whose queries could read another cluster's series.

    The fleet's clusters are cut from the same traces, so another cluster's past can hold this one's
    future; a scorer reading the whole fleet (no ``cluster`` matcher, or a matcher that is not the
    agent's own placeholder) would see through the replay.  Every selector of a stored metric
    (:data:`~bench.placement_quality.prometheus.METRICS`) must start with the ``cluster="${cluster}"``
    matcher, and a query must read at least one of them.

    Raises:
        ValueError: a query reads a stored metric without that matcher, or reads none of them.
    """
    for query in plan.queries:
        counts = [(query.count(m), query.count(m + SCOPE), m) for m in METRICS]
        if sum(c for c, _, _ in counts) == 0 or any(c != scoped for c, scoped, _ in counts):
            raise ValueError(
                f"{plan.score_name}: query {query!r} is not scoped to the agent's cluster; every"
                f" selector must begin <metric>{SCOPE}"
            )
    if not plan.queries:
        raise ValueError(f"{plan.score_name}: no query; the benchmark replays Prometheus sources only")


def plan_for(obj: dict[str, Any]) -> ScorerPlan:
    """The agent's plan for a DynamicScorer object, by the path ``dynamic-scoring explain`` takes.

    The plan must be cluster-scoped (:func:`require_cluster_scoped`).

    Raises:
        ValueError: the object is not a valid DynamicScorer, resolves to no summary, or is not
            cluster-scoped.
    """
    parsed = parse_scorer(obj)
    if isinstance(parsed, SpecProblem):
        raise ValueError(f"DynamicScorer: {parsed.message}")
    resolution = resolve(parsed)
    if resolution.summary is None:
        raise ValueError(f"DynamicScorer resolves to no summary: {resolution.message or resolution.pending}")
    plan = plan_summary(resolution.summary)
    require_cluster_scoped(plan)
    return plan


def scorer_app(policy: Policy) -> ScorerApp:
    """``policy``'s scoring API; its ``/config`` matches the DynamicScorer's spec."""
    if policy.score is None:
        raise ValueError(f"policy {policy.name} has no score function")
    return ScorerApp(
        policy.score,
        name=policy.score_name,
        description=policy.description,
        query=policy.query,
        range=policy.range,
        step=policy.step,
        interval=STEP_SECONDS,
    )


def _serve_child(policies: Sequence[Policy], conn: Connection) -> None:
    """The scorer process: serve every scored policy, send their base URLs, stop when told (or orphaned)."""
    servers: list[ScorerServer] = []
    try:
        urls: dict[str, str] = {}
        for policy in policies:
            if policy.scored:
                server = ScorerServer(scorer_app(policy), "127.0.0.1", 0, max_concurrent=64)
                server.start_in_thread()
                servers.append(server)
                urls[policy.name] = server.base_url
        conn.send(urls)
        with contextlib.suppress(EOFError):
            conn.recv()  # "stop", or EOF when the parent is gone
    finally:
        for server in servers:
            server.shutdown()
        conn.close()


@contextlib.contextmanager
def serving(policies: Sequence[Policy], prometheus_url: str) -> Iterator[dict[str, ScorerPlan]]:
    """Serve every scored policy on 127.0.0.1 (a free port each) and yield its plan by policy name.

    The scoring APIs run in a child process of their own, as a scorer runs beside, not inside, the
    agent: the replay's agent cycles and the scorers' HTTP handlers then use both cores instead of
    sharing one interpreter lock (about 1.6 times the cycles a second on 2 cores).
    """
    context = multiprocessing.get_context("fork")
    mine, theirs = context.Pipe()
    child = context.Process(target=_serve_child, args=(policies, theirs), name="quality-scorers", daemon=True)
    child.start()
    theirs.close()
    try:
        if not mine.poll(SERVE_TIMEOUT):
            raise RuntimeError(f"the scorer process did not start within {SERVE_TIMEOUT:.0f} s")
        urls: dict[str, str] = mine.recv()
        yield {
            name: plan_for(dynamic_scorer(BY_NAME[name], url, prometheus_url)) for name, url in urls.items()
        }
    finally:
        with contextlib.suppress(OSError):
            mine.send("stop")
        mine.close()
        child.join(SERVE_TIMEOUT)
        if child.is_alive():
            child.kill()
            child.join()


__all__ = [
    "BLENDED_LIVES",
    "CAPACITY",
    "CAPACITY_POLICIES",
    "DEFAULT_FORECAST",
    "FREE_CORES_QUERY",
    "FREE_CORES_SCALE",
    "HISTORY_DAYS",
    "HISTORY_LIVES",
    "HISTORY_POLICIES",
    "LIVES",
    "PLAIN_POLICIES",
    "POLICIES",
    "PREVIOUS_SEASONAL_RANGE",
    "QUERY",
    "RECIPE_NORMALIZATION",
    "RECIPE_POLICIES",
    "RECIPE_SPREAD",
    "SHIPPED_SEASONAL",
    "STABILIZATION",
    "Policy",
    "dynamic_scorer",
    "free_cores_score",
    "judged_at",
    "plan_for",
    "predict_policy",
    "reactive_score",
    "recipe_policy",
    "require_cluster_scoped",
    "scorer_app",
    "seasonal_policy",
    "serving",
]
