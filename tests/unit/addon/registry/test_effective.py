"""The effective summary: precedence between spec and synced /config, defaults, and field problems."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.addon.registry.effective import Resolution, resolve
from dynamic_scoring.addon.registry.models import DynamicScorer, parse_scorer
from dynamic_scoring.addon.registry.probe import check_config
from dynamic_scoring.contract.wire import ScorerConfig
from tests.unit.addon.registry.crdutil import SAMPLES, apply_defaults, crd_schema, stored

SCHEMA = crd_schema("dynamicscorers")


def scorer(spec: dict[str, Any], synced: dict[str, Any] | None = None, name: str = "s") -> DynamicScorer:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "hub", "generation": 3},
        "spec": apply_defaults(SCHEMA["properties"]["spec"], spec),
    }
    if synced is not None:
        obj["status"] = {"healthStatus": "Active", "lastSyncedConfig": synced}
    parsed = parse_scorer(obj)
    assert isinstance(parsed, DynamicScorer), parsed
    return parsed


def ok(res: Resolution) -> Any:
    assert res.problems == (), res.message
    assert res.summary is not None, res.pending
    return res.summary


PROM = {"type": "Prometheus", "host": "http://prom:9090", "params": {"query": "up", "range": 600, "step": 60}}
SYNCED = {
    "source": {
        "type": "Prometheus",
        "host": "http://synced-prom:9090",
        "path": "/p",
        "params": {"query": "synced", "range": 1200, "step": 30},
    },
    "scoring": {
        "host": "http://synced-scorer:1",
        "path": "/s",
        "params": {"name": "synced_name", "interval": 15},
    },
}
SPEC = {
    "configURL": "http://scorer.ns.svc:8000/config",
    "source": PROM,
    "scoring": {
        "host": "http://spec-scorer:2",
        "path": "/score",
        "params": {"name": "spec_name", "interval": 60},
    },
}


def test_full_mode_synced_config_wins_field_by_field() -> None:
    s = ok(resolve(scorer({**SPEC, "configSyncMode": "Full"}, SYNCED)))
    assert (s.score_name, s.scoring_interval) == ("synced_name", 15)
    assert s.source_endpoint == "http://synced-prom:9090/p"
    assert (s.source_query, s.source_range, s.source_step) == ("synced", 1200, 30)


def test_full_mode_scoring_host_comes_from_scoring_host_not_source_host() -> None:
    # upstream used lastSyncedConfig.source.host here
    s = ok(resolve(scorer({**SPEC, "configSyncMode": "Full"}, SYNCED)))
    assert s.scoring_endpoint == "http://synced-scorer:1/s"


def test_none_mode_ignores_a_stale_synced_config() -> None:
    # upstream: a lastSyncedConfig from an earlier Full period still overrode the spec
    s = ok(resolve(scorer({**SPEC, "configSyncMode": "None"}, SYNCED)))
    assert (s.score_name, s.scoring_interval) == ("spec_name", 60)
    assert s.scoring_endpoint == "http://spec-scorer:2/score"
    assert (s.source_query, s.source_range, s.source_endpoint) == (
        "up",
        600,
        "http://prom:9090/api/v1/query_range",
    )


def test_full_mode_gaps_in_the_synced_config_are_filled_from_the_spec_then_defaults() -> None:
    synced = {"scoring": {"params": {"name": "from_config"}}, "source": {"params": {"range": 0}}}
    s = ok(resolve(scorer({**SPEC, "configSyncMode": "Full"}, synced)))
    assert s.score_name == "from_config"
    assert s.scoring_interval == 60  # spec
    assert s.source_range == 600  # synced 0 counts as unset
    assert s.scoring_endpoint == "http://spec-scorer:2/score"


SRC_AUTH = {
    "tokenSecretRef": {"name": "prom-token", "key": "token"},
    "headers": [{"name": "X-Scope-OrgID", "secretKeyRef": {"name": "tenant", "key": "id"}}],
}
SC_AUTH = {"tokenSecretRef": {"name": "scorer-token", "key": "token"}, "clientCertSecretRef": {"name": "cc"}}
AUTHED = {
    **SPEC,
    "configSyncMode": "Full",
    "source": {**PROM, "auth": SRC_AUTH},
    "scoring": {**SPEC["scoring"], "auth": SC_AUTH},  # type: ignore[dict-item]
}


def test_a_host_moved_by_config_loses_the_spec_credentials() -> None:
    """Before: ``/config`` answering another host got every agent to send the spec's Secrets there."""
    res = resolve(scorer(AUTHED, SYNCED))
    s = ok(res)
    assert (
        s.source_endpoint == "http://synced-prom:9090/p" and s.scoring_endpoint == "http://synced-scorer:1/s"
    )
    assert (s.source_endpoint_auth_name, s.source_endpoint_auth_key, s.source_auth) == ("", "", None)
    assert (s.scoring_endpoint_auth_name, s.scoring_endpoint_auth_key, s.scoring_auth) == ("", "", None)
    assert len(res.withheld) == 2
    source, scoring = res.withheld
    assert "status.lastSyncedConfig.source.host" in source and "spec.source.auth" in source
    assert "http://prom:9090" in source and "http://synced-prom:9090" in source
    assert "status.lastSyncedConfig.scoring.host" in scoring and "spec.scoring.auth" in scoring
    assert "spec.sendCredentialsToSyncedHosts" in scoring


