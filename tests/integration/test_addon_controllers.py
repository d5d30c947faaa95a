"""The lifecycle controllers in-process against the real hub apiserver, with OCM's addon-manager beside them.

The clusters here are ManagedClusters created directly on the hub (no klusterlet), so these tests
are about what the manager writes on the hub: works, hub RBAC, MCA and CMA status, Events, CSR
decisions, and that a converged world is left alone.  The e2e tests cover the same manager as a
process, with klusterlets and agents.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.config.spec_hash import spec_hash
from dynamic_scoring.addon.controllers import agent_scores
from dynamic_scoring.addon.controllers.lifecycle import lifecycle_controllers
from dynamic_scoring.addon.manager import Manager, ManagerOptions
from dynamic_scoring.addon.registration.identity import default_groups, default_user
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.ocm.score_labels import ADDON_LABEL, score_labels
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.procs import wait_until

REPO = Path(__file__).resolve().parents[2]
ADDON = "dynamic-scoring"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
WORK_V1 = "work.open-cluster-management.io/v1"
RBAC_V1 = "rbac.authorization.k8s.io/v1"
HUB_RBAC = f"open-cluster-management:{ADDON}:agent"
WORK = f"addon-{ADDON}-deploy-0"
CSR_V1 = "certificates.k8s.io/v1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
APS_PATH = "/apis/cluster.open-cluster-management.io/v1alpha1"


def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def hub_install(hub: Client) -> None:
    """The CRDs, CMA, default ADC and namespace from manifests/, without the manager Deployment.

    The manager's registry controllers watch DynamicScorers and DynamicScoringConfigs, so the manager
    is ready only once their CRDs are served (as `kubectl apply -k manifests/` installs them).
    """
    for name in ("crds/dynamicscorers.yaml", "crds/dynamicscoringconfigs.yaml"):
        hub.apply_yaml((REPO / "manifests" / name).read_text())
    for name in ("namespace.yaml", "clustermanagementaddon.yaml", "addondeploymentconfig.yaml"):
        hub.apply_yaml((REPO / "manifests" / name).read_text())


def add_cluster(hub: Client, name: str) -> None:
    """A ManagedCluster with its namespace and our addon enabled (what clusteradm enable creates)."""
    hub.apply(
        {
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {"name": name},
            "spec": {"hubAcceptsClient": True},
        }
    )
    hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    hub.apply(
        {
            "apiVersion": ADDON_V1A1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": ADDON, "namespace": name},
            "spec": {"installNamespace": "open-cluster-management-agent-addon"},
        }
    )


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def total(registry: CollectorRegistry, name: str) -> float:
    return sum(s.value for metric in registry.collect() for s in metric.samples if s.name == name)


class Running:
    """A manager running in a thread of the test process."""

    def __init__(self, api: KubeAPI, registry: CollectorRegistry, resync: float) -> None:
        self.registry = registry
        self.manager = Manager(
            api,
            ManagerOptions(leader_elect=False, bind_address="127.0.0.1:0", resync_seconds=resync),
            factories=[lifecycle_controllers],  # the controllers under test, not the scorer registry's
            registry=registry,
        )
        self.stop = threading.Event()
        self.exit_code: int | None = None
        self.thread = threading.Thread(target=self._run, name="manager under test", daemon=True)

    def _run(self) -> None:
        self.exit_code = self.manager.run(self.stop)

    def start(self) -> None:
        self.manager.serve()
        self.thread.start()
        wait_until(
            lambda: self.manager.readiness()[0] and self.manager.leading, timeout=60, what="manager ready"
        )

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert self.exit_code == 0


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Client:
    assert control_plane.hub is not None
    client = Client(control_plane.hub.admin_kubeconfig, timeout=10)
    hub_install(client)
    return client


@pytest.fixture(scope="module")
def clusters(hub: Client) -> Iterator[list[str]]:
    names = [f"int-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
    for name in names:
        add_cluster(hub, name)
    yield names
    for name in names:
        hub.delete(ADDON_V1A1, "ManagedClusterAddOn", ADDON, name)
        hub.delete("cluster.open-cluster-management.io/v1", "ManagedCluster", name)


@pytest.fixture(scope="module")
def manager(control_plane: ControlPlane, hub: Client, clusters: list[str]) -> Iterator[Running]:
    assert control_plane.hub is not None
    running = Running(KubeAPI(control_plane.hub.admin_kubeconfig), CollectorRegistry(), resync=2.0)
    running.start()
    yield running
    running.close()


def converged(hub: Client, cluster: str) -> bool:
    mca = hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)
    work = hub.find(WORK_V1, "ManifestWork", WORK, cluster)
    return (
        conditions(mca).get("RegistrationApplied", {}).get("status") == "True"
        and work is not None
        and hub.find(RBAC_V1, "RoleBinding", HUB_RBAC, cluster) is not None
    )


def test_every_enabled_cluster_gets_registration_rbac_and_its_work(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    for cluster in clusters:
        wait_until(partial(converged, hub, cluster), timeout=60, what=f"{cluster} converged")
    default = hub.get(ADDON_V1A1, "AddOnDeploymentConfig", "dynamic-scoring-default", "dynamic-scoring")
    want = spec_hash(default)

    # OCM's addon-manager and our controllers write these status fields, bindings and works in
    # their own threads, after (or apart from) what `converged` waited for: wait for each of them
    def cma_hash() -> bool:
        cma = hub.get(ADDON_V1A1, "ClusterManagementAddOn", ADDON)
        return bool(cma["status"]["defaultconfigReferences"][0]["desiredConfig"]["specHash"] == want)

    # A: the CMA's default config hash, as the framework computes it
    wait_until(cma_hash, timeout=30, what=f"the CMA's defaultconfigReferences specHash {want}")
    for cluster in clusters:

        def recorded(cluster: str = cluster) -> bool:
            status = hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)["status"]
            # B: the generation of the config in use is recorded
            return bool(
                status["configReferences"][0]["lastObservedGeneration"] == default["metadata"]["generation"]
                and status["registrations"][0]["subject"]["user"] == default_user(cluster)
            )

        wait_until(
            recorded,
            timeout=30,
            what=f"{cluster}'s MCA recording generation {default['metadata']['generation']} of the "
            f"config and the registration subject {default_user(cluster)}",
        )
        subjects = {default_user(cluster), default_groups(cluster)[0]}

        def bound(cluster: str = cluster, subjects: set[str] = subjects) -> bool:
            binding = hub.get(RBAC_V1, "RoleBinding", HUB_RBAC, cluster)
            return {s["name"] for s in binding["subjects"]} == subjects

        wait_until(bound, timeout=30, what=f"{cluster}'s hub RoleBinding binding exactly {sorted(subjects)}")

        def work_hashes(cluster: str = cluster) -> bool:
            work = hub.get(WORK_V1, "ManifestWork", WORK, cluster)
            annotation = work["metadata"]["annotations"]["open-cluster-management.io/config-spec-hash"]
            return list(json.loads(annotation).values()) == [want]

        wait_until(work_hashes, timeout=30, what=f"{cluster}'s deploy work annotated with the hash {want}")
        # nothing applied the work (no klusterlet): ManifestApplied is not claimed
        assert "ManifestApplied" not in conditions(hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster))


def test_a_resync_of_a_converged_world_writes_nothing(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    for cluster in clusters:
        wait_until(partial(converged, hub, cluster), timeout=60, what=f"{cluster} converged")
    reg = manager.registry
    name = "dynamic_scoring_controller_reconcile_total"

    def reconciles() -> float:
        return sample(reg, name, controller="deploy", result="success") + sample(
            reg, name, controller="registration", result="success"
        )

    def quiet_round() -> bool:
        """One resync round of every key (deploy and registration) during which nothing was written."""
        writes, seen = total(reg, "dynamic_scoring_controller_writes_total"), reconciles()
        wait_until(lambda: reconciles() >= seen + 2 * len(clusters), timeout=30, what="a resync round")
        return total(reg, "dynamic_scoring_controller_writes_total") == writes

    # OCM's own status writes keep the world moving for a few seconds after creation; then a
    # resync of every key must write nothing
    wait_until(quiet_round, timeout=60, interval=0, what="a resync round without writes")
    assert quiet_round(), "a second resync round wrote"


def test_hub_rbac_is_reverted_when_edited_and_recreated_when_deleted(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    cluster = clusters[0]
    wait_until(lambda: converged(hub, cluster), timeout=60, what=f"{cluster} converged")
    path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{cluster}/roles/{HUB_RBAC}"
    original = hub.api.request("GET", path)["rules"]
    hub.api.request(
        "PATCH",
        path,
        body={"rules": [*original, {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]},
        content_type="application/merge-patch+json",
    )
    wait_until(lambda: hub.api.request("GET", path)["rules"] == original, timeout=20, what="Role reverted")
    hub.delete(RBAC_V1, "RoleBinding", HUB_RBAC, cluster)
    wait_until(
        lambda: hub.find(RBAC_V1, "RoleBinding", HUB_RBAC, cluster), timeout=20, what="RoleBinding recreated"
    )


def test_only_our_agents_scores_are_cached_and_a_score_relabelled_away_loses_its_grant(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    """The shared AddOnPlacementScore informer selects our agents' scores by label on the apiserver.

    A score our agent left behind is still granted (the agent must be able to delete it); another
    addon's score and an unlabelled one never enter the cache.  A score relabelled out of the
    selection arrives as a deletion: its grant goes; relabelled back, it returns.
    """
    cluster = clusters[1]
    wait_until(lambda: converged(hub, cluster), timeout=60, what=f"{cluster} converged")
    labels = {
        "ours": score_labels(ADDON),
        "theirs": {"app.kubernetes.io/managed-by": "other-addon"},
        "bare": {},
    }
    for name, these in labels.items():
        hub.apply(
            {
                "apiVersion": APS_V1A1,
                "kind": "AddOnPlacementScore",
                "metadata": {"name": f"left-{name}", "namespace": cluster, "labels": these},
            }
        )
    scores = agent_scores(manager.manager.controllers)
    role = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{cluster}/roles/{HUB_RBAC}"

    def granted() -> set[str]:
        rules = hub.api.request("GET", role)["rules"]
        return {
            n for r in rules for n in r.get("resourceNames") or [] if "addonplacementscores" in r["resources"]
        }

    def relabel(addon: str | None) -> None:
        path = f"{APS_PATH}/namespaces/{cluster}/addonplacementscores/left-ours"
        body = {"metadata": {"labels": {ADDON_LABEL: addon}}}
        hub.api.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    try:
        wait_until(lambda: "left-ours" in granted(), timeout=30, what="our left-over score granted")
        assert [s["metadata"]["name"] for s in scores.list(cluster)] == ["left-ours"]
        assert granted() == {"left-ours"}

        relabel(None)
        wait_until(
            lambda: "left-ours" not in granted(), timeout=30, what="the relabelled score's grant removed"
        )
        assert scores.list(cluster) == []

        relabel(ADDON)
        wait_until(lambda: "left-ours" in granted(), timeout=30, what="the score granted again")
    finally:
        for name in labels:
            hub.delete(APS_V1A1, "AddOnPlacementScore", f"left-{name}", cluster)
    wait_until(lambda: not granted(), timeout=30, what="no score granted once they are gone")


def test_obsolete_deploy_works_are_deleted_and_other_works_left_alone(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    cluster = clusters[1]
    wait_until(lambda: converged(hub, cluster), timeout=60, what=f"{cluster} converged")
    label = {"open-cluster-management.io/addon-name": ADDON}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}
    for name in (f"addon-{ADDON}-deploy-1", "someone-elses-work"):
        hub.apply(
            {
                "apiVersion": WORK_V1,
                "kind": "ManifestWork",
                "metadata": {"name": name, "namespace": cluster, "labels": label},
                "spec": {"workload": {"manifests": [configmap]}},
            }
        )
    wait_until(
        lambda: hub.find(WORK_V1, "ManifestWork", f"addon-{ADDON}-deploy-1", cluster) is None,
        timeout=20,
        what="the obsolete deploy-1 work deleted",
    )
    assert hub.find(WORK_V1, "ManifestWork", "someone-elses-work", cluster) is not None
    assert hub.find(WORK_V1, "ManifestWork", WORK, cluster) is not None
    hub.delete(WORK_V1, "ManifestWork", "someone-elses-work", cluster)


def test_conditions_of_other_writers_are_kept_and_never_written(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    cluster = clusters[2]
    wait_until(lambda: converged(hub, cluster), timeout=60, what=f"{cluster} converged")
    mca = hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)
    sentinel = {
        "type": "Available",
        "status": "True",
        "reason": "SentinelOfAnotherWriter",
        "message": "set by the test as the klusterlet would",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    others = [c for c in mca["status"]["conditions"] if c["type"] != "Available"]
    hub.patch_status(mca, {"conditions": [*others, sentinel]}, field_manager=SENTINEL_WRITER)
    assert available_owners(hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)) == {SENTINEL_WRITER}
    # make our controllers rewrite their own condition: remove RegistrationApplied
    mca = hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)
    hub.patch_status(
        mca, {"conditions": [c for c in mca["status"]["conditions"] if c["type"] != "RegistrationApplied"]}
    )
    wait_until(
        lambda: (
            "RegistrationApplied" in conditions(hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster))
        ),
        timeout=20,
        what="RegistrationApplied written again",
    )
    rewritten = hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)
    assert conditions(rewritten)["Available"] == sentinel
    # `conditions` is a list map keyed by type, so the apiserver records who last changed each
    # entry: had our controllers written the Available entry (even back to the same value after a
    # change), its owner would now be their field manager, not the sentinel's writer.
    assert available_owners(rewritten) == {SENTINEL_WRITER}


SENTINEL_WRITER = "test-sentinel-writer"
AVAILABLE_KEY = 'k:{"type":"Available"}'


def available_owners(mca: dict[str, Any]) -> set[str]:
    """The field managers that own the Available condition of `mca`'s status."""
    return {
        str(entry.get("manager"))
        for entry in mca["metadata"].get("managedFields") or []
        if entry.get("subresource") == "status"
        and AVAILABLE_KEY in ((entry.get("fieldsV1") or {}).get("f:status", {}).get("f:conditions") or {})
    }


