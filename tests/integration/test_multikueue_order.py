"""Ordered MultiKueueConfigs on the real hub: OCM's placement controller decides, the manager orders.

The manager runs in-process with `--multikueue-order` and only that controller, as its own
ServiceAccount with the RBAC the installs grant (manifests/rbac.yaml and the multikueue-order
component, which it is shown to need), against the real hub kube-apiserver with Kueue's own
MultiKueueConfig CRD (v1beta2, whose CEL rule refuses a repeated cluster) and OCM's real placement
controller.  The state is shaped directly: three
ManagedClusters of the test's own (no klusterlet; their availability taints tolerated), a cluster
set selecting them, and an AddOnPlacementScore per cluster whose values put them in an order that
is not name order.  What a user sees is checked: the MultiKueueConfig's `spec.clusters` and the
Events on the Placement.  Kueue's dispatcher following that order is the e2e tier's job.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.controllers.multikueue import NAME, multikueue_order_controller
from dynamic_scoring.addon.manager import Manager, ManagerOptions
from dynamic_scoring.addon.multikueue import ORDER_LABEL, PLACEMENT_ANNOTATION
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.kube import Client, Kubectl
from e2e.kueue import kueue_build
from e2e.ocm import (
    decided_clusters,
    install_crds,
    scheduling_stage,
    set_addon_score,
)
from e2e.procs import wait_until, wait_value
from tests.integration.manager_identity import can_i, token_kubeconfig

pytestmark = pytest.mark.late_tools  # Kueue's CRDs come with the Kueue build

REPO = Path(__file__).resolve().parents[2]
CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
KUEUE_V1B2 = "kueue.x-k8s.io/v1beta2"
MKC_CRD = "multikueueconfigs.kueue.x-k8s.io"
# MultiKueueConfigs are cluster-scoped and named after their Placements: names of this run only
SUFFIX = uuid.uuid4().hex[:5]
ORDERED, TAKEN, PLAIN, WITNESS = (f"{x}-{SUFFIX}" for x in ("ordered", "taken", "plain", "witness"))
NS = f"mko-{SUFFIX}"
SET = f"mko-{SUFFIX}"
MEMBER = "mko.test/member"
A, B, C = (f"mko-{SUFFIX}-{x}" for x in "abc")
SCORE = "mko-score"
TOLERATE = [
    {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
    {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"},
]


def placement(name: str, number: int, *, opted_in: bool = True) -> JSON:
    return {
        "apiVersion": CLUSTER_V1B1,
        "kind": "Placement",
        "metadata": {"name": name, "namespace": NS, "labels": {ORDER_LABEL: "score"} if opted_in else {}},
        "spec": {
            "clusterSets": [SET],
            "numberOfClusters": number,
            "tolerations": TOLERATE,
            "prioritizerPolicy": {
                "mode": "Exact",
                "configurations": [
                    {
                        "scoreCoordinate": {
                            "type": "AddOn",
                            "addOn": {"resourceName": SCORE, "scoreName": "s"},
                        },
                        "weight": 1,
                    }
                ],
            },
        },
    }


def set_score(hub: Client, cluster: str, value: int) -> None:
    set_addon_score(hub, cluster, SCORE, "s", value)


def listed(hub: Client, name: str) -> list[str] | None:
    obj = hub.find(KUEUE_V1B2, "MultiKueueConfig", name)
    return None if obj is None else list(obj["spec"]["clusters"])


def wait_listed(hub: Client, name: str, want: list[str] | None) -> None:
    wait_until(lambda: listed(hub, name) == want, timeout=60, what=f"MultiKueueConfig {name} lists {want}")


def events(hub: Client, placement_name: str, reason: str) -> list[str]:
    return [
        str(e.get("message"))
        for e in hub.items("v1", "Event", NS)
        if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == placement_name
    ]


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Iterator[Client]:
    assert control_plane.hub is not None
    client = Client(control_plane.hub.admin_kubeconfig, timeout=15)
    crd_file = next(p for p in kueue_build().kueue_crds if p.name.endswith("_multikueueconfigs.yaml"))
    # another test may have deleted Kueue's CRDs without waiting: install only once that is over
    wait_until(
        lambda: (
            not (
                (client.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", MKC_CRD) or {})
                .get("metadata", {})
                .get("deletionTimestamp")
            )
        ),
        timeout=60,
        what=f"CRD {MKC_CRD} not being deleted",
    )
    install_crds(client, (crd_file,))
    clusters = (A, B, C)
    try:
        with scheduling_stage(client, NS, SET, MEMBER, clusters):
            for cluster, value in zip(clusters, (30, 90, 60), strict=True):
                set_score(client, cluster, value)
            yield client
    finally:
        for obj in client.items(KUEUE_V1B2, "MultiKueueConfig"):
            client.delete(KUEUE_V1B2, "MultiKueueConfig", obj["metadata"]["name"])
        client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", MKC_CRD)
        wait_until(
            lambda: client.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", MKC_CRD) is None,
            timeout=60,
            what=f"CRD {MKC_CRD} gone",
        )


@pytest.fixture(scope="module")
def manager_kubeconfig(
    control_plane: ControlPlane, manager_rbac: Client, hub: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The manager's ServiceAccount with the installs' RBAC: manifests/rbac.yaml, then the component's.

    Without the component the manager may not write a MultiKueueConfig; with it, it may, and the
    tests below run the controller on exactly these rules.  The base install comes from the
    tier's `manager_rbac`, which removes what it created; the component's objects are removed here.
    """
    assert control_plane.hub is not None and control_plane.tools is not None
    kubectl = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    wait_until(
        lambda: can_i(kubectl, "watch", "addonplacementscores.cluster.open-cluster-management.io") == "yes",
        timeout=30,
        what="the manager's base RBAC in effect",
    )
    assert can_i(kubectl, "create", "multikueueconfigs.kueue.x-k8s.io") == "no"
    assert can_i(kubectl, "list", "placements.cluster.open-cluster-management.io", NS) == "no"
    # the component's Role and RoleBinding live in the manager's --multikueue-namespace: this test's
    component = [
        {**o, "metadata": {**o["metadata"], "namespace": NS}} if o["kind"] in ("Role", "RoleBinding") else o
        for o in yaml.safe_load_all(
            (REPO / "manifests" / "components" / "multikueue-order" / "rbac.yaml").read_text()
        )
    ]
    for obj in component:
        hub.apply(obj)
    try:
        wait_until(
            lambda: (
                can_i(kubectl, "create", "multikueueconfigs.kueue.x-k8s.io") == "yes"
                and can_i(kubectl, "watch", "placementdecisions.cluster.open-cluster-management.io", NS)
                == "yes"
            ),
            timeout=30,
            what="the component's RBAC in effect",
        )
        # Placements elsewhere stay out of reach
        assert can_i(kubectl, "list", "placements.cluster.open-cluster-management.io", "default") == "no"
        yield token_kubeconfig(control_plane, kubectl, tmp_path_factory.mktemp("manager"))
    finally:
        for obj in reversed(component):
            hub.delete(
                obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace")
            )


