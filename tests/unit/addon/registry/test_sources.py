"""``spec.sources`` and ``onSourceError`` translated to the summary, and the problems they can have."""

from __future__ import annotations

from typing import Any

import pytest

from dynamic_scoring.addon.registry.effective import Resolution, resolve
from dynamic_scoring.addon.registry.models import DynamicScorer, parse_scorer
from tests.unit.addon.registry.crdutil import apply_defaults, crd_schema

SPEC_SCHEMA = crd_schema("dynamicscorers")["properties"]["spec"]
SCORING = {"host": "http://scorer:8000"}
CENTRAL = {"name": "central", "host": "http://thanos:9090", "queries": ['up{cluster="${cluster}"}', "x"]}


def resolved(spec: dict[str, Any], synced: dict[str, Any] | None = None) -> Resolution:
    obj: dict[str, Any] = {
        "metadata": {"name": "s", "namespace": "hub"},
        "spec": apply_defaults(SPEC_SCHEMA, {"scoring": SCORING, **spec}),
    }
    if synced is not None:
        obj["status"] = {"lastSyncedConfig": synced}
    scorer = parse_scorer(obj)
    assert isinstance(scorer, DynamicScorer), scorer
    return resolve(scorer)


def wire(spec: dict[str, Any], synced: dict[str, Any] | None = None) -> dict[str, Any]:
    res = resolved(spec, synced)
    assert res.problems == (), res.message
    assert res.summary is not None
    return res.summary.to_wire()


def test_entries_become_wire_sources_in_order_with_their_endpoints() -> None:
    edge = {"name": "edge", "host": "https://edge:9091/select/0/prometheus", "queries": ["a"], "step": 15}
    custom = {"name": "custom", "host": "http://vm:8428", "path": "/api/v1/query_range", "queries": ["b"]}
    out = wire({"sources": [CENTRAL, edge, custom]})
    assert [(s["name"], s["endpoint"], s["queries"], s["range"], s["step"]) for s in out["sources"]] == [
        ("central", "http://thanos:9090/api/v1/query_range", ['up{cluster="${cluster}"}', "x"], 3600, 60),
        ("edge", "https://edge:9091/select/0/prometheus", ["a"], 3600, 15),  # the host's own path is kept
        ("custom", "http://vm:8428/api/v1/query_range", ["b"], 3600, 60),
    ]
    assert out["onSourceError"] == "Fail"  # the default is written out for the agent


def test_upstream_keys_carry_the_first_prometheus_source() -> None:
    otel = {"name": "pushed", "type": "OpenTelemetry", "queries": ["cpu_load"]}
    central = dict(CENTRAL, auth={"tokenSecretRef": {"name": "thanos", "key": "token"}}, range=600, step=30)
    out = wire({"sources": [otel, central]})
    assert {
        k: out[k] for k in ("sourceType", "sourceEndpoint", "sourceQuery", "sourceRange", "sourceStep")
    } == {
        "sourceType": "Prometheus",
        "sourceEndpoint": "http://thanos:9090/api/v1/query_range",
        "sourceQuery": 'up{cluster="${cluster}"};x',
        "sourceRange": 600,
        "sourceStep": 30,
    }
    assert (out["sourceEndpointAuthName"], out["sourceEndpointAuthKey"]) == ("thanos", "token")
    assert "sourceQueries" not in out and "sourceAuth" not in out


