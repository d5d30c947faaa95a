"""``dynamic-scoring explain`` from a file, against the real Prometheus and real scorer processes."""

from __future__ import annotations

import json
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from dynamic_scoring.ctl.main import main
from dynamic_scoring.outbound.addresses import AGENT_ALLOW_CIDRS_ENV
from e2e.procs import Proc, wait_until
from tests.component.conftest import GAUGE, PromFixture
from tests.component.harness import ScorerProcess, free_port


def scorer_file(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "scorer.yaml"
    obj = {
        "apiVersion": "dynamic-scoring.open-cluster-management.io/v1alpha1",
        "kind": "DynamicScorer",
        "metadata": {"name": "cpu", "namespace": "dynamic-scoring"},
        "spec": spec,
    }
    path.write_text(yaml.safe_dump(obj))
    return path


def prometheus_source(prometheus: PromFixture, query: str = GAUGE) -> dict[str, Any]:
    host = prometheus.query_range_url.removesuffix("/api/v1/query_range")
    return {"type": "Prometheus", "host": host, "params": {"query": query, "range": 3600, "step": 60}}


def run(tmp_path: Path, path: Path, *extra: str) -> Result:
    # No hub: KUBECONFIG names a missing file, so the current AddOnPlacementScore is not read.
    # The agent's address policy refuses loopback; the test Prometheus and scorers are on 127.0.0.1.
    env = {"KUBECONFIG": str(tmp_path / "no-kubeconfig"), AGENT_ALLOW_CIDRS_ENV: "127.0.0.0/8"}
    return CliRunner().invoke(
        main, ["explain", "cpu", "--cluster", "cluster1", "--file", str(path), *extra], env=env
    )


def test_every_stage_of_a_cycle_is_shown_with_the_agents_numbers(
    prometheus: PromFixture, scorer: ScorerProcess, tmp_path: Path
) -> None:
    path = scorer_file(
        tmp_path,
        {
            "configSyncMode": "None",
            "scoreDimensionFormat": "${node};${namespace};${pod}",
            "scoreNormalization": {"min": 0, "max": 2},
            "source": prometheus_source(prometheus),
            "scoring": {"host": scorer.base, "path": "/mean/scoring", "params": {"name": "cpu_headroom"}},
        },
    )
    result = run(tmp_path, path, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)

    origins = {f["field"]: (f["value"], f["from"]) for f in doc["summary"]["fields"]}
    assert origins["scoreName"] == ("cpu_headroom", "spec")
    assert origins["sourceQuery"] == (GAUGE, "spec")
    assert origins["scoringInterval"] == (30, "default")
    [query] = doc["fetch"]["queries"]
    assert query["query"] == GAUGE and query["series"] == 3 and query["bytes"] > 1000
    assert doc["fetch"]["window"]["end"] - doc["fetch"]["window"]["start"] == 3600
    assert doc["score"]["results"] == 3
    per_result = {
        tuple(i["names"]): (i["raw"], i["normalised"], i["value"]) for i in doc["items"]["perResult"]
    }
    assert per_result[("node-1;team-a;web-2",)] == (1.5, 75.0, 75)
    assert doc["items"]["unitsPerPoint"] == 0.02  # 0..2 onto 0..100: a point is 0.02 of the scorer's units
    aps = doc["addOnPlacementScore"]
    assert aps["name"] == "cpu-headroom" and aps["namespace"] == "cluster1" and aps["hubRead"] is False
    assert aps["items"] == [
        {"name": "node-1;team-a;web-1", "wouldWrite": 25},
        {"name": "node-1;team-a;web-2", "wouldWrite": 75},
        {"name": "node-2;team-b;db-1", "wouldWrite": 50},
    ]

    text = run(tmp_path, path)
    assert text.exit_code == 0, text.output
    assert "3 series" in text.output and "node-2;team-b;db-1" in text.output and "hub not read" in text.output
    assert (
        "one published point is 0.02 of the scorer's units (AddOn 10 + Steady 1's 10-point margin: 0.2)"
        in (text.output)
    )


def test_clamping_rounding_and_name_collisions_are_shown(scorer: ScorerProcess, tmp_path: Path) -> None:
    # /outofrange answers 250, -300 and 42.5; with the default format all three name one item.
    path = scorer_file(
        tmp_path,
        {"scoring": {"host": scorer.base, "path": "/outofrange/scoring", "params": {"name": "oor"}}},
    )
    result = run(tmp_path, path, "-o", "json")
    assert result.exit_code == 1, result.output  # the agent would fail this cycle: nothing is written
    doc = json.loads(result.output)
    assert doc["fetch"]["queries"] == []
    assert (doc["failed"]["stage"], doc["failed"]["reason"]) == ("score", "ItemNameCollision")
    assert 'render to item "oor" under format "${scoreName}"' in doc["failed"]["message"]
    assert "scoreDimensionFormat" in doc["failed"]["hint"]
    items = doc["items"]
    assert [(i["raw"], i["clamped"], i["value"]) for i in items["perResult"]] == [
        (250.0, 100.0, 100),
        (-300.0, -100.0, -100),
        (42.5, 42.5, 43),
    ]
    assert items["collisions"] == {"oor": [0, 1, 2]}
    assert items["clamped"] == 2
    assert doc["addOnPlacementScore"]["conditionOnly"]["reason"] == "ItemNameCollision"
    assert "unitsPerPoint" not in items  # no scoreNormalization: a point is a unit
    text = run(tmp_path, path).output
    assert "collision: 'oor' from results [0, 1, 2] (the agent fails the cycle: ItemNameCollision)" in text


def test_a_failing_query_stops_at_fetch_with_prometheus_own_error(
    prometheus: PromFixture, scorer: ScorerProcess, tmp_path: Path
) -> None:
    path = scorer_file(
        tmp_path,
        {
            "source": prometheus_source(prometheus, "sum(rate(x[5m])"),
            "scoring": {"host": scorer.base, "path": "/mean/scoring"},
        },
    )
    result = run(tmp_path, path)
    assert result.exit_code == 1, result.output
    assert "FAILED at fetch: PrometheusQueryError" in result.output
    assert "bad_data" in result.output and "what to do: fix the query" in result.output
    assert "3. score" not in result.output


def test_prometheus_option_overrides_the_endpoint_and_unreachable_exits_3(
    prometheus: PromFixture, scorer: ScorerProcess, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    path = scorer_file(
        tmp_path,
        {
            "source": {
                "type": "Prometheus",
                "host": dead,
                "params": {"query": GAUGE, "range": 600, "step": 60},
            },
            "scoring": {"host": scorer.base, "path": "/count/scoring"},
        },
    )
    down = run(tmp_path, path)
    assert down.exit_code == 3, down.output
    assert "FAILED at fetch: PrometheusUnavailable" in down.output

    rerouted = run(tmp_path, path, "--prometheus", prometheus.query_range_url, "-o", "json")
    assert rerouted.exit_code == 0, rerouted.output
    doc = json.loads(rerouted.output)
    assert doc["fetch"]["queries"][0]["endpoint"] == prometheus.query_range_url
    assert doc["score"]["answer"] == [{"metric": {"meta": "count"}, "score": 3.0}]


def test_a_scorer_token_comes_from_a_file_and_is_never_printed(scorer: ScorerProcess, tmp_path: Path) -> None:
    key = uuid.uuid4().hex
    token = f"tok-{uuid.uuid4().hex}"
    scorer.expect(key, {"Authorization": f"Bearer {token}"})
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    spec = {
        "scoring": {
            "host": scorer.base,
            "path": f"/auth/{key}/scoring",
            "auth": {"tokenSecretRef": {"name": "scorer-token", "key": "token"}},
        }
    }
    path = scorer_file(tmp_path, spec)

    missing = run(tmp_path, path)
    assert missing.exit_code == 1, missing.output
    assert "FAILED at score: SecretNotFound" in missing.output and "--token-file" in missing.output

    # The file is the operator's, the URL the scorer author's: the token goes only where the operator says.
    unbound = run(tmp_path, path, "--token-file", f"scorer-token/token={token_file}")
    assert unbound.exit_code == 1, unbound.output
    assert "SecretNotBound" in unbound.output and "--token-allowed-hosts" in unbound.output
    assert token not in unbound.output
    elsewhere = run(
        tmp_path,
        path,
        "--token-file",
        f"scorer-token/token={token_file}",
        "--token-allowed-hosts",
        "example.com",
    )
    assert elsewhere.exit_code == 1 and "SecretNotBound" in elsewhere.output

    host = scorer.base.split("://", 1)[1]
    bound = ("--token-file", f"scorer-token/token={token_file}", "--token-allowed-hosts", host)
    given = run(tmp_path, path, *bound, "-o", "json")
    assert given.exit_code == 0, given.output
    assert json.loads(given.output)["score"]["results"] == 1
    assert token not in given.output and token not in run(tmp_path, path, *bound).output


def test_the_agents_own_token_is_sent_only_where_the_operator_lists(
    prometheus: PromFixture, scorer: ScorerProcess, tmp_path: Path
) -> None:
    source = {**prometheus_source(prometheus), "auth": {"agentServiceAccountToken": True}}
    path = scorer_file(
        tmp_path,
        {
            "configSyncMode": "None",
            "scoreDimensionFormat": "${node}-${namespace}-${pod}",
            "source": source,
            "scoring": {"host": scorer.base, "path": "/mean/scoring", "params": {"name": "cpu_headroom"}},
        },
    )
    token = f"agent-{uuid.uuid4().hex}"
    token_file = tmp_path / "agent-token"
    token_file.write_text(token + "\n")

    missing = run(tmp_path, path)
    assert missing.exit_code == 1, missing.output
    assert "FAILED at fetch: SecretNotBound" in missing.output and "--agent-token-file" in missing.output

    alone = run(tmp_path, path, "--agent-token-file", str(token_file))
    assert alone.exit_code == 2 and "--agent-token-file needs --token-allowed-hosts" in alone.output

    elsewhere = run(
        tmp_path, path, "--agent-token-file", str(token_file), "--token-allowed-hosts", "example.com"
    )
    assert elsewhere.exit_code == 1 and "SecretNotBound" in elsewhere.output and token not in elsewhere.output

    host = source["host"].split("://", 1)[1]
    bound = run(
        tmp_path, path, "--agent-token-file", str(token_file), "--token-allowed-hosts", host, "-o", "json"
    )
    assert bound.exit_code == 0, bound.output
    assert json.loads(bound.output)["fetch"]["queries"][0]["series"] == 3 and token not in bound.output


def test_a_scorer_the_hub_would_not_distribute_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = scorer_file(tmp_path, {"source": {"type": "Prometheus", "params": {"query": "up"}}})
    result = run(tmp_path, path)
    assert result.exit_code == 1
    assert "spec.source.host" in result.output and "spec.scoring.host" in result.output


def test_no_series_with_a_missing_data_score_writes_the_default_without_calling_the_scorer(
    prometheus: PromFixture, scorer: ScorerProcess, tmp_path: Path
) -> None:
    path = scorer_file(
        tmp_path,
        {
            "missingData": {"score": -20},
            "scoreDimensionFormats": ["${scoreName}", "${cluster}-${pod}"],
            "source": prometheus_source(prometheus, f'{GAUGE}{{pod="no-such-pod"}}'),
            "scoring": {"host": scorer.base, "path": "/status/500/scoring", "params": {"name": "nodata"}},
        },
    )
    result = run(tmp_path, path, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["fetch"]["queries"][0]["series"] == 0
    assert doc["noData"] == {"missingDataScore": -20, "scorerCalled": False}
    assert "score" not in doc  # /status/500 would have failed the cycle had it been called
    assert doc["addOnPlacementScore"]["items"] == [{"name": "nodata", "wouldWrite": -20}]
    assert "missingDataScore -20 is written" in run(tmp_path, path).output


def test_full_mode_from_a_file_fetches_config_as_the_hub_does_and_says_so(
    prometheus: PromFixture, tmp_path: Path
) -> None:
    port = free_port()
    base = prometheus.query_range_url.removesuffix("/api/v1/query_range")
    argv = [
        sys.executable,
        "-m",
        "dynamic_scoring.samples.scorers.cpu",
        "--port",
        str(port),
        "--prometheus-url",
        base,
    ]
    argv += ["--query", GAUGE, "--score-name", "cpu_full", "--range", "600", "--step", "60"]
    proc = Proc("sample-cpu", argv, tmp_path / "sample-cpu.log")
    proc.start()
    try:
        wait_until(lambda: _healthy(f"http://127.0.0.1:{port}/healthz"), timeout=30, what="sample scorer up")
        # the sample scorer keeps each series' labels: three series need three item names
        spec = {"configSyncMode": "Full", "configURL": f"http://127.0.0.1:{port}/config"}
        path = scorer_file(tmp_path, {**spec, "scoreDimensionFormat": "${node};${namespace};${pod}"})
        result = run(tmp_path, path, "-o", "json")
    finally:
        proc.stop()
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    origins = {f["field"]: (f["value"], f["from"]) for f in doc["summary"]["fields"]}
    assert origins["scoreName"] == ("cpu_full", "/config")
    assert origins["sourceQuery"] == (GAUGE, "/config")
    assert origins["sourceRange"] == (600, "/config")
    # /config names no scoring host (the sample scorers publish none): the configURL's origin is used
    assert origins["scoringEndpoint"] == (f"http://127.0.0.1:{port}/scoring", "spec.configURL")
    assert doc["fetch"]["queries"][0]["series"] == 3 and doc["score"]["results"] == 3


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_named_sources_and_the_cluster_placeholder_are_shown_as_sent(
    prometheus: PromFixture, scorer: ScorerProcess, tmp_path: Path
) -> None:
    host = prometheus.query_range_url.removesuffix("/api/v1/query_range")
    path = scorer_file(
        tmp_path,
        {
            "scoreDimensionFormat": "${pod}",
            "sources": [
                {"name": "a", "host": host, "queries": [f'{GAUGE}{{namespace="team-a"}}'], "range": 600},
                {"name": "b", "host": host, "queries": [f'{GAUGE}{{pod!="${{cluster}}"}}'], "range": 600},
            ],
            "scoring": {"host": scorer.base, "path": "/mean/scoring", "params": {"name": "multi"}},
        },
    )
    result = run(tmp_path, path, "-o", "json")
    assert result.exit_code == 1, result.output  # ${pod} alone names both sources' series alike
    doc = json.loads(result.output)
    assert doc["failed"]["reason"] == "ItemNameCollision"
    sent = [(q["source"], q["query"], q["series"]) for q in doc["fetch"]["queries"]]
    assert sent == [("a", f'{GAUGE}{{namespace="team-a"}}', 2), ("b", f'{GAUGE}{{pod!="cluster1"}}', 3)]
    assert {r["metric"].get("source") for r in doc["score"]["answer"]} == {"a", "b"}
    assert doc["items"]["collisions"] == {"web-1": [0, 2], "web-2": [1, 3]}
    assert {f["field"]: f["from"] for f in doc["summary"]["fields"]}["sourceEndpoint"] == "spec.sources"


def unreachable_hub_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig naming a loopback port nothing listens on, with a token that must never be shown."""
    kubeconfig = tmp_path / "hub.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "hub", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
                "users": [{"name": "u", "user": {"token": "not-used"}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "u"}}],
                "current-context": "hub",
            }
        )
    )
    return kubeconfig


def test_an_unreachable_hub_still_shows_the_cycle_and_exits_3(scorer: ScorerProcess, tmp_path: Path) -> None:
    kubeconfig = unreachable_hub_kubeconfig(tmp_path)
    path = scorer_file(
        tmp_path,
        {
            "scoreDimensionFormat": "${app};${device}",
            "scoring": {"host": scorer.base, "path": "/static/scoring"},
        },
    )
    result = run(tmp_path, path, "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 3, result.output
    assert (
        "4. items" in result.output
        and "hub not read: could not read AddOnPlacementScore cluster1/cpu" in result.output
    )
    assert "not-used" not in result.output


def test_a_source_failing_under_score_with_available_is_shown_and_the_cycle_scores_as_the_agents_would(
    prometheus: PromFixture, scorer: ScorerProcess, tmp_path: Path
) -> None:
    host = prometheus.query_range_url.removesuffix("/api/v1/query_range")
    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    path = scorer_file(
        tmp_path,
        {
            "scoreDimensionFormat": "${pod}",
            "onSourceError": "ScoreWithAvailable",
            "sources": [
                {"name": "a", "host": host, "queries": [f'{GAUGE}{{namespace="team-a"}}'], "range": 600},
                {"name": "edge", "host": gone, "queries": [GAUGE], "range": 600},
            ],
            "scoring": {"host": scorer.base, "path": "/mean/scoring", "params": {"name": "partial"}},
        },
    )
    result = run(tmp_path, path, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [(q["source"], q["answered"]) for q in doc["fetch"]["queries"]] == [("a", True), ("edge", False)]
    [skipped] = doc["fetch"]["skippedSources"]
    assert skipped["reason"] == "PrometheusUnavailable" and 'source "edge"' in skipped["message"]
    assert "failed" not in doc
    assert {r["metric"].get("source") for r in doc["score"]["answer"]} == {"a"}
    assert [i["name"] for i in doc["addOnPlacementScore"]["items"]] == ["web-1", "web-2"]
    text = run(tmp_path, path).output
    assert "scored without it (onSourceError: ScoreWithAvailable): PrometheusUnavailable" in text


def test_explain_applies_the_agents_address_policy_unless_allow_cidr_says_otherwise(
    scorer: ScorerProcess, tmp_path: Path
) -> None:
    """The URLs are the scorer author's and explain runs on the operator's machine: same policy."""
    run_id = uuid.uuid4().hex
    path = scorer_file(tmp_path, {"scoring": {"host": scorer.base, "path": f"/count/scoring?run={run_id}"}})
    env = {"KUBECONFIG": str(tmp_path / "no-kubeconfig"), AGENT_ALLOW_CIDRS_ENV: ""}
    args = ["explain", "cpu", "--cluster", "cluster1", "--file", str(path)]
    refused = CliRunner().invoke(main, args, env=env)
    assert refused.exit_code == 1, refused.output
    assert "FAILED at score: ScorerAddressRefused" in refused.output
    assert "127.0.0.1 is a loopback address" in refused.output and "--allow-cidr" in refused.output
    assert [r for r in scorer.requests("/count/") if run_id in r["query"]] == []
    allowed = CliRunner().invoke(main, [*args, "--allow-cidr", "127.0.0.0/8"], env=env)
    assert allowed.exit_code == 0, allowed.output
