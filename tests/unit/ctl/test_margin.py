"""The incumbent margin `why` names: points of each AddOn score, and the scorer's units behind them."""

from __future__ import annotations

import pytest

from dynamic_scoring.ctl.margin import Scale, margins, scales, unreadable, with_scales
from dynamic_scoring.kube.jsontypes import JSON


def addon(resource: str, score: str, weight: int) -> JSON:
    return {
        "scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": resource, "scoreName": score}},
        "weight": weight,
    }


def steady(weight: int) -> JSON:
    return {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": weight}


def placement(*configs: JSON, mode: str | None = "Exact") -> JSON:
    policy: JSON = {"configurations": list(configs)}
    if mode:
        policy["mode"] = mode
    return {"spec": {"numberOfClusters": 1, "prioritizerPolicy": policy}}


def scorer(name: str, score_name: str | None, band: JSON | None = None, destination: str = "") -> JSON:
    spec: JSON = {}
    if band is not None:
        spec["scoreNormalization"] = band
    if destination:
        spec["scoreDestination"] = destination
    status: JSON = {} if score_name is None else {"scoreName": score_name}
    return {"metadata": {"namespace": "ds", "name": name}, "spec": spec, "status": status}


def test_the_readme_recipe_is_a_10_point_lead_and_each_score_gets_its_own() -> None:
    (one,) = margins(placement(addon("cpu-free", "cpu_free", 10), steady(1)))
    assert (one.resource, one.score, one.points) == ("cpu-free", "cpu_free", 10)
    two = margins(placement(addon("f", "cpu_forecast", 10), addon("h", "cpu_headroom", 5), steady(1)))
    assert [m.points for m in two] == [10, 20]  # the sample Placement: 10 of forecast or 20 of headroom


def test_no_steady_a_zero_or_negative_weight_and_additive_defaults() -> None:
    assert margins(placement(addon("a", "s", 10))) == []  # Exact without Steady: no margin
    assert margins(placement(addon("a", "s", 10), steady(0))) == []  # weight 0 turns it off
    assert margins(placement(addon("a", "s", -1), steady(1))) == []  # lower wins: "lead" is backwards
    (additive,) = margins(placement(addon("a", "s", 1), mode=None))  # Additive adds Steady 1 itself
    assert additive.points == 100
    assert margins({"spec": {"prioritizerPolicy": {"mode": "Sometimes"}}}) == []  # misconfigured


def test_a_normalized_scorer_turns_points_into_its_own_units() -> None:
    found = margins(placement(addon("cpu-free", "cpu_free", 10), steady(1)))
    band = {"min": 20, "max": 80, "targetMin": -100, "targetMax": 100}
    by_resource = scales(
        [
            scorer("free", "cpu_free", band),
            scorer("plain", "cpu_free"),  # a second scorer of the same name: both are shown
            scorer("other", "gpu_fit", band),
            scorer("pending", None, band),  # not resolved yet: publishes nothing
            scorer("elsewhere", "cpu_free", band, destination="None"),
        ]
    )
    assert set(by_resource) == {"cpu-free", "gpu-fit"}
    (m,) = with_scales(found, by_resource)
    assert [s.scorer for s in m.scales] == ["ds/free", "ds/plain"]
    assert [s.units_per_point for s in m.scales] == [0.3, 1.0]
    line = m.describe()
    assert "more than 10 points of cpu-free/cpu_free (Steady 1, AddOn 10)" in line
    assert "= 3 in the units of ds/free (scoreNormalization 20..80 onto -100..100)" in line
    assert "= 10 in the units of ds/plain (no scoreNormalization)" in line


def test_an_inverted_band_and_defaults_of_the_target_range() -> None:
    inverted = Scale("ds/cost", (80.0, 20.0, 0.0, 100.0))  # lower raw is better: still 0.6 a point
    assert inverted.units_per_point == pytest.approx(0.6)
    (s,) = scales([scorer("c", "cost", {"min": 0, "max": 50})])["cost"]
    assert s.band == (0.0, 50.0, 0.0, 100.0) and s.units_per_point == 0.5
    (bad,) = scales([scorer("c", "cost", {"min": 1, "max": 1})])["cost"]
    assert bad.band is None  # unusable: the hub refuses it anyway, and it scales nothing


def test_unknown_units_say_why() -> None:
    found = margins(placement(addon("cpu-free", "cpu_free", 10), steady(1)))
    (none,) = with_scales(found, {})
    assert "no DynamicScorer on the hub publishes cpu-free, so its units are unknown" in none.describe()
    (refused,) = unreadable(found, "could not list DynamicScorers (403 Forbidden: no)")
    assert refused.describe().endswith(
        "its scorer's units unknown: could not list DynamicScorers (403 Forbidden: no)"
    )


def test_balance_beside_steady_is_named_as_a_swing_of_the_lead() -> None:
    balanced = {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Balance"}, "weight": 3}
    (one,) = margins(placement(addon("cpu-free", "cpu_free", 10), steady(7), balanced))
    assert (one.points, one.balance_weight, one.balance_swing) == (70, 3, 60)
    assert "widened or narrowed by up to 60 as other Placements' decisions move Balance (3)" in one.describe()
    (plain,) = margins(placement(addon("cpu-free", "cpu_free", 10), steady(1)))
    assert plain.balance_swing == 0 and "Balance" not in plain.describe()
    (additive,) = margins(placement(addon("a", "s", 1), mode=None))  # Additive: Balance 1 and Steady 1
    assert (additive.points, additive.balance_swing) == (100, 200)
    (kept,) = unreadable([one], "403")
    assert kept.balance_weight == 3
