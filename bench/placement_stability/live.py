"""``python -m bench placement-stability``: decision churn, reaction time and hub writes, per policy.

On the local control plane (OCM's real placement controller, the chart-installed manager, the real
agents on cluster1 and cluster2, each cluster's real Prometheus fed by its load exporter) the sample
CPU scorer scores each cluster's headroom.  Three DynamicScorers call it on the same metrics: one
publishes raw scores, one stabilized (``STABILIZATION``, tolerance 3 = the noise's sigma) and one
with tolerance 6.  Six Placements choose one cluster each, one per policy, all at once, so every
policy sees the very same load:

    raw                AddOn score (raw) alone
    stabilization      AddOn score (stabilized) alone
    margin             AddOn score (raw) x10 plus Steady x1: an incumbent margin of 10 points
    both               AddOn score (stabilized) x10 plus Steady x1
    stabilization-tol6, both-tol6   the same with tolerance 6

The load driver sets each cluster's CPU load to its scenario's mean plus Gaussian noise (a new
value every 3-7 s), and the observer polls the hub four times a second: every Placement's decision, every
AddOnPlacementScore's value and resourceVersion.  Scenarios, in this order:

    noise   both clusters at the same mean; decisions and writes counted over the run
    step    the chosen cluster, 5 points above the other, falls by 30: how soon each policy moves away
    rise    the other cluster rises from 30 below to 40 above the chosen one: how soon each policy moves
    drift   the two clusters' means cross slowly: how many moves, and when, around the crossing

Time is compressed ``COMPRESSION`` times: a 5 s scoring interval stands for production's 30 s, and
the rise window and the scores' validity are shortened alike, so a run's noise phase of 10 minutes is
one production hour (120 cycles).  Rates are reported per production hour.  Each scenario's plot of
load, published scores and decisions is written as a PNG (``--workdir`` keeps them).
"""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bench import Row, benchmark, verdict
from bench.placement_stability.churn import Sample, decision_changes, per_hour, reaction, spread, writes
from bench.placement_stability.setup import (
    CLUSTERS,
    COMPRESSION,
    INTERVAL,
    MARGIN_WEIGHTS,
    NAMESPACE,
    POLICIES,
    QUERY_RANGE,
    RAW,
    SCORERS,
    SIGMA,
    SIGMA_AT_LOAD,
    STABILIZATION,
    STABLE,
    VALID_FOR,
)
from dynamic_scoring.kube.api import KubeError
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm.naming import aps_name

if TYPE_CHECKING:  # the harness is imported when the benchmark runs, not when `python -m bench` lists it
    from e2e.kube import Client


@dataclass(frozen=True)
class Scenario:
    """A load pattern: each cluster's mean headroom (score points) over time, and what to measure."""

    name: str
    seconds: float
    means: Callable[[float], dict[str, float]]
    # the time of the change whose reaction is measured, and the decision it should lead to
    onset: float | None = None
    target: tuple[str, ...] = ()
    # the decision every Placement must have before the scenario starts (None: whatever it is),
    # reached at the means ``settle`` (default: the scenario's own means at its start)
    start_from: tuple[str, ...] | None = None
    settle: tuple[float, float] | None = None


def _constant(c1: float, c2: float) -> Callable[[float], dict[str, float]]:
    return lambda _t: {"cluster1": c1, "cluster2": c2}


def _step(
    before: tuple[float, float], after: tuple[float, float], at: float
) -> Callable[[float], dict[str, float]]:
    return lambda t: dict(zip(CLUSTERS, before if t < at else after, strict=True))


def _drift(
    start: tuple[float, float], end: tuple[float, float], seconds: float
) -> Callable[[float], dict[str, float]]:
    def means(t: float) -> dict[str, float]:
        f = min(max(t / seconds, 0.0), 1.0)
        return {c: a + (b - a) * f for c, a, b in zip(CLUSTERS, start, end, strict=True)}

    return means


SCENARIOS = (
    Scenario("noise", 600, _constant(50, 50)),
    # chosen at 80, the incumbent comes down to 55, 5 above the challenger, then falls by 30 to 25
    Scenario(
        "step",
        80,
        _step((55, 50), (25, 50), 20),
        onset=20,
        target=("cluster2",),
        start_from=("cluster1",),
        settle=(80, 50),
    ),
    # the challenger rises from 20 to 90 and leads the incumbent (50) by 40; from 20, no noise
    # before the onset makes it better, so its rise window counts from the rise itself
    Scenario(
        "rise", 100, _step((20, 50), (90, 50), 10), onset=10, target=("cluster1",), start_from=("cluster2",)
    ),
    Scenario("drift", 360, _drift((65, 35), (35, 65), 300), target=("cluster2",), start_from=("cluster1",)),
)
"""Scenario ``noise`` is one production hour; ``drift`` crosses at 150 s (15 production minutes)."""


