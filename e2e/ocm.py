"""OCM on the local clusters: CRDs, hub controllers, klusterlet agents, and joining with clusteradm.

This follows what OCM's cluster-manager and klusterlet operators would set up, minus the
operators themselves (they create Deployments, which never run without a kubelet): the same
binaries run as processes with the flags the operators' Deployments use.  Clusters join the
real way: the registration agent creates a CSR with a bootstrap identity and `clusteradm accept`
approves it; kube-controller-manager signs it.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.kube import Client, KubeCluster
from e2e.pki import write_kubeconfig
from e2e.procs import Proc, free_port, wait_until
from e2e.tools import Tools

HUB_NAMESPACE = "open-cluster-management-hub"
AGENT_NAMESPACE = "open-cluster-management-agent"
ADDON_NAMESPACE = "open-cluster-management-agent-addon"
BOOTSTRAP_USER = "system:bootstrap:e2e001"
BOOTSTRAP_GROUP = "system:bootstrappers:managedcluster"
CLUSTERSET_LABEL = "cluster.open-cluster-management.io/clusterset"

# What the cluster-manager chart grants the bootstrap identity: enough to create its CSR and its
# ManagedCluster, nothing more.
BOOTSTRAP_RBAC = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: open-cluster-management:bootstrap
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests]
  verbs: [create, get, list, watch]
- apiGroups: [cluster.open-cluster-management.io]
  resources: [managedclusters]
  verbs: [get, create, list, watch]
- apiGroups: [cluster.open-cluster-management.io]
  resources: [managedclustersets/join]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: open-cluster-management:bootstrap
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: open-cluster-management:bootstrap
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: {BOOTSTRAP_GROUP}
"""


CRD_API = "apiextensions.k8s.io/v1"


def apply_namespaces(client: Client, *names: str) -> None:
    """Create (or keep) namespaces."""
    for n in names:
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})


def install_crds(
    client: Client,
    files: tuple[Path, ...],
    render: Callable[[str], str] | None = None,
    timeout: float = 120,
) -> None:
    """Apply CRD files (each through `render` if given) and wait until each is Established."""
    names = [
        crd["metadata"]["name"]
        for f in files
        for crd in client.apply_yaml(render(f.read_text()) if render else f.read_text())
    ]

    def established() -> bool:
        for name in names:
            crd = client.get(CRD_API, "CustomResourceDefinition", name)
            conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
            if conds.get("Established") != "True":
                return False
        return True

    wait_until(established, timeout=timeout, what=f"CRDs established: {', '.join(names)}")


def _controller(
    tools_bin: Path, sub: list[str], name: str, kubeconfig: Path, namespace: str, logs: Path
) -> Proc:
    return Proc(
        name,
        [
            str(tools_bin),
            *sub,
            f"--kubeconfig={kubeconfig}",
            f"--namespace={namespace}",
            "--disable-leader-election",
            f"--listen=127.0.0.1:{free_port()}",
        ],
        logs / f"{name}.log",
    )


def install_hub(tools: Tools, hub: KubeCluster, render: Callable[[str], str] | None = None) -> None:
    """Install the hub CRDs (templates go through `render`), the hub namespace and the bootstrap RBAC."""
    client = Client(hub.admin_kubeconfig)
    install_crds(client, tools.hub_crds, render)
    apply_namespaces(client, HUB_NAMESPACE)
    client.apply_yaml(BOOTSTRAP_RBAC)


def start_hub_controllers(tools: Tools, hub: KubeCluster) -> list[Proc]:
    """Start the registration, placement, addon-manager and work controllers (after `install_hub`).

    The work controller is OCM's hub-side `work manager` with the ManifestWorkReplicaSet feature
    gate on, as a hub whose ClusterManager enables that gate runs it: the samples deliver the
    agents' scorer tokens to every selected cluster with a ManifestWorkReplicaSet.
    """
    logs = hub.run_dir / "logs"
    kc = hub.admin_kubeconfig
    mwrs = "--feature-gates=ManifestWorkReplicaSet=true"
    procs = [
        _controller(tools.registration, ["controller"], "hub-registration", kc, HUB_NAMESPACE, logs),
        _controller(tools.placement, ["controller"], "hub-placement", kc, HUB_NAMESPACE, logs),
        _controller(tools.addon, ["manager"], "hub-addon-manager", kc, HUB_NAMESPACE, logs),
        _controller(tools.work, ["manager", mwrs], "hub-work-manager", kc, HUB_NAMESPACE, logs),
    ]
    for p in procs:
        p.start()
    return procs


