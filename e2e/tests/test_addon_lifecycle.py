"""The addon as OCM sees it: `kubectl apply -k manifests/`, `clusteradm addon enable`, and what follows.

Everything here runs on the session's local control plane with OCM's own controllers, both
klusterlets and `clusteradm`; the addon manager is the Deployment from `manifests/` (two
replicas, run by the process runner), and each agent is the Deployment our ManifestWork delivers.

The tests are steps of one story and run in file order on one installation (the module fixture):
enable -> registered, delivered, available -> identities -> config rollout -> bad input ->
leader failover -> hub apiserver restart -> disable cluster2.  Each step waits on conditions and
shapes only the state it is about.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import os
import signal
import time
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from dynamic_scoring.addon.config.spec_hash import spec_hash
from dynamic_scoring.addon.registration.csr_request import NOT_CANONICAL
from dynamic_scoring.addon.registration.identity import default_groups, default_user
from dynamic_scoring.kube.api import Forbidden, KubeAPI, NotFound
from dynamic_scoring.kube.timestamps import parse_time
from e2e.controlplane import ControlPlane
from e2e.csr_shapes import FORGING_SHAPES, agent_request, pem_block
from e2e.image import default_tag, podman, ulimits
from e2e.kube import Client, Kubectl
from e2e.ocm import clusteradm
from e2e.procs import wait_until, wait_value

REPO = Path(__file__).resolve().parents[2]
ADDON = "dynamic-scoring"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
WORK_V1 = "work.open-cluster-management.io/v1"
CLUSTER_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
MANAGER_NS = "dynamic-scoring"
MANAGER = "dynamic-scoring-addon-manager"
INSTALL_NS = "open-cluster-management-agent-addon"
WORK = f"addon-{ADDON}-deploy-0"
HUB_RBAC = f"open-cluster-management:{ADDON}:agent"
MERGE = "application/merge-patch+json"
AGENT = "dynamic-scoring-agent"
CLUSTERS = ("cluster1", "cluster2")
RUNNER_CLUSTER = {"cluster1": "hub", "cluster2": "cluster2"}  # the runner's names for them
USER_CONFIGMAP = "e2e-user-data"

# the agent's CN is longer than X.509's 64 characters, as the framework makes it; cryptography warns
pytestmark = [
    pytest.mark.ocm_contract,
    pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning"),
]


# ------------------------------------------------------------------------------------- helpers
def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def status_of(obj: dict[str, Any] | None, type_: str) -> str | None:
    cond = conditions(obj).get(type_)
    return None if cond is None else str(cond["status"])


class Env:
    """Clients and paths of the session's control plane, for the addon tests."""

    def __init__(self, cp: ControlPlane) -> None:
        assert cp.hub is not None and cp.spoke2 is not None and cp.tools is not None
        self.cp = cp
        self.hub = Client(cp.hub.admin_kubeconfig, timeout=10)
        self.spokes = {"cluster1": self.hub, "cluster2": Client(cp.spoke2.admin_kubeconfig, timeout=10)}
        self.kubeconfigs = {"cluster1": cp.hub.admin_kubeconfig, "cluster2": cp.spoke2.admin_kubeconfig}
        self.kubectl = Kubectl(cp.tools.kubectl, cp.hub.admin_kubeconfig)
        self.pods_json = cp.run_dir / "runner" / "pods.json"

    def clusteradm(self, *args: str) -> str:
        assert self.cp.hub is not None and self.cp.tools is not None
        return clusteradm(self.cp.tools, self.cp.hub.admin_kubeconfig, *args)

    def mca(self, cluster: str) -> dict[str, Any] | None:
        return self.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)

    def work(self, cluster: str) -> dict[str, Any] | None:
        return self.hub.find(WORK_V1, "ManifestWork", WORK, cluster)

    def pods(self, deployment: str, runner_cluster: str | None = None) -> list[dict[str, Any]]:
        try:
            rows: list[dict[str, Any]] = json.loads(self.pods_json.read_text())
        except (FileNotFoundError, ValueError):
            return []
        return [
            r
            for r in rows
            if r["deployment"] == deployment and (runner_cluster is None or r["cluster"] == runner_cluster)
        ]

    def agent_pod(self, cluster: str) -> dict[str, Any] | None:
        rows = [r for r in self.pods(AGENT, RUNNER_CLUSTER[cluster]) if r["pid"] and r["ready"]]
        return rows[0] if rows else None

    def leader(self) -> str:
        lease = self.hub.find("coordination.k8s.io/v1", "Lease", MANAGER, MANAGER_NS)
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def manager_pod(self, identity: str) -> dict[str, Any] | None:
        pod = identity.rsplit("_", 1)[0]
        rows = [r for r in self.pods(MANAGER, "hub") if r["pod"] == pod]
        return rows[0] if rows else None

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.hub.items("v1", "Event", namespace) if e.get("reason") == reason]

    def install_manager(self) -> None:
        """`kubectl apply -k manifests/`, then wait for both manager replicas and a leader."""
        self.kubectl.run("apply", "-k", str(REPO / "manifests"))
        wait_until(
            lambda: len([p for p in self.pods(MANAGER, "hub") if p["pid"]]) == 2 and self.leader(),
            timeout=60,
            what="two manager replicas running, one holding the Lease",
        )

    def uninstall(self, clusters: tuple[str, ...]) -> None:
        """Disable the addon on `clusters`, then delete what `install_manager` created, and wait.

        Safe after a failed install (half the objects created): the next module then starts from
        a clean hub instead of failing on what this one left.
        """
        for cluster in clusters:
            if self.mca(cluster) is not None:
                self.clusteradm("addon", "disable", "--names", ADDON, "--clusters", cluster)
        wait_until(
            lambda: all(self.work(c) is None for c in clusters) and not self.pods(AGENT),
            timeout=90,
            what="works and agents gone after disable",
        )
        installed = hub_objects_without_crds(self)
        for obj in reversed(installed):
            self.hub.delete(
                obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace")
            )
        wait_until(lambda: not self.pods(MANAGER), timeout=60, what="manager processes stopped")

        # The namespace finishes terminating after the delete returns; the next module installs the
        # same objects into it and would be refused ("being terminated") if it started earlier.
        def gone(o: dict[str, Any]) -> bool:
            meta = o["metadata"]
            return self.hub.find(o["apiVersion"], o["kind"], meta["name"], meta.get("namespace")) is None

        wait_until(
            lambda: all(gone(o) for o in installed),
            timeout=90,
            what="every installed hub object gone, the manager's namespace included",
        )

    def patch_mca_configs(self, cluster: str, configs: list[dict[str, str]] | None) -> None:
        self.hub.api.request(
            "PATCH",
            f"/apis/addon.open-cluster-management.io/v1alpha1/namespaces/{cluster}/managedclusteraddons/{ADDON}",
            body={"spec": {"configs": configs}},
            content_type="application/merge-patch+json",
        )


