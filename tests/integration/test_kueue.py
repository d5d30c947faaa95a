"""The pinned Kueue and kueue-addon builds are usable on the local hub.

`make tools` builds Kueue's controller manager and OCM's kueue-addon hub controller from pinned git
mirrors (e2e/kueue.py).  Here, against the real hub kube-apiserver of the test control plane:

* both binaries start far enough to print their command line help, and each build records the
  tag and commit it was built from;
* Kueue's CRDs and the CRDs kueue-addon's informers need install and become Established, and
  Kueue's objects are stored as `v1beta2`, the only version kueue-addon speaks;
* a `v1beta2` AdmissionCheck of kueue-addon's controller, its Placement parameters and a
  MultiKueueConfig round-trip through the apiserver;
* `samples/kueue/multikueue.yaml` and the ordered variant pass Kueue's own schema with strict
  validation;
* the manager's and kueue-addon's ClusterRoles apply;
* Kueue's manager runs as a process on the hub with its webhooks (every listener on 127.0.0.1): a
  queued Job is suspended by its webhook, then admitted through a ClusterQueue and unsuspended.

Everything installed is removed again, so the rest of the session's hub does not see Kueue.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.kueue import KueueBuild, KueueManager, kueue_build
from e2e.procs import listening_addresses, wait_until

pytestmark = pytest.mark.late_tools  # the tier (integration) comes from the directory

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_V1B2 = f"{KUEUE_GROUP}/v1beta2"
# The kinds kueue-addon reads or writes, and the queueing kinds a MultiKueue setup needs.
KUEUE_KINDS = (
    "admissionchecks",
    "clusterqueues",
    "localqueues",
    "multikueueclusters",
    "multikueueconfigs",
    "resourceflavors",
    "workloads",
)
ADDON_CRDS = (
    "managedserviceaccounts.authentication.open-cluster-management.io",
    "clusterpermissions.rbac.open-cluster-management.io",
    "clusterprofiles.multicluster.x-k8s.io",
)


@pytest.fixture(scope="module")
def build() -> KueueBuild:
    return kueue_build()


def _crd_names(paths: tuple[Path, ...]) -> list[str]:
    names = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                names.append(doc["metadata"]["name"])
    return names


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane, build: KueueBuild) -> Iterator[Kubectl]:
    assert control_plane.hub is not None and control_plane.tools is not None
    kubectl = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    crds = (*build.kueue_crds, *build.addon_crds)
    names = _crd_names(crds)
    try:
        for path in crds:
            kubectl.run("apply", "--server-side", "--force-conflicts", "-f", str(path))
        for name in names:
            kubectl.run("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
        yield kubectl
    finally:
        kubectl.run("delete", "crd", "--ignore-not-found", "--wait=false", *names, check=False)


def test_both_binaries_run_and_say_what_they_were_built_from(build: KueueBuild) -> None:
    manager = subprocess.run([str(build.manager), "--help"], capture_output=True, text=True, timeout=60)
    assert "-config" in manager.stdout + manager.stderr, manager.stderr[-2000:]
    addon = subprocess.run(
        [str(build.addon_controller), "hub", "--help"], capture_output=True, text=True, timeout=60
    )
    assert addon.returncode == 0, addon.stderr[-2000:]
    assert "--kubeconfig" in addon.stdout
    # v0.19: its incremental dispatcher keeps MultiKueueConfig.spec.clusters order (ordered dispatch)
    assert build.kueue_source["tag"].startswith("v0.19."), build.kueue_source
    assert build.kueue_source["module"] == f"sigs.k8s.io/kueue@{build.kueue_source['tag']}"
    assert len(build.addon_source["commit"]) == 40
    assert build.addon_source["kueue"].startswith("v0.16.0+"), build.addon_source


def test_kueue_stores_v1beta2_and_kueue_addon_has_its_crds(hub: Kubectl) -> None:
    for kind in KUEUE_KINDS:
        crd = hub.get_json("crd", f"{kind}.{KUEUE_GROUP}")
        stored = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
        assert stored == ["v1beta2"], (kind, stored)
        assert "v1beta2" in served, (kind, served)
    for name in ADDON_CRDS:
        crd = hub.get_json("crd", name)
        assert any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"])


def test_kueue_addons_admission_check_and_a_multikueue_config_round_trip(hub: Kubectl) -> None:
    name = f"kueue-build-{uuid.uuid4().hex[:8]}"
    objects = [
        {
            "apiVersion": KUEUE_V1B2,
            "kind": "AdmissionCheck",
            "metadata": {"name": name},
            "spec": {
                "controllerName": "open-cluster-management.io/placement",
                "parameters": {
                    "apiGroup": "cluster.open-cluster-management.io",
                    "kind": "Placement",
                    "name": "least-loaded",
                },
            },
        },
        {
            "apiVersion": KUEUE_V1B2,
            "kind": "MultiKueueConfig",
            "metadata": {"name": name},
            "spec": {"clusters": ["cluster1", "cluster2"]},
        },
    ]
    try:
        hub.run("apply", "--server-side", "--validate=strict", "-f", "-", stdin=yaml.safe_dump_all(objects))
        check = hub.get_json(f"admissionchecks.v1beta2.{KUEUE_GROUP}", name)
        assert check["spec"]["controllerName"] == "open-cluster-management.io/placement"
        config = hub.get_json(f"multikueueconfigs.v1beta2.{KUEUE_GROUP}", name)
        assert config["spec"]["clusters"] == ["cluster1", "cluster2"]
    finally:
        hub.run(
            "delete",
            f"admissionchecks.{KUEUE_GROUP}/{name}",
            f"multikueueconfigs.{KUEUE_GROUP}/{name}",
            "--ignore-not-found",
            check=False,
        )


def test_the_kueue_sample_is_valid_v1beta2_for_kueue_itself(hub: Kubectl) -> None:
    """samples/kueue/ (hub and worker side) passes Kueue's own schema, strictly (no unknown field)."""
    sample = SAMPLES / "kueue" / "multikueue.yaml"
    out = hub.run("apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", str(sample))
    for kind in ("resourceflavor", "admissioncheck", "clusterqueue", "localqueue"):
        assert kind in out, out
    # the ordered variant's hub side, and its Placement (in kueue-system, which Kueue's install creates)
    ordered = SAMPLES / "kueue" / "ordered" / "multikueue.yaml"
    out = hub.run("apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", str(ordered))
    assert "admissioncheck.kueue.x-k8s.io/multikueue-ordered" in out, out
    hub.run("create", "namespace", "kueue-system", check=False)
    placement = SAMPLES / "kueue" / "ordered" / "placement.yaml"
    out = hub.run("apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", str(placement))
    assert "placement.cluster.open-cluster-management.io/spill-over" in out, out
    worker = SAMPLES / "kueue" / "worker.yaml"
    out = hub.run("apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", str(worker))
    for kind in ("resourceflavor", "clusterqueue", "localqueue"):
        assert kind in out, out
    # and a field of the old v1beta1 API is refused, so this check can fail
    old = [d for d in yaml.safe_load_all(sample.read_text()) if d and d["kind"] == "ClusterQueue"]
    old[0]["spec"]["admissionChecks"] = ["multikueue"]
    with pytest.raises(RuntimeError, match="admissionChecks"):
        hub.run(
            *("apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-"),
            stdin=yaml.safe_dump(old[0]),
        )