def test_without_a_prometheus_source_upstream_agents_are_told_none() -> None:
    out = wire({"sources": [{"name": "pushed", "type": "OpenTelemetry", "queries": ["cpu_load"]}]})
    assert out["sourceType"] == "None" and out["sourceEndpoint"] == "" and out["sourceQuery"] == ""


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        ({"tokenSecretRef": {"name": "t", "key": "k"}}, {"bearerTokenSecretRef": {"name": "t", "key": "k"}}),
        (
            {"tokenSecretRef": {"name": "t", "key": "k"}, "bearerTokenSecretRef": {"name": "b", "key": "k"}},
            {"bearerTokenSecretRef": {"name": "b", "key": "k"}},
        ),
        (
            {"tokenSecretRef": {"name": "t", "key": "k"}, "basicAuthSecretRef": {"name": "basic"}},
            {"basicAuthSecretRef": {"name": "basic", "usernameKey": "username", "passwordKey": "password"}},
        ),
        (
            {"headers": [{"name": "X-Scope-OrgID", "value": "fleet"}]},
            {"headers": [{"name": "X-Scope-OrgID", "value": "fleet"}]},
        ),
    ],
)
def test_entry_auth_keeps_the_agents_precedence(auth: dict[str, Any], expected: dict[str, Any]) -> None:
    (entry,) = wire({"sources": [dict(CENTRAL, auth=auth)]})["sources"]
    assert entry["auth"] == {**expected, "insecureSkipVerify": False}


def test_policy_is_sent_as_written() -> None:
    assert (
        wire({"sources": [CENTRAL], "onSourceError": "ScoreWithAvailable"})["onSourceError"]
        == "ScoreWithAvailable"
    )


def test_a_scorer_without_sources_sends_neither_key() -> None:
    out = wire({"source": {"host": "http://prom:9090", "params": {"query": "up"}}})
    assert "sources" not in out and "onSourceError" not in out


def test_full_mode_ignores_the_synced_source_and_says_so() -> None:
    synced = {
        "source": {
            "type": "Prometheus",
            "host": "http://other:9090",
            "params": {"query": "synced", "range": 60, "step": 5},
        },
        "scoring": {"params": {"name": "from_config", "interval": 20}},
    }
    spec = {"configSyncMode": "Full", "configURL": "http://scorer:8000/config", "sources": [CENTRAL]}
    res = resolved(spec, synced)
    assert res.summary is not None, res.message
    out = res.summary.to_wire()
    assert out["scoreName"] == "from_config" and out["scoringInterval"] == 20  # the rest still syncs
    assert out["sourceEndpoint"] == "http://thanos:9090/api/v1/query_range"
    assert "status.lastSyncedConfig.source: ignored because spec.sources is set" in res.notes


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"source": {"host": "http://p:9090", "params": {"query": "up"}}, "sources": [CENTRAL]},
            "spec.sources",
            "not both",
        ),
        ({"onSourceError": "Fail"}, "spec.onSourceError", "applies to spec.sources only"),
        (
            {"sources": [CENTRAL, dict(CENTRAL, host="http://x:1")]},
            "spec.sources[1].name",
            "used by an earlier entry",
        ),
        (
            {"sources": [{"name": "a", "queries": ["up"]}]},
            "spec.sources[0].host",
            "required for a Prometheus source (a)",
        ),
        (
            {"sources": [dict(CENTRAL, host="http://<NODE_IP>:9090")]},
            "spec.sources[0].host",
            "not a valid host",
        ),
        ({"sources": [dict(CENTRAL, queries=[" "])]}, "spec.sources[0].queries", "at least one query"),
        ({"sources": [dict(CENTRAL, range=60, step=120)]}, "spec.sources[0].step", "larger than range"),
    ],
)
def test_problems_name_the_field_and_nothing_is_distributed(
    spec: dict[str, Any], field: str, message: str
) -> None:
    res = resolved(spec)
    assert res.summary is None
    assert any(p.field == field and message in p.message for p in res.problems), res.message


def test_sources_too_large_for_the_shared_configmap_are_a_problem() -> None:
    big = [dict(CENTRAL, name=f"s{i}", queries=["x" * 60_000] * 2) for i in range(3)]
    res = resolved({"sources": big})
    assert res.summary is None
    assert [p.field for p in res.problems] == ["spec.sources"]
    assert "at most 262144 are distributed" in res.message
