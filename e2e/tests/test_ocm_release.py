"""What differs between the OCM releases the harness runs, checked against the running hub.

On v1.3.1 OCM's webhooks run as the cluster manager wires them; on v1.2.1 there are none.  Each
test states what a user sees on each release (docs/local-control-plane.md has the table), so the
same test passes on both and fails if the harness runs a hub that is not what it claims.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import pytest

from dynamic_scoring.kube.api import KubeError, NotFound
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.ocm import CLUSTERSET_LABEL
from e2e.procs import listening_addresses, wait_until, wait_value

CLUSTER_V1 = "cluster.open-cluster-management.io/v1"
ADDON_GROUP = "addon.open-cluster-management.io"
INSTALL_NS_ANNOTATION = "addon.open-cluster-management.io/v1alpha1-install-namespace"

pytestmark = pytest.mark.ocm_contract


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Client:
    assert control_plane.hub is not None
    return Client(control_plane.hub.admin_kubeconfig, timeout=10)


@pytest.fixture(scope="module")
def webhooks(control_plane: ControlPlane) -> bool:
    assert control_plane.tools is not None
    return control_plane.tools.ocm.webhooks


@pytest.fixture
def probe_cluster(hub: Client) -> Iterator[str]:
    """A ManagedCluster no klusterlet backs, created by the test and deleted with its namespace."""
    name = "e2e-release-probe"
    yield name
    hub.delete(CLUSTER_V1, "ManagedCluster", name)
    wait_until(
        lambda: (
            hub.find(CLUSTER_V1, "ManagedCluster", name) is None and hub.find("v1", "Namespace", name) is None
        ),
        timeout=90,
        what=f"ManagedCluster {name} and its namespace gone",
    )


def test_a_new_cluster_joins_the_default_set_only_through_the_registration_webhook(
    hub: Client, webhooks: bool, probe_cluster: str
) -> None:
    created = hub.apply(
        {
            "apiVersion": CLUSTER_V1,
            "kind": "ManagedCluster",
            "metadata": {"name": probe_cluster},
            "spec": {"hubAcceptsClient": False},
        }
    )
    labels = created["metadata"].get("labels") or {}
    if webhooks:
        assert labels.get(CLUSTERSET_LABEL) == "default", labels
    else:
        assert CLUSTERSET_LABEL not in labels, labels
    # the joined clusters are in `default` on both: by the webhook, or set by the harness as it would
    for joined in ("cluster1", "cluster2"):
        mc = hub.get(CLUSTER_V1, "ManagedCluster", joined)
        assert mc["metadata"]["labels"].get(CLUSTERSET_LABEL) == "default", joined
    # either way the registration controller keeps the `global` set, which selects every cluster
    # (created by OCM's registration controller on its own: waited for, not read once)
    wait_value(
        lambda: hub.find("cluster.open-cluster-management.io/v1beta2", "ManagedClusterSet", "global"),
        lambda found: (
            ((found or {}).get("spec") or {}).get("clusterSelector", {}).get("selectorType")
            == "LabelSelector"
        ),
        timeout=60,
        what="ManagedClusterSet global with a LabelSelector",
    )


def test_the_manifestwork_validator_refuses_an_empty_work_only_with_webhooks(
    hub: Client, webhooks: bool
) -> None:
    work = {
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"name": "e2e-empty-work", "namespace": "cluster2"},
        "spec": {"workload": {"manifests": []}},
    }
    try:
        if webhooks:
            with pytest.raises(KubeError) as refused:
                hub.apply(work)
            assert "manifests should not be empty" in str(refused.value)
        else:
            hub.apply(work)
    finally:
        hub.delete("work.open-cluster-management.io/v1", "ManifestWork", "e2e-empty-work", "cluster2")


def test_every_ocm_process_listens_on_loopback_only(control_plane: ControlPlane, webhooks: bool) -> None:
    """The webhook servers have no bind-address flag; the build makes them bind 127.0.0.1."""
    ocm = [p for p in control_plane.procs if p.name.startswith("hub-") or p.name.endswith("-agent")]
    webhook_procs = [p for p in ocm if p.name.endswith("-webhook")]
    assert len(webhook_procs) == (3 if webhooks else 0), [p.name for p in ocm]
    for proc in ocm:
        assert proc.pid is not None and proc.alive, proc.name
        bound = listening_addresses({proc.pid})
        if proc in webhook_procs:
            assert bound, f"{proc.name} listens nowhere"
        wide = sorted(f"{a}:{port}" for a, port in bound if not ipaddress.ip_address(a).is_loopback)
        assert not wide, f"{proc.name} listens beyond loopback: {wide}"


def _mca_path(version: str, namespace: str, name: str) -> str:
    return f"/apis/{ADDON_GROUP}/{version}/namespaces/{namespace}/managedclusteraddons/{name}"


def test_managedclusteraddon_v1beta1_is_served_through_conversion_only_on_the_webhook_release(
    hub: Client, webhooks: bool
) -> None:
    """A v1alpha1 write read back as v1beta1 (and a v1beta1 status write read as v1alpha1)."""
    name, namespace = "e2e-conversion", "cluster2"
    mca: dict[str, Any] = {
        "apiVersion": f"{ADDON_GROUP}/v1alpha1",
        "kind": "ManagedClusterAddOn",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "installNamespace": "e2e-agent-ns",
            "configs": [
                {
                    "group": ADDON_GROUP,
                    "resource": "addondeploymentconfigs",
                    "name": "e2e-adc",
                    "namespace": namespace,
                }
            ],
        },
    }
    hub.apply(mca)
    try:
        if not webhooks:
            with pytest.raises(NotFound):
                hub.api.request("GET", _mca_path("v1beta1", namespace, name))
            return
        beta = hub.api.request("GET", _mca_path("v1beta1", namespace, name))
        assert beta["apiVersion"] == f"{ADDON_GROUP}/v1beta1"
        # v1beta1 has no spec.installNamespace: the conversion keeps it as an annotation
        assert beta["metadata"]["annotations"][INSTALL_NS_ANNOTATION] == "e2e-agent-ns"
        assert "installNamespace" not in beta["spec"]
        assert beta["spec"]["configs"] == [
            {
                "group": ADDON_GROUP,
                "resource": "addondeploymentconfigs",
                "name": "e2e-adc",
                "namespace": namespace,
            }
        ]
        # a status written as v1beta1 (how OCM's own controllers write) reads back as v1alpha1
        subject = {"user": "e2e-user", "groups": ["e2e-group"]}
        hub.api.request(
            "PATCH",
            _mca_path("v1beta1", namespace, name) + "/status",
            body={
                "status": {
                    "registrations": [
                        {"type": "kubeClient", "kubeClient": {"subject": subject, "driver": "csr"}}
                    ]
                }
            },
            content_type="application/merge-patch+json",
        )
        alpha = hub.api.request("GET", _mca_path("v1alpha1", namespace, name))
        assert alpha["spec"]["installNamespace"] == "e2e-agent-ns"
        assert alpha["status"]["registrations"] == [
            {"signerName": "kubernetes.io/kube-apiserver-client", "subject": subject}
        ]
        assert alpha["status"].get("kubeClientDriver") == "csr"
    finally:
        hub.delete(f"{ADDON_GROUP}/v1alpha1", "ManagedClusterAddOn", name, namespace)