def adc_ref(cluster: str, name: str) -> dict[str, str]:
    return {
        "group": "addon.open-cluster-management.io",
        "resource": "addondeploymentconfigs",
        "namespace": cluster,
        "name": name,
    }


def deployment_in(work: dict[str, Any]) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        m for m in work["spec"]["workload"]["manifests"] if m["kind"] == "Deployment"
    ]
    assert len(found) == 1, [m["kind"] for m in work["spec"]["workload"]["manifests"]]
    return found[0]


def hub_objects_without_crds(env: Env) -> list[dict[str, Any]]:
    built = env.kubectl.run("kustomize", str(REPO / "manifests"))
    return [d for d in yaml.safe_load_all(built) if d and d["kind"] != "CustomResourceDefinition"]


def metrics_of(pod: dict[str, Any]) -> str:
    port = pod["ports"]["8080"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def sample_sum(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def kubeconfig_with_token(admin_kubeconfig: Path, token: str, target: Path) -> Path:
    doc = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = doc["clusters"][0]["cluster"]
    if "certificate-authority" in cluster and not Path(cluster["certificate-authority"]).is_absolute():
        cluster["certificate-authority"] = str(admin_kubeconfig.parent / cluster["certificate-authority"])
    target.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return target


# ------------------------------------------------------------------------------------- fixture
@pytest.fixture(scope="module")
def env(control_plane: ControlPlane) -> Iterator[Env]:
    """The hub side installed from manifests/, the addon enabled on both clusters.

    Before enabling, cluster2 already has the install namespace with a user's ConfigMap in it:
    the addon must adopt neither, and disabling must delete neither.
    """
    e = Env(control_plane)
    # the harness prepares it for the klusterlet; put back exactly what was there at the end
    namespace_existed = e.spokes["cluster2"].find("v1", "Namespace", INSTALL_NS) is not None
    e.spokes["cluster2"].apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": INSTALL_NS}})
    e.spokes["cluster2"].apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": USER_CONFIGMAP, "namespace": INSTALL_NS},
            "data": {"owner": "a user, not the addon"},
        }
    )
    try:
        # Inside the try: a failed apply (half the objects created) is still taken back below, so the
        # next module starts from a clean hub instead of failing on what this one left.
        e.install_manager()
        e.enabled_at = time.monotonic()  # type: ignore[attr-defined]
        out = e.clusteradm("addon", "enable", "--names", ADDON, "--clusters", ",".join(CLUSTERS))
        assert "Deploying dynamic-scoring add-on" in out, out
        yield e
    finally:
        e.uninstall(CLUSTERS)
        if namespace_existed:
            e.spokes["cluster2"].delete("v1", "ConfigMap", USER_CONFIGMAP, INSTALL_NS)
        else:
            e.spokes["cluster2"].delete("v1", "Namespace", INSTALL_NS)


