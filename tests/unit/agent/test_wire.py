from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from dynamic_scoring.contract.wire import (
    UPSTREAM_SUMMARY_KEYS,
    ScorerConfig,
    ScorerSummary,
    ScoringResponse,
    dump_summaries,
    parse_summaries,
)

QUICKSTART = """[{"name":"sample-scorer","scoreName":"sample_my_score","sourceType":"Prometheus",
  "sourceEndpoint":"http://kube-prometheus-kube-prome-prometheus.monitoring.svc:9090/api/v1/query_range",
  "sourceEndpointAuthName":"","sourceEndpointAuthKey":"",
  "sourceQuery":"sum by (node, namespace, pod) (rate(container_cpu_usage_seconds_total{pod!=\\"\\"}[1m]))",
  "sourceRange":3600,"sourceStep":60,"scoringEndpoint":"http://10.0.0.1:30007/scoring","scoringInterval":30,
  "scoringEndpointAuthName":"","scoringEndpointAuthKey":"","location":"Internal",
  "scoreDestination":"AddOnPlacementScore","scoreDimensionFormat":"${node};${namespace};${pod}"}]"""


def test_upstream_summary_round_trips_key_for_key() -> None:
    summaries, errors = parse_summaries(QUICKSTART)
    assert errors == []
    (s,) = summaries
    assert s.score_name == "sample_my_score" and s.source_range == 3600
    out = json.loads(dump_summaries(summaries))
    assert list(out[0]) == list(UPSTREAM_SUMMARY_KEYS)
    assert out == json.loads(QUICKSTART)


def test_missing_and_null_keys_are_zero_values_and_unknown_keys_ignored() -> None:
    (s,), errors = parse_summaries('[{"scoreName":"x","sourceRange":null,"futureField":{"a":1}}]')
    assert errors == []
    assert s.source_range == 0 and s.name == "" and s.source_queries is None
    assert list(s.to_wire()) == list(UPSTREAM_SUMMARY_KEYS)


def test_extensions_are_emitted_only_when_set() -> None:
    s = ScorerSummary(
        score_name="x",
        source_queries=["up"],
        scoring_auth={"bearerTokenSecretRef": {"name": "s", "key": "t"}},  # type: ignore[arg-type]
        valid_for_seconds=600,
    )
    wire = s.to_wire()
    assert list(wire)[16:] == ["sourceQueries", "scoringAuth", "validForSeconds"]
    assert wire["scoringAuth"] == {
        "bearerTokenSecretRef": {"name": "s", "key": "t"},
        "insecureSkipVerify": False,
    }
    assert ScorerSummary.model_validate(wire) == s


def test_a_bad_entry_is_reported_by_name_and_the_rest_survive() -> None:
    payload = json.dumps(
        [
            {"scoreName": "good"},
            {"name": "n", "scoreName": "typed", "scoringInterval": "30"},
            {"name": "only-name", "sourceRange": 1.5},
            "not an object",
            {"scoreName": "auth", "scoringAuth": {"bearerTokenSecretRef": {"name": "a", "key": "b"},
                                                  "basicAuthSecretRef": {"name": "c"}}},
            {"scoreName": "hdr", "sourceAuth": {"headers": [{"name": "Bad Header", "value": "v"}]}},
        ]
    )  # fmt: skip
    summaries, errors = parse_summaries(payload)
    assert [s.score_name for s in summaries] == ["good"]
    assert [(e.index, e.name) for e in errors] == [
        (1, "typed"),
        (2, "only-name"),
        (3, ""),
        (4, "auth"),
        (5, "hdr"),
    ]
    assert "scoringInterval" in errors[0].message
    assert "exclude each other" in errors[3].message
    assert str(errors[0]).startswith("summaries[1] (typed): scoringInterval")


@pytest.mark.parametrize(("payload", "count"), [("null", 0), ("[]", 0)])
def test_empty_payloads(payload: str, count: int) -> None:
    assert parse_summaries(payload) == ([], [])


@pytest.mark.parametrize("payload", ["{", '{"a": 1}', "3", b"\xff"])
def test_unusable_payload_is_one_error(payload: str | bytes) -> None:
    summaries, errors = parse_summaries(payload)
    assert summaries == [] and len(errors) == 1 and errors[0].index is None


def test_scoring_response_coerces_scalars_and_defaults() -> None:
    resp = ScoringResponse.model_validate_json(
        b'{"results":[{"metric":{"a":1,"b":true,"c":null,"d":1.5,"e":"x"},"score":3},{"metric":{}}],"extra":1}'
    )
    assert resp.results[0].metric == {"a": "1", "b": "true", "c": "", "d": "1.5", "e": "x"}
    assert resp.results[1].score == 0
    assert ScoringResponse.model_validate_json(b"{}").results == []
    assert ScoringResponse.model_validate_json(b'{"results":null}').results == []


@pytest.mark.parametrize(
    "body",
    [
        b'{"results":[{"score":NaN}]}',
        b'{"results":[{"score":Infinity}]}',
        b'{"results":[{"score":1e999}]}',
        b'{"results":[{"score":"85"}]}',
        b'{"results":[{"metric":{"a":[1]},"score":1}]}',
        b'{"results":{}}',
        b"[]",
    ],
)
def test_scoring_response_rejections(body: bytes) -> None:
    with pytest.raises(ValidationError):
        ScoringResponse.model_validate_json(body)


def test_config_document() -> None:
    cfg = ScorerConfig.model_validate_json(
        b'{"name":"n","source":{"type":"Prometheus","path":"/api/v1/query_range","params":{"query":"up","range":3600}},'
        b'"scoring":{"path":"/scoring","params":{"name":"s","interval":30}},"unknown":true}'
    )
    assert (
        cfg.source.params.range == 3600 and cfg.source.params.step == 0 and cfg.scoring.params.interval == 30
    )
    with pytest.raises(ValidationError):
        ScorerConfig.model_validate_json(b'{"source":{"params":{"range":"3600"}}}')


@pytest.mark.parametrize(
    "name", ["Host", "host", "Content-Length", "Transfer-Encoding", "Connection", "Proxy-Authorization"]
)
def test_headers_the_http_client_owns_cannot_be_configured(name: str) -> None:
    """``Host: my-own.example`` would route a bound Secret to another backend behind a shared ingress."""
    payload = json.dumps([{"scoreName": "hdr", "scoringAuth": {"headers": [{"name": name, "value": "x"}]}}])
    summaries, errors = parse_summaries(payload)
    assert summaries == [] and len(errors) == 1
    assert f"header {name} is set by the HTTP client" in errors[0].message


def test_ordinary_extra_headers_are_kept() -> None:
    payload = json.dumps(
        [{"scoreName": "hdr", "scoringAuth": {"headers": [{"name": "X-Scope-OrgID", "value": "t"}]}}]
    )
    summaries, errors = parse_summaries(payload)
    assert errors == [] and summaries[0].scoring_auth is not None