@dataclass
class Klusterlet:
    """The registration and work agents of one managed cluster."""

    cluster_name: str
    spoke: KubeCluster
    hub: KubeCluster
    tools: Tools
    bootstrap_token: str

    def __post_init__(self) -> None:
        self.dir = self.spoke.run_dir / f"klusterlet-{self.cluster_name}"
        self.hub_kubeconfig_dir = self.dir / "hub-kubeconfig"
        self.registration: Proc | None = None
        self.work: Proc | None = None

    @property
    def hub_kubeconfig(self) -> Path:
        """The kubeconfig the registration agent obtained for this cluster (after acceptance)."""
        return self.hub_kubeconfig_dir / "kubeconfig"

    def prepare_spoke(self) -> None:
        """Install the spoke CRDs and the agent namespaces on the managed cluster."""
        client = Client(self.spoke.admin_kubeconfig)
        install_crds(client, self.tools.spoke_crds)
        apply_namespaces(client, AGENT_NAMESPACE, ADDON_NAMESPACE)

    def start_registration(self) -> Proc:
        """Start the registration agent with the bootstrap identity; it creates CSR and cluster."""
        bootstrap = write_kubeconfig(
            self.dir / "bootstrap.kubeconfig",
            server=self.hub.server,
            ca_pem=self.hub.ca.cert_pem,
            user=BOOTSTRAP_USER,
            token=self.bootstrap_token,
            cluster="hub",
        )
        self.registration = self._agent(
            "registration",
            f"--bootstrap-kubeconfig={bootstrap}",
            "--cluster-healthcheck-period=10s",
            f"--spoke-external-server-urls={self.spoke.server}",
        )
        return self.registration

    def _agent(self, kind: str, *extra: str) -> Proc:
        """Start `registration agent` or `work agent` with the flags both share."""
        binary = self.tools.registration if kind == "registration" else self.tools.work
        name = f"{self.cluster_name}-{kind}-agent"
        return Proc(
            name,
            [
                str(binary),
                "agent",
                f"--kubeconfig={self.spoke.admin_kubeconfig}",
                f"--namespace={AGENT_NAMESPACE}",
                "--disable-leader-election",
                f"--listen=127.0.0.1:{free_port()}",
                f"--spoke-cluster-name={self.cluster_name}",
                f"--agent-id={self.cluster_name}-agent",
                f"--hub-kubeconfig-dir={self.hub_kubeconfig_dir}",
                *extra,
            ],
            self.spoke.run_dir / "logs" / f"{name}.log",
        ).start()

    def start_work(self, timeout: float = 180) -> Proc:
        """Start the work agent once the hub kubeconfig exists (it exits without one)."""
        wait_until(
            lambda: self.hub_kubeconfig.exists() and (self.hub_kubeconfig_dir / "tls.crt").exists(),
            timeout=timeout,
            what=f"{self.cluster_name} hub kubeconfig (is the cluster accepted?)",
            proc=self.registration,
        )
        self.work = self._agent(
            "work",
            "--workload-source-driver=kube",
            f"--workload-source-config={self.hub_kubeconfig}",
            "--status-sync-interval=2s",
        )
        return self.work


@contextmanager
def manual_addon(tools: Tools, hub_kubeconfig: Path, name: str, cluster: str) -> Iterator[str]:
    """A ClusterManagementAddOn with manual install strategy, enabled on `cluster` by clusteradm.

    Yields what `clusteradm addon enable` printed.  On exit the addon is disabled with clusteradm
    and the ClusterManagementAddOn deleted.
    """
    client = Client(hub_kubeconfig)
    cma = {
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ClusterManagementAddOn",
        "metadata": {"name": name},
        "spec": {"addOnMeta": {"displayName": name}, "installStrategy": {"type": "Manual"}},
    }
    client.apply(cma)
    out = clusteradm(tools, hub_kubeconfig, "addon", "enable", "--names", name, "--clusters", cluster)
    try:
        yield out
    finally:
        clusteradm(tools, hub_kubeconfig, "addon", "disable", "--names", name, "--clusters", cluster)
        client.delete("addon.open-cluster-management.io/v1alpha1", "ClusterManagementAddOn", name)


