"""Kubernetes' own `restricted` Pod Security admission admits the manager's and the agent's pods.

The pods are what the installs render: the manager from `manifests/` (with and without the OpenShift
component), the agent from `render_agent` for a Kubernetes and an OpenShift cluster, and with every
optional part turned on.  Each is created as a Pod, server-side dry run, in a namespace labelled
`pod-security.kubernetes.io/enforce=restricted` on the real kube-apiserver of the hub (the manager)
and of cluster2 (the agent).  A pod with one rule broken is the control: the same admission refuses
it, so an accepted pod means the rules were checked.  OpenShift's restricted-v2 SCC is not here
(no OpenShift runs); `tests/restricted_v2.py` holds the rendered pods to its rules instead.
"""

from __future__ import annotations

import base64
import copy
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.kube.api import Forbidden, KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.kube import KubeCluster, Kubectl
from tests.restricted_v2 import pod_spec

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
NS = f"restricted-{uuid.uuid4().hex[:5]}"
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def restricted_namespace(api: KubeAPI, *service_accounts: str) -> None:
    api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS, "labels": RESTRICTED}})
    for sa in service_accounts:  # the ServiceAccount admission wants the pod's account to exist
        api.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", body={"metadata": {"name": sa}})


def dry_run_pod(api: KubeAPI, spec: dict[str, Any]) -> JSON:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "psa-", "namespace": NS},
        "spec": spec,
    }
    return api.request("POST", f"/api/v1/namespaces/{NS}/pods", query={"dryRun": "All"}, body=pod)


def kustomize(cp: ControlPlane, *components: str) -> list[JSON]:
    assert cp.tools is not None and cp.hub is not None
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.relpath(MANIFESTS, tmp)  # kustomize refuses absolute paths
        text = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [base],
            "components": [f"{base}/components/{c}" for c in components],
        }
        Path(tmp, "kustomization.yaml").write_text(yaml.safe_dump(text))
        out = Kubectl(cp.tools.kubectl, cp.hub.admin_kubeconfig).run("kustomize", tmp)
    return [d for d in yaml.safe_load_all(out) if d]


def manager_pod(cp: ControlPlane, *components: str) -> dict[str, Any]:
    (dep,) = [d for d in kustomize(cp, *components) if d["kind"] == "Deployment"]
    return pod_spec(dep)


def agent_pod(**spec: Any) -> dict[str, Any]:
    mca = {"metadata": {"name": "dynamic-scoring", "namespace": "cluster2"}, "spec": {}, "status": {}}
    adc = {"metadata": {"name": "cfg", "namespace": "x"}, "spec": {"agentInstallNamespace": "", **spec}}
    rendered = render_agent(mca=mca, adc=adc if spec else None)
    (dep,) = [m for m in rendered.manifests if m["kind"] == "Deployment"]
    return pod_spec(dep)


def variables(**values: str) -> list[JSON]:
    return [{"name": k, "value": v} for k, v in values.items()]


AGENT_PODS: dict[str, dict[str, Any]] = {
    "kubernetes": {},
    "openshift": {"customizedVariables": variables(Platform="openshift")},
    "every option on openshift": {
        "customizedVariables": variables(
            Platform="openshift",
            OtlpReceiverPort="4318",
            OtlpBearerTokenSecret="otlp-token",
            OtlpTlsSecret="otlp-tls",
            OtlpClientCaSecret="otlp-ca",
        ),
        "proxyConfig": {
            "httpsProxy": "http://proxy:3128",
            "caBundle": base64.b64encode(PEM.encode()).decode(),
        },
    },
}


def restricted_cluster(cluster: KubeCluster | None, service_account: str) -> Iterator[KubeAPI]:
    """A cluster's admin API with the restricted namespace in it, deleted afterwards."""
    assert cluster is not None
    api = KubeAPI(cluster.admin_kubeconfig)
    restricted_namespace(api, service_account)
    yield api
    api.request("DELETE", f"/api/v1/namespaces/{NS}")


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Iterator[KubeAPI]:
    yield from restricted_cluster(control_plane.hub, "dynamic-scoring-addon-manager")


@pytest.fixture(scope="module")
def cluster2(control_plane: ControlPlane) -> Iterator[KubeAPI]:
    yield from restricted_cluster(control_plane.spoke2, "dynamic-scoring-agent")


@pytest.mark.parametrize("components", [(), ("openshift",)], ids=["kubernetes", "openshift"])
def test_the_managers_pod_is_admitted(
    control_plane: ControlPlane, hub: KubeAPI, components: tuple[str]
) -> None:
    created = dry_run_pod(hub, manager_pod(control_plane, *components))
    assert created["spec"]["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("name", sorted(AGENT_PODS))
def test_the_agents_pod_is_admitted(cluster2: KubeAPI, name: str) -> None:
    created = dry_run_pod(cluster2, agent_pod(**AGENT_PODS[name]))
    assert ("runAsUser" in created["spec"]["securityContext"]) is (name == "kubernetes")


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (
            lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
            "allowPrivilegeEscalation",
        ),
        (lambda p: p["securityContext"].update(runAsUser=0), "runAsUser=0"),
        (lambda p: p["securityContext"].pop("seccompProfile"), "seccompProfile"),
    ],
    ids=["escalation", "root", "seccomp"],
)
def test_a_pod_with_one_rule_broken_is_refused(cluster2: KubeAPI, change: Any, complaint: str) -> None:
    pod = copy.deepcopy(agent_pod(**AGENT_PODS["openshift"]))
    change(pod)
    with pytest.raises(Forbidden) as refused:
        dry_run_pod(cluster2, pod)
    assert 'violates PodSecurity "restricted:latest"' in refused.value.message
    assert complaint in refused.value.message