def test_the_opt_in_keeps_the_credentials_on_a_moved_host() -> None:
    res = resolve(scorer({**AUTHED, "sendCredentialsToSyncedHosts": True}, SYNCED))
    s = ok(res)
    assert res.withheld == ()
    assert (s.source_endpoint_auth_name, s.scoring_endpoint_auth_name) == ("prom-token", "scorer-token")
    assert s.source_auth is not None and s.source_auth.headers is not None
    assert s.scoring_auth is not None and s.scoring_auth.client_cert_secret_ref is not None


def test_only_the_moved_endpoint_loses_its_credentials() -> None:
    synced = {"scoring": {"host": "http://evil.example:80"}}
    res = resolve(scorer(AUTHED, synced))
    s = ok(res)
    assert s.source_endpoint_auth_name == "prom-token" and s.source_auth is not None
    assert s.scoring_endpoint_auth_name == "" and s.scoring_auth is None
    assert [w.split(" moves")[0] for w in res.withheld] == ["status.lastSyncedConfig.scoring.host"]
    assert "http://evil.example:80" in res.withheld[0]


def test_the_same_host_with_another_spelling_or_path_is_not_a_move() -> None:
    synced = {
        "source": {"host": "HTTP://Prom:9090/", "path": "/other"},
        "scoring": {"host": "http://spec-scorer:2/v2"},
    }
    res = resolve(scorer(AUTHED, synced))
    s = ok(res)
    assert res.withheld == ()
    assert s.source_endpoint_auth_name == "prom-token" and s.scoring_endpoint_auth_name == "scorer-token"


def test_a_scoring_host_from_config_is_compared_with_the_config_url_origin_when_the_spec_has_none() -> None:
    spec = {**AUTHED, "scoring": {"auth": SC_AUTH}}
    same = resolve(scorer(spec, {"scoring": {"host": "http://scorer.ns.svc:8000"}}))
    assert same.withheld == () and ok(same).scoring_endpoint_auth_name == "scorer-token"
    moved = resolve(scorer(spec, {"scoring": {"host": "http://scorer.ns.svc:9000"}}))
    assert ok(moved).scoring_auth is None and "from http://scorer.ns.svc:8000" in moved.withheld[0]


def test_a_source_host_only_config_names_is_a_move() -> None:
    spec = {**AUTHED, "source": {"type": "Prometheus", "params": {"query": "up"}, "auth": SRC_AUTH}}
    res = resolve(scorer(spec, {"source": {"host": "http://collector.other:9090"}}))
    assert ok(res).source_auth is None and "from no host in the spec" in res.withheld[0]


def test_no_auth_no_withholding_and_none_mode_never_withholds() -> None:
    assert resolve(scorer({**SPEC, "configSyncMode": "Full"}, SYNCED)).withheld == ()
    res = resolve(scorer({**AUTHED, "configSyncMode": "None"}, SYNCED))
    assert res.withheld == () and ok(res).scoring_endpoint_auth_name == "scorer-token"