# ------------------------------------------------------------------------------------- the story
def test_enable_registers_and_delivers_the_agent_within_60s(env: Env) -> None:
    left = 60 - (time.monotonic() - env.enabled_at)  # type: ignore[attr-defined]

    def both_applied() -> bool:
        return all(
            status_of(m, "RegistrationApplied") == "True" and status_of(m, "ManifestApplied") == "True"
            for m in (env.mca(c) for c in CLUSTERS)
        )

    wait_until(
        both_applied, timeout=max(left, 1), what="RegistrationApplied and ManifestApplied on both MCAs"
    )
    for cluster in CLUSTERS:
        mca = env.mca(cluster)
        assert mca is not None
        status = mca["status"]
        assert conditions(mca)["RegistrationApplied"]["reason"] == "SetPermissionApplied"
        assert conditions(mca)["ManifestApplied"]["reason"] == "AddonManifestApplied"
        assert status["supportedConfigs"] == [
            {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs"}
        ]
        assert status["registrations"] == [
            {
                "signerName": "kubernetes.io/kube-apiserver-client",
                "subject": {"user": default_user(cluster), "groups": default_groups(cluster)},
            }
        ]
        assert status["namespace"] == INSTALL_NS
        assert status["healthCheck"] == {"mode": "Lease"}

        work = env.work(cluster)
        assert work is not None
        meta = work["metadata"]
        assert meta["labels"]["open-cluster-management.io/addon-name"] == ADDON
        assert meta["ownerReferences"] == [
            {
                "apiVersion": ADDON_V1A1,
                "kind": "ManagedClusterAddOn",
                "name": ADDON,
                "uid": mca["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        default_adc = env.hub.get(ADDON_V1A1, "AddOnDeploymentConfig", "dynamic-scoring-default", MANAGER_NS)
        annotation = json.loads(meta["annotations"]["open-cluster-management.io/config-spec-hash"])
        assert annotation == {
            f"addondeploymentconfigs.addon.open-cluster-management.io/{MANAGER_NS}/dynamic-scoring-default": (
                spec_hash(default_adc)
            )
        }
        kinds = sorted(m["kind"] for m in work["spec"]["workload"]["manifests"])
        assert kinds == ["Deployment", "Namespace", "Role", "RoleBinding", "ServiceAccount"]
        assert [w["metadata"]["name"] for w in env.hub.items(WORK_V1, "ManifestWork", cluster)] == [WORK]

        for kind in ("Role", "RoleBinding"):
            rbac = env.hub.get("rbac.authorization.k8s.io/v1", kind, HUB_RBAC, cluster)
            assert rbac["metadata"]["ownerReferences"][0]["uid"] == mca["metadata"]["uid"]


def test_klusterlet_gets_the_hub_kubeconfig_through_a_csr_the_manager_approved(env: Env) -> None:
    for cluster in CLUSTERS:

        def issued(cluster: str = cluster) -> list[dict[str, Any]]:
            csrs = env.hub.items(
                "certificates.k8s.io/v1",
                "CertificateSigningRequest",
                label_selector=f"open-cluster-management.io/addon-name={ADDON},"
                f"open-cluster-management.io/cluster-name={cluster}",
            )
            return [c for c in csrs if (c.get("status") or {}).get("certificate")]

        csr = wait_until(issued, timeout=60, what=f"a signed agent CSR of {cluster}")[0]
        approved = conditions(csr)["Approved"]
        assert approved["reason"] == "AutoApprovedByHubCSRApprovingController"  # ours, not the KCM's
        cert = x509.load_pem_x509_certificate(base64.b64decode(csr["status"]["certificate"]))
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == default_user(cluster)

        # the klusterlet may create the Secret before it holds the certificate: wait for all three keys
        secret = wait_value(
            partial(env.spokes[cluster].find, "v1", "Secret", f"{ADDON}-hub-kubeconfig", INSTALL_NS),
            lambda s: s is not None and {"kubeconfig", "tls.crt", "tls.key"} <= set(s.get("data") or {}),
            timeout=60,
            what=f"the hub kubeconfig Secret on {cluster} with kubeconfig, tls.crt and tls.key",
        )
        assert secret is not None
        mounted = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        assert mounted.subject == cert.subject


def test_the_runner_runs_the_delivered_agent_and_the_klusterlet_reports_it_available(env: Env) -> None:
    for cluster in CLUSTERS:
        pod = wait_until(partial(env.agent_pod, cluster), timeout=90, what=f"the agent of {cluster} ready")
        assert pod["namespace"] == INSTALL_NS
        started = Path(pod["log"]).read_text()
        assert (
            f"--cluster-name={cluster}" in started and "--hub-kubeconfig=/var/run/hub/kubeconfig" in started
        )
        lease = wait_until(
            partial(env.spokes[cluster].find, "coordination.k8s.io/v1", "Lease", ADDON, INSTALL_NS),
            timeout=60,
            what=f"the agent's Lease on {cluster}",
        )
        assert lease["spec"].get("renewTime")
    wait_until(
        lambda: all(status_of(env.mca(c), "Available") == "True" for c in CLUSTERS),
        timeout=120,  # the klusterlet looks at addon Leases every 30 s
        what="Available=True (klusterlet, Lease mode) on both MCAs",
    )
    for cluster in CLUSTERS:
        assert conditions(env.mca(cluster))["Available"]["reason"] == "ManagedClusterAddOnLeaseUpdated"
    tree = env.clusteradm("get", "addon", ADDON)
    for cluster in CLUSTERS:
        assert cluster in tree
    assert tree.count("Available -> true") == 2, tree
    assert tree.count("ManifestApplied -> true") == 2, tree
    assert tree.count("RegistrationApplied -> true") == 2, tree
    assert "applied" in tree


def test_ocm_reads_our_status_through_the_v1beta1_conversion_where_it_is_served(env: Env) -> None:
    """OCM v1.3's own controllers read MCAs as v1beta1 through its conversion webhook; we write v1alpha1.

    What the manager wrote must come through: install namespace, conditions, the registration
    subject (as a `kubeClient` registration), the health-check mode and the config references with
    their hashes.  On v1.2.1 the addon API has no v1beta1 at all.
    """
    assert env.cp.tools is not None
    cluster = "cluster2"

    def path(version: str) -> str:
        group = "addon.open-cluster-management.io"
        return f"/apis/{group}/{version}/namespaces/{cluster}/managedclusteraddons/{ADDON}"

    if not env.cp.tools.ocm.webhooks:
        with pytest.raises(NotFound):
            env.hub.api.request("GET", path("v1beta1"))
        return
    alpha, beta = (env.hub.api.request("GET", path(v))["status"] for v in ("v1alpha1", "v1beta1"))
    assert beta["namespace"] == alpha["namespace"] == INSTALL_NS
    assert beta["healthCheck"] == alpha["healthCheck"] == {"mode": "Lease"}

    def summary(conds: list[dict[str, Any]]) -> dict[str, tuple[str, str, str]]:
        return {c["type"]: (c["status"], c["reason"], c["message"]) for c in conds}

    assert summary(beta["conditions"]) == summary(alpha["conditions"])
    [registration] = beta["registrations"]
    assert registration["type"] == "kubeClient"
    assert registration["kubeClient"]["subject"] == alpha["registrations"][0]["subject"]
    assert registration["kubeClient"].get("driver") == alpha.get("kubeClientDriver")

    def configs(refs: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, Any]]:
        return {
            (r["group"], r["resource"]): (r.get("desiredConfig"), r.get("lastAppliedConfig")) for r in refs
        }

    assert configs(beta["configReferences"]) == configs(alpha["configReferences"])
    assert all(desired and desired["specHash"] for desired, _ in configs(alpha["configReferences"]).values())
    # the CMA as v1.3 reads it: the default config and the install strategy we declare
    cma = env.hub.api.request(
        "GET", f"/apis/addon.open-cluster-management.io/v1beta1/clustermanagementaddons/{ADDON}"
    )
    assert cma["spec"]["installStrategy"]["type"] == "Manual"
    assert cma["spec"]["defaultConfigs"] == [
        {
            "group": "addon.open-cluster-management.io",
            "resource": "addondeploymentconfigs",
            "name": "dynamic-scoring-default",
            "namespace": MANAGER_NS,
        }
    ]


def test_agent_identity_on_the_managed_cluster_is_least_privilege(env: Env, tmp_path: Path) -> None:
    cluster = "cluster2"
    spoke = env.spokes[cluster]
    token = spoke.service_account_token(INSTALL_NS, AGENT, 600)
    agent = KubeAPI(kubeconfig_with_token(env.kubeconfigs[cluster], token, tmp_path / "agent.kubeconfig"))
    ns = f"/api/v1/namespaces/{INSTALL_NS}"

    # allowed: its ConfigMap and a Secret by name (404 means the authorizer let the request through)
    for path in (f"{ns}/configmaps/dynamic-scoring-config", f"{ns}/secrets/some-scorer-token"):
        with contextlib.suppress(NotFound):
            agent.request("GET", path)
    lease = agent.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{INSTALL_NS}/leases/{ADDON}")
    agent.request("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{INSTALL_NS}/leases/{ADDON}", body=lease)

    for path in (
        f"{ns}/secrets",  # listing would hand out every Secret value
        f"{ns}/configmaps/{USER_CONFIGMAP}",  # not its ConfigMap
        "/api/v1/namespaces/kube-system/configmaps",
        "/api/v1/namespaces",
        f"/apis/coordination.k8s.io/v1/namespaces/{INSTALL_NS}/leases/someone-else",
    ):
        with pytest.raises(Forbidden):
            agent.request("GET", path)


def test_agent_identity_on_the_hub_writes_only_its_own_clusters_scores(env: Env, tmp_path: Path) -> None:
    cluster, other = "cluster2", "cluster1"
    secret = env.spokes[cluster].get("v1", "Secret", f"{ADDON}-hub-kubeconfig", INSTALL_NS)
    for name, value in secret["data"].items():
        (tmp_path / name).write_bytes(base64.b64decode(value))
    hub_as_agent = KubeAPI(tmp_path / "kubeconfig")
    name = f"e2e-identity-{uuid.uuid4().hex[:6]}"
    ours = {
        "app.kubernetes.io/managed-by": "dynamic-scoring-agent",
        "dynamic-scoring.open-cluster-management.io/addon": ADDON,
    }

    def score(namespace: str, score_name: str = name, labels: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            "apiVersion": CLUSTER_V1A1,
            "kind": "AddOnPlacementScore",
            "metadata": {"name": score_name, "namespace": namespace, "labels": labels or {}},
        }

    aps = f"/apis/cluster.open-cluster-management.io/v1alpha1/namespaces/{cluster}/addonplacementscores"
    status = {"status": {"scores": [{"name": "e2e", "value": 7}]}}
    # create is not limited by name; the manager then names a score our agent wrote in its hub Role
    hub_as_agent.request("POST", aps, body=score(cluster, labels=ours))

    def written() -> bool:
        try:
            hub_as_agent.request("PATCH", f"{aps}/{name}/status", body=status, content_type=MERGE)
        except Forbidden:
            return False
        return True

    wait_until(written, timeout=30, what="the agent's hub Role names its new score")
    assert (
        env.hub.get(CLUSTER_V1A1, "AddOnPlacementScore", name, cluster)["status"]["scores"][0]["value"] == 7
    )
    hub_as_agent.request("DELETE", f"{aps}/{name}")
    # another addon's score in the same cluster namespace: out of reach
    foreign = f"e2e-other-addon-{uuid.uuid4().hex[:6]}"
    env.hub.apply(score(cluster, foreign))
    try:
        for method, path, body in (
            ("PATCH", f"{aps}/{foreign}/status", status),
            ("PATCH", f"{aps}/{foreign}", {"metadata": {"labels": ours}}),
            ("DELETE", f"{aps}/{foreign}", None),
            ("GET", f"{aps}/{foreign}", None),
        ):
            with pytest.raises(Forbidden):
                hub_as_agent.request(method, path, body=body, content_type=MERGE)
    finally:
        env.hub.delete(CLUSTER_V1A1, "AddOnPlacementScore", foreign, cluster)
    with pytest.raises(Forbidden):
        hub_as_agent.request("POST", aps.replace(f"/{cluster}/", f"/{other}/"), body=score(other))
    with pytest.raises(Forbidden):
        hub_as_agent.request("GET", "/apis/cluster.open-cluster-management.io/v1/managedclusters")
    with pytest.raises(Forbidden):
        hub_as_agent.request("GET", f"/api/v1/namespaces/{cluster}/secrets")


def test_a_deployment_config_change_reaches_the_work_and_progressing_completes(env: Env) -> None:
    cluster = "cluster2"
    adc: dict[str, Any] = {
        "apiVersion": ADDON_V1A1,
        "kind": "AddOnDeploymentConfig",
        "metadata": {"name": "e2e-tuned", "namespace": cluster},
        "spec": {
            "agentInstallNamespace": "",
            "nodePlacement": {"nodeSelector": {"e2e.dynamic-scoring/pool": "tuned"}},
            "customizedVariables": [{"name": "LogLevel", "value": "debug"}],
        },
    }
    env.hub.apply(adc)
    env.patch_mca_configs(cluster, [adc_ref(cluster, "e2e-tuned")])
    try:
        for log_level in ("debug", "warning"):
            if log_level != "debug":  # the second round: an edit of the same ADC
                adc["spec"]["customizedVariables"] = [{"name": "LogLevel", "value": log_level}]
                env.hub.apply(adc)
            stored = env.hub.get(ADDON_V1A1, "AddOnDeploymentConfig", "e2e-tuned", cluster)
            want_hash = spec_hash(stored)
            key = f"addondeploymentconfigs.addon.open-cluster-management.io/{cluster}/e2e-tuned"

            def rolled_out(want_hash: str = want_hash, log_level: str = log_level, key: str = key) -> bool:
                work = env.work(cluster)
                if work is None:
                    return False
                annotation = json.loads(
                    work["metadata"]["annotations"]["open-cluster-management.io/config-spec-hash"]
                )
                pod_spec = deployment_in(work)["spec"]["template"]["spec"]
                return (
                    annotation == {key: want_hash}
                    and pod_spec.get("nodeSelector") == {"e2e.dynamic-scoring/pool": "tuned"}
                    and f"--log-level={log_level}" in pod_spec["containers"][0]["args"]
                )

            wait_until(rolled_out, timeout=60, what=f"LogLevel={log_level} and the nodeSelector in the work")

            def completed(want_hash: str = want_hash) -> bool:
                mca = env.mca(cluster)
                progressing = conditions(mca).get("Progressing", {})
                refs = (mca or {}).get("status", {}).get("configReferences") or []
                return (
                    progressing.get("reason") == "Completed"
                    and progressing.get("status") == "False"
                    and bool(refs)
                    and (refs[0].get("lastAppliedConfig") or {}).get("specHash") == want_hash
                )

            wait_until(completed, timeout=90, what="OCM's Progressing=False/Completed with the new hash")

        def reconfigured_agent() -> bool:
            return any(
                p["ready"] and "--log-level=warning" in Path(p["log"]).read_text().rsplit("--- ", 1)[-1]
                for p in env.pods(AGENT, RUNNER_CLUSTER[cluster])
            )

        wait_until(reconfigured_agent, timeout=60, what="the agent restarted with the new config, ready")
    finally:
        env.patch_mca_configs(cluster, None)
        env.hub.delete(ADDON_V1A1, "AddOnDeploymentConfig", "e2e-tuned", cluster)
    wait_until(
        lambda: (
            "nodeSelector"
            not in deployment_in(env.work(cluster) or {"spec": {"workload": {"manifests": []}}})["spec"][
                "template"
            ]["spec"]
        ),
        timeout=60,
        what="the default config back in the work",
    )


def test_removing_and_restoring_the_default_config_leaves_no_stale_hash(env: Env) -> None:
    """With the CMA's default config gone, the work loses its config-spec-hash and Progressing settles.

    A merge patch that leaves the annotation out keeps it, and OCM then reports Progressing
    ("mca and work configs mismatch") until the default comes back.  While there is no default,
    cluster2 is disabled and enabled again: a CMA with supportedConfigs and no default is what
    OCM v1.3.0's conversion broke ("desired spec hash is empty"), so enabling must still register,
    deploy and turn Available.
    """
    cluster = "cluster2"
    hash_key = "open-cluster-management.io/config-spec-hash"
    cma_path = f"/apis/{ADDON_V1A1}/clustermanagementaddons/{ADDON}"
    cma = env.hub.get(ADDON_V1A1, "ClusterManagementAddOn", ADDON)
    default = cma["spec"]["supportedConfigs"][0]["defaultConfig"]

    def patch_default(value: dict[str, str] | None) -> None:
        op = {"op": "add", "path": "/spec/supportedConfigs/0/defaultConfig", "value": value}
        if value is None:
            op = {"op": "remove", "path": "/spec/supportedConfigs/0/defaultConfig"}
        env.hub.api.request("PATCH", cma_path, body=[op], content_type="application/json-patch+json")

    def settled(with_hash: bool) -> bool:
        mca, work = env.mca(cluster), env.work(cluster)
        annotations = ((work or {}).get("metadata") or {}).get("annotations") or {}
        refs = ((mca or {}).get("status") or {}).get("configReferences") or []
        progressing = conditions(mca).get("Progressing", {})
        return (
            work is not None
            and (hash_key in annotations) == with_hash
            and bool(refs) == with_hash
            and progressing.get("status") == "False"
        )

    patch_default(None)
    try:
        wait_until(
            partial(settled, False), timeout=90, what="no config references, no hash, Progressing=False"
        )
        env.clusteradm("addon", "disable", "--names", ADDON, "--clusters", cluster)
        wait_until(
            lambda: env.mca(cluster) is None and env.work(cluster) is None and not env.pods(AGENT, cluster),
            timeout=90,
            what=f"{cluster}'s MCA, work and agent gone",
        )
        env.clusteradm("addon", "enable", "--names", ADDON, "--clusters", cluster)
        wait_until(
            lambda: (
                settled(False)
                and all(
                    status_of(env.mca(cluster), c) == "True"
                    for c in ("RegistrationApplied", "ManifestApplied", "Available")
                )
            ),
            timeout=150,  # the klusterlet looks at addon Leases every 30 s
            what=f"{cluster} enabled again without a default config: registered, applied, Available",
        )
    finally:
        patch_default(default)
    wait_until(partial(settled, True), timeout=90, what="the default's hash back and Progressing=False")


def test_a_missing_or_invalid_deployment_config_is_reported_and_the_last_good_work_stays(env: Env) -> None:
    cluster = "cluster2"
    before = env.work(cluster)
    assert before is not None
    generation = before["metadata"]["generation"]
    invalid = {
        "apiVersion": ADDON_V1A1,
        "kind": "AddOnDeploymentConfig",
        "metadata": {"name": "e2e-invalid", "namespace": cluster},
        "spec": {"agentInstallNamespace": "", "customizedVariables": [{"name": "LogLevel", "value": "loud"}]},
    }
    env.hub.apply(invalid)
    try:
        for name, reason, text in (
            ("e2e-absent", "AddOnDeploymentConfigNotFound", "not found"),
            ("e2e-invalid", "InvalidAddOnDeploymentConfig", "LogLevel"),
        ):
            env.patch_mca_configs(cluster, [adc_ref(cluster, name)])

            def reported(name: str = name, reason: str = reason, text: str = text) -> bool:
                applied = conditions(env.mca(cluster)).get("ManifestApplied", {})
                return (
                    applied.get("status") == "False"
                    and applied.get("reason") == "ManifestWorkApplyFailed"
                    and name in applied.get("message", "")
                    and text in applied.get("message", "")
                    and any(
                        e["involvedObject"].get("name") == ADDON and name in e["message"]
                        for e in env.events(cluster, reason)
                    )
                )

            wait_until(reported, timeout=60, what=f"ManifestApplied=False and a {reason} Event")
            work = env.work(cluster)
            assert work is not None and work["metadata"]["generation"] == generation, (
                "the last good work changed"
            )
            assert status_of(env.mca("cluster1"), "ManifestApplied") == "True"
    finally:
        env.patch_mca_configs(cluster, None)
        env.hub.delete(ADDON_V1A1, "AddOnDeploymentConfig", "e2e-invalid", cluster)
    wait_until(
        lambda: status_of(env.mca(cluster), "ManifestApplied") == "True",
        timeout=60,
        what="ManifestApplied=True again with the default config",
    )


def test_a_manager_image_without_the_agent_templates_reports_it_on_the_addon(
    env: Env, tmp_path: Path
) -> None:
    """A broken image is seen where a broken addon is looked at, and the checkout never heals it.

    The image is the one `make image` built, minus the wheel's dynamic_scoring/addon/templates: in
    process mode the manager would have found the checkout's templates/ and rendered as if nothing
    were wrong.
    """
    # unique to this run: a second run on this host (the compat run beside the first) has its own
    broken = f"localhost/dynamic-scoring:e2e-no-templates-{uuid.uuid4().hex[:8]}"
    (tmp_path / "Containerfile").write_text(
        f"FROM {default_tag()}\nUSER 0\n"
        "RUN rm -r /opt/venv/lib/python3.11/site-packages/dynamic_scoring/addon/templates\nUSER 65532:65532\n"
    )
    podman("build", *ulimits(), "--quiet", "--tag", broken, str(tmp_path))
    # The state this test is about, shaped here and not left to the steps before it (run alone, the
    # module's fixture has only just enabled the addon): a good work delivered and an agent running
    # on both clusters.
    wait_until(
        lambda: all(
            status_of(env.mca(c), "ManifestApplied") == "True" and env.work(c) and env.agent_pod(c)
            for c in CLUSTERS
        ),
        timeout=120,
        what="a delivered work and a running agent on both clusters",
    )
    works = {c: (env.work(c) or {}).get("metadata", {}).get("generation") for c in CLUSTERS}
    manager = env.hub.get("apps/v1", "Deployment", MANAGER, MANAGER_NS)
    image = manager["spec"]["template"]["spec"]["containers"][0]["image"]

    def set_image(ref: str) -> None:
        env.hub.api.request(
            "PATCH",
            f"/apis/apps/v1/namespaces/{MANAGER_NS}/deployments/{MANAGER}",
            body=[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": ref}],
            content_type="application/json-patch+json",
        )

    set_image(broken)
    try:

        def reported(cluster: str) -> bool:
            applied = conditions(env.mca(cluster)).get("ManifestApplied", {})
            return (
                applied.get("status") == "False"
                and "is not installed in" in applied.get("message", "")
                and "make image" in applied.get("message", "")
                and any(
                    e["involvedObject"].get("name") == ADDON
                    for e in env.events(cluster, "AgentTemplatesUnavailable")
                )
            )

        wait_until(
            lambda: all(reported(c) for c in CLUSTERS), timeout=120, what="ManifestApplied=False on both"
        )

        def on_broken_image() -> bool:
            rows = [r for r in env.pods(MANAGER, "hub") if r["pid"]]
            return bool(rows) and all(
                podman("inspect", "--format", "{{.ImageName}}", r["container"]).strip() == broken
                for r in rows
            )

        # the runner rolls the replicas over on its own passes: the one that reported may be the first
        wait_until(
            on_broken_image, timeout=60, interval=1, what="every running manager replica on the broken image"
        )
        for c in CLUSTERS:  # the last good work stays, so the agents keep running
            assert (env.work(c) or {}).get("metadata", {}).get("generation") == works[c]
            assert env.agent_pod(c) is not None
    finally:
        set_image(image)
    wait_until(
        lambda: all(status_of(env.mca(c), "ManifestApplied") == "True" for c in CLUSTERS),
        timeout=120,
        what="ManifestApplied=True again on the complete image",
    )
    wait_until(
        lambda: (
            not any(
                r["pid"] and r["container"] and broken in r.get("image", "") for r in env.pods(MANAGER, "hub")
            )
        ),
        timeout=60,
        what="no manager replica on the broken image",
    )
    podman("rmi", broken, check=False)


def test_an_addon_for_a_cluster_that_does_not_exist_is_reported_and_not_deployed(env: Env) -> None:
    ghost = f"e2e-ghost-{uuid.uuid4().hex[:6]}"
    env.hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ghost}})
    env.hub.apply(
        {
            "apiVersion": ADDON_V1A1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": ADDON, "namespace": ghost},
            "spec": {"installNamespace": INSTALL_NS},
        }
    )
    try:
        wait_until(
            lambda: any(ghost in e["message"] for e in env.events(ghost, "ManagedClusterNotFound")),
            timeout=30,
            what="a ManagedClusterNotFound Event on the ghost cluster's MCA",
        )
        assert env.hub.items(WORK_V1, "ManifestWork", ghost) == []
        assert env.hub.find("rbac.authorization.k8s.io/v1", "Role", HUB_RBAC, ghost) is None
        assert all(status_of(env.mca(c), "ManifestApplied") == "True" for c in CLUSTERS)
    finally:
        env.hub.delete("v1", "Namespace", ghost)


def _agent_csr(cluster: str, organizations: list[str], request: bytes | None = None) -> dict[str, Any]:
    """An agent CSR for `cluster` with the agent's CN and the given Organizations (or this PEM text)."""
    if request is None:
        request = pem_block(agent_request(default_user(cluster), organizations))
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {
            "name": f"addon-{cluster}-{ADDON}-e2e-{uuid.uuid4().hex[:6]}",
            "labels": {
                "open-cluster-management.io/addon-name": ADDON,
                "open-cluster-management.io/cluster-name": cluster,
            },
        },
        "spec": {
            "request": base64.b64encode(request).decode(),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["digital signature", "key encipherment", "client auth"],
        },
    }


