"""System install namespaces are refused: no agent work goes there, and the MCA says why.

The lifecycle controllers run in-process against the real hub apiserver with OCM's addon-manager
beside them (the fixtures of test_addon_controllers.py).  A ManagedClusterAddOn asking for
`kube-system` gets `ManifestApplied=False` naming the field and the namespace, one Warning Event,
and no deploy work; an MCA already deployed keeps its last good work when moved to a system
namespace, and a move to a namespace of the user's own is deployed as usual.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamic_scoring.kube.api import KubeAPI
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.procs import wait_until
from tests.integration.test_addon_controllers import (
    ADDON,
    ADDON_V1A1,
    WORK,
    WORK_V1,
    Running,
    conditions,
    hub_install,
)

DEFAULT_NS = "open-cluster-management-agent-addon"


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Client:
    assert control_plane.hub is not None
    client = Client(control_plane.hub.admin_kubeconfig, timeout=10)
    hub_install(client)
    return client


@pytest.fixture(scope="module")
def manager(control_plane: ControlPlane, hub: Client) -> Iterator[Running]:
    assert control_plane.hub is not None
    running = Running(KubeAPI(control_plane.hub.admin_kubeconfig), CollectorRegistry(), resync=2.0)
    running.start()
    yield running
    running.close()


@pytest.fixture
def cluster(hub: Client) -> Iterator[str]:
    """A ManagedCluster with its namespace; each test enables the addon as it needs."""
    name = f"ns-{uuid.uuid4().hex[:6]}"
    hub.apply(
        {
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {"name": name},
            "spec": {"hubAcceptsClient": True},
        }
    )
    hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    hub.delete(ADDON_V1A1, "ManagedClusterAddOn", ADDON, name)
    hub.delete("cluster.open-cluster-management.io/v1", "ManagedCluster", name)


def enable(hub: Client, cluster: str, namespace: str) -> None:
    """The ManagedClusterAddOn that `clusteradm addon enable --namespace <namespace>` creates."""
    hub.apply(
        {
            "apiVersion": ADDON_V1A1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": ADDON, "namespace": cluster},
            "spec": {"installNamespace": namespace},
        }
    )


def set_install_namespace(hub: Client, cluster: str, namespace: str) -> None:
    path = hub.resource(ADDON_V1A1, "ManagedClusterAddOn").path(cluster, ADDON)
    hub.api.request(
        "PATCH",
        path,
        body={"spec": {"installNamespace": namespace}},
        content_type="application/merge-patch+json",
    )


def mca(hub: Client, cluster: str) -> dict[str, Any]:
    return hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)


def work_namespaces(hub: Client, cluster: str) -> set[str] | None:
    """The namespaces of the deploy work's namespaced manifests; None when there is no work."""
    work = hub.find(WORK_V1, "ManifestWork", WORK, cluster)
    if work is None:
        return None
    manifests = work["spec"]["workload"]["manifests"]
    return {m["metadata"]["namespace"] for m in manifests if m["metadata"].get("namespace")}


def refused(hub: Client, cluster: str, namespace: str) -> dict[str, Any] | None:
    applied = conditions(mca(hub, cluster)).get("ManifestApplied")
    if applied and applied["status"] == "False" and repr(namespace) in applied["message"]:
        return applied
    return None


def warnings(hub: Client, cluster: str) -> list[dict[str, Any]]:
    return [
        e
        for e in hub.items("v1", "Event", cluster)
        if e["involvedObject"].get("kind") == "ManagedClusterAddOn" and e["type"] == "Warning"
    ]


def test_a_new_mca_asking_for_kube_system_gets_a_condition_and_no_work(
    hub: Client, manager: Running, cluster: str
) -> None:
    enable(hub, cluster, "kube-system")
    applied = wait_until(
        lambda: refused(hub, cluster, "kube-system"), timeout=60, what="ManifestApplied=False for kube-system"
    )
    assert applied["reason"] == "ManifestWorkApplyFailed"
    assert "ManagedClusterAddOn spec.installNamespace" in applied["message"]
    assert DEFAULT_NS in applied["message"]  # what to do instead
    assert hub.find(WORK_V1, "ManifestWork", WORK, cluster) is None
    # status.namespace (where the klusterlet writes the agent's hub kubeconfig) is not kube-system
    assert mca(hub, cluster)["status"].get("namespace") != "kube-system"
    event = wait_until(
        lambda: [e for e in warnings(hub, cluster) if e["reason"] == "InstallNamespaceNotAllowed"],
        timeout=20,
        what="the Warning Event",
    )[0]
    assert "kube-system" in event["message"]
    # and a namespace of the user's own is deployed as usual
    set_install_namespace(hub, cluster, "team-scoring")
    wait_until(
        lambda: work_namespaces(hub, cluster) == {"team-scoring"}, timeout=60, what="work in team-scoring"
    )
    wait_until(
        lambda: "ManifestApplied" not in conditions(mca(hub, cluster)), timeout=30, what="condition cleared"
    )


@pytest.mark.parametrize("namespace", ["open-cluster-management-agent", "openshift-monitoring", "default"])
def test_a_deployed_mca_moved_to_a_system_namespace_keeps_its_last_good_work(
    hub: Client, manager: Running, cluster: str, namespace: str
) -> None:
    enable(hub, cluster, DEFAULT_NS)
    wait_until(lambda: work_namespaces(hub, cluster) == {DEFAULT_NS}, timeout=60, what="deployed")
    before = hub.get(WORK_V1, "ManifestWork", WORK, cluster)
    set_install_namespace(hub, cluster, namespace)
    wait_until(lambda: refused(hub, cluster, namespace), timeout=60, what=f"{namespace} refused")
    after = hub.get(WORK_V1, "ManifestWork", WORK, cluster)
    assert after["spec"] == before["spec"]
    assert work_namespaces(hub, cluster) == {DEFAULT_NS}
