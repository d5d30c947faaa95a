"""The Helm chart against `kubectl apply -k manifests/`: the same objects, rendered and installed.

Rendering uses the real `helm template` and `kubectl kustomize`; installing uses the real `helm
install`/`helm uninstall` on the session's hub (the manager then runs from the chart's Deployment).
The upgrade from one chart version to the next, with a scorer and live scores, is a step of
test_mission.py.  What the chart deliberately does differently, and nothing else:

* no Namespace object: `helm install --create-namespace` creates it (Helm stores the release in
  that namespace before it creates any template), and the uninstall deletes it afterwards;
* Helm adds its ownership annotations (`meta.helm.sh/release-name`, `meta.helm.sh/release-namespace`)
  and the label `app.kubernetes.io/managed-by: Helm` to every templated object when it installs
  them (not when it renders them);
* CRDs come from `crds/`: installed before the templates, never upgraded or deleted by Helm.

The values themselves (every one reaching its object, the schema, another release namespace) are
rendered by tests/packaging/test_chart_values.py; here `installStrategy: Placements` is installed
for real and OCM enables the addon on the cluster a Placement selects, without clusteradm.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import chartgen
from e2e.controlplane import ControlPlane
from e2e.inventory import Key, snapshot
from e2e.kube import Kubectl
from e2e.mission import (
    ADDON,
    ADDON_V1A1,
    CHART,
    CRD_NAMES,
    NAMESPACE,
    RELEASE,
    Mission,
    helm_binary,
    install_command,
)
from e2e.ocm import cluster_set_binding, decided_clusters
from e2e.procs import StartupError, wait_until
from e2e.tools import locate

pytestmark = pytest.mark.own_install

Obj = dict[str, Any]


def key(o: Obj) -> tuple[str, str, str]:
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def helm_template(*values: str) -> list[Obj]:
    proc = subprocess.run(
        [
            str(helm_binary()),
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--include-crds",
            *values,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return sorted((d for d in yaml.safe_load_all(proc.stdout) if d), key=key)


@functools.cache
def kubectl_binary() -> Path:
    return locate().kubectl


def kustomized() -> list[Obj]:
    return sorted(chartgen.kustomize(kubectl_binary()), key=key)


def test_the_chart_renders_the_objects_kubectl_kustomize_renders_but_the_namespace() -> None:
    from_kustomize = [o for o in kustomized() if o["kind"] != "Namespace"]
    from_helm = helm_template()
    assert [key(o) for o in from_helm] == [key(o) for o in from_kustomize]
    for h, k in zip(from_helm, from_kustomize, strict=True):
        assert h == k, f"{key(h)} differs between the chart and manifests/"


def test_image_repository_and_tag_are_values_and_retag_manager_and_agents_together() -> None:
    rendered = helm_template(
        "--set", "image.repository=registry.example.com/ds/dynamic-scoring", "--set", "image.tag=9.8.7"
    )
    (dep,) = [o for o in rendered if o["kind"] == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    want = "registry.example.com/ds/dynamic-scoring:9.8.7"
    assert container["image"] == want
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DYNAMIC_SCORING_AGENT_IMAGE"] == want
    # the rest is unchanged: the same objects as the default render, once the image is put back
    default = helm_template()
    text = yaml.safe_dump_all(rendered).replace(want, chartgen.kustomize_image())
    assert list(yaml.safe_load_all(text)) == default


def test_the_generated_chart_files_are_current_with_manifests() -> None:
    assert chartgen.main(["--check", "--kubectl", str(kubectl_binary())]) == 0, "run `make chart`"


def test_the_chart_crds_are_the_ones_the_uninstall_removes() -> None:
    names = {o["metadata"]["name"] for o in helm_template() if o["kind"] == "CustomResourceDefinition"}
    assert names == set(CRD_NAMES)


# ------------------------------------------------------------------------ on the hub
@pytest.fixture(scope="module")
def mission(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mission]:
    m = Mission(control_plane, progress=print, work_dir=tmp_path_factory.mktemp("chart"))
    try:
        yield m
    finally:
        if m.hub.find("v1", "Namespace", NAMESPACE) is not None:
            m.run_helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--ignore-not-found")
            m.hub.delete("v1", "Namespace", NAMESPACE)
            wait_until(
                lambda: m.hub.find("v1", "Namespace", NAMESPACE) is None, timeout=90, what="namespace gone"
            )


def test_helm_install_creates_what_kubectl_apply_k_creates_and_uninstall_takes_it_back(
    mission: Mission, control_plane: ControlPlane
) -> None:
    m = mission
    assert control_plane.tools is not None and control_plane.hub is not None
    kubectl = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    before = snapshot(kubectl)
    assert NAMESPACE not in {k.name for k in before if k.kind == "Namespace"}, "a previous install was left"
    assert install_command()[1:4] == ["install", RELEASE, str(CHART)]
    m.install()  # the documented command, then waits for both manager replicas and a leader

    for o in kustomized():
        api = o["apiVersion"]
        live = m.hub.find(api, o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
        assert live is not None, f"{key(o)} from manifests/ is missing after helm install"
        if o["kind"] not in ("Namespace", "CustomResourceDefinition"):
            annotations = live["metadata"].get("annotations") or {}
            assert annotations.get("meta.helm.sh/release-name") == RELEASE, key(o)

    m.run_helm("uninstall", RELEASE, "--namespace", NAMESPACE)
    m.hub.delete("v1", "Namespace", NAMESPACE)
    # the kept CRDs, and the APIService kube-apiserver derives from their group/version while they exist
    crds = {Key("CustomResourceDefinition", "", n) for n in CRD_NAMES}
    crds |= {Key("APIService", "", f"v1alpha1.{n.split('.', 1)[1]}") for n in CRD_NAMES}

    extra: set[Key] = set()

    def gone() -> bool:
        extra.clear()
        extra.update(snapshot(kubectl) - before - crds)
        return not extra

    try:
        wait_until(gone, timeout=90, what="everything but the CRDs gone")
    except StartupError:
        pytest.fail(f"left after helm uninstall: {sorted(map(str, extra))}")
    # the CRD policy (docs/install.md): helm keeps them; removing them is a separate, explicit step
    for name in CRD_NAMES:
        assert m.hub.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) is not None


# ------------------------------------------------------------------------ installStrategy: Placements
PLACEMENT_NS = "chart-placements-e2e"
PLACEMENT = "chart-e2e"
MEMBER_KEY = "chart-placements.test/member"
CLUSTER_V1 = "cluster.open-cluster-management.io/v1"


def label_cluster(m: Mission, cluster: str, value: str | None) -> None:
    m.hub.api.request(
        "PATCH",
        f"/apis/{CLUSTER_V1}/managedclusters/{cluster}",
        body={"metadata": {"labels": {MEMBER_KEY: value}}},
        content_type="application/merge-patch+json",
    )


def mca_condition(m: Mission, cluster: str, kind: str) -> str:
    mca = m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster) or {}
    conditions = (mca.get("status") or {}).get("conditions") or []
    return next((str(c.get("status")) for c in conditions if c.get("type") == kind), "")


def test_install_strategy_placements_enables_the_addon_where_the_placement_decides(mission: Mission) -> None:
    """`--set installStrategy.type=Placements`: OCM creates cluster1's MCA, and only cluster1's."""
    m = mission
    assert m.hub.find("v1", "Namespace", NAMESPACE) is None, "a previous install was left"
    label_cluster(m, "cluster1", "yes")
    try:
        m.hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLACEMENT_NS}})
        m.hub.apply(cluster_set_binding(PLACEMENT_NS))
        m.hub.apply(
            {
                "apiVersion": "cluster.open-cluster-management.io/v1beta1",
                "kind": "Placement",
                "metadata": {"name": PLACEMENT, "namespace": PLACEMENT_NS},
                "spec": {
                    "clusterSets": ["default"],
                    "predicates": [
                        {"requiredClusterSelector": {"labelSelector": {"matchLabels": {MEMBER_KEY: "yes"}}}}
                    ],
                },
            }
        )
        wait_until(
            lambda: decided_clusters(m.hub, PLACEMENT_NS, PLACEMENT) == ["cluster1"],
            timeout=60,
            what="the Placement deciding cluster1 only",
        )
        m.install(
            "--set",
            "installStrategy.type=Placements",
            "--set",
            f"installStrategy.placements[0].name={PLACEMENT}",
            "--set",
            f"installStrategy.placements[0].namespace={PLACEMENT_NS}",
            # the optional objects the real apiserver can take here (no ServiceMonitor CRD)
            "--set",
            "podDisruptionBudget.enabled=true",
            "--set",
            "metrics.service.enabled=true",
            "--set",
            "manager.logLevel=debug",
        )
        cma = m.hub.find(ADDON_V1A1, "ClusterManagementAddOn", ADDON)
        assert cma is not None
        assert cma["spec"]["installStrategy"]["type"] == "Placements"
        assert cma["spec"]["installStrategy"]["placements"][0]["name"] == PLACEMENT
        assert m.hub.find("policy/v1", "PodDisruptionBudget", "dynamic-scoring-addon-manager", NAMESPACE)
        assert m.hub.find("v1", "Service", "dynamic-scoring-addon-manager-metrics", NAMESPACE)

        # no `clusteradm addon enable`: OCM's addon manager creates the MCA from the strategy,
        # and ours renders the agent for it
        wait_until(
            lambda: m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, "cluster1"),
            timeout=120,
            what="OCM creating cluster1's ManagedClusterAddOn from installStrategy",
        )
        wait_until(
            lambda: mca_condition(m, "cluster1", "ManifestApplied") == "True",
            timeout=180,
            what="cluster1's agent ManifestWork applied",
        )
        assert m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, "cluster2") is None, (
            "cluster2 is not selected by the Placement, yet has the addon"
        )
    finally:
        if m.hub.find("v1", "Namespace", NAMESPACE) is not None:
            m.run_helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--ignore-not-found")
            m.hub.delete("v1", "Namespace", NAMESPACE)
        m.hub.delete("v1", "Namespace", PLACEMENT_NS)
        label_cluster(m, "cluster1", None)
        wait_until(
            lambda: (
                m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, "cluster1") is None
                and m.hub.find("v1", "Namespace", NAMESPACE) is None
                and m.hub.find("v1", "Namespace", PLACEMENT_NS) is None
            ),
            timeout=120,
            what="the addon, its namespace and the Placement's namespace gone after the uninstall",
        )