def _bad_csr(cluster: str) -> dict[str, Any]:
    """An agent CSR for `cluster` whose subject lacks the cluster-wide addon group."""
    return _agent_csr(cluster, default_groups(cluster)[:1])


def test_a_csr_that_must_not_be_approved_stays_pending_with_an_event(env: Env) -> None:
    csr = _bad_csr("cluster2")
    name = csr["metadata"]["name"]
    env.hub.apply(csr)
    try:
        event = wait_until(
            lambda: [e for e in env.events("cluster2", "CSRNotApproved") if name in e["message"]],
            timeout=30,
            what="a CSRNotApproved Event naming the CSR",
        )[0]
        assert "organizations" in event["message"]
        assert "Approved" not in conditions(
            env.hub.get("certificates.k8s.io/v1", "CertificateSigningRequest", name)
        )
    finally:
        env.hub.delete("certificates.k8s.io/v1", "CertificateSigningRequest", name)


# A third Organization is a third group of the issued certificate; each of these was approved and
# issued before the approver required the exact set.
FORGED_EXTRA_ORGANIZATIONS = (
    "system:open-cluster-management:cluster2",  # cluster2's klusterlet: its ManifestWorks
    "system:cluster-admins",  # cluster-admin on OpenShift-based hubs
    "system:open-cluster-management:cluster:cluster2:addon:dynamic-scoring",  # cluster2's agent
)
# (`system:masters` is refused by the kube-apiserver itself for this signer, before any approver.)


