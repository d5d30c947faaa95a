"""The pure parts of the placement-quality replay: series, rescale, ranking vs the model, writes, timeline."""

from __future__ import annotations

import datetime as dt
import functools
import random
import time

import numpy as np
import pytest

from bench.placement_quality import prometheus as prom
from bench.placement_quality.policies import (
    BLENDED_LIVES,
    BY_NAME,
    DEFAULT_FORECAST,
    LIVES,
    POLICIES,
    QUERY,
    RECIPE_SPREAD,
    SHIPPED_SEASONAL,
    dynamic_scorer,
    free_cores_score,
    judged_at,
    plan_for,
    reactive_score,
)
from bench.placement_quality.ranking import FORMS, Form, placement, rank, score_object
from bench.placement_quality.replay import (
    LAGS,
    Timeline,
    aps_writes,
    decide,
    decide_static,
    stabilize,
    warmup_steps,
)
from bench.placement_quality.traces import ClusterLoads
from dynamic_scoring.agent.cycle import CycleEnv
from dynamic_scoring.agent.items.stabilization import Stabilization
from dynamic_scoring.ctl import placement_model as pm
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm import placement_policy as pp
from dynamic_scoring.scorer import parse_request, recent_weight

# --- series ------------------------------------------------------------------------------------------


def test_rescale_sets_the_mean_and_keeps_the_shape() -> None:
    out = prom.rescale(np.array([10.0, 20.0, 30.0]))
    assert out.tolist() == pytest.approx([25.0, 50.0, 75.0])
    assert float(out.mean()) == pytest.approx(50.0)


def test_rescale_clips_to_percent() -> None:
    out = prom.rescale(np.array([1.0, 1.0, 10.0]), target_mean=50.0)  # x 12.5: 12.5, 12.5, 125
    assert out.tolist() == [12.5, 12.5, 100.0]


@pytest.mark.parametrize("series", [np.array([]), np.zeros(3)])
def test_rescale_refuses_what_it_cannot_scale(series: np.ndarray) -> None:
    with pytest.raises(ValueError, match="positive mean"):
        prom.rescale(series)


def test_openmetrics_writes_one_gauge_sample_per_step_on_the_grid() -> None:
    clusters = ClusterLoads(("a", "b"), 300, np.array([[1.5, 2.0], [3.0, 4.25]]))
    text = prom.openmetrics(clusters, start=1000)
    assert text.splitlines() == [
        f"# TYPE {prom.METRIC} gauge",
        f'{prom.METRIC}{{cluster="a"}} 1.5 1000',
        f'{prom.METRIC}{{cluster="a"}} 2.0 1300',
        f'{prom.METRIC}{{cluster="b"}} 3.0 1000',
        f'{prom.METRIC}{{cluster="b"}} 4.25 1300',
        "# EOF",
    ]


# --- policies ----------------------------------------------------------------------------------------


def test_policies_resolve_to_plans_with_the_cluster_placeholder_and_adapted_windows() -> None:
    windows = {}
    for policy in POLICIES:
        if not policy.scored:
            continue
        plan = plan_for(dynamic_scorer(policy, "http://127.0.0.1:1", "http://127.0.0.1:2"))
        (source,) = plan.sources
        assert source.queries == (QUERY,)
        assert "${cluster}" in QUERY
        assert plan.interval == 300
        windows[policy.name] = (source.range, source.step)
    assert windows == {
        "reactive": (300, 300),
        "cpu": (3000, 300),
        **{f"predict-{life}": (6000, 300) for life in LIVES},
        **{f"seasonal-{life}": (90_000, 300) for life in LIVES},
        **{f"blend-{life}": (90_000, 300) for life in ("15m", "1h")},
        **{f"even-{life}": (90_000, 300) for life in ("4h", "12h")},
        "cpu-recipe": (3000, 300),  # the recipe changes the score's scale, not its window
        **{f"recipe-{life}": (90_000, 300) for life in LIVES},
    }