def test_a_withheld_url_shows_only_scheme_host_and_port() -> None:
    res = resolve(scorer(AUTHED, {"scoring": {"host": "http://evil.example:81/x?token=abc"}}))
    assert "abc" not in res.withheld[0] and "/x" not in res.withheld[0]
    assert "http://evil.example:81" in res.withheld[0]


def test_full_mode_before_the_first_sync_is_pending_not_invalid() -> None:
    res = resolve(scorer({**SPEC, "configSyncMode": "Full"}))
    assert res.summary is None and res.problems == ()
    assert res.pending is not None and "/config" in res.pending


@given(
    synced=st.one_of(st.none(), st.integers(-5, 100)),
    spec=st.one_of(st.none(), st.integers(1, 100)),
)
def test_interval_is_the_first_positive_of_synced_spec_default(synced: int | None, spec: int | None) -> None:
    params: dict[str, Any] = {"name": "x"} | ({"interval": spec} if spec is not None else {})
    doc = {"scoring": {"params": {"interval": synced}}} if synced is not None else {}
    s = ok(
        resolve(
            scorer(
                {"configURL": "http://a:1/config", "configSyncMode": "Full", "scoring": {"params": params}},
                doc,
            )
        )
    )
    expected = synced if synced is not None and synced > 0 else spec if spec is not None else 30
    assert s.scoring_interval == expected


def test_minimal_spec_gets_every_default() -> None:
    s = ok(resolve(scorer({"scoring": {"host": "http://scorer:8000"}}, name="tiny")))
    assert s.score_name == "tiny"
    assert s.scoring_endpoint == "http://scorer:8000/scoring"
    assert s.scoring_interval == 30
    assert (s.source_type, s.source_endpoint, s.source_query) == ("None", "", "")
    assert (s.location, s.score_destination, s.score_dimension_format) == (
        "Internal",
        "AddOnPlacementScore",
        "${scoreName}",
    )


def test_scoring_host_defaults_to_the_config_url_origin_and_keeps_a_host_path() -> None:
    s = ok(resolve(scorer({"configURL": "https://x.example:8443/a/config?q=1"})))
    assert s.scoring_endpoint == "https://x.example:8443/scoring"
    res = resolve(scorer({"configURL": "https://u:p@x.example:8443/config"}))
    assert res.summary is None and res.problems[0].field == "spec.configURL"
    assert "credentials" in res.problems[0].message and "u:p" not in res.problems[0].message
    s = ok(resolve(scorer({"scoring": {"host": "http://x:1/api/score"}})))
    assert s.scoring_endpoint == "http://x:1/api/score"


def test_prometheus_source_needs_host_and_query_named_by_field() -> None:
    res = resolve(scorer({"scoring": {"host": "http://s:1"}, "source": {"type": "Prometheus"}}))
    assert res.summary is None
    fields = {p.field for p in res.problems}
    assert fields == {"spec.source.host", "spec.source.params.query"}


def test_step_larger_than_range_after_merging_is_a_problem() -> None:
    synced = {"source": {"params": {"step": 900}}}
    res = resolve(scorer({**SPEC, "configSyncMode": "Full"}, synced))
    assert [p.field for p in res.problems] == ["spec.source.params.step"]
    assert "900s is larger than range 600s" in res.message


def test_a_placeholder_in_config_url_is_named() -> None:
    res = resolve(scorer({"configURL": "http://<NODE_IP>:30007/config"}))
    assert res.summary is None
    assert res.problems[0].field == "spec.configURL"
    assert "placeholder" in res.problems[0].message


def test_auth_maps_one_to_one() -> None:
    spec = {
        "scoring": {
            "host": "http://s:1",
            "auth": {"tokenSecretRef": {"name": "t", "key": "k"}, "insecureSkipVerify": True},
        },
        "source": {
            "type": "None",
            "auth": {"tokenSecretRef": {"name": "ignored", "key": "k"}},
        },
    }
    s = ok(resolve(scorer(spec)))
    assert (s.scoring_endpoint_auth_name, s.scoring_endpoint_auth_key) == ("t", "k")
    assert s.scoring_auth is not None and s.scoring_auth.insecure_skip_verify
    assert s.scoring_auth.bearer_token_secret_ref is None
    # a source of type None is never fetched, so its credentials are not sent to the agents
    assert (s.source_endpoint_auth_name, s.source_auth) == ("", None)


