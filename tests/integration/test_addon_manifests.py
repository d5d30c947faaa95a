"""The hub install manifests and the rendered agent, against the real apiservers of the local
control plane: server-side validation with OCM's CRDs, OCM's own addon-manager reacting to our
ClusterManagementAddOn, and the agent's managed-cluster Role enforced by a real authorizer."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dynamic_scoring.addon.constants import DEFAULT_IMAGE
from dynamic_scoring.addon.registration.status import registration_subject
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.render.hub_rbac import render_hub_rbac
from dynamic_scoring.addon.work.builder import build_deploy_works
from dynamic_scoring.kube.api import Forbidden, KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.kube import KubeCluster, Kubectl
from e2e.pki import write_kubeconfig
from e2e.procs import wait_until

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"


def hub_kubectl(cp: ControlPlane) -> Kubectl:
    assert cp.tools is not None and cp.hub is not None
    return Kubectl(cp.tools.kubectl, cp.hub.admin_kubeconfig)


def kustomize(cp: ControlPlane) -> list[JSON]:
    return [d for d in yaml.safe_load_all(hub_kubectl(cp).run("kustomize", str(MANIFESTS))) if d]


def test_kustomize_renders_the_hub_side(control_plane: ControlPlane) -> None:
    docs = kustomize(control_plane)
    names = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs}
    assert {
        ("Namespace", None, "dynamic-scoring"),
        ("ServiceAccount", "dynamic-scoring", "dynamic-scoring-addon-manager"),
        ("ClusterRole", None, "dynamic-scoring-addon-manager"),
        ("ClusterRoleBinding", None, "dynamic-scoring-addon-manager"),
        ("Role", "dynamic-scoring", "dynamic-scoring-addon-manager"),
        ("RoleBinding", "dynamic-scoring", "dynamic-scoring-addon-manager"),
        ("Deployment", "dynamic-scoring", "dynamic-scoring-addon-manager"),
        ("ClusterManagementAddOn", None, "dynamic-scoring"),
        ("AddOnDeploymentConfig", "dynamic-scoring", "dynamic-scoring-default"),
    } <= names
    cma = next(d for d in docs if d["kind"] == "ClusterManagementAddOn")
    assert "addon.open-cluster-management.io/lifecycle" not in (cma["metadata"].get("annotations") or {})
    assert cma["spec"]["supportedConfigs"] == [
        {
            "group": "addon.open-cluster-management.io",
            "resource": "addondeploymentconfigs",
            "defaultConfig": {"name": "dynamic-scoring-default", "namespace": "dynamic-scoring"},
        }
    ]
    manager = next(d for d in docs if d["kind"] == "Deployment")
    (container,) = manager["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    # The kustomize images entry reaches both the manager and (through the env) every agent.
    assert container["image"] == env["DYNAMIC_SCORING_AGENT_IMAGE"] == DEFAULT_IMAGE
    assert container["command"] == ["dynamic-scoring-addon"] and container["args"][0] == "manager"


@pytest.fixture
def installed(control_plane: ControlPlane) -> Iterator[Kubectl]:
    """`kubectl apply -k manifests/`, removing afterwards only what did not exist before."""
    kubectl = hub_kubectl(control_plane)
    docs = kustomize(control_plane)
    existed = set()
    for d in docs:
        ns = ["-n", d["metadata"]["namespace"]] if d["metadata"].get("namespace") else []
        if kubectl.run(
            "get", d["kind"], d["metadata"]["name"], *ns, "--ignore-not-found", "-o", "name"
        ).strip():
            existed.add((d["kind"], d["metadata"]["name"]))
    try:
        yield kubectl
    finally:
        created = [d for d in docs if (d["kind"], d["metadata"]["name"]) not in existed]
        if created:
            # Waits until gone: a later test applying manifests/ must not meet a terminating namespace.
            kubectl.run(
                "delete",
                "--ignore-not-found",
                "--wait=true",
                "--timeout=120s",
                "-f",
                "-",
                stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": created}),
            )


def test_apply_k_installs_on_the_hub(control_plane: ControlPlane, installed: Kubectl) -> None:
    out = installed.run("apply", "-k", str(MANIFESTS), "--validate=strict")
    assert "clustermanagementaddon.addon.open-cluster-management.io/dynamic-scoring" in out
    # A second apply is a no-op: nothing the server defaults fights what we wrote.
    again = installed.run("apply", "-k", str(MANIFESTS), "--validate=strict")
    assert "configured" not in again, again
    adc = installed.get_json("addondeploymentconfig", "dynamic-scoring-default", "-n", "dynamic-scoring")
    # Kept empty (the CRD would default it), so `clusteradm --namespace` still chooses the namespace.
    assert adc["spec"]["agentInstallNamespace"] == ""

    # OCM's own addon-manager treats the CMA as one it manages (no lifecycle annotation): it fills
    # the default config reference into the CMA status.
    def default_ref() -> JSON | None:
        # fully qualified: on a cluster-manager hub the short name means v1beta1 (defaultConfigReferences)
        cma = installed.get_json(
            "clustermanagementaddons.v1alpha1.addon.open-cluster-management.io", "dynamic-scoring"
        )
        refs = (cma.get("status") or {}).get("defaultconfigReferences") or []
        return refs[0] if refs else None

    ref = wait_until(default_ref, timeout=60, what="OCM to fill CMA defaultconfigReferences")
    assert ref["desiredConfig"]["name"] == "dynamic-scoring-default"
    assert ref["desiredConfig"]["namespace"] == "dynamic-scoring"


def test_deploy_work_and_hub_rbac_pass_server_side_validation(control_plane: ControlPlane) -> None:
    """The work and RBAC exactly as built, accepted by the hub with OCM's ManifestWork CRD."""
    kubectl = hub_kubectl(control_plane)
    ns = f"ds-it-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", ns)
    try:
        mca = {
            "metadata": {"name": "dynamic-scoring", "namespace": ns, "uid": str(uuid.uuid4())},
            "spec": {"installNamespace": "scoring"},
            "status": {
                "configReferences": [
                    {
                        "group": "addon.open-cluster-management.io",
                        "resource": "addondeploymentconfigs",
                        "desiredConfig": {
                            "namespace": "dynamic-scoring",
                            "name": "dynamic-scoring-default",
                            "specHash": "a" * 64,
                        },
                    }
                ]
            },
        }
        plan = build_deploy_works(mca, render_agent(mca=mca, adc=None).manifests)
        hub_rbac = render_hub_rbac(mca, registration_subject(mca), score_names=["cpu", "mem"])
        objects = [*plan.works, *hub_rbac]
        for obj in objects:  # ownerReferences to an MCA that does not exist would be collected: drop them
            obj["metadata"].pop("ownerReferences", None)
        kubectl.run(
            "create",
            "--validate=strict",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        )
        work = kubectl.get_json("manifestwork", "addon-dynamic-scoring-deploy-0", "-n", ns)
        assert work["spec"]["manifestConfigs"] == plan.works[0]["spec"]["manifestConfigs"]
        assert work["spec"]["deleteOption"] == plan.works[0]["spec"]["deleteOption"]
        assert work["metadata"]["annotations"] == plan.works[0]["metadata"]["annotations"]
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false")