def test_forecast_horizons_match_the_life_they_are_judged_at() -> None:
    by_name = {p.name: p for p in POLICIES}
    for life, steps in LIVES.items():
        seasonal, predict = by_name[f"seasonal-{life}"], by_name[f"predict-{life}"]
        assert isinstance(seasonal.score, functools.partial) and isinstance(predict.score, functools.partial)
        assert seasonal.score.keywords["horizon"] == steps * 300  # the mean over the whole life
        assert predict.score.keywords["horizon"] == (steps + 1) * 150  # a line's value at mid-life
        assert (seasonal.family, predict.family, seasonal.life) == ("seasonal", "predict", life)
    assert by_name[SHIPPED_SEASONAL].score.keywords["horizon"] == 3600  # type: ignore[union-attr]
    # The blend is replayed only where it differs from the seasonal forecast alone.
    assert BLENDED_LIVES == ("15m", "1h")
    for life in BLENDED_LIVES:
        blend = by_name[f"blend-{life}"].score
        assert isinstance(blend, functools.partial) and blend.keywords["blend"] is True
        assert by_name[f"seasonal-{life}"].score.keywords["blend"] is False  # type: ignore[union-attr]
    assert all(recent_weight(steps * 300) == 0 for life, steps in LIVES.items() if life not in BLENDED_LIVES)
    at_4h = [p.name for p in POLICIES if p.scored and judged_at(p, "4h")]
    assert at_4h == [
        "reactive",
        "cpu",
        "predict-4h",
        "seasonal-1h",
        "seasonal-4h",
        "even-4h",
        "cpu-recipe",
        "recipe-4h",
    ]
    assert {p.score_name for p in POLICIES} >= {"quality_seasonal_12h", "quality_cpu"}


def test_reactive_scores_the_latest_point_only() -> None:
    body = (
        b'{"data": [{"metric": {"cluster": "a"}, "values": [[0, "10"], [300, "90"], [600, "30"]]}],'
        b' "params": {}}'
    )
    (only,) = reactive_score(parse_request(body), capacity=100.0)
    assert only.score == pytest.approx(70.0)


# --- cycle clock -------------------------------------------------------------------------------------


def test_cycle_env_clock_defaults_to_now() -> None:
    env = CycleEnv("c", object(), object(), object())  # type: ignore[arg-type]
    assert abs(env.clock() - time.time()) < 5
    assert CycleEnv("c", object(), object(), object(), clock=lambda: 42.0).clock() == 42.0  # type: ignore[arg-type]


# --- ranking against the placement model -------------------------------------------------------------

NOW = dt.datetime(2023, 11, 15, tzinfo=dt.UTC)


def _hub(
    obj: JSON, names: list[str], scores: dict[str, int] | None, previous: tuple[str, ...]
) -> pm.HubState:
    addon = obj["spec"]["prioritizerPolicy"]["configurations"][0]["scoreCoordinate"]["addOn"]
    resource, score = addon["resourceName"], addon["scoreName"]
    objects = [] if scores is None else [score_object(n, resource, score, v) for n, v in scores.items()]
    decision = {
        "metadata": {
            "namespace": "quality",
            "name": "quality-decision-1",
            "labels": {pp.PLACEMENT_LABEL: "quality"},
        },
        "status": {"decisions": [{"clusterName": c, "reason": ""} for c in previous]},
    }
    return pm.HubState(
        placement=obj,
        clusters=[{"metadata": {"name": n, "labels": {pm.CLUSTER_SET_LABEL: "default"}}} for n in names],
        cluster_sets=[{"metadata": {"name": "default"}, "spec": {}}],
        bindings=[{"metadata": {"namespace": "quality", "name": "default"}}],
        scores={(n, resource): s for n, s in zip(scores or {}, objects, strict=True)},
        decisions=[decision] if previous else [],
    )


def _explained(state: pm.HubState) -> tuple[str, ...]:
    result = pm.explain(state, NOW)
    assert not result.misconfigured
    chosen = [v for v in result.clusters if v.expected]
    return tuple(v.name for v in sorted(chosen, key=lambda v: v.rank or 0))


