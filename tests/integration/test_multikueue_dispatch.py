"""The External MultiKueue dispatcher on the real hub: Kueue's Workloads nominated in score order.

The manager runs in-process with `--multikueue-order --multikueue-dispatch` and only the dispatcher,
as its own ServiceAccount with the RBAC the installs grant (manifests/rbac.yaml and the two
components, which it is shown to need), against the real hub kube-apiserver with Kueue v0.19.2's
own Workload, AdmissionCheck and MultiKueueConfig CRDs (whose CEL rules refuse a `clusterName`
beside nominations).  The state is shaped directly: an ordered MultiKueueConfig as the order
controller writes it (its own tests cover that), a `kueue.x-k8s.io/multikueue` AdmissionCheck
naming it, and Workloads whose status says what Kueue's scheduler would (quota reserved on the
hub, the check Pending).  What a user sees is checked: `status.nominatedClusterNames`, who owns
it, and the Events on the Workload.  Kueue's MultiKueue following the nominations is the e2e tier's.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.controllers.multikueue.dispatch import NAME, multikueue_dispatch_controller
from dynamic_scoring.addon.dispatch import CONDITION, FIELD_MANAGER, MULTIKUEUE_CONTROLLER
from dynamic_scoring.addon.manager import Manager, ManagerOptions
from dynamic_scoring.addon.multikueue import desired_config
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.kube import Client, Kubectl
from e2e.kueue import kueue_build
from e2e.ocm import apply_namespaces, install_crds
from e2e.procs import wait_until, wait_value
from tests.integration.manager_identity import can_i, token_kubeconfig

pytestmark = pytest.mark.late_tools  # Kueue's CRDs come with the Kueue build

REPO = Path(__file__).resolve().parents[2]
KUEUE_V1B2 = "kueue.x-k8s.io/v1beta2"
CRDS = ("workloads", "admissionchecks", "multikueueconfigs")
SUFFIX = uuid.uuid4().hex[:5]
NS = f"mkd-{SUFFIX}"
CONFIG, FOREIGN_CONFIG = f"spill-{SUFFIX}", f"by-hand-{SUFFIX}"
CHECK, FOREIGN_CHECK = f"mk-{SUFFIX}", f"mk-by-hand-{SUFFIX}"
# the ordered config lists b, c, a: score order, not name order
A, B, C = (f"mkd-{SUFFIX}-{x}" for x in "abc")
DELAY = 2.0
TIME = "2026-12-04T12:00:00Z"


def ordered(clusters: list[str]) -> JSON:
    """The MultiKueueConfig as the order controller writes it for a Placement deciding `clusters`."""
    return {
        "apiVersion": KUEUE_V1B2,
        "kind": "MultiKueueConfig",
        **desired_config(CONFIG, f"kueue-system/{CONFIG}", clusters),
    }


def crd_name(plural: str) -> str:
    return f"{plural}.kueue.x-k8s.io"


def admission_check(name: str, config: str) -> JSON:
    return {
        "apiVersion": KUEUE_V1B2,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {
            "controllerName": MULTIKUEUE_CONTROLLER,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config},
        },
    }


def submit(hub: Client, name: str, check: str = CHECK, nominated: list[str] | None = None) -> JSON:
    """A Workload as Kueue's scheduler leaves it on the hub: quota reserved, its multikueue check Pending.

    `nominated`: clusters another writer (this test's client) nominates in that same write.
    """
    workload = hub.apply(
        {
            "apiVersion": KUEUE_V1B2,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "queueName": "user-queue",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                    }
                ],
            },
        }
    )
    status: JSON = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue cluster-queue",
                "lastTransitionTime": TIME,
            }
        ],
        "admissionChecks": [{"name": check, "state": "Pending", "message": "", "lastTransitionTime": TIME}],
    }
    if nominated:
        status["nominatedClusterNames"] = nominated
    return hub.patch_status(workload, status, field_manager="kueue-test")


def nominations(hub: Client, name: str) -> list[str]:
    return list(hub.get(KUEUE_V1B2, "Workload", name, NS)["status"].get("nominatedClusterNames") or [])


def wait_nominated(hub: Client, name: str, want: list[str]) -> None:
    wait_until(
        lambda: nominations(hub, name) == want, timeout=60, what=f"Workload {name} nominated to {want}"
    )


def events(hub: Client, name: str, reason: str) -> list[str]:
    return [
        str(e.get("message"))
        for e in hub.items("v1", "Event", NS)
        if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == name
    ]


def condition(hub: Client, name: str) -> JSON | None:
    """Our condition on the Workload, if any."""
    for c in hub.get(KUEUE_V1B2, "Workload", name, NS)["status"].get("conditions") or []:
        if c["type"] == CONDITION:
            return dict(c)
    return None


def owners(hub: Client, name: str) -> set[str]:
    meta = hub.get(KUEUE_V1B2, "Workload", name, NS)["metadata"]
    return {
        str(e["manager"])
        for e in meta.get("managedFields") or []
        if "f:nominatedClusterNames" in (e.get("fieldsV1") or {}).get("f:status", {})
    }


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Iterator[Client]:
    assert control_plane.hub is not None
    client = Client(control_plane.hub.admin_kubeconfig, timeout=15)
    files = [p for p in kueue_build().kueue_crds if any(p.name.endswith(f"_{c}.yaml") for c in CRDS)]
    assert len(files) == len(CRDS), files

    def deleting() -> bool:
        return any(
            (client.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd_name(c)) or {})
            .get("metadata", {})
            .get("deletionTimestamp")
            for c in CRDS
        )

    # another test may have deleted Kueue's CRDs without waiting: install only once that is over
    wait_until(lambda: not deleting(), timeout=60, what="Kueue's CRDs not being deleted")
    install_crds(client, tuple(files))
    apply_namespaces(client, NS)
    try:
        client.apply(ordered([B, C, A]))
        client.apply(
            {
                "apiVersion": KUEUE_V1B2,
                "kind": "MultiKueueConfig",
                "metadata": {"name": FOREIGN_CONFIG},
                "spec": {"clusters": [A, B]},
            }
        )
        client.apply(admission_check(CHECK, CONFIG))
        client.apply(admission_check(FOREIGN_CHECK, FOREIGN_CONFIG))
        yield client
    finally:
        client.delete("v1", "Namespace", NS)
        for plural in CRDS:
            client.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd_name(plural))
        wait_until(
            lambda: all(
                client.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd_name(c)) is None
                for c in CRDS
            ),
            timeout=90,
            what="Kueue's CRDs gone",
        )


def component(name: str) -> list[JSON]:
    path = REPO / "manifests" / "components" / name / "rbac.yaml"
    return [
        {**o, "metadata": {**o["metadata"], "namespace": NS}} if o["kind"] in ("Role", "RoleBinding") else o
        for o in yaml.safe_load_all(path.read_text())
    ]


@pytest.fixture(scope="module")
def manager_kubeconfig(
    control_plane: ControlPlane, manager_rbac: Client, hub: Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The manager's ServiceAccount with the installs' RBAC: the base, the order's, then the dispatcher's.

    Without the dispatch component the manager may not read Workloads or write their status; with
    it, it may write their status and nothing else of them.
    """
    assert control_plane.hub is not None and control_plane.tools is not None
    kubectl = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    order = component("multikueue-order")
    for obj in order:
        hub.apply(obj)
    wait_until(
        lambda: can_i(kubectl, "watch", "multikueueconfigs.kueue.x-k8s.io") == "yes",
        timeout=30,
        what="the order component's RBAC in effect",
    )
    assert can_i(kubectl, "patch", "workloads.kueue.x-k8s.io/status", NS) == "no"
    assert can_i(kubectl, "watch", "workloads.kueue.x-k8s.io") == "no"
    dispatch = component("multikueue-dispatch")
    for obj in dispatch:
        hub.apply(obj)
    try:
        wait_until(
            lambda: (
                can_i(
                    kubectl,
                    "patch",
                    "workloads.kueue.x-k8s.io",
                    NS,
                )
                == "no"
                and can_i(kubectl, "patch", "workloads.kueue.x-k8s.io/status", NS) == "yes"
                and can_i(kubectl, "watch", "admissionchecks.kueue.x-k8s.io") == "yes"
            ),
            timeout=30,
            what="the dispatch component's RBAC in effect",
        )
        # a Workload's spec, and deleting one, stay out of reach
        assert can_i(kubectl, "update", "workloads.kueue.x-k8s.io", NS) == "no"
        assert can_i(kubectl, "delete", "workloads.kueue.x-k8s.io", NS) == "no"
        yield token_kubeconfig(control_plane, kubectl, tmp_path_factory.mktemp("manager"))
    finally:
        for obj in reversed([*order, *dispatch]):
            hub.delete(
                obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace")
            )


class Running:
    """The manager with the dispatcher only, as its ServiceAccount, started and stopped on demand."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.registry = CollectorRegistry()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._exit: list[int] = []

    def start(self) -> Running:
        process = Manager(
            KubeAPI(self.kubeconfig),
            ManagerOptions(
                leader_elect=False,
                bind_address="127.0.0.1:0",
                multikueue_order=True,
                multikueue_dispatch=True,
                multikueue_dispatch_delay=DELAY,
            ),
            factories=[multikueue_dispatch_controller],
            registry=self.registry,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=lambda: self._exit.append(process.run(self._stop)), daemon=True
        )
        self._thread.start()
        wait_until(lambda: process.readiness()[0], timeout=60, what="the manager ready (its caches synced)")
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(60)
            self._thread = None
            assert self._exit[-1] == 0

    def counted(self, metric: str) -> float:
        return sum(
            s.value
            for m in self.registry.collect()
            for s in m.samples
            if s.name == metric and s.labels.get("controller") == NAME
        )


@pytest.fixture
def dispatcher(manager_kubeconfig: Path) -> Iterator[Running]:
    running = Running(manager_kubeconfig).start()
    try:
        yield running
    finally:
        running.stop()


def test_a_waiting_workload_gets_the_best_cluster_first_then_the_next_ones_in_score_order(
    hub: Client, dispatcher: Running
) -> None:
    name = "job-order"
    submit(hub, name)
    wait_nominated(hub, name, [B])
    # ours, by our field manager, so another writer's can be told apart
    assert FIELD_MANAGER in owners(hub, name)
    first = wait_value(lambda: events(hub, name, "MultiKueueNominated"), bool, timeout=30, what="the Event")
    assert f"nominated {B}, the best-scored cluster of MultiKueueConfig {CONFIG}" in first[0]
    # nobody reserves quota: the next one is added after the delay, never one taken away
    wait_nominated(hub, name, [B, C])
    wait_nominated(hub, name, [B, C, A])
    warning = wait_value(
        lambda: events(hub, name, "MultiKueueNoClusterAdmitted"), bool, timeout=30, what="the Warning"
    )
    assert f"every cluster of MultiKueueConfig {CONFIG} is nominated ({B}, {C}, {A})" in warning[0]
    assert "keeps waiting" in warning[0]
    seconds = [m for m in events(hub, name, "MultiKueueNominated") if f"nominated {C}, the next" in m]
    assert seconds and f"(nominated before: {B})" in seconds[0], seconds
    # the same on the Workload itself, beside Kueue's conditions: applied, so it replaced none
    ours = wait_value(
        lambda: condition(hub, name),
        lambda c: c and c["reason"] == "AllClustersNominated",
        timeout=30,
        what="our condition saying every cluster is nominated",
    )
    assert ours is not None and ours["status"] == "True" and "keeps waiting" in ours["message"]
    kinds = [c["type"] for c in hub.get(KUEUE_V1B2, "Workload", name, NS)["status"]["conditions"]]
    assert sorted(kinds) == sorted(["QuotaReserved", CONDITION]), kinds
    # the condition is an apply entry of its own: it does not move the time the next nomination counts from
    entries = [
        e
        for e in hub.get(KUEUE_V1B2, "Workload", name, NS)["metadata"]["managedFields"]
        if e["manager"] == FIELD_MANAGER
    ]
    assert sorted(e["operation"] for e in entries) == ["Apply", "Update"], entries

    # Kueue admits it on c (as its MultiKueue controller does: clusterName set, nominations
    # cleared, the check Ready): the dispatcher is woken by that change and writes nothing
    reconciles = dispatcher.counted("dynamic_scoring_controller_reconcile_total")
    writes = dispatcher.counted("dynamic_scoring_controller_writes_total")
    workload = hub.get(KUEUE_V1B2, "Workload", name, NS)
    hub.patch_status(
        workload,
        {
            "clusterName": C,
            "nominatedClusterNames": None,
            "admissionChecks": [
                {"name": CHECK, "state": "Ready", "message": f'admitted on "{C}"', "lastTransitionTime": TIME}
            ],
        },
        field_manager="kueue-admission",
    )
    wait_until(
        lambda: dispatcher.counted("dynamic_scoring_controller_reconcile_total") > reconciles,
        timeout=30,
        what="the admission reconciled",
    )
    assert dispatcher.counted("dynamic_scoring_controller_writes_total") == writes
    admitted = hub.get(KUEUE_V1B2, "Workload", name, NS)["status"]
    assert admitted.get("clusterName") == C and not admitted.get("nominatedClusterNames")


def test_another_writers_nominations_and_other_configs_are_left_alone(
    hub: Client, dispatcher: Running
) -> None:
    submit(hub, "job-pinned", nominated=[A])
    submit(hub, "job-by-hand", check=FOREIGN_CHECK)
    # a witness submitted after both: once it is nominated, both were reconciled before it
    submit(hub, "job-witness")
    wait_nominated(hub, "job-witness", [B])
    wait_until(
        lambda: nominations(hub, "job-witness") == [B, C], timeout=60, what="the witness's second nomination"
    )
    assert nominations(hub, "job-pinned") == [A] and owners(hub, "job-pinned") == {"kueue-test"}
    assert nominations(hub, "job-by-hand") == []
    assert events(hub, "job-pinned", "MultiKueueNominated") == []


def test_a_restarted_dispatcher_goes_on_where_it_stood_and_a_cluster_that_left_is_withdrawn(
    hub: Client, manager_kubeconfig: Path
) -> None:
    name = "job-restart"
    first = Running(manager_kubeconfig).start()
    try:
        submit(hub, name)
        wait_nominated(hub, name, [B])
    finally:
        first.stop()
    # what the first one knew is in the Workload: the second adds c, it does not start over at b
    second = Running(manager_kubeconfig).start()
    try:
        wait_nominated(hub, name, [B, C])
        # c leaves the Placement, so the order controller drops it from the config: c is withdrawn
        # at once and never nominated again; a comes next
        hub.apply(ordered([B, A]))
        wait_nominated(hub, name, [B, A])
        withdrawn = [m for m in events(hub, name, "MultiKueueNominated") if f"withdrew {C}" in m]
        assert withdrawn, events(hub, name, "MultiKueueNominated")
    finally:
        second.stop()
        hub.apply(ordered([B, C, A]))