def test_unknown_dimension_placeholder_is_a_note_not_a_problem() -> None:
    res = resolve(scorer({"scoring": {"host": "http://s:1"}, "scoreDimensionFormat": "${node}-${nodes}"}))
    assert res.summary is not None
    assert any("${nodes}" in n for n in res.notes)


# --- upstream samples, as the apiserver stores them ------------------------------------------------


def config(name: str) -> dict[str, Any]:
    doc = ScorerConfig.model_validate(json.loads((SAMPLES / "config" / name).read_text()))
    checked, problems = check_config(doc)
    assert checked is not None, problems
    return checked.model_dump(mode="json")


def sample_scorer(file: str, synced: dict[str, Any] | None = None) -> DynamicScorer:
    obj = stored(file)
    if synced is not None:
        obj["status"] = {"healthStatus": "Active", "lastSyncedConfig": synced}
    parsed = parse_scorer(obj)
    assert isinstance(parsed, DynamicScorer), parsed
    return parsed


def test_blog_cpu_predictor_resolves() -> None:
    res = resolve(sample_scorer("blog-cpu-predictor.yaml"))
    s = ok(res)
    assert s.to_wire() == {
        "name": "cpu-predictor",
        "scoreName": "cpu-predictor",
        "sourceType": "Prometheus",
        "sourceEndpoint": "http://prometheus.monitoring.svc:9090/api/v1/query_range",
        "sourceEndpointAuthName": "",
        "sourceEndpointAuthKey": "",
        "sourceQuery": "rate(container_cpu_usage_seconds_total[5m])",
        "sourceRange": 3600,
        "sourceStep": 60,
        "scoringEndpoint": "http://cpu-predictor-api.default.svc:8000/scoring",
        "scoringInterval": 30,
        "scoringEndpointAuthName": "",
        "scoringEndpointAuthKey": "",
        "location": "Internal",
        "scoreDestination": "AddOnPlacementScore",
        "scoreDimensionFormat": "${scoreName}",
        "scoringParams": {"model": "linear_regression", "horizon": 3600},  # sent to the scorer as params
    }
    assert any("spec.source.endpoint" in n for n in res.notes)


QUICKSTART_QUERY = (
    'sum by (node, namespace, pod) (rate(container_cpu_usage_seconds_total{container!="", pod!=""}[1m]))'
)


def test_quickstart_sample_gives_the_quickstart_summary() -> None:
    s = ok(resolve(sample_scorer("mydynamicscorer-sample-auth.yaml", config("sample-scorer.json"))))
    assert s.to_wire() == {
        "name": "sample-scorer-auth",
        "scoreName": "sample_my_score",
        "sourceType": "Prometheus",
        "sourceEndpoint": "http://kube-prometheus-kube-prome-prometheus.monitoring.svc:9090/api/v1/query_range",
        "sourceEndpointAuthName": "",
        "sourceEndpointAuthKey": "",
        "sourceQuery": QUICKSTART_QUERY,
        "sourceRange": 3600,
        "sourceStep": 60,
        "scoringEndpoint": "http://sample-scorer.dynamic-scoring.svc:8000/scoring",
        "scoringInterval": 30,
        "scoringEndpointAuthName": "api-auth-secret",
        "scoringEndpointAuthKey": "token",
        "location": "Internal",
        "scoreDestination": "AddOnPlacementScore",
        "scoreDimensionFormat": "${node};${namespace};${pod}",
    }


def test_quickstart_placeholder_sample_is_flagged_not_distributed() -> None:
    res = resolve(sample_scorer("mydynamicscorer-sample.yaml", config("sample-scorer.json")))
    assert res.summary is None
    assert "spec.configURL" in res.message and "<node_ip>" in res.message.lower()


