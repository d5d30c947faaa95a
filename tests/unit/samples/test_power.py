"""The power sample in process: the cap per cluster, headroom now and forecast, named errors."""

from __future__ import annotations

from typing import Any

import pytest

from dynamic_scoring.samples.scorers import power
from dynamic_scoring.samples.scorers.server import build_parser, config_document
from dynamic_scoring.scorer import RequestError, ScoringRequest, Series

T0 = 1_800_000_000


def cluster_watts(cluster: str, values: list[float]) -> Series:
    return Series({"cluster": cluster}, [(T0 + 30 * i, v) for i, v in enumerate(values)])


def scores(*series: Series, **params: Any) -> list[float]:
    return [r.score for r in power.score(ScoringRequest(list(series), params))]


def test_headroom_under_one_cap_or_a_cap_per_cluster() -> None:
    assert scores(cluster_watts("edge-1", [300.0, 500.0]), capWatts=1000) == [60.0]
    caps = {"edge-1": 500, "*": 2000}
    assert scores(cluster_watts("edge-1", [400.0]), cluster_watts("dc-1", [400.0]), capWatts=caps) == [
        pytest.approx(20.0),
        80.0,
    ]
    assert scores(cluster_watts("edge-1", [900.0]), capWatts=500) == [0.0]  # over the cap: no headroom


def test_a_horizon_scores_the_power_expected_while_the_work_runs() -> None:
    # Less than a day of history: the forecast is the last hour's mean (30 s apart: 120 points).
    series = cluster_watts("edge-1", [100.0] * 80 + [400.0] * 140)
    assert scores(series, capWatts=1000) == [pytest.approx(100 * (1 - (80 * 100 + 140 * 400) / 220 / 1000))]
    assert scores(series, capWatts=1000, horizon=3600) == [pytest.approx(60.0)]


def test_the_start_option_is_the_cap_when_requests_send_none() -> None:
    assert [r.score for r in power.score(ScoringRequest([cluster_watts("x", [250.0])]), cap=1000)] == [75.0]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, r"give the power cap in watts \(or start the scorer with --cap-watts\)"),
        ({"capWatts": 0}, "expected watts above 0, or an object"),
        ({"capWatts": True}, "expected watts above 0, or an object"),
        ({"capWatts": {"edge-1": -5, "*": 100}}, "edge-1: expected watts above 0"),
        ({"capWatts": {"other": 100}}, r"no cap for cluster 'edge-1' and no '\*'"),
        ({"capWatts": 100, "horizon": -1}, "params.horizon"),
    ],
)
def test_bad_params_are_named(params: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        power.score(ScoringRequest([cluster_watts("edge-1", [1.0])], params))


def test_a_series_without_a_cluster_label_is_told_how_to_get_one() -> None:
    with pytest.raises(RequestError, match=r'label its series cluster="\$\{cluster\}"'):
        power.score(ScoringRequest([Series({}, [(T0, 1.0)])], {"capWatts": {"edge-1": 100}}))
    assert scores(Series({}, [(T0, 50.0)]), capWatts={"*": 100}) == [50.0]


def test_config_names_keplers_counter_with_the_cluster_label() -> None:
    config = config_document(build_parser("power", power.DEFAULTS).parse_args([]), power.DEFAULTS.description)
    assert config.name == "power_headroom"
    assert 'kepler_node_cpu_joules_total{zone="package"}' in config.source.params.query
    assert '"cluster", "${cluster}"' in config.source.params.query


def test_a_bad_cap_option_stops_the_scorer_at_start() -> None:
    with pytest.raises(SystemExit) as stopped:
        power.main(["--cap-watts", "0"])
    assert stopped.value.code == 2