@dataclass
class LoadDriver:
    """Sets each cluster's load once a second to its scenario's mean plus noise, as CPU cores.

    A noise value holds for 3 to 7 s (one scoring interval on average, at a random phase), so
    successive cycles see nearly independent values and the blend of a change straddling a cycle's
    points is the same on every run, whatever the phase between driver and agent.
    """

    set_load: Callable[[str, float], None]
    capacity: float
    sigma: float
    seed: int = 38
    means: Callable[[float], dict[str, float]] = field(default=_constant(50, 50))
    started: float = field(default_factory=time.monotonic)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def follow(self, means: Callable[[float], dict[str, float]]) -> None:
        """Aim at ``means`` from now on, with its time starting now."""
        self.means, self.started = means, time.monotonic()

    def current(self) -> dict[str, float]:
        """The means aimed at now."""
        return self.means(time.monotonic() - self.started)

    def start(self) -> LoadDriver:
        """Drive in a background thread until ``stop``."""
        rng = random.Random(self.seed)

        def run() -> None:
            noise: dict[str, float] = {}
            tick = change = 0
            while not self._stop.wait(1.0 - (time.monotonic() % 1.0)):
                if tick >= change:
                    noise = {c: rng.gauss(0.0, self.sigma) for c in CLUSTERS}
                    change = tick + rng.randint(INTERVAL - 2, INTERVAL + 2)
                tick += 1
                for cluster, mean in self.current().items():
                    headroom = min(max(mean + noise.get(cluster, 0.0), 0.0), 100.0)
                    self.set_load(cluster, self.capacity * (1 - headroom / 100))

        self._thread = threading.Thread(target=run, name="load-driver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop driving (the last loads stay)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class Observer:
    """Polls the hub: every Placement's decision and every bench score's value and version."""

    def __init__(self, hub: Client, driver: LoadDriver, period: float = 0.25) -> None:
        self.hub = hub
        self.driver = driver
        self.period = period
        self.samples: list[Sample] = []
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def read(self) -> Sample:
        """One poll: two list calls."""
        t = time.monotonic() - self.started
        loads = self.driver.current()
        decisions: dict[str, tuple[str, ...]] = {}
        scores: dict[tuple[str, str], int | None] = {}
        versions: dict[tuple[str, str], str] = {}
        try:
            for pd in self.hub.items(
                "cluster.open-cluster-management.io/v1beta1", "PlacementDecision", NAMESPACE
            ):
                placement = (
                    pd["metadata"].get("labels", {}).get("cluster.open-cluster-management.io/placement", "")
                )
                chosen = tuple(d["clusterName"] for d in (pd.get("status") or {}).get("decisions") or [])
                decisions[placement] = tuple(sorted(decisions.get(placement, ()) + chosen))
            for aps in self.hub.items("cluster.open-cluster-management.io/v1alpha1", "AddOnPlacementScore"):
                cluster = aps["metadata"]["namespace"]
                for score in SCORERS:
                    if aps["metadata"]["name"] != aps_name(score):
                        continue
                    versions[(score, cluster)] = aps["metadata"]["resourceVersion"]
                    items = (aps.get("status") or {}).get("scores") or []
                    scores[(score, cluster)] = next(
                        (int(i["value"]) for i in items if i["name"] == score), None
                    )
        except KubeError:
            decisions = {}
        return Sample(t=t, loads=loads, scores=scores, versions=versions, decisions=decisions)

    def start(self) -> Observer:
        """Poll in a background thread."""

        def run() -> None:
            while not self._stop.wait(self.period):
                sample = self.read()
                with self._lock:
                    self.samples.append(sample)

        self._thread = threading.Thread(target=run, name="observer", daemon=True)
        self._thread.start()
        return self

    def since(self, t0: float) -> list[Sample]:
        """The samples from ``t0`` (observer time) on, with times made relative to it."""
        with self._lock:
            taken = [s for s in self.samples if s.t >= t0]
        return [Sample(s.t - t0, s.loads, s.scores, s.versions, s.decisions) for s in taken]

    def last(self) -> Sample | None:
        """The latest poll, if any."""
        with self._lock:
            return self.samples[-1] if self.samples else None

    def now(self) -> float:
        """Observer time now."""
        return time.monotonic() - self.started

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def placement(name: str, score: str, margin: bool) -> JSON:
    """One policy's Placement: the score alone, or with the Steady margin."""
    addon = {"type": "AddOn", "addOn": {"resourceName": aps_name(score), "scoreName": score}}
    configurations: list[JSON] = [{"scoreCoordinate": addon, "weight": MARGIN_WEIGHTS[0]}]
    if margin:
        steady = {"type": "BuiltIn", "builtIn": "Steady"}
        configurations.append({"scoreCoordinate": steady, "weight": MARGIN_WEIGHTS[1]})
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "clusterSets": ["default"],
            "numberOfClusters": 1,
            "prioritizerPolicy": {"mode": "Exact", "configurations": configurations},
        },
    }