def test_static_scorer_sample_has_no_source() -> None:
    s = ok(
        resolve(sample_scorer("mydynamicscorer-static-performance.yaml", config("static-performance.json")))
    )
    assert (s.source_type, s.source_endpoint, s.source_range) == ("None", "", 0)
    assert s.scoring_endpoint == "http://static-scorer:8000/performance/scoring"
    assert s.score_name == "example_performance_score"


def test_lowercase_prometheus_from_samples_and_config_reaches_the_agent_canonical() -> None:
    s = ok(resolve(sample_scorer("mydynamicscorer-simple-prediction.yaml", config("simple-prediction.json"))))
    assert s.source_type == "Prometheus"  # upstream sent "prometheus" and the agent skipped the fetch
    s = ok(resolve(sample_scorer("concept-doc-scorer.yaml", config("simple-prediction.json"))))
    assert (s.source_type, s.score_destination) == ("Prometheus", "AddOnPlacementScore")


# --- robustness: nothing a stored object holds makes resolution raise -----------------------------

urls = st.sampled_from(
    [
        "http://h:1",
        "https://h/x",
        "http://<NODE_IP>:1",
        "ftp://h",
        "",
        "http://u:p@h",
        "http://h:1/a?b=c",
        "x",
    ]
)
texts = st.one_of(st.none(), st.text(max_size=8), st.sampled_from(["", "/scoring", "a/../../b", "${nodes}"]))
positive = st.one_of(st.none(), st.integers(1, 10_000))
any_spec = st.fixed_dictionaries(
    {},
    optional={
        "configURL": urls,
        "configSyncMode": st.sampled_from(["Full", "None", "full", "none"]),
        "name": texts,
        "scoreDimensionFormat": st.text(max_size=12),
        "source": st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(["Prometheus", "None", "prometheus"]),
                "host": urls,
                "path": texts,
                "params": st.fixed_dictionaries(
                    {},
                    optional={
                        "query": texts,
                        "queries": st.lists(st.text(min_size=1, max_size=5), max_size=2),
                        "range": positive,
                        "step": positive,
                    },
                ),
            },
        ),
        "scoring": st.fixed_dictionaries(
            {},
            optional={
                "host": urls,
                "path": texts,
                "params": st.fixed_dictionaries({}, optional={"name": texts, "interval": positive}),
            },
        ),
    },
)
any_config = st.fixed_dictionaries(
    {},
    optional={
        "source": st.fixed_dictionaries(
            {}, optional={"type": st.sampled_from(["Prometheus", "None"]), "host": urls, "path": texts}
        ),
        "scoring": st.fixed_dictionaries(
            {}, optional={"host": urls, "params": st.fixed_dictionaries({}, optional={"interval": positive})}
        ),
    },
)


@given(any_spec, st.one_of(st.none(), any_config))
def test_resolution_never_raises_and_always_explains(
    spec: dict[str, Any], synced: dict[str, Any] | None
) -> None:
    parsed = parse_scorer(
        {"metadata": {"name": "p", "namespace": "hub"}, "spec": spec, "status": {"lastSyncedConfig": synced}}
    )
    if not isinstance(parsed, DynamicScorer):
        return
    res = resolve(parsed)
    assert (res.summary is not None) != bool(res.problems or res.pending)
    if res.summary is not None:
        assert res.summary.scoring_interval >= 1 and res.summary.score_name


def test_a_trailing_dot_is_a_move() -> None:
    """``prom`` is found through the DNS search list (the Service), ``prom.`` only as a public name."""
    res = resolve(
        scorer(
            AUTHED, {"source": {"host": "http://prom.:9090"}, "scoring": {"host": "http://spec-scorer.:2"}}
        )
    )
    s = ok(res)
    assert s.source_auth is None and s.scoring_auth is None
    assert len(res.withheld) == 2 and "http://prom.:9090" in res.withheld[0]


def test_the_default_port_written_out_is_not_a_move() -> None:
    spec = {**AUTHED, "source": {**PROM, "host": "https://prom.example", "auth": SRC_AUTH}}
    res = resolve(scorer(spec, {"source": {"host": "HTTPS://Prom.Example:443/"}}))
    assert res.withheld == () and ok(res).source_endpoint_auth_name == "prom-token"