def _hub_signed_agent_certificate(env: Env, cluster: str) -> x509.Certificate | None:
    secret = env.spokes[cluster].find("v1", "Secret", f"{ADDON}-hub-kubeconfig", INSTALL_NS)
    if not secret or "tls.crt" not in (secret.get("data") or {}):
        return None
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    return cert if cert.issuer != cert.subject else None


def test_forged_csrs_from_a_klusterlet_stay_unapproved_and_the_agent_still_rotates(env: Env) -> None:
    """cluster1's klusterlet identity, which any admin of cluster1 can read, asks for more than its agent.

    Each forged CSR has the agent's CN and the right label, requester and usages; only the
    Organizations differ.  None may be approved.  With those CSRs still pending, the klusterlet's
    own rotation of the agent certificate must still go through.
    """
    cluster = "cluster1"
    own = default_groups(cluster)
    klusterlet = KubeAPI(env.cp.run_dir / f"klusterlet-{cluster}" / "hub-kubeconfig" / "kubeconfig")
    forged = [_agent_csr(cluster, [*own, extra]) for extra in FORGED_EXTRA_ORGANIZATIONS]
    forged.append(_agent_csr(cluster, [own[0], default_groups("cluster2")[0]]))  # one group swapped
    names = [c["metadata"]["name"] for c in forged]
    csr_path = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
    try:
        for csr in forged:
            created = klusterlet.request("POST", csr_path, body=csr)
            assert created["spec"]["username"].startswith(f"system:open-cluster-management:{cluster}:")

        def refused() -> bool:
            messages = [e["message"] for e in env.events(cluster, "CSRNotApproved")]
            return all(any(n in m and "not a group of this agent" in m for m in messages) for n in names)

        wait_until(refused, timeout=30, what="a CSRNotApproved Event naming each forged CSR")
        for name in names:
            csr = env.hub.get("certificates.k8s.io/v1", "CertificateSigningRequest", name)
            assert "Approved" not in conditions(csr), name
            assert not (csr.get("status") or {}).get("certificate"), name

        # Rotation, as the klusterlet does it at 75-80 % of a certificate's life: put a certificate with
        # the agent's subject and 5 % of its life left in the Secret; the klusterlet must ask for a new
        # one, and we must approve it while the forged CSRs are still there.
        issued = _hub_signed_agent_certificate(env, cluster)
        assert issued is not None
        secret = env.spokes[cluster].get("v1", "Secret", f"{ADDON}-hub-kubeconfig", INSTALL_NS)
        key = serialization.load_pem_private_key(base64.b64decode(secret["data"]["tls.key"]), None)
        now = datetime.datetime.now(datetime.UTC)
        expiring = (
            x509.CertificateBuilder()
            .subject_name(issued.subject)
            .issuer_name(issued.subject)
            .public_key(key.public_key())  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1, minutes=54))
            .not_valid_after(now + datetime.timedelta(minutes=6))
            .sign(key, hashes.SHA256())  # type: ignore[arg-type]
        )
        secret["data"]["tls.crt"] = base64.b64encode(
            expiring.public_bytes(serialization.Encoding.PEM)
        ).decode()
        env.spokes[cluster].api.request(
            "PUT",
            f"/api/v1/namespaces/{INSTALL_NS}/secrets/{ADDON}-hub-kubeconfig",
            body=secret,
        )

        def renewed() -> x509.Certificate | None:
            cert = _hub_signed_agent_certificate(env, cluster)
            return cert if cert is not None and cert.serial_number != issued.serial_number else None

        rotated = wait_until(
            renewed,
            timeout=90,
            what=f"a new hub-signed agent certificate for {cluster} after the old one neared expiry",
        )
        assert rotated.subject == issued.subject
        organizations = [
            str(o.value) for o in rotated.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        ]
        assert sorted(organizations) == sorted(own)
        for name in names:  # still not approved, after the manager approved the real one
            assert "Approved" not in conditions(
                env.hub.get("certificates.k8s.io/v1", "CertificateSigningRequest", name)
            )
    finally:
        for name in names:
            env.hub.delete("certificates.k8s.io/v1", "CertificateSigningRequest", name)


