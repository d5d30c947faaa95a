"""The DynamicScorer and DynamicScoringConfig CRDs on the real kube-apiserver of the local control plane.

Every upstream-shaped sample applies unchanged (with strict field validation, so nothing is silently
pruned), the alternate spellings are admitted, invalid objects are rejected with a message that names the
field, and the stored objects resolve through the hub's pure logic to the summaries the agents get.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.health import HealthState, next_state
from dynamic_scoring.addon.registry.models import (
    DynamicScorer,
    DynamicScoringConfig,
    parse_config,
    parse_scorer,
)
from dynamic_scoring.addon.registry.probe import ConfigResult, ProbeResult, check_config
from dynamic_scoring.addon.registry.status import (
    apply_conditions,
    config_synced_condition,
    healthy_condition,
    status_patch,
    synced_config_after,
    valid_condition,
)
from dynamic_scoring.contract.wire import ScorerConfig
from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.procs import wait_until

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "manifests" / "crds"
SAMPLES = REPO / "samples" / "upstream"
GROUP = "dynamic-scoring.open-cluster-management.io"


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Kubectl:
    assert control_plane.hub is not None and control_plane.tools is not None
    kubectl = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    kubectl.run("apply", "--server-side", "--force-conflicts", "-k", str(CRDS))
    for plural in ("dynamicscorers", "dynamicscoringconfigs"):
        kubectl.run("wait", "--for=condition=Established", "--timeout=60s", f"crd/{plural}.{GROUP}")
    # discovery must list the new kinds before kubectl can use their short names
    wait_until(
        lambda: "dsc" in kubectl.run("api-resources", f"--api-group={GROUP}", check=False),
        timeout=30,
        what="discovery of the new CRDs",
    )
    return kubectl


@pytest.fixture
def ns(hub: Kubectl) -> Iterator[str]:
    name = f"scorers-{uuid.uuid4().hex[:8]}"
    hub.run("create", "namespace", name)
    yield name
    hub.run("delete", "namespace", name, "--wait=false")


def apply(hub: Kubectl, manifest: str, ns: str | None = None) -> subprocess.CompletedProcess[str]:
    """Server-side apply with strict field validation; returns the finished process (no raise)."""
    args = [str(hub.binary), f"--kubeconfig={hub.kubeconfig}", "apply", "--server-side", "--validate=strict"]
    if ns is not None:
        args += ["-n", ns]
    return subprocess.run([*args, "-f", "-"], input=manifest, capture_output=True, text=True, timeout=60)


def scorer_yaml(name: str, spec: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {"apiVersion": f"{GROUP}/v1alpha1", "kind": "DynamicScorer", "metadata": {"name": name}, "spec": spec}
    )


SAMPLE_FILES = sorted(p.name for p in SAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("file", SAMPLE_FILES)
def test_every_upstream_sample_applies_unchanged(hub: Kubectl, ns: str, file: str) -> None:
    text = (SAMPLES / file).read_text()
    doc = yaml.safe_load(text)
    target = doc["metadata"].get("namespace")
    if target is not None:  # the blog's example names its namespace
        hub.run("create", "namespace", target, check=False)
    done = apply(hub, text, None if target else ns)
    assert done.returncode == 0, done.stderr
    kind = "dynamicscorers" if doc["kind"] == "DynamicScorer" else "dynamicscoringconfigs"
    stored = hub.get_json(f"{kind}.{GROUP}", doc["metadata"]["name"], "-n", target or ns)
    try:
        if doc["kind"] == "DynamicScoringConfig":
            parsed_config = parse_config(stored)
            assert isinstance(parsed_config, DynamicScoringConfig)
            # upstream's CRD pruned the proposal's `mask:`; here it is kept and read as masks
            assert [(m.cluster_name, m.score_name) for m in parsed_config.spec.masks] == [
                ("cluster1", "something_gpu_score")
            ]
            return
        # nothing the sample wrote was pruned: every key written is stored as written
        assert _contains(stored["spec"], doc["spec"]), json.dumps(stored["spec"])
        parsed = parse_scorer(stored)
        assert isinstance(parsed, DynamicScorer), parsed
        res = resolve(parsed)
        # Full-mode samples wait for their /config; the others resolve now (or name the placeholder)
        if parsed.spec.config_sync_mode == "Full":
            assert res.summary is None
            assert res.pending is not None or "placeholder" in res.message
        else:
            assert res.summary is not None, res.message
    finally:
        if target is not None:
            hub.run("delete", f"{kind}.{GROUP}", doc["metadata"]["name"], "-n", target)


def _contains(stored: Any, written: Any) -> bool:
    if isinstance(written, dict):
        return isinstance(stored, dict) and all(
            k in stored and _contains(stored[k], v) for k, v in written.items()
        )
    if isinstance(written, list):
        return (
            isinstance(stored, list) and len(stored) == len(written) and all(map(_contains, stored, written))
        )
    return bool(stored == written)


def test_defaults_are_applied_by_the_apiserver(hub: Kubectl, ns: str) -> None:
    done = apply(
        hub, scorer_yaml("bare", {"scoring": {"host": "http://scorer.example:8000"}, "source": {}}), ns
    )
    assert done.returncode == 0, done.stderr
    spec = hub.get_json(f"dynamicscorers.{GROUP}", "bare", "-n", ns)["spec"]
    assert spec["configSyncMode"] == "None"
    assert spec["location"] == "Internal"
    assert spec["scoreDestination"] == "AddOnPlacementScore"
    assert spec["scoreDimensionFormat"] == "${scoreName}"
    assert spec["source"]["type"] == "Prometheus"


def test_alternate_spellings_are_admitted(hub: Kubectl, ns: str) -> None:
    spec = {
        "configURL": "http://scorer.example:8000/config",
        "configSyncMode": "full",
        "location": "external",
        "scoreDestination": "addonPlacementScore",
        "source": {"type": "prometheus", "host": "http://prom:9090"},
    }
    done = apply(hub, scorer_yaml("lower", spec), ns)
    assert done.returncode == 0, done.stderr
    done = apply(hub, scorer_yaml("none-mode", {"configSyncMode": "none", "source": {"type": "none"}}), ns)
    assert done.returncode == 0, done.stderr
    parsed = parse_scorer(hub.get_json(f"dynamicscorers.{GROUP}", "lower", "-n", ns))
    assert isinstance(parsed, DynamicScorer)
    assert (parsed.spec.config_sync_mode, parsed.spec.location, parsed.spec.score_destination) == (
        "Full",
        "External",
        "AddOnPlacementScore",
    )


INVALID = [
    ("url", {"configURL": "not a url"}, "spec.configURL", "absolute http or https URL"),
    ("scheme", {"scoring": {"host": "ftp://x:21"}}, "spec.scoring.host", "absolute http or https URL"),
    (
        "interval",
        {"scoring": {"params": {"interval": -5}}},
        "spec.scoring.params.interval",
        "greater than or equal to 1",
    ),
    ("range", {"source": {"params": {"range": 0}}}, "spec.source.params.range", "greater than or equal to 1"),
    ("step", {"source": {"params": {"step": 0}}}, "spec.source.params.step", "greater than or equal to 1"),
    ("enum", {"configSyncMode": "Sometimes"}, "spec.configSyncMode", "supported values"),
    ("type", {"source": {"type": "OpenTelemetry"}}, "spec.source.type", "supported values"),
    (
        "cel-full",
        {"configSyncMode": "Full"},
        "spec.configURL",
        "configURL is required when configSyncMode is Full",
    ),
    (
        "cel-step",
        {"source": {"params": {"range": 60, "step": 300}}},
        "spec.source.params.step",
        "step must not be larger than range",
    ),
    (
        "cel-auth",
        {
            "scoring": {
                "auth": {
                    "bearerTokenSecretRef": {"name": "a", "key": "t"},
                    "basicAuthSecretRef": {"name": "b"},
                }
            }
        },
        "spec.scoring.auth.basicAuthSecretRef",
        "set one",
    ),
    (
        "cel-header",
        {
            "source": {
                "auth": {
                    "headers": [{"name": "X-Org", "value": "a", "secretKeyRef": {"name": "s", "key": "k"}}]
                }
            }
        },
        "spec.source.auth.headers[0]",
        "exactly one of value and secretKeyRef",
    ),
    (
        "cel-norm",
        {"scoreNormalization": {"min": 5, "max": 5}},
        "spec.scoreNormalization.max",
        "min and max must differ",
    ),
    ("unknown", {"endpoint": "http://x"}, ".spec.endpoint", "field not declared in schema"),
    (
        "tolerance",
        {"stabilization": {"tolerance": 101}},
        "spec.stabilization.tolerance",
        "less than or equal to 100",
    ),
    (
        "window",
        {"stabilization": {"riseWindowSeconds": -1}},
        "spec.stabilization.riseWindowSeconds",
        "greater than or equal to 0",
    ),
    (
        "window-type",
        {"stabilization": {"fallWindowSeconds": 1.5}},
        "spec.stabilization.fallWindowSeconds",
        "must be of type integer",
    ),
    (
        "agent-token-scoring",
        {"scoring": {"auth": {"agentServiceAccountToken": True}}},
        "spec.scoring.auth.agentServiceAccountToken",
        "sent only to metrics sources, never to a scoring API",
    ),
    (
        "agent-token-bearer",
        {
            "source": {
                "auth": {"agentServiceAccountToken": True, "bearerTokenSecretRef": {"name": "t", "key": "k"}}
            }
        },
        "spec.source.auth.agentServiceAccountToken",
        "each set Authorization; set one",
    ),
    (
        "agent-token-insecure",
        {"source": {"auth": {"agentServiceAccountToken": True, "insecureSkipVerify": True}}},
        "spec.source.auth.insecureSkipVerify",
        "sent only over verified TLS",
    ),
    (
        "agent-token-insecure-sources",
        {
            "sources": [
                {
                    "name": "a",
                    "host": "https://prom:9091",
                    "queries": ["up"],
                    "auth": {"agentServiceAccountToken": True, "insecureSkipVerify": True},
                }
            ]
        },
        "spec.sources[0].auth.insecureSkipVerify",
        "sent only over verified TLS",
    ),
    (
        "horizon-too-far",
        {"scoring": {"params": {"horizon": 2_592_001}}},
        "spec.scoring.params.horizon",
        "less than or equal to 2592000",
    ),
    (
        "labels-key",
        {"scoreDimensionLabels": {"host": "instance"}},
        "spec.scoreDimensionLabels",
        "keys must be label placeholders",
    ),
    (
        "labels-value",
        {"scoreDimensionLabels": {"node": "not-a-label"}},
        "spec.scoreDimensionLabels.node",
        "should match",
    ),
]


@pytest.mark.parametrize(("name", "spec", "field", "message"), INVALID, ids=[i[0] for i in INVALID])
def test_invalid_scorers_are_rejected_naming_the_field(
    hub: Kubectl, ns: str, name: str, spec: dict[str, Any], field: str, message: str
) -> None:
    done = apply(hub, scorer_yaml(f"bad-{name}", spec), ns)
    assert done.returncode != 0, f"{name} was admitted"
    assert field in done.stderr, done.stderr
    assert message in done.stderr, done.stderr


def test_duplicate_masks_are_rejected(hub: Kubectl, ns: str) -> None:
    mask = {"clusterName": "cluster1", "scoreName": "s"}
    doc = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "DynamicScoringConfig",
        "metadata": {"name": "dynamic-scoring-config"},
        "spec": {"masks": [mask, mask]},
    }
    done = apply(hub, yaml.safe_dump(doc), ns)
    assert done.returncode != 0, "duplicate masks were admitted"
    assert ".spec.masks: duplicate entries" in done.stderr and 'clusterName="cluster1"' in done.stderr, (
        done.stderr
    )


def test_status_subresource_and_printer_columns(hub: Kubectl, ns: str) -> None:
    assert (
        apply(
            hub,
            scorer_yaml("shown", {"configSyncMode": "Full", "configURL": "http://s.example:8000/config"}),
            ns,
        ).returncode
        == 0
    )
    status = {
        "status": {
            "observedGeneration": 1,
            "healthStatus": "Active",
            "scoreName": "my_score",
            "scoringInterval": 45,
            "conditions": [
                {
                    "type": "Healthy",
                    "status": "True",
                    "reason": "Healthy",
                    "message": "GET http://s.example:8000/healthz answered HTTP 200",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "lastSyncedConfig": {"scoring": {"params": {"name": "my_score"}}},
        }
    }
    hub.run(
        "patch",
        "dscorer",
        "shown",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    table = hub.run("get", "dscorer", "-n", ns, "shown")
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "HEALTH", "SYNC", "SCORE", "INTERVAL", "AGE"]
    assert row.split()[:5] == ["shown", "Active", "Full", "my_score", "45"]
    # the spec is untouched by a status write, and an invalid health status is refused
    bad = subprocess.run(
        [
            str(hub.binary),
            f"--kubeconfig={hub.kubeconfig}",
            "patch",
            "dynamicscorers",
            "shown",
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status":{"healthStatus":"Healthy"}}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "status.healthStatus" in bad.stderr
    cfg = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "DynamicScoringConfig",
        "metadata": {"name": "dynamic-scoring-config"},
        "spec": {},
    }
    assert apply(hub, yaml.safe_dump(cfg), ns).returncode == 0
    header = hub.run("get", "dsc", "-n", ns).splitlines()[0]
    assert header.split() == ["NAME", "ACCEPTED", "DISTRIBUTED", "CLUSTERS", "AGE"]


def test_status_written_by_the_pure_logic_is_accepted_and_reads_back(hub: Kubectl, ns: str) -> None:
    spec = {"configSyncMode": "Full", "configURL": "http://static-scorer.example:8000/performance/config"}
    assert apply(hub, scorer_yaml("static", spec), ns).returncode == 0
    parsed = parse_scorer(hub.get_json(f"dynamicscorers.{GROUP}", "static", "-n", ns))
    assert isinstance(parsed, DynamicScorer)
    document = json.loads((SAMPLES / "config" / "static-performance.json").read_text())
    fetched = ConfigResult(ProbeResult(True, "ConfigFetched", "GET ... answered HTTP 200", 200), None)
    checked, problems = check_config(ScorerConfig.model_validate(document))
    assert checked is not None, problems
    fetched = ConfigResult(fetched.result, checked)
    synced = synced_config_after(parsed, fetched)
    state = next_state(HealthState(), True, "ok", failure_threshold=3).state
    with_config = replace(parsed, status=parsed.status.model_copy(update={"last_synced_config": synced}))
    res = resolve(with_config)
    patch = status_patch(parsed, state, synced, res, datetime.now(UTC))
    patch["conditions"] = apply_conditions(
        [],
        [
            healthy_condition(state, ProbeResult(True, "Healthy", "GET /healthz answered HTTP 200", 200), 3),
            config_synced_condition(parsed, fetched),
            valid_condition(res),
        ],
        parsed.generation,
    )
    hub.run(
        "patch",
        "dscorer",
        "static",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": patch}),
    )
    back = parse_scorer(hub.get_json(f"dynamicscorers.{GROUP}", "static", "-n", ns))
    assert isinstance(back, DynamicScorer)
    assert back.status.health_status == "Active" and back.status.last_synced_config == synced
    summary = resolve(back).summary
    assert summary is not None and summary.score_name == "example_performance_score"
    row = hub.run("get", "dscorer", "static", "-n", ns).splitlines()[1].split()
    assert row[:5] == ["static", "Active", "Full", "example_performance_score", "30"]
    # switching to None mode clears the stale document through the same merge patch
    assert apply(hub, scorer_yaml("static", {**spec, "configSyncMode": "None"}), ns).returncode == 0
    none_mode = parse_scorer(hub.get_json(f"dynamicscorers.{GROUP}", "static", "-n", ns))
    assert isinstance(none_mode, DynamicScorer)
    patch = status_patch(none_mode, state, synced_config_after(none_mode, None), resolve(none_mode), None)
    hub.run(
        "patch",
        "dscorer",
        "static",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": patch}),
    )
    status = hub.get_json(f"dynamicscorers.{GROUP}", "static", "-n", ns)["status"]
    assert "lastSyncedConfig" not in status and status["observedGeneration"] == none_mode.generation == 2


def test_short_name_ds_is_shadowed_by_daemonsets(hub: Kubectl, ns: str) -> None:
    # `ds` is upstream's (and the issue's) short name, but kubectl resolves it to apps/v1 DaemonSets
    # first; `dscorer` is the unambiguous one (docs/scorer-registry.md says so).
    assert (
        apply(hub, scorer_yaml("named", {"scoring": {"host": "http://s.example:8000"}}), ns).returncode == 0
    )
    shadowed = subprocess.run(
        [str(hub.binary), f"--kubeconfig={hub.kubeconfig}", "get", "ds", "named", "-n", ns],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shadowed.returncode != 0 and 'daemonsets.apps "named" not found' in shadowed.stderr
    assert "named" in hub.run("get", "dscorer", "named", "-n", ns)
    assert "named" in hub.run("get", "dynamic-scoring", "-n", ns)  # the category lists both kinds


# -- several sources (issue 11) ---------------------------------------------------------------------

CENTRAL = {
    "name": "central",
    "host": "http://thanos.monitoring.svc:9090",
    "queries": ['up{cluster="${cluster}"}'],
}
SOURCES_INVALID = [
    (
        "both-forms",
        {"source": {"host": "http://prom:9090"}, "sources": [CENTRAL]},
        "spec.sources",
        "set either source (one source, upstream's form) or sources (several), not both",
    ),
    (
        "policy-alone",
        {"onSourceError": "Fail"},
        "spec.onSourceError",
        "onSourceError applies to sources only",
    ),
    (
        "policy-enum",
        {"sources": [CENTRAL], "onSourceError": "Ignore"},
        "spec.onSourceError",
        "supported values",
    ),
    (
        "dup-names",
        {"sources": [CENTRAL, CENTRAL]},
        ".spec.sources",
        'duplicate entries for key [name="central"]',
    ),
    ("no-host", {"sources": [{"name": "a", "queries": ["up"]}]}, "spec.sources[0].host", "needs host"),
    (
        "entry-step",
        {"sources": [dict(CENTRAL, range=60, step=300)]},
        "spec.sources[0].step",
        "step must not be larger than range",
    ),
    ("entry-name", {"sources": [dict(CENTRAL, name="Central_1")]}, "spec.sources[0].name", "should match"),
    ("entry-type", {"sources": [dict(CENTRAL, type="Loki")]}, "spec.sources[0].type", "supported values"),
]


@pytest.mark.parametrize(
    ("name", "spec", "field", "message"), SOURCES_INVALID, ids=[i[0] for i in SOURCES_INVALID]
)
def test_invalid_sources_are_rejected_naming_the_field(
    hub: Kubectl, ns: str, name: str, spec: dict[str, Any], field: str, message: str
) -> None:
    done = apply(hub, scorer_yaml(f"bad-{name}", {"scoring": {"host": "http://s:8000"}, **spec}), ns)
    assert done.returncode != 0, f"{name} was admitted"
    assert field in done.stderr, done.stderr
    assert message in done.stderr, done.stderr


def test_sources_get_their_defaults_and_resolve_to_the_summary_agents_get(hub: Kubectl, ns: str) -> None:
    edge = {
        "name": "edge",
        "host": "https://prom.edge.svc:9091/prefix",
        "queries": ["node_load1"],
        "step": 30,
        "auth": {"tokenSecretRef": {"name": "edge-token", "key": "token"}},
    }
    spec = {
        "scoring": {"host": "http://s:8000"},
        "sources": [CENTRAL, edge],
        "onSourceError": "ScoreWithAvailable",
    }
    done = apply(hub, scorer_yaml("several", spec), ns)
    assert done.returncode == 0, done.stderr
    stored = hub.get_json(f"dynamicscorers.{GROUP}", "several", "-n", ns)
    central, stored_edge = stored["spec"]["sources"]
    assert (central["type"], central["range"], central["step"]) == ("Prometheus", 3600, 60)
    assert (stored_edge["range"], stored_edge["step"]) == (3600, 30)
    assert "source" not in stored["spec"]  # no default object appears beside the list

    scorer = parse_scorer(stored)
    assert isinstance(scorer, DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None and summary.sources is not None
    wire = summary.to_wire()
    # Upstream agents read the first Prometheus source from the upstream keys.
    assert wire["sourceType"] == "Prometheus"
    assert wire["sourceEndpoint"] == "http://thanos.monitoring.svc:9090/api/v1/query_range"
    assert wire["sourceQuery"] == 'up{cluster="${cluster}"}'
    assert wire["onSourceError"] == "ScoreWithAvailable"
    assert [(s["name"], s["endpoint"]) for s in wire["sources"]] == [
        ("central", "http://thanos.monitoring.svc:9090/api/v1/query_range"),
        ("edge", "https://prom.edge.svc:9091/prefix"),
    ]
    assert wire["sources"][1]["auth"] == {
        "bearerTokenSecretRef": {"name": "edge-token", "key": "token"},
        "insecureSkipVerify": False,
    }


def test_stabilization_is_stored_as_written_and_reaches_the_summary(hub: Kubectl, ns: str) -> None:
    stabilization = {"tolerance": 3, "riseWindowSeconds": 300}
    spec = {"scoring": {"host": "http://s:8000"}, "stabilization": stabilization}
    done = apply(hub, scorer_yaml("stable", spec), ns)
    assert done.returncode == 0, done.stderr
    stored = hub.get_json(f"dynamicscorers.{GROUP}", "stable", "-n", ns)
    assert stored["spec"]["stabilization"] == stabilization  # no defaults written into it
    scorer = parse_scorer(stored)
    assert isinstance(scorer, DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None
    assert summary.to_wire()["stabilization"] == {
        "tolerance": 3,
        "riseWindowSeconds": 300,
        "fallWindowSeconds": 0,
    }


def test_the_agent_token_and_a_label_mapping_are_stored_and_reach_the_summary(hub: Kubectl, ns: str) -> None:
    spec = {
        "source": {
            "host": "https://thanos-querier.openshift-monitoring.svc:9091",
            "params": {"query": "up"},
            "auth": {"agentServiceAccountToken": True},
        },
        "scoring": {"host": "http://s:8000"},
        "scoreDimensionFormat": "${cluster}-${node}",
        "scoreDimensionLabels": {"node": "instance"},
    }
    done = apply(hub, scorer_yaml("openshift-nodes", spec), ns)
    assert done.returncode == 0, done.stderr
    stored = hub.get_json(f"dynamicscorers.{GROUP}", "openshift-nodes", "-n", ns)
    scorer = parse_scorer(stored)
    assert isinstance(scorer, DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None
    wire = summary.to_wire()
    assert wire["scoreDimensionLabels"] == {"node": "instance"}
    assert wire["sourceAuth"]["agentServiceAccountToken"] is True