@pytest.mark.parametrize("seed", range(200))
def test_rank_agrees_with_explain_on_random_hubs(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"c{i}" for i in rng.sample(range(20), rng.randint(1, 8))]
    form: Form = rng.choice(FORMS)
    k = rng.randint(1, len(names) + 1)
    obj = placement(k, form, "quality-x", "quality_x")
    scores: dict[str, int] | None = None
    if rng.random() < 0.9:  # some clusters publish no score; ties are frequent (scores 0..5 or -100..100)
        top = rng.choice([5, 100])
        scores = {n: rng.randint(-top if top == 100 else 0, top) for n in names if rng.random() < 0.8}
    previous = tuple(rng.sample(names, rng.randint(0, min(k, len(names)))))
    assert rank(obj, names, scores, previous) == _explained(_hub(obj, names, scores, previous))


def test_additive_steady_keeps_the_first_choice_and_exact_follows_the_score() -> None:
    names = ["a", "b"]
    published = np.array([[90, 10, 10], [10, 90, 95]])
    assert decide(published, names, 1, "exact", "r", "s") == [(0,), (1,), (1,)]
    # Additive: Steady's 100 beats b's lead of 80 and 85 points.
    assert decide(published, names, 1, "additive", "r", "s") == [(0,), (0,), (0,)]
    # A lead of exactly 100 only ties, and the name breaks it: "a" (index 1) takes over from "b" ...
    assert decide(np.array([[100, 0], [0, 100]]), ["b", "a"], 1, "additive", "r", "s") == [(0,), (1,)]
    # ... but "b" never takes over from "a" that way.
    assert decide(np.array([[0, 100], [100, 0]]), ["b", "a"], 1, "additive", "r", "s") == [(1,), (1,)]


def test_static_is_the_name_order() -> None:
    assert decide_static(3, ["b", "a", "c"], 2, "exact") == [(1, 0)] * 3
    assert decide_static(2, ["b", "a", "c"], 1, "additive") == [(1,), (1,)]


# --- stabilization and writes ------------------------------------------------------------------------


def test_stabilize_holds_rises_and_passes_falls() -> None:
    settings = Stabilization(tolerance=3, rise_window_seconds=900, fall_window_seconds=0)
    raw = np.array([[50, 60, 60, 60, 60, 40, 41, 52]])
    times = [300.0 * j for j in range(8)]
    # 60 first seen at 300 s is published at 1200 s; the fall to 40 at once; 41 is within tolerance;
    # 52 is a rise not yet held.
    assert stabilize(raw, times, settings).tolist() == [[50, 50, 50, 50, 60, 40, 40, 40]]


def test_aps_writes_count_changes_after_the_first_publication() -> None:
    assert aps_writes(np.array([[1, 1, 2, 2, 1], [5, 5, 5, 5, 5]])) == 2
    assert aps_writes(np.array([[7]])) == 0


# --- causality ---------------------------------------------------------------------------------------


def test_the_warm_up_covers_the_longest_window_at_the_largest_lag() -> None:
    ranges = [p.range for p in POLICIES if p.scored]
    warmup = warmup_steps(ranges, 300)
    # The seasonal window is 25 h (300 steps): its first judged score needs 301 + 1 + lag 2 samples.
    assert warmup == 2 * 288
    assert warmup_steps(ranges, 300, whole_days=False) == 300 + 1 + max(LAGS)
    timeline = Timeline(warmup, 100)
    assert timeline.first_scored - max(ranges) // 300 >= 0


@pytest.mark.parametrize("lag", LAGS)
def test_a_decision_uses_a_score_from_before_its_life(lag: int) -> None:
    timeline = Timeline(warmup=10, judged=6)
    assert list(timeline.scored) == list(range(10 - 1 - max(LAGS), 10 + 6 - 1))
    scores = np.array([list(timeline.scored)])  # each score holds the sample it was computed at
    aligned = timeline.aligned(scores, lag)
    for j in range(6):
        # Judged step j is sample 10 + j, the first of its workload's life; its score is older.
        assert aligned[0, j] == timeline.score_sample(j, lag) == 10 + j - 1 - lag