def test_a_request_kubernetes_reads_as_another_subject_gets_no_certificate(env: Env) -> None:
    """One `spec.request`, two readings: an honest block the approver could take, a forged one Go takes.

    Go's PEM decoder skips a block it finds malformed (an END line with trailing bytes, or no
    newline before END) and reads the next.  Each text below holds cluster1's honest agent request
    followed by one that adds cluster2's klusterlet group; the kube-apiserver accepts it, reading the
    forged block.  Submitted with cluster1's real klusterlet identity, none may be approved, and no
    certificate the signer issues for cluster1's CSRs may carry a group beyond the agent's.
    """
    cluster = "cluster1"
    own, stolen = default_groups(cluster), "system:open-cluster-management:cluster2"
    cluster_label = "open-cluster-management.io/cluster-name"
    key = ec.generate_private_key(ec.SECP256R1())
    honest = pem_block(agent_request(default_user(cluster), own, key))
    forged = pem_block(agent_request(default_user(cluster), [*own, stolen], key))
    klusterlet = KubeAPI(env.cp.run_dir / f"klusterlet-{cluster}" / "hub-kubeconfig" / "kubeconfig")
    csrs = [_agent_csr(cluster, own, shape(honest, forged)) for shape in FORGING_SHAPES.values()]
    names = [c["metadata"]["name"] for c in csrs]
    try:
        for csr in csrs:
            klusterlet.request("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", body=csr)

        def refused() -> bool:
            messages = [e["message"] for e in env.events(cluster, "CSRNotApproved")]
            return all(any(n in m and NOT_CANONICAL in m for m in messages) for n in names)

        wait_until(refused, timeout=30, what="a CSRNotApproved Event naming each two-block CSR")
        for name in names:
            csr = env.hub.get("certificates.k8s.io/v1", "CertificateSigningRequest", name)
            assert "Approved" not in conditions(csr), name
            assert not (csr.get("status") or {}).get("certificate"), name
        for csr in env.hub.items("certificates.k8s.io/v1", "CertificateSigningRequest"):
            if (csr["metadata"].get("labels") or {}).get(cluster_label) != cluster:
                continue
            issued = (csr.get("status") or {}).get("certificate")
            if issued:
                cert = x509.load_pem_x509_certificate(base64.b64decode(issued))
                groups = [
                    str(o.value) for o in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
                ]
                assert stolen not in groups, (csr["metadata"]["name"], groups)
    finally:
        for name in names:
            env.hub.delete("certificates.k8s.io/v1", "CertificateSigningRequest", name)


