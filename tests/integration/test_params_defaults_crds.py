"""The issue-11 CRD fields on the real kube-apiserver: scoring params, missingData, formats, maskPolicy.

Objects go through server-side apply with strict field validation, so a key the schema would prune
fails the apply instead of vanishing; what the apiserver stores is then resolved by the hub's pure
logic, as the controllers do.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.models import (
    DynamicScorer,
    DynamicScoringConfig,
    parse_config,
    parse_scorer,
)
from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.procs import wait_until

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
GROUP = "dynamic-scoring.open-cluster-management.io"
API = f"{GROUP}/v1alpha1"
BASE = {
    "source": {"host": "http://prom:9090", "params": {"query": "up"}},
    "scoring": {"host": "http://predictor:8000", "params": {"name": "cpu_predict"}},
}


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Kubectl:
    assert control_plane.hub is not None and control_plane.tools is not None
    kubectl = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    kubectl.run("apply", "--server-side", "--force-conflicts", "-k", str(CRDS))
    for plural in ("dynamicscorers", "dynamicscoringconfigs"):
        kubectl.run("wait", "--for=condition=Established", "--timeout=60s", f"crd/{plural}.{GROUP}")
    wait_until(
        lambda: "dsc" in kubectl.run("api-resources", f"--api-group={GROUP}", check=False),
        timeout=30,
        what="discovery of the CRDs",
    )
    return kubectl


@pytest.fixture
def ns(hub: Kubectl) -> Iterator[str]:
    name = f"params-{uuid.uuid4().hex[:8]}"
    hub.run("create", "namespace", name)
    yield name
    hub.run("delete", "namespace", name, "--wait=false")


def apply(
    hub: Kubectl, ns: str, kind: str, name: str, spec: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    manifest = yaml.safe_dump({"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec})
    args = [str(hub.binary), f"--kubeconfig={hub.kubeconfig}", "apply", "--server-side", "--validate=strict"]
    return subprocess.run(
        [*args, "-n", ns, "-f", "-"], input=manifest, capture_output=True, text=True, timeout=60
    )


def stored(hub: Kubectl, ns: str, resource: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(hub.run("get", "-n", ns, f"{resource}.{GROUP}", name, "-o", "json"))
    return out


def test_any_scoring_param_is_kept_and_resolves_to_scoring_params(hub: Kubectl, ns: str) -> None:
    params = {
        "name": "cpu_predict",
        "model": "linear_regression",
        "horizon": 3600,
        "quantile": "0.9",
        "weights": {"cpu": 2, "memory": 1},
    }
    spec = {**BASE, "scoring": {"host": "http://predictor:8000", "params": params}}
    done = apply(hub, ns, "DynamicScorer", "predictor", spec)
    assert done.returncode == 0, done.stderr
    obj = stored(hub, ns, "dynamicscorers", "predictor")
    assert obj["spec"]["scoring"]["params"] == params  # nothing pruned
    scorer = parse_scorer(obj)
    assert isinstance(scorer, DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None
    assert summary.scoring_params == {k: v for k, v in params.items() if k != "name"}


def test_a_synced_configs_own_params_survive_the_status_subresource(hub: Kubectl, ns: str) -> None:
    spec = {**BASE, "configURL": "http://predictor:8000/config", "configSyncMode": "Full"}
    assert apply(hub, ns, "DynamicScorer", "synced", spec).returncode == 0
    synced = {
        "source": {"type": "Prometheus", "host": "http://prom:9090", "params": {"query": "up"}},
        "scoring": {
            "host": "http://predictor:8000",
            "params": {"name": "cpu", "interval": 30, "horizon": 900},
        },
    }
    patch = json.dumps({"status": {"healthStatus": "Active", "lastSyncedConfig": synced}})
    hub.run(
        "patch",
        "-n",
        ns,
        f"dynamicscorers.{GROUP}",
        "synced",
        "--subresource=status",
        "--type=merge",
        "-p",
        patch,
    )
    obj = stored(hub, ns, "dynamicscorers", "synced")
    assert obj["status"]["lastSyncedConfig"]["scoring"]["params"]["horizon"] == 900
    scorer = parse_scorer(obj)
    assert isinstance(scorer, DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None and summary.scoring_params == {"horizon": 900}


def test_missing_data_and_formats_are_stored_and_reach_the_summary(hub: Kubectl, ns: str) -> None:
    spec = {**BASE, "missingData": {"score": -100}, "scoreDimensionFormats": ["${scoreName}", "${node}"]}
    done = apply(hub, ns, "DynamicScorer", "gpu", spec)
    assert done.returncode == 0, done.stderr
    scorer = parse_scorer(stored(hub, ns, "dynamicscorers", "gpu"))
    assert isinstance(scorer, DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None
    assert summary.missing_data_score == -100
    assert summary.score_dimension_formats == ["${scoreName}", "${node}"]
    assert summary.score_dimension_format == "${scoreName}"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"missingData": {"score": -101}}, "spec.missingData.score"),
        ({"missingData": {"score": 100.5}}, "spec.missingData.score"),
        ({"missingData": {}}, "spec.missingData.score"),
        ({"scoreDimensionFormats": []}, "spec.scoreDimensionFormats"),
        ({"scoreDimensionFormats": [""]}, "spec.scoreDimensionFormats[0]"),
    ],
)
def test_bad_values_are_refused_naming_the_field(
    hub: Kubectl, ns: str, extra: dict[str, Any], field: str
) -> None:
    done = apply(hub, ns, "DynamicScorer", "bad", {**BASE, **extra})
    assert done.returncode != 0
    assert field in done.stderr, done.stderr


def test_mask_policy_defaults_to_skip_accepts_score_in_either_case_and_refuses_others(
    hub: Kubectl, ns: str
) -> None:
    masks = [{"clusterName": "cluster2", "scoreName": "gpu"}]
    assert apply(hub, ns, "DynamicScoringConfig", "plain", {"masks": masks}).returncode == 0
    # No CRD default: the object stays as written (as upstream's do), and the manager reads it as Skip.
    plain = stored(hub, ns, "dynamicscoringconfigs", "plain")
    assert "maskPolicy" not in plain["spec"]
    config = parse_config(plain)
    assert isinstance(config, DynamicScoringConfig) and config.spec.mask_policy == "Skip"
    for name, written in (("lower", "score"), ("upper", "Score")):
        done = apply(hub, ns, "DynamicScoringConfig", name, {"masks": masks, "maskPolicy": written})
        assert done.returncode == 0, done.stderr
        config = parse_config(stored(hub, ns, "dynamicscoringconfigs", name))
        assert isinstance(config, DynamicScoringConfig) and config.spec.mask_policy == "Score"
    done = apply(hub, ns, "DynamicScoringConfig", "odd", {"masks": masks, "maskPolicy": "Sometimes"})
    assert done.returncode != 0 and "spec.maskPolicy" in done.stderr, done.stderr
