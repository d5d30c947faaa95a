"""Sample scorers in process: request parsing, per-series scoring, the /config document."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.contract.wire import ScorerConfig, ScoringResponse
from dynamic_scoring.samples.scorers import cpu, predict
from dynamic_scoring.samples.scorers.server import build_parser, config_document
from dynamic_scoring.scorer import RequestError, ScoringRequest, Series, parse_request

T0 = 1_800_000_000


def matrix(labels: dict[str, str], values: list[float], step: int = 15) -> dict[str, object]:
    return {"metric": labels, "values": [[T0 + step * i, repr(v)] for i, v in enumerate(values)]}


def test_parse_reads_prometheus_matrix_and_drops_non_finite_points() -> None:
    body = {
        "data": [
            {"metric": {"namespace": "a"}, "values": [[T0 + 15, "2"], [T0, "1"], [T0 + 30, "NaN"]]},
            {"metric": {}, "values": [[T0, "+Inf"]]},
        ]
    }
    series = parse_request(json.dumps(body).encode()).series
    assert series == [
        Series({"namespace": "a"}, [(T0, 1.0), (T0 + 15, 2.0)], non_finite=1),
        Series({}, [], non_finite=1),
    ]


@pytest.mark.parametrize("body", [b'{"data": null}', b"{}", b'{"data": []}'])
def test_parse_empty_requests(body: bytes) -> None:
    assert parse_request(body) == ScoringRequest([])


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"not json", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"data": {}}', "data: expected a list"),
        (b'{"data": [3]}', r"data\[0\]"),
        (b'{"data": [{"metric": {"a": 1}, "values": []}]}', r"data\[0\].metric"),
        (b'{"data": [{"values": [[1]]}]}', r"data\[0\].values\[0\]"),
        (b'{"data": [{"values": [[1, "x"]]}]}', r"data\[0\].values\[0\]\[1\]: not a number"),
        (b'{"data": [{"values": [[1, true]]}]}', r"data\[0\].values\[0\]\[1\]"),
    ],
)
def test_parse_names_what_is_wrong(body: bytes, where: str) -> None:
    with pytest.raises(RequestError, match=where):
        parse_request(body)


def test_cpu_scores_the_mean_load_and_passes_labels_through() -> None:
    request = parse_request(
        json.dumps({"data": [matrix({"cluster": "c1"}, [0.5, 1.5]), matrix({"cluster": "c2"}, [])]}).encode()
    )
    response = ScoringResponse(results=cpu.score(request, capacity=4.0))
    # Mean 1.0 core of 4: 75. The series without points gives no result rather than a made-up score.
    assert response.model_dump() == {"results": [{"metric": {"cluster": "c1"}, "score": 75.0}]}
    ScoringResponse.model_validate_json(response.model_dump_json())  # what the agent accepts


def test_predict_scores_the_forecast_not_the_mean() -> None:
    # Load climbing 0.5, 1, 1.5, 2 cores, 15 s apart: 2.5 cores expected 15 s later.
    rising = parse_request(json.dumps({"data": [matrix({}, [0.5, 1.0, 1.5, 2.0])]}).encode()).series[0]
    assert predict.score_series(rising, capacity=4.0, horizon=15) == pytest.approx(37.5)
    assert cpu.score_series(rising, capacity=4.0) == pytest.approx(68.75)


@given(st.lists(st.floats(min_value=0, max_value=64), min_size=1, max_size=40), st.floats(0.5, 64))
def test_both_scorers_stay_in_range(loads: list[float], capacity: float) -> None:
    s = Series({}, [(T0 + 15.0 * i, v) for i, v in enumerate(loads)])
    for score in (cpu.score_series(s, capacity), predict.score_series(s, capacity, 30.0)):
        assert score is not None and 0.0 <= score <= 100.0


def test_config_document_is_a_valid_scorer_config() -> None:
    parser = build_parser("x", cpu.DEFAULTS)
    args = parser.parse_args(["--prometheus-url", "http://prom.monitoring.svc:9090"])
    doc = config_document(args, cpu.DEFAULTS.description)
    wire = json.loads(doc.model_dump_json())
    assert ScorerConfig.model_validate(wire) == doc
    assert wire["source"] == {
        "type": "Prometheus",
        "host": "http://prom.monitoring.svc:9090",
        "path": "/api/v1/query_range",
        "params": {"query": "sum(rate(container_cpu_usage_seconds_total[1m]))", "range": 300, "step": 15},
    }
    assert wire["scoring"] == {
        "host": "",  # the hub uses configURL's origin; a host here misleads upstream's manager
        "path": "/scoring",
        "params": {"name": "cpu_headroom", "interval": 30},
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--capacity-cores", "0"], "--capacity-cores must be positive"),
        (["--range", "60", "--step", "120"], "--step at most --range"),
        (["--scoring-path", "/config"], "--scoring-path must start with '/'"),
        (["--horizon", "-5"], "--horizon must be at least 0"),
    ],
)
def test_bad_options_stop_the_scorer_with_a_usage_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        predict.main(["--port", "0", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