def sa_api(cluster: KubeCluster, kubectl: Kubectl, namespace: str, tmp: Path) -> KubeAPI:
    token = kubectl.run(
        "create", "token", "dynamic-scoring-agent", "-n", namespace, "--duration=600s"
    ).strip()
    path = write_kubeconfig(
        tmp / "agent.kubeconfig", server=cluster.server, ca_pem=cluster.ca.cert_pem, user="agent", token=token
    )
    return KubeAPI(path)


def test_agent_role_on_a_managed_cluster_is_least_privilege(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """Apply the rendered agent on cluster2 and use the agent's own ServiceAccount token."""
    assert control_plane.tools is not None and control_plane.spoke2 is not None
    spoke = control_plane.spoke2
    kubectl = Kubectl(control_plane.tools.kubectl, spoke.admin_kubeconfig)
    ns = f"ds-agent-{uuid.uuid4().hex[:6]}"
    mca = {
        "metadata": {"name": "dynamic-scoring", "namespace": "cluster2", "uid": "u"},
        "spec": {"installNamespace": ns},
    }
    # Everything the work would carry, Deployment included, under strict server-side validation.
    # (The runner sees the Deployment but cannot start it: there is no hub-kubeconfig Secret.)
    manifests = render_agent(mca=mca, adc=None).manifests
    assert [m["kind"] for m in manifests] == [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
    ]
    kubectl.run(
        "apply",
        "--validate=strict",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}),
    )
    try:
        for doc in (
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "dynamic-scoring-config", "namespace": ns},
                "data": {"summaries": "[]"},
            },
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": ns}},
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "scorer-token", "namespace": ns},
                "stringData": {"token": "t"},
            },
        ):
            kubectl.run("apply", "-f", "-", stdin=json.dumps(doc))
        api = sa_api(spoke, kubectl, ns, tmp_path)
        cms = f"/api/v1/namespaces/{ns}/configmaps"
        leases = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"

        # Allowed: exactly what the agent does.
        assert api.request("GET", f"{cms}/dynamic-scoring-config")["data"] == {"summaries": "[]"}
        listed = api.request("GET", cms, query={"fieldSelector": "metadata.name=dynamic-scoring-config"})
        assert [i["metadata"]["name"] for i in listed["items"]] == ["dynamic-scoring-config"]
        stop = threading.Event()
        rv = listed["metadata"]["resourceVersion"]
        list(
            api.watch(
                cms,
                {
                    "fieldSelector": "metadata.name=dynamic-scoring-config",
                    "resourceVersion": rv,
                    "timeoutSeconds": "1",
                },
                stop,
            )
        )
        assert api.request("GET", f"/api/v1/namespaces/{ns}/secrets/scorer-token")["data"]["token"]
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "dynamic-scoring", "namespace": ns},
            "spec": {"leaseDurationSeconds": 60},
        }
        api.request("POST", leases, body=lease)
        api.request(
            "PATCH",
            f"{leases}/dynamic-scoring",
            body={"spec": {"holderIdentity": "a"}},
            content_type="application/merge-patch+json",
        )
        current = api.request("GET", f"{leases}/dynamic-scoring")
        api.request("PUT", f"{leases}/dynamic-scoring", body=current)
        api.request(
            "POST",
            f"/api/v1/namespaces/{ns}/events",
            body={
                "metadata": {"generateName": "agent-", "namespace": ns},
                "involvedObject": {"kind": "Lease", "name": "dynamic-scoring", "namespace": ns},
                "reason": "Test",
                "message": "m",
                "type": "Normal",
            },
        )

        # Denied: everything else.
        denied: list[tuple[str, str, JSON | None]] = [
            ("GET", f"{cms}/other", None),
            ("GET", cms, None),  # a list without the name selector
            ("GET", f"/api/v1/namespaces/{ns}/secrets", None),  # list Secrets
            ("DELETE", f"{cms}/dynamic-scoring-config", None),
            ("PATCH", f"{leases}/someone-else", {"spec": {}}),
            ("DELETE", f"{leases}/dynamic-scoring", None),
            ("GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt", None),
            ("GET", "/api/v1/namespaces", None),
            ("GET", f"/api/v1/namespaces/{ns}/pods", None),
            ("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", None),
            ("GET", f"/apis/apps/v1/namespaces/{ns}/deployments", None),  # only its own, by name
            ("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/other", None),
        ]
        for method, path, body in denied:
            with pytest.raises(Forbidden):
                api.request(method, path, body=body, content_type="application/merge-patch+json")
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false")