def _say(msg: str) -> None:
    print(f"[placement-stability] {msg}", file=sys.stderr, flush=True)


def _settle(observer: Observer, want: tuple[str, ...], timeout: float) -> None:
    """Until every Placement decides ``want`` (each stays on its last decision otherwise)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = observer.last()
        if last is not None and all(last.decisions.get(p) == want for p in POLICIES):
            return
        time.sleep(0.5)
    last = observer.last()
    seen = last.decisions if last is not None else {}
    raise TimeoutError(f"the Placements did not all choose {want} within {timeout:.0f}s: {seen}")


@dataclass(frozen=True)
class Outcome:
    """One scenario's samples, from its start."""

    scenario: Scenario
    samples: list[Sample]


def run_scenario(scenario: Scenario, driver: LoadDriver, observer: Observer) -> Outcome:
    """Bring every Placement to the scenario's start, then run its load pattern and keep the samples."""
    if scenario.start_from is not None:
        before = scenario.settle or (scenario.means(0)["cluster1"], scenario.means(0)["cluster2"])
        _say(f"{scenario.name}: settling at {before} until every Placement chooses {scenario.start_from}")
        driver.follow(_constant(*before))
        _settle(observer, scenario.start_from, timeout=240)
        # windows full of the starting level, so the scenario starts from a steady state
        time.sleep(STABILIZATION["riseWindowSeconds"] + INTERVAL)
    _say(f"{scenario.name}: {scenario.seconds:.0f}s")
    t0 = observer.now()
    driver.follow(scenario.means)
    time.sleep(scenario.seconds)
    return Outcome(scenario, observer.since(t0))


def rows_for(outcome: Outcome) -> list[Row]:
    """The table's rows for one scenario: per policy, moves and reaction; per scorer, writes."""
    sc, samples = outcome.scenario, outcome.samples
    name = f"placement-stability {sc.name}"
    rows: list[Row] = []
    changes = {p: len(decision_changes(samples, p)) for p in POLICIES}
    if sc.name == "noise":
        raw_rate = per_hour(changes["raw"], sc.seconds, COMPRESSION)
        for p in POLICIES:
            rate = per_hour(changes[p], sc.seconds, COMPRESSION)
            target, ok = "", True
            if p == "both":
                target, ok = "<= 1 /h", rate <= 1
            elif p == "stabilization":
                target, ok = f"<= raw/10 ({raw_rate / 10:.1f})", rate <= raw_rate / 10
            rows.append(
                Row(
                    name,
                    f"{p}: decision changes",
                    f"{changes[p]} ({rate:.0f} /h)",
                    target,
                    verdict(ok) if target else "",
                )
            )
        w = {s: writes(samples, s) for s in SCORERS}
        for s in SCORERS:
            rows.append(
                Row(name, f"{s}: APS writes", f"{w[s]} ({per_hour(w[s], sc.seconds, COMPRESSION):.0f} /h)")
            )
        ratio = w[RAW] / max(w[STABLE], 1)
        rows.append(Row(name, "APS writes raw/stabilized", f"{ratio:.1f}x", ">= 5x", verdict(ratio >= 5)))
        sigma = [spread(samples, (RAW, c)) for c in CLUSTERS]
        rows.append(
            Row(name, "raw score sigma (measured)", " / ".join(f"{x:.1f}" for x in sigma), f"~{SIGMA:.0f}")
        )
        return rows
    if sc.onset is not None:
        for p in POLICIES:
            took = reaction(samples, p, sc.target, sc.onset)
            value = "never" if took is None else f"{took:.1f}s"
            target, ok = "", True
            if sc.name == "step":
                target, ok = f"<= {INTERVAL + 5}s", took is not None and took <= INTERVAL + 5
            elif sc.name == "rise" and POLICIES[p][0] != RAW:
                lo, hi = STABILIZATION["riseWindowSeconds"], STABILIZATION["riseWindowSeconds"] + INTERVAL + 5
                target, ok = f"{lo}-{hi}s", took is not None and lo <= took <= hi
            rows.append(
                Row(
                    name,
                    f"{p}: reaction",
                    f"{value}, {changes[p]} change(s)",
                    target,
                    verdict(ok) if target else "",
                )
            )
        return rows
    # drift: the means cross at half the drift; when did each policy move, and how often
    crossing = 150.0
    for p in POLICIES:
        times = decision_changes(samples, p)
        when = ", ".join(f"{t - crossing:+.0f}s" for t in times) or "never"
        goal = "" if p == "raw" else "1"
        met = verdict(len(times) == 1) if goal else ""
        rows.append(Row(name, f"{p}: changes (vs crossing)", f"{len(times)}: {when}", goal, met))
    return rows