def csr_events(hub: Client, cluster: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in hub.items("v1", "Event", cluster)
        if e.get("reason") == "CSRNotApproved" and name in e["message"]
    ]


def agent_csr(cluster: str, user_cluster: str, *, addon: str = ADDON, signer: str = "") -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, default_user(user_cluster), _validate=False)]
        + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in default_groups(user_cluster)]
    )
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    return {
        "apiVersion": CSR_V1,
        "kind": "CertificateSigningRequest",
        "metadata": {
            "name": f"addon-{cluster}-{addon}-{uuid.uuid4().hex[:6]}",
            "labels": {
                "open-cluster-management.io/addon-name": addon,
                "open-cluster-management.io/cluster-name": cluster,
            },
        },
        "spec": {
            "request": base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode(),
            "signerName": signer or "kubernetes.io/kube-apiserver-client",
            "usages": ["digital signature", "key encipherment", "client auth"],
        },
    }


# the agent's CN is longer than X.509's 64 characters, as the framework makes it; cryptography warns
@pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning")
def test_csrs_that_must_not_be_approved_are_left_pending_with_an_event(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    cluster, other = clusters[0], clusters[1]
    wait_until(lambda: converged(hub, cluster), timeout=60, what=f"{cluster} converged")
    foreign = agent_csr(cluster, cluster, addon="some-other-addon")
    reported = {
        "signer": agent_csr(cluster, cluster, signer="example.com/custom"),
        "subject CN": agent_csr(cluster, other),  # another cluster's identity
        # valid, but requested by the test's admin, not by system:open-cluster-management:<cluster>:...
        "requester": agent_csr(cluster, cluster),
    }
    csrs = [foreign, *reported.values()]
    for csr in csrs:
        hub.apply(csr)
    try:
        for why, csr in reported.items():
            name = csr["metadata"]["name"]
            event = wait_until(
                partial(csr_events, hub, cluster, name),
                timeout=20,
                what=f"a CSRNotApproved Event for {name}",
            )[0]
            assert why in event["message"], event["message"]
        for csr in csrs:  # the foreign one was created first: if it were to be approved, it would be by now
            got = hub.get(CSR_V1, "CertificateSigningRequest", csr["metadata"]["name"])
            assert "Approved" not in conditions(got)
    finally:
        for csr in csrs:
            hub.delete(CSR_V1, "CertificateSigningRequest", csr["metadata"]["name"])


def test_deleting_a_cluster_removes_its_work_and_hub_rbac(hub: Client, manager: Running) -> None:
    name = f"int-{uuid.uuid4().hex[:6]}-gone"
    add_cluster(hub, name)
    wait_until(partial(converged, hub, name), timeout=60, what=f"{name} converged")
    hub.delete("cluster.open-cluster-management.io/v1", "ManagedCluster", name)
    # OCM's hub garbage collector deletes the cluster's MCAs; ours owns the work and the hub RBAC
    wait_until(
        lambda: (
            hub.find(ADDON_V1A1, "ManagedClusterAddOn", ADDON, name) is None
            and hub.find(WORK_V1, "ManifestWork", WORK, name) is None
            and hub.find(RBAC_V1, "Role", HUB_RBAC, name) is None
            and hub.find(RBAC_V1, "RoleBinding", HUB_RBAC, name) is None
        ),
        timeout=90,
        what="the cluster's MCA, work and hub RBAC gone",
    )
    hub.delete("v1", "Namespace", name)


def test_a_sent_score_name_another_owner_holds_is_kept_out_of_the_agents_role(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    """The agent's hub Role names a sent score only while no other owner's score holds that name."""
    cluster = clusters[1]
    wait_until(lambda: converged(hub, cluster), timeout=60, what=f"{cluster} converged")
    summaries = json.dumps([{"scoreName": n} for n in ("free_name", "taken_name")])
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "dynamic-scoring-config", "namespace": "open-cluster-management-agent-addon"},
        "data": {"summaries": summaries},
    }
    label = {"open-cluster-management.io/addon-name": ADDON}
    hub.apply(
        {
            "apiVersion": WORK_V1,
            "kind": "ManifestWork",
            "metadata": {"name": f"addon-{ADDON}-config", "namespace": cluster, "labels": label},
            "spec": {"workload": {"manifests": [configmap]}},
        }
    )
    role = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{cluster}/roles/{HUB_RBAC}"

    def granted() -> set[str]:
        rules = hub.api.request("GET", role)["rules"]
        return {
            n for r in rules for n in r.get("resourceNames") or [] if "addonplacementscores" in r["resources"]
        }

    try:
        wait_until(lambda: granted() == {"free-name", "taken-name"}, timeout=30, what="both names granted")
        hub.apply(
            {
                "apiVersion": APS_V1A1,
                "kind": "AddOnPlacementScore",
                "metadata": {"name": "taken-name", "namespace": cluster, "labels": {"team": "other"}},
            }
        )
        wait_until(lambda: granted() == {"free-name"}, timeout=30, what="the taken name's grant removed")
        hub.delete(APS_V1A1, "AddOnPlacementScore", "taken-name", cluster)
        wait_until(
            lambda: granted() == {"free-name", "taken-name"}, timeout=30, what="the freed name granted"
        )
    finally:
        hub.delete(WORK_V1, "ManifestWork", f"addon-{ADDON}-config", cluster)
        hub.delete(APS_V1A1, "AddOnPlacementScore", "taken-name", cluster)