def clusteradm(tools: Tools, hub_kubeconfig: Path, *args: str, timeout: float = 120) -> str:
    """Run clusteradm against the hub; raises with its output on failure."""
    proc = subprocess.run(
        [str(tools.clusteradm), f"--kubeconfig={hub_kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"clusteradm {' '.join(args)} failed: {proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def accept_clusters(
    tools: Tools, hub_kubeconfig: Path, clusters: Sequence[str], *, timeout: float = 60, pause: float = 1.0
) -> str:
    """`clusteradm accept --clusters ...`, tried again until it succeeds or `timeout` passes.

    The caller waits until every cluster's CSR and ManagedCluster exist, which is what accept
    needs; the retry covers what can still race after that (the hub's informer caches inside the
    registration controller, an apiserver answering slowly right after start).  Accepting an
    accepted cluster is a no-op, so trying again is safe.  The last failure is raised with its
    output and the number of attempts.
    """
    deadline = time.monotonic() + timeout
    attempts = 0
    while True:
        attempts += 1
        try:
            return clusteradm(tools, hub_kubeconfig, "accept", "--clusters", ",".join(clusters))
        except RuntimeError as exc:
            if time.monotonic() + pause > deadline:
                raise RuntimeError(f"{exc} (after {attempts} attempts in {timeout:g} s)") from exc
            time.sleep(pause)


ADDON_LABEL = "open-cluster-management.io/addon-name"  # on the CSRs a klusterlet creates for an addon


def forget_issued_addon_csrs(hub: Client) -> list[str]:
    """Delete every addon CSR that was already issued, as kube-controller-manager's cleaner would.

    That cleaner removes an issued CSR only an hour after it was issued, and a klusterlet stops
    asking for an addon certificate once 10 CSRs of one cluster and addon exist ("too many CSRs
    created already on the hub").  A test session enables, disables and rotates the addon more
    often than that within minutes, so the harness forgets issued CSRs between test modules.
    Pending and denied CSRs stay: tests look at those.
    """
    gone = []
    for csr in hub.items("certificates.k8s.io/v1", "CertificateSigningRequest", label_selector=ADDON_LABEL):
        if (csr.get("status") or {}).get("certificate"):
            hub.delete("certificates.k8s.io/v1", "CertificateSigningRequest", csr["metadata"]["name"])
            gone.append(csr["metadata"]["name"])
    return gone


def decided_clusters(hub: Client, namespace: str, placement: str) -> list[str]:
    """The clusters the Placement's PlacementDecisions name now, sorted (every decision page)."""
    pds = hub.items(
        "cluster.open-cluster-management.io/v1beta1",
        "PlacementDecision",
        namespace,
        label_selector=f"cluster.open-cluster-management.io/placement={placement}",
    )
    return sorted(d["clusterName"] for pd in pds for d in (pd.get("status") or {}).get("decisions") or [])


def cluster_set_binding(namespace: str, cluster_set: str = "default") -> dict[str, Any]:
    """The ManagedClusterSetBinding that lets Placements in ``namespace`` see ``cluster_set``."""
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": cluster_set, "namespace": namespace},
        "spec": {"clusterSet": cluster_set},
    }


def label_selected_cluster_set(name: str, label_key: str, value: str = "yes") -> dict[str, Any]:
    """A ManagedClusterSet of the clusters labelled ``label_key=value``.

    A test's own set: a ManagedCluster another test left behind cannot join its Placement's
    candidates, which a global set would let it do.
    """
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSet",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {
                "selectorType": "LabelSelector",
                "labelSelector": {"matchLabels": {label_key: value}},
            }
        },
    }


def set_addon_score(client: Client, cluster: str, name: str, item: str, value: int) -> None:
    """Create (or keep) the AddOnPlacementScore `name` of `cluster` and set its one item, valid 1 h."""
    obj = {
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
        "kind": "AddOnPlacementScore",
        "metadata": {"name": name, "namespace": cluster},
    }
    client.apply(obj)
    until = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    client.patch_status(obj, {"validUntil": until, "scores": [{"name": item, "value": value}]})


@contextmanager
def scheduling_stage(
    client: Client,
    namespace: str,
    cluster_set: str,
    member_label: str,
    clusters: Sequence[str],
    extra_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[None]:
    """ManagedClusters of a test's own, in a set its Placements in `namespace` see; removed after.

    What OCM's placement scheduler reads, shaped directly: the clusters (no klusterlet behind them,
    `hubAcceptsClient: false`; a Placement must tolerate their availability taints), labelled
    `member_label=yes` plus `extra_labels[cluster]`, their namespaces (for AddOnPlacementScores),
    a label-selected ManagedClusterSet and its binding in `namespace`.
    """
    try:
        for cluster in clusters:
            labels = {member_label: "yes", **(extra_labels or {}).get(cluster, {})}
            client.apply(
                {
                    "apiVersion": "cluster.open-cluster-management.io/v1",
                    "kind": "ManagedCluster",
                    "metadata": {"name": cluster, "labels": labels},
                    "spec": {"hubAcceptsClient": False},
                }
            )
        apply_namespaces(client, *clusters, namespace)
        client.apply(label_selected_cluster_set(cluster_set, member_label))
        client.apply(cluster_set_binding(namespace, cluster_set))
        yield
    finally:
        client.delete("v1", "Namespace", namespace)
        client.delete("cluster.open-cluster-management.io/v1beta2", "ManagedClusterSet", cluster_set)
        for cluster in clusters:
            client.delete("v1", "Namespace", cluster)
            client.delete("cluster.open-cluster-management.io/v1", "ManagedCluster", cluster)
