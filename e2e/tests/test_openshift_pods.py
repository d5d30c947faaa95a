"""On OpenShift the manager and the agent run as the UID the SCC gives them, with GID 0, and work.

No OpenShift runs here, so the runner plays its `restricted-v2` SCC admission for namespaces that
carry OpenShift's `openshift.io/sa.scc.uid-range` annotation (`e2e.containers.admit_restricted_v2`):
a pod naming no user gets the namespace's first UID and fsGroup and runs with GID 0; a pod naming
another UID is not started, with OpenShift's message.  The story: the hub's and cluster2's
namespaces get OpenShift's annotations, cluster2 is labelled `vendor=OpenShift` as Red Hat ACM
labels it, the chart is installed with `manager.platform=openshift`, the addon enabled on cluster2
and the sample scorer registered.  The manager leads, the agent publishes its score, both run
as the SCC's UID from the built image on a read-only root, and a pod that pins the image's user
(what every pod did before `Platform`) is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from dynamic_scoring.addon.constants import AGENT_DEPLOYMENT
from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.image import default_tag, podman
from e2e.kube import Client
from e2e.mission import (
    ADDON,
    INSTALL_NS,
    MANAGER,
    NAMESPACE,
    SAMPLE_CONFIG,
    Mission,
    sample_documents,
)
from e2e.procs import wait_until, wait_value

CLUSTER = "cluster2"
HUB_UID, AGENT_UID = 1000690000, 1000680000
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
MERGE = "application/merge-patch+json"


def scc_annotations(uid: int) -> dict[str, str | None]:
    """What OpenShift's namespace controller writes on every namespace: its UID and group ranges."""
    return {
        "openshift.io/sa.scc.uid-range": f"{uid}/10000",
        "openshift.io/sa.scc.supplemental-groups": f"{uid}/10000",
    }


def annotate(client: Client, namespace: str, annotations: dict[str, str | None]) -> None:
    """Create the namespace if needed, then merge its annotations (None removes one).

    A merge patch, not an apply: the mission applies the same namespaces again with the harness's
    field manager, and an apply would drop annotations that manager set before.
    """
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    client.api.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        body={"metadata": {"annotations": annotations}},
        content_type=MERGE,
    )


def label_vendor(m: Mission, value: str | None) -> None:
    m.hub.api.request(
        "PATCH",
        f"/apis/cluster.open-cluster-management.io/v1/managedclusters/{CLUSTER}",
        body={"metadata": {"labels": {"vendor": value}}},
        content_type=MERGE,
    )


def pods(m: Mission) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((m.cp.run_dir / "runner" / "pods.json").read_text())
    return rows


def running(m: Mission, cluster: str, deployment: str) -> list[dict[str, Any]]:
    return [r for r in pods(m) if (r["cluster"], r["deployment"]) == (cluster, deployment) and r["container"]]


@pytest.fixture(scope="module")
def openshift(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mission]:
    cp = control_plane
    if not cp.clusters[CLUSTER].prometheus_url:
        pytest.skip("needs the per-cluster Prometheus servers (DS_E2E_PROMETHEUS=1)")
    m = Mission(
        cp, progress=print, interval=5, window=5, clusters=(CLUSTER,), work_dir=tmp_path_factory.mktemp("os")
    )
    spoke = m.spokes[CLUSTER]
    existed = spoke.find("v1", "Namespace", INSTALL_NS) is not None
    try:
        annotate(m.hub, NAMESPACE, scc_annotations(HUB_UID))
        annotate(spoke, INSTALL_NS, scc_annotations(AGENT_UID))
        label_vendor(m, "OpenShift")
        m.install("--set", "manager.platform=openshift")
        m.enable(CLUSTER)
        m.start_gateway()
        base = m.start_scorer()
        m.hub.apply(m.dynamic_scorer(base))
        for doc in sample_documents(SAMPLE_CONFIG):
            m.hub.apply(doc)
        yield m
    finally:
        m.stop_local()
        if m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, CLUSTER) is not None:
            m.disable(CLUSTER)
        m.run_helm("uninstall", "dynamic-scoring", "--namespace", NAMESPACE, "--ignore-not-found")
        m.hub.delete("v1", "Namespace", NAMESPACE)
        label_vendor(m, None)
        if existed:  # the harness's namespace: only take back what this module added
            spoke.delete("v1", "Secret", "demo-metrics-tenant", INSTALL_NS)
            spoke.delete("apps/v1", "Deployment", "pinned", INSTALL_NS)
            annotate(spoke, INSTALL_NS, dict.fromkeys(scc_annotations(AGENT_UID)))
        else:
            spoke.delete("v1", "Namespace", INSTALL_NS)
        wait_until(
            lambda: (
                m.hub.find("v1", "Namespace", NAMESPACE) is None
                and (existed or spoke.find("v1", "Namespace", INSTALL_NS) is None)
                and not running(m, CLUSTER, AGENT_DEPLOYMENT)
            ),
            timeout=120,
            what="the OpenShift story's namespaces and agent gone",
        )