def test_killing_the_leader_hands_over_to_the_standby(env: Env) -> None:
    """A SIGKILLed leader's standby takes the Lease once it has expired, and leads.

    Timing from the product's own Lease writes, not this test's clock: the standby must not take
    the Lease before ``leaseDurationSeconds`` (15 s) after the old leader's last renewal (it counts
    from when it saw that renewal, which is later still), so its ``acquireTime`` minus the last
    ``renewTime`` read before the kill is at least that; a standby that ignored the lease would take
    it within its 2 s retry period.  The handover is due after at most lease + retry period (17 s
    plus jitter); the 60 s wait is a liveness deadline with 40 s of margin for a loaded machine,
    not the claim.
    """
    old = env.leader()
    pod = env.manager_pod(old)
    assert pod is not None and pod["pid"], f"no running replica for leader {old!r}"
    before = env.hub.get("coordination.k8s.io/v1", "Lease", MANAGER, MANAGER_NS)["spec"]
    assert before["holderIdentity"] == old
    renewed = parse_time(before["renewTime"])
    duration = int(before["leaseDurationSeconds"])
    assert renewed is not None
    if pod.get("container"):
        # the container's process: killing podman's group leaves it running under conmon until the
        # runner's restart replaces it with a SIGTERM, a graceful release and not a crash
        podman("kill", "--signal", "KILL", pod["container"])
    else:
        os.killpg(pod["pid"], signal.SIGKILL)
    new = wait_until(
        lambda: (lambda h: h if h and h != old else None)(env.leader()),
        timeout=60,
        what="the standby to take the Lease",
    )
    after = env.hub.get("coordination.k8s.io/v1", "Lease", MANAGER, MANAGER_NS)["spec"]
    acquired = parse_time(after["acquireTime"])
    assert acquired is not None
    took = (acquired - renewed).total_seconds()
    assert took >= duration, f"{new} took the Lease {took:.1f}s after {old}'s last renewal, before it expired"
    assert int(after["leaseTransitions"]) > int(before.get("leaseTransitions") or 0)
    assert env.manager_pod(new) is not None, "the new leader is not one of the manager replicas"
    # the new leader reconciles: a deleted hub RoleBinding is recreated
    env.hub.delete("rbac.authorization.k8s.io/v1", "RoleBinding", HUB_RBAC, "cluster1")
    wait_until(
        lambda: env.hub.find("rbac.authorization.k8s.io/v1", "RoleBinding", HUB_RBAC, "cluster1"),
        timeout=30,
        what="the hub RoleBinding recreated by the new leader",
    )
    print(f"leader handover: the Lease taken {took:.1f}s after the last renewal")


def _logged_at(log: Path, text: str) -> datetime.datetime | None:
    """When the manager first logged a message containing ``text`` (its JSON lines' own ``time``)."""
    for line in log.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and text in str(record.get("message", "")):
            return parse_time(record.get("time"))
    return None