def test_hub_rbac_lets_an_agent_write_only_its_own_clusters_scores(control_plane: ControlPlane) -> None:
    """Two cluster namespaces with their agents' hub RBAC; each agent identity (user plus the groups
    its certificate carries, including the one all agents share) checked by the real authorizer."""
    kubectl = hub_kubectl(control_plane)
    suffix = uuid.uuid4().hex[:6]
    clusters = [f"ds-a-{suffix}", f"ds-b-{suffix}"]
    try:
        for name in clusters:
            kubectl.run("create", "namespace", name)
            mca = {"metadata": {"name": "dynamic-scoring", "namespace": name, "uid": str(uuid.uuid4())}}
            objects = render_hub_rbac(mca, registration_subject(mca), score_names=["cpu"])
            for obj in objects:
                obj["metadata"].pop("ownerReferences")  # the MCA is not real here
            kubectl.run(
                "create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
            )

        def can(cluster: str, verb: str, resource: str, namespace: str | None, subresource: str = "") -> bool:
            subject = registration_subject({"metadata": {"namespace": cluster}})
            assert subject is not None
            args = ["auth", "can-i", verb, resource, f"--as={subject['user']}"]
            args += [f"--as-group={g}" for g in subject["groups"]]
            args += ["-n", namespace] if namespace else []
            args += [f"--subresource={subresource}"] if subresource else []
            return kubectl.run(*args, check=False).strip() == "yes"

        aps = "addonplacementscores.cluster.open-cluster-management.io"
        a, b = clusters
        for verb in ("list", "create"):
            assert can(a, verb, aps, a), verb
        for verb in ("get", "patch", "delete"):  # only the scores it is sent (score_names)
            assert can(a, verb, f"{aps}/cpu", a), verb
            assert not can(a, verb, f"{aps}/other-addons-score", a), verb
        assert can(a, "patch", f"{aps}/cpu", a, "status") and can(a, "update", f"{aps}/cpu", a, "status")
        assert not can(a, "patch", f"{aps}/other-addons-score", a, "status")
        assert not can(a, "patch", f"{aps}/cpu", b, "status")
        assert can(a, "create", "events", a)
        for verb in ("get", "create", "patch", "delete"):
            assert not can(a, verb, f"{aps}/cpu", b), f"cluster {a}'s agent may {verb} scores of {b}"
        assert not can(b, "create", aps, a)
        assert not can(a, "update", f"{aps}/cpu", a)  # updates go through /status
        assert not can(a, "get", "secrets", a)
        assert not can(a, "get", "managedclusters.cluster.open-cluster-management.io", None)
        mcas = "managedclusteraddons.addon.open-cluster-management.io"
        assert can(a, "get", f"{mcas}/dynamic-scoring", a)  # its scores' owner
        assert not can(a, "get", f"{mcas}/other-addon", a)
        assert not can(a, "list", mcas, a)
        assert not can(a, "get", f"{mcas}/dynamic-scoring", b)
    finally:
        for name in clusters:
            kubectl.run("delete", "namespace", name, "--wait=false", check=False)
