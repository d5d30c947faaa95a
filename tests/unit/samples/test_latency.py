"""The latency sample in process: probes per target, failures, traffic weights, named errors."""

from __future__ import annotations

from typing import Any

import pytest

from dynamic_scoring.samples.scorers import latency
from dynamic_scoring.samples.scorers.server import build_parser, config_document
from dynamic_scoring.scorer import RequestError, ScoringRequest, Series

T0 = 1_800_000_000
EU, US = "https://eu.users.example.com", "https://us.users.example.com"


def probe(target: str, seconds: list[float], success: list[float] | None = None) -> list[Series]:
    labels = {"instance": target, "job": "blackbox", "module": "http_2xx"}
    out = [
        Series({"__name__": latency.DURATION, **labels}, [(T0 + 30 * i, v) for i, v in enumerate(seconds)])
    ]
    ok = success if success is not None else [1.0] * len(seconds)
    out.append(Series({"__name__": latency.SUCCESS, **labels}, [(T0 + 30 * i, v) for i, v in enumerate(ok)]))
    return out


def scores(series: list[Series], **params: Any) -> list[float]:
    return [r.score for r in latency.score(ScoringRequest(series, params))]


def test_the_mean_probe_latency_scores_against_the_maximum() -> None:
    assert scores(probe(EU, [0.02, 0.04])) == [pytest.approx(85.0)]  # 30 ms of 200
    assert scores(probe(EU, [0.02, 0.04]), maxLatencyMs=60) == [pytest.approx(50.0)]
    assert scores(probe(EU, [0.5])) == [0.0]  # slower than the maximum


def test_failed_probes_count_as_the_maximum() -> None:
    # half the probes failed: half of 30 ms and half of 200 ms
    assert scores(probe(EU, [0.03, 0.03], success=[1.0, 0.0])) == [pytest.approx(100 * (1 - 115 / 200))]


def test_targets_weigh_the_same_unless_weights_say_where_the_users_are() -> None:
    both = probe(EU, [0.01]) + probe(US, [0.11])  # 10 ms and 110 ms
    assert scores(both) == [pytest.approx(70.0)]  # mean 60 ms
    assert scores(both, weights={EU: 3, US: 1}) == [pytest.approx(100 * (1 - 35 / 200))]
    # a weighted target this cluster does not probe counts as unreachable
    assert scores(probe(EU, [0.01]), weights={EU: 1, US: 1}) == [pytest.approx(100 * (1 - 105 / 200))]


def test_no_probes_score_nothing_and_foreign_series_are_named() -> None:
    assert scores([]) == []
    foreign = [Series({"__name__": "up"}, [(T0, 1.0)])]
    with pytest.raises(RequestError, match=r"no probe_duration_seconds or probe_success series among 1"):
        latency.score(ScoringRequest(foreign))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"maxLatencyMs": 0}, "params.maxLatencyMs"),
        ({"maxLatencyMs": "200"}, "params.maxLatencyMs"),
        ({"weights": []}, "params.weights: expected an object"),
        ({"weights": {EU: -1}}, "params.weights: expected an object"),
        ({"weights": {EU: 0}}, "at least one share must be above 0"),
    ],
)
def test_bad_params_are_named(params: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        latency.score(ScoringRequest(probe(EU, [0.01]), params))


def test_config_names_the_probe_series() -> None:
    config = config_document(build_parser("l", latency.DEFAULTS).parse_args([]), latency.DEFAULTS.description)
    assert config.name == "user_latency"
    assert config.source.params.query == '{__name__=~"probe_duration_seconds|probe_success"}'