def test_stabilization_reaches_the_summary_unchanged_and_all_zero_is_left_out() -> None:
    stab = {"tolerance": 3, "riseWindowSeconds": 300, "fallWindowSeconds": 0}
    summary = ok(resolve(scorer(dict(SPEC, configSyncMode="None", stabilization=stab))))
    assert summary.to_wire()["stabilization"] == stab
    # Full mode: /config cannot change it (it is the hub author's, like missingData)
    summary = ok(resolve(scorer(dict(SPEC, configSyncMode="Full", stabilization=stab), SYNCED)))
    assert summary.to_wire()["stabilization"] == stab
    for spec in (SPEC, dict(SPEC, stabilization={}), dict(SPEC, stabilization=dict.fromkeys(stab, 0))):
        assert "stabilization" not in ok(resolve(scorer(spec))).to_wire()


def test_stabilization_out_of_range_is_a_field_problem_naming_the_field() -> None:
    obj = {
        "metadata": {"name": "s", "namespace": "hub", "generation": 1},
        "spec": apply_defaults(SCHEMA["properties"]["spec"], dict(SPEC, stabilization={"tolerance": -1})),
    }
    parsed = parse_scorer(obj)
    assert not isinstance(parsed, DynamicScorer)
    assert "stabilization.tolerance" in parsed.message


def test_the_agent_token_request_reaches_the_summary_of_a_source_only() -> None:
    spec = {**SPEC, "configURL": None, "source": {**PROM, "auth": {"agentServiceAccountToken": True}}}
    summary = ok(resolve(scorer({k: v for k, v in spec.items() if v is not None})))
    assert summary.source_auth is not None and summary.source_auth.agent_service_account_token
    assert summary.to_wire()["sourceAuth"] == {"agentServiceAccountToken": True, "insecureSkipVerify": False}
    # A scoring API never gets it: the hub names the field instead of passing it on.
    scoring: dict[str, Any] = {**SPEC["scoring"], "auth": {"agentServiceAccountToken": True}}  # type: ignore[dict-item]
    bad = {**SPEC, "scoring": scoring}
    parsed = parse_scorer({"metadata": {"name": "s", "namespace": "hub"}, "spec": bad})
    assert not isinstance(parsed, DynamicScorer)
    assert "never to a scoring API" in parsed.message


def test_the_label_mapping_reaches_the_summary_and_a_bad_one_names_the_field() -> None:
    spec = {
        **SPEC,
        "scoreDimensionFormat": "${cluster}-${node}",
        "scoreDimensionLabels": {"node": "instance"},
    }
    summary = ok(resolve(scorer(spec)))
    assert summary.to_wire()["scoreDimensionLabels"] == {"node": "instance"}
    bad = parse_scorer(
        {
            "metadata": {"name": "s", "namespace": "hub"},
            "spec": {**SPEC, "scoreDimensionLabels": {"host": "instance"}},
        }
    )
    assert not isinstance(bad, DynamicScorer)
    assert "spec.scoreDimensionLabels" in bad.message and "not a label placeholder" in bad.message


def test_full_mode_never_chooses_the_query_or_host_of_a_source_with_the_agents_token() -> None:
    """The agent's own token reads with the agent's identity: /config must not pick what it runs."""
    token_source = {**PROM, "host": "https://thanos:9091", "auth": {"agentServiceAccountToken": True}}
    res = resolve(scorer({**SPEC, "configSyncMode": "Full", "source": token_source}, SYNCED))
    s = ok(res)
    assert s.source_endpoint == "https://thanos:9091/api/v1/query_range"
    assert (s.source_query, s.source_range, s.source_step) == ("up", 600, 60)
    assert any("agentServiceAccountToken" in n for n in res.notes), res.notes
    # the scoring side still follows /config in Full mode
    assert (s.score_name, s.scoring_interval) == ("synced_name", 15)
    # without the token, the same document wins as before
    plain = ok(resolve(scorer({**SPEC, "configSyncMode": "Full"}, SYNCED)))
    assert plain.source_query == "synced"