def test_the_agent_rendered_for_openshift_names_no_user(openshift: Mission) -> None:
    m = openshift

    def deployment() -> JSON | None:
        work = m.hub.find(
            "work.open-cluster-management.io/v1", "ManifestWork", f"addon-{ADDON}-deploy-0", CLUSTER
        )
        found = [
            x
            for x in ((work or {}).get("spec") or {}).get("workload", {}).get("manifests", [])
            if x["kind"] == "Deployment"
        ]
        return found[0] if found else None

    dep = wait_value(deployment, lambda d: d is not None, timeout=60, what="the agent's ManifestWork")
    assert dep is not None
    assert dep["spec"]["template"]["spec"]["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_the_agent_publishes_its_score_as_the_sccs_uid_with_gid_0(openshift: Mission) -> None:
    m = openshift
    wait_until(lambda: m.score(CLUSTER) is not None, timeout=120, what=f"a {CLUSTER} score from the agent")
    (agent,) = running(m, CLUSTER, AGENT_DEPLOYMENT)
    name = agent["container"]
    assert podman("exec", name, "id", "-u").strip() == str(AGENT_UID)
    assert podman("exec", name, "id", "-g").strip() == "0"
    assert str(AGENT_UID) in podman("exec", name, "id", "-G").split()  # the fsGroup
    podman("exec", name, "touch", "/tmp/written")  # its emptyDir, writable by the assigned UID
    for path in ("/opt/venv/x", "/x", "/var/run/hub/x"):
        out = podman("exec", name, "sh", "-c", f"touch {path} 2>&1 || echo refused", check=False)
        assert "Read-only file system" in out and "refused" in out, (path, out)

    def available() -> bool:
        mca = m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, CLUSTER) or {}
        conds = {c["type"]: c for c in (mca.get("status") or {}).get("conditions") or []}
        return (conds.get("Available") or {}).get("status") == "True"

    wait_until(available, timeout=120, what=f"the addon Available on {CLUSTER} (the agent's health Lease)")


def test_the_manager_leads_as_the_sccs_uid(openshift: Mission) -> None:
    m = openshift
    managers = running(m, "hub", MANAGER)
    assert len(managers) == 2, managers
    for row in managers:
        assert podman("exec", row["container"], "id", "-u").strip() == str(HUB_UID)
        assert podman("exec", row["container"], "id", "-g").strip() == "0"
    m.wait_manager()  # every replica available, one holding the Lease


def test_a_pod_that_pins_the_images_user_is_refused_as_openshift_refuses_it(openshift: Mission) -> None:
    """What every pod of this addon did before `Platform`: OpenShift never starts it."""
    spoke = openshift.spokes[CLUSTER]
    spoke.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "pinned", "namespace": INSTALL_NS},
            "spec": {
                "selector": {"matchLabels": {"app": "pinned"}},
                "template": {
                    "metadata": {"labels": {"app": "pinned"}},
                    "spec": {
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532},
                        "containers": [{"name": "c", "image": default_tag(), "command": ["sleep", "60"]}],
                    },
                },
            },
        }
    )

    def message() -> str:
        dep = spoke.find("apps/v1", "Deployment", "pinned", INSTALL_NS) or {}
        conds = {c["type"]: c for c in (dep.get("status") or {}).get("conditions") or []}
        return str((conds.get("Available") or {}).get("message") or "")

    text = wait_value(message, lambda t: "FailedCreate" in t, timeout=60, what="the pinned pod refused")
    assert "unable to validate against any security context constraint" in text
    assert (
        f"runAsUser: Invalid value: 65532: must be in the ranges: [{AGENT_UID}, {AGENT_UID + 9999}]" in text
    )
    assert not running(openshift, CLUSTER, "pinned")