@pytest.fixture
def manager(manager_kubeconfig: Path) -> Iterator[CollectorRegistry]:
    """The manager with `--multikueue-order` and only that controller, as its ServiceAccount.

    Yields its metrics registry: reconciles and writes are counted there.
    """
    registry = CollectorRegistry()
    process = Manager(
        KubeAPI(manager_kubeconfig),
        ManagerOptions(
            leader_elect=False, bind_address="127.0.0.1:0", multikueue_order=True, multikueue_namespace=NS
        ),
        factories=[multikueue_order_controller],
        registry=registry,
    )
    stop = threading.Event()
    exit_code: list[int] = []
    thread = threading.Thread(target=lambda: exit_code.append(process.run(stop)), name="manager", daemon=True)
    thread.start()
    try:
        wait_until(lambda: process.readiness()[0], timeout=60, what="the manager ready (its caches synced)")
        yield registry
    finally:
        stop.set()
        thread.join(60)
    assert exit_code == [0]


def counted(registry: CollectorRegistry, metric: str, **labels: str) -> float:
    """The sum of a counter's samples of the multikueue-order controller matching `labels`."""
    return sum(
        s.value
        for m in registry.collect()
        for s in m.samples
        if s.name == metric
        and s.labels.get("controller") == NAME
        and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_the_config_lists_every_decided_cluster_in_score_order_and_follows_the_scores(
    hub: Client, manager: CollectorRegistry
) -> None:
    hub.apply(placement(ORDERED, 3))
    name = ORDERED
    wait_until(lambda: decided_clusters(hub, NS, ORDERED) == [A, B, C], timeout=60, what="all three decided")
    # scores b 90, c 60, a 30: not name order
    wait_listed(hub, name, [B, C, A])
    config = hub.get(KUEUE_V1B2, "MultiKueueConfig", name)
    assert config["metadata"]["annotations"][PLACEMENT_ANNOTATION] == f"{NS}/{ORDERED}"
    first = wait_value(
        lambda: events(hub, ORDERED, "MultiKueueOrderChanged"),
        bool,
        timeout=30,
        what="the Event of the first order",
    )
    assert f"order {B} (90), {C} (60), {A} (30)" in first[0], first

    # a score change that keeps the order writes nothing: the controller sees it (one more
    # reconcile, woken by the score) and leaves the config as it is
    reconciles = counted(manager, "dynamic_scoring_controller_reconcile_total")
    writes = counted(manager, "dynamic_scoring_controller_writes_total", resource=MKC_CRD)
    version = hub.get(KUEUE_V1B2, "MultiKueueConfig", name)["metadata"]["resourceVersion"]
    set_score(hub, C, 70)
    wait_until(
        lambda: counted(manager, "dynamic_scoring_controller_reconcile_total") > reconciles,
        timeout=30,
        what="the score change reconciled",
    )
    assert counted(manager, "dynamic_scoring_controller_writes_total", resource=MKC_CRD) == writes
    assert hub.get(KUEUE_V1B2, "MultiKueueConfig", name)["metadata"]["resourceVersion"] == version

    # a climbs to the top: the order follows, the set stays (a rank change removes no one)
    set_score(hub, A, 95)
    wait_listed(hub, name, [A, B, C])
    message = wait_value(
        lambda: [m for m in events(hub, ORDERED, "MultiKueueOrderChanged") if f"was {B}, {C}, {A}" in m],
        bool,
        timeout=30,
        what="the Event of the new order",
    )
    assert f"order {A} (95), {B} (90), {C} (70)" in message[0], message

    # the Placement decides two: the one it dropped leaves the list
    hub.apply(placement(ORDERED, 2))
    wait_listed(hub, name, [A, B])

    # the label removed: the Placement's config goes
    hub.apply(placement(ORDERED, 2, opted_in=False))
    wait_listed(hub, name, None)


def test_a_config_of_that_name_written_by_someone_else_is_left_alone_and_reported(
    hub: Client, manager: CollectorRegistry
) -> None:
    name = TAKEN
    set_score(hub, A, 30)  # the first order again: b 90, c 60, a 30
    hand_made = hub.apply(
        {
            "apiVersion": KUEUE_V1B2,
            "kind": "MultiKueueConfig",
            "metadata": {"name": name},
            "spec": {"clusters": ["x"]},
        }
    )
    hub.apply(placement(TAKEN, 3))
    warnings = wait_value(
        lambda: events(hub, TAKEN, "MultiKueueConfigNotOurs"), bool, timeout=60, what="the Warning"
    )
    assert f"MultiKueueConfig {name} exists and was not written for this Placement" in warnings[0]
    assert (
        hub.get(KUEUE_V1B2, "MultiKueueConfig", name)["metadata"]["resourceVersion"]
        == (hand_made["metadata"]["resourceVersion"])
    )
    # once it is deleted, the ordered one is written in its place
    hub.delete(KUEUE_V1B2, "MultiKueueConfig", name)
    wait_listed(hub, name, [B, C, A])
    hub.delete(CLUSTER_V1B1, "Placement", TAKEN, NS)
    wait_listed(hub, name, None)


def test_a_placement_without_the_label_gets_no_config(hub: Client, manager: CollectorRegistry) -> None:
    hub.apply(placement(PLAIN, 3, opted_in=False))
    hub.apply(placement(WITNESS, 3))
    # the witness is reconciled by the same controller after the plain one was created: by then
    # the plain one would have its config too, had it been selected
    wait_until(lambda: listed(hub, WITNESS) is not None, timeout=60, what="the witness's config")
    assert listed(hub, PLAIN) is None
    hub.delete(CLUSTER_V1B1, "Placement", WITNESS, NS)
    wait_listed(hub, WITNESS, None)