def test_the_manager_survives_a_hub_apiserver_restart(env: Env) -> None:
    # The state this test is about, shaped here and not left to the steps before it (run alone, the
    # module's fixture has only just enabled the addon): a delivered work on both clusters and the
    # agent's hub Role that the end of the test edits.
    wait_until(
        lambda: (
            all(status_of(env.mca(c), "ManifestApplied") == "True" and env.work(c) for c in CLUSTERS)
            and env.hub.find("rbac.authorization.k8s.io/v1", "Role", HUB_RBAC, "cluster1")
        ),
        timeout=120,
        what="a delivered work on both clusters and the agent's hub Role in cluster1",
    )
    leader = wait_until(lambda: env.leader() or None, timeout=30, what="a leader")
    pod = env.manager_pod(leader)
    assert pod is not None
    restarts = pod["restarts"]
    generations = {c: (env.work(c) or {}).get("metadata", {}).get("generation") for c in CLUSTERS}
    errors_before = sample_sum(metrics_of(pod), "dynamic_scoring_watch_errors_total")

    # the leader's last renewal before the outage, on its own clock (Lease times are its writes)
    lease = env.hub.get("coordination.k8s.io/v1", "Lease", MANAGER, MANAGER_NS)
    renewed_before = parse_time(lease["spec"]["renewTime"])
    assert renewed_before is not None and lease["spec"]["holderIdentity"] == leader

    # SIGKILL: connections are reset mid-watch.  The harness usually has the apiserver back within
    # the leader's 10 s renew deadline (SIGTERM would drain for longer than that).
    down_at = time.monotonic()
    env.cp.stop_component("hub-apiserver", kill=True)
    time.sleep(2)  # the outage itself: the manager must ride it out, not be told it ended
    env.cp.start_component("hub-apiserver")
    outage = time.monotonic() - down_at
    print(f"hub apiserver outage {outage:.1f}s")

    # Which way it went is judged on what the leader did, not on a snapshot taken right after the
    # restart: a leader seen holding the Lease then may still give it up seconds later (its renew
    # deadline runs from its last renewal before the kill), and its metrics port goes with it.
    def outcome() -> str | None:
        if _logged_at(Path(pod["log"]), "lost lease") is not None:
            return "gave up"
        # raises while its process is gone (the log says why on the next poll)
        counted = sample_sum(metrics_of(pod), "dynamic_scoring_watch_errors_total") > errors_before
        return "kept" if counted else None

    verdict = wait_until(
        outcome, timeout=45, what="the leader counting its broken watches, or giving up its Lease"
    )
    if verdict == "kept":
        # the leader kept its process (and so the Lease it held) and counted the broken watches; it
        # may still give up once its deadline passes, which the check below then judges
        after = env.manager_pod(leader)
        same = after is not None and after["pid"] == pod["pid"] and after["restarts"] == restarts
        assert same or _logged_at(Path(pod["log"]), "lost lease") is not None, after
    else:
        wait_until(lambda: env.leader() or None, timeout=60, what="a leader again")
    # the informer logs the broken watch itself, not necessarily before what was waited on above
    wait_until(
        lambda: (
            '"logger": "dynamic_scoring.kube.informer"' in (text := Path(pod["log"]).read_text())
            and '"level": "warning"' in text
        ),
        timeout=30,
        what=f"a warning of dynamic_scoring.kube.informer in {pod['log']}",
    )
    # watches resumed: an edit of the agent's hub Role is reverted
    role_path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/cluster1/roles/{HUB_RBAC}"
    env.hub.api.request(
        "PATCH",
        role_path,
        body={"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]},
        content_type="application/merge-patch+json",
    )
    wait_until(
        lambda: all("secrets" not in r["resources"] for r in env.hub.api.request("GET", role_path)["rules"]),
        timeout=30,
        what="the edited hub Role reverted",
    )
    # A leader may give up only when it really could not renew for its 10 s deadline: then it exits
    # 1 (the runner restarts it) and a replica takes the Lease again.  "Really" is judged on the
    # product's own clock, not on this test's (a loaded machine stretches the outage the test sees,
    # and the apiserver's way back): the time it logged giving up, minus the renewTime it wrote last
    # before the outage.  A later renewal only moves the deadline later.  The slack: renewTime is
    # stamped after the renewal's GET, while the deadline counts from the GET's start; 2 s covers that
    # GET on a loaded machine, and a leader that gave up at the first failed renewal (2-4 s after the
    # kill) still fails.  Checked whichever way the verdict went: a leader may give up after counting.
    lost = _logged_at(Path(pod["log"]), "lost lease")
    if lost is not None:
        held = (lost - renewed_before).total_seconds()
        assert held > 10 - 2, f"the leader gave up {held:.1f}s after its last renewal (outage {outage:.1f}s)"
    # nothing duplicated, nothing rewritten
    for cluster in CLUSTERS:
        assert [w["metadata"]["name"] for w in env.hub.items(WORK_V1, "ManifestWork", cluster)] == [WORK]
        assert status_of(env.mca(cluster), "ManifestApplied") == "True"
    assert generations == {c: (env.work(c) or {}).get("metadata", {}).get("generation") for c in CLUSTERS}


def test_disable_on_cluster2_removes_its_agent_and_leaves_cluster1_and_user_objects(env: Env) -> None:
    cluster1_work = env.work("cluster1")
    cluster1_agent = env.agent_pod("cluster1")
    assert cluster1_work is not None and cluster1_agent is not None
    out = env.clusteradm("addon", "disable", "--names", ADDON, "--clusters", "cluster2")
    assert "Undeploying dynamic-scoring add-on in managed cluster: cluster2" in out, out
    spoke = env.spokes["cluster2"]
    wait_until(
        lambda: (
            env.mca("cluster2") is None
            and env.work("cluster2") is None
            and env.hub.find("rbac.authorization.k8s.io/v1", "Role", HUB_RBAC, "cluster2") is None
            and env.hub.find("rbac.authorization.k8s.io/v1", "RoleBinding", HUB_RBAC, "cluster2") is None
            and spoke.find("apps/v1", "Deployment", AGENT, INSTALL_NS) is None
            and not env.pods(AGENT, "cluster2")
        ),
        timeout=90,
        what="cluster2's MCA, work, hub RBAC, agent Deployment and agent process gone",
    )
    # the namespace existed before the addon and holds a user's object: both stay (a namespace being
    # deleted is still found until its content is gone, so "not Terminating" is what proves it stays)
    namespace = spoke.find("v1", "Namespace", INSTALL_NS)
    assert namespace is not None and "deletionTimestamp" not in namespace["metadata"], namespace
    assert spoke.get("v1", "ConfigMap", USER_CONFIGMAP, INSTALL_NS)["data"] == {
        "owner": "a user, not the addon"
    }
    # cluster1 untouched
    assert status_of(env.mca("cluster1"), "ManifestApplied") == "True"
    after = env.work("cluster1")
    assert after is not None and after["metadata"]["generation"] == cluster1_work["metadata"]["generation"]
    assert (env.agent_pod("cluster1") or {}).get("pid") == cluster1_agent["pid"]