@benchmark("placement-stability")
def placement_stability(workdir: Path) -> list[Row]:
    """Run every scenario on one control plane and report each policy's churn and reaction."""
    from bench.placement_stability.plot import plot
    from e2e.controlplane import ControlPlane
    from e2e.loadgen import CAPACITY_CORES
    from e2e.mission import SAMPLE_CONFIG, Mission, sample_documents
    from e2e.ocm import cluster_set_binding

    cp = ControlPlane(workdir / "ocm", progress=_say)
    mission: Mission | None = None
    driver: LoadDriver | None = None
    observer: Observer | None = None
    rows: list[Row] = []
    try:
        _say("starting the local control plane (tools, OCM, Prometheus, image)")
        cp.up()
        m = mission = Mission(cp, progress=_say, interval=INTERVAL, work_dir=workdir / "mission")
        _say("helm install, clusteradm addon enable, sample CPU scorer, gateway")
        m.install()
        m.tenant_secrets()
        m.enable()
        m.start_gateway()
        base = m.start_scorer()
        driver = LoadDriver(m.set_load, CAPACITY_CORES, SIGMA_AT_LOAD).start()
        for doc in sample_documents(SAMPLE_CONFIG):
            m.hub.apply(doc)
        for score in SCORERS:
            m.hub.apply(scorer(m.dynamic_scorer(base), score))
        m.hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        m.hub.apply(cluster_set_binding(NAMESPACE))
        for name, (score, margin) in POLICIES.items():
            m.hub.apply(placement(name, score, margin))
        observer = Observer(m.hub, driver).start()
        _say("waiting for both scores on both clusters and a decision from every Placement")
        deadline = time.monotonic() + 240
        while not _ready(observer):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no scores or decisions after 240s: {observer.samples[-1:]}")
            time.sleep(1)
        time.sleep(STABILIZATION["riseWindowSeconds"] + INTERVAL)  # the noise run starts from a steady state
        for scenario in SCENARIOS:
            outcome = run_scenario(scenario, driver, observer)
            found = rows_for(outcome)
            rows.extend(found)
            png = plot(outcome.samples, scenario.name, workdir / f"placement-stability-{scenario.name}.png")
            _say(f"{scenario.name}: plot {png}")
            for row in found:
                _say(f"  {row.metric}: {row.value} {row.target} {row.verdict}")
    finally:
        # a second Ctrl-C (or `timeout` passing one on) must not cut the teardown short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if observer is not None:
            observer.stop()
        if driver is not None:
            driver.stop()
        if mission is not None:
            mission.stop_local()
        left = cp.down()
        if left:
            _say("teardown left: " + "; ".join(left))
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return rows


def _ready(observer: Observer) -> bool:
    last = observer.last()
    if last is None:
        return False
    scored = all(last.scores.get((s, c)) is not None for s in SCORERS for c in CLUSTERS)
    return scored and all(last.decisions.get(p) for p in POLICIES)


def scorer(sample: JSON, score: str) -> JSON:
    """The mission's sample DynamicScorer renamed to ``score``: a 1 s range, its stabilization."""
    spec = dict(sample["spec"])
    spec["scoring"] = {**spec["scoring"], "params": {"name": score, "interval": INTERVAL}}
    spec["source"] = {
        **spec["source"],
        "params": {**spec["source"]["params"], "range": QUERY_RANGE, "step": 1},
    }
    spec["validForSeconds"] = VALID_FOR
    spec.pop("stabilization", None)
    if SCORERS[score]:
        spec["stabilization"] = dict(SCORERS[score])
    return {**sample, "metadata": {**sample["metadata"], "name": score.replace("_", "-")}, "spec": spec}