def test_the_manager_and_kueue_addon_cluster_roles_apply(hub: Kubectl, build: KueueBuild) -> None:
    for path in (build.manager_role, build.addon_role):
        out = hub.run("apply", "--server-side", "--dry-run=server", "-f", str(path))
        assert "clusterrole" in out.lower(), out


# -- Kueue's manager running, with its webhooks --------------------------------------------------------


@pytest.fixture(scope="module")
def kueue(control_plane: ControlPlane, hub: Kubectl, build: KueueBuild) -> Iterator[KueueManager]:
    assert control_plane.hub is not None
    manager = KueueManager(build, control_plane.hub)
    manager.install()
    try:
        manager.start()
        yield manager
    finally:
        manager.stop()


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def test_kueue_listens_on_loopback_only(kueue: KueueManager) -> None:
    assert kueue.proc is not None and kueue.proc.pid is not None
    pid = kueue.proc.pid

    # the manager opens its listeners in goroutines of its own: wait until every port listens
    def listening() -> set[tuple[str, int]] | None:
        found = listening_addresses({pid})
        return found if {port for _, port in found} >= set(kueue.ports.values()) else None

    addresses = wait_until(
        listening, timeout=30, what=f"Kueue listening on all its ports {kueue.ports}", proc=kueue.proc
    )
    assert {host for host, _ in addresses} == {"127.0.0.1"}, addresses


def test_a_queued_job_is_suspended_by_kueues_webhook_then_admitted(kueue: KueueManager, hub: Kubectl) -> None:
    """The Job webhook (a real admission call to the process) and the scheduler, end to end on one cluster."""
    name = f"kueue-{uuid.uuid4().hex[:8]}"
    namespace = name
    hub.run("create", "namespace", namespace)
    queueing = [
        {"apiVersion": KUEUE_V1B2, "kind": "ResourceFlavor", "metadata": {"name": name}},
        {
            "apiVersion": KUEUE_V1B2,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": name, "resources": [{"name": "cpu", "nominalQuota": 1}]}],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE_V1B2,
            "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": namespace},
            "spec": {"clusterQueue": name},
        },
    ]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "queued",
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "suspend": False,  # Kueue's webhook must turn this into true
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "sleep",
                            "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                            "resources": {"requests": {"cpu": "500m"}},
                        }
                    ],
                }
            },
        },
    }
    try:
        hub.run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(queueing))
        wait_until(
            lambda: _condition(hub.get_json(f"clusterqueues.{KUEUE_GROUP}", name), "Active") == "True",
            timeout=60,
            what=f"ClusterQueue {name} Active",
        )
        created = json.loads(hub.run("create", "-o", "json", "-f", "-", stdin=yaml.safe_dump(job)))
        assert created["spec"]["suspend"] is True, "Kueue's Job webhook did not suspend the queued Job"

        def admitted() -> dict[str, Any] | None:
            items = hub.get_json(f"workloads.{KUEUE_GROUP}", "-n", namespace)["items"]
            return next((w for w in items if _condition(w, "Admitted") == "True"), None)

        workload = wait_until(admitted, timeout=60, what="the Job's Workload admitted")
        assert workload["status"]["admission"]["clusterQueue"] == name
        wait_until(
            lambda: hub.get_json("job", "queued", "-n", namespace)["spec"]["suspend"] is False,
            timeout=60,
            what="the admitted Job unsuspended by Kueue",
        )
    finally:
        # while Kueue still runs: it holds finalizers on the Workload, ClusterQueue and flavor
        hub.run("delete", "namespace", namespace, "--timeout=60s", check=False)
        hub.run(
            "delete",
            f"clusterqueues.{KUEUE_GROUP}/{name}",
            f"resourceflavors.{KUEUE_GROUP}/{name}",
            "--ignore-not-found",
            "--timeout=60s",
            check=False,
        )