def test_timeline_refuses_what_is_not_causal() -> None:
    with pytest.raises(ValueError, match="no causal timeline"):
        Timeline(warmup=2, judged=5, max_lag=2)
    timeline = Timeline(warmup=10, judged=6)
    with pytest.raises(ValueError, match="outside"):
        timeline.aligned(np.zeros((1, len(timeline.scored)), dtype=np.int64), max(LAGS) + 1)
    with pytest.raises(ValueError, match="scored samples"):
        timeline.aligned(np.zeros((1, 3), dtype=np.int64))


@pytest.mark.parametrize(
    "query",
    [
        "avg(trace_cpu_utilization_percent)",
        'trace_cpu_utilization_percent{cluster=~".+"}',
        'trace_cpu_utilization_percent{cluster="${cluster}"} - trace_cpu_utilization_percent',
        "up",
        # The capacity gauge counts too: a free-cores query that reads every cluster's size is refused.
        'trace_cpu_capacity_cores * (100 - trace_cpu_utilization_percent{cluster="${cluster}"}) / 100',
        'max(trace_cpu_capacity_cores{cluster!="${cluster}"})',
    ],
)
def test_a_query_not_scoped_to_the_agents_cluster_is_refused(query: str) -> None:
    policy = next(p for p in POLICIES if p.name == "cpu")
    obj = dynamic_scorer(policy, "http://127.0.0.1:1", "http://127.0.0.1:2")
    obj["spec"]["source"]["params"]["query"] = query
    with pytest.raises(ValueError, match="not scoped to the agent's cluster"):
        plan_for(obj)


def test_every_policy_including_free_cores_is_scoped_to_its_cluster() -> None:
    for policy in BY_NAME.values():
        if policy.scored:
            plan_for(dynamic_scorer(policy, "http://127.0.0.1:1", "http://127.0.0.1:2"))


def test_openmetrics_stores_each_clusters_capacity_at_every_step_when_given() -> None:
    clusters = ClusterLoads(("a", "b"), 300, np.array([[1.5, 2.0], [3.0, 4.25]]))
    text = prom.openmetrics(clusters, start=1000, capacities=np.array([50.0, 2000.0]))
    assert text.splitlines()[5:] == [
        f"# TYPE {prom.CAPACITY_METRIC} gauge",
        f'{prom.CAPACITY_METRIC}{{cluster="a"}} 50.0 1000',
        f'{prom.CAPACITY_METRIC}{{cluster="a"}} 50.0 1300',
        f'{prom.CAPACITY_METRIC}{{cluster="b"}} 2000.0 1000',
        f'{prom.CAPACITY_METRIC}{{cluster="b"}} 2000.0 1300',
        "# EOF",
    ]
    with pytest.raises(ValueError, match="capacities for 2 clusters"):
        prom.openmetrics(clusters, capacities=np.array([1.0]))


def test_free_cores_scores_idle_cores_against_the_largest_capacity() -> None:
    body = b'{"data": [{"metric": {"cluster": "a"}, "values": [[0, "10"], [300, "500"]]}], "params": {}}'
    (only,) = free_cores_score(parse_request(body), 2000.0)
    assert only.score == pytest.approx(25.0)  # 500 idle cores of 2000: the latest point only
    big = b'{"data": [{"metric": {}, "values": [[0, "3000"]]}], "params": {}}'
    assert free_cores_score(parse_request(big), 2000.0)[0].score == pytest.approx(100.0)


def test_the_recipe_policies_are_the_plain_ones_with_the_band_the_agent_applies() -> None:
    by_name = {p.name: p for p in POLICIES}
    for life in LIVES:
        recipe, plain = by_name[f"recipe-{life}"], by_name[DEFAULT_FORECAST[life]]
        assert (recipe.score, recipe.range, recipe.life) == (plain.score, plain.range, plain.life)
        plan = plan_for(dynamic_scorer(recipe, "http://127.0.0.1:1", "http://127.0.0.1:2"))
        band = plan.summary.score_normalization
        assert band is not None and (band.min, band.max, band.target_min, band.target_max) == (
            20,
            80,
            -100,
            100,
        )
        assert plan_for(dynamic_scorer(plain, "http://a:1", "http://b:2")).summary.score_normalization is None
    assert by_name["cpu-recipe"].score == by_name["cpu"].score
    assert RECIPE_SPREAD == 0.3  # 10 score points = 3 load points
