"""Restarting one component of the local control plane: same port, same data, ready again.

Other tests use this to show that the manager and the agent survive an apiserver going away;
these tests show that the harness itself does what it says.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from dynamic_scoring.kube.api import KubeError
from e2e.controlplane import ControlPlane
from e2e.image import default_tag
from e2e.kube import Client
from e2e.procs import pid_alive, port_in_use, wait_until, wait_value

WORK = "work.open-cluster-management.io/v1"


def clients(cp: ControlPlane) -> tuple[Client, Client]:
    assert cp.hub is not None and cp.spoke2 is not None
    return Client(cp.hub.admin_kubeconfig, timeout=5), Client(cp.spoke2.admin_kubeconfig, timeout=5)


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


def configmap(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"value": value},
    }


def deliver_configmap(hub: Client, spoke: Client, cluster: str, value: str) -> None:
    """A ManifestWork for `cluster` applies a ConfigMap there, and its deletion is processed.

    The ConfigMap itself is deleted here rather than awaited: right after an apiserver restart,
    OCM's work agent was seen to leave the AppliedManifestWork, and so the ConfigMap, in place for
    more than 100 s after the ManifestWork was gone (docs/local-control-plane.md).
    """
    name = f"e2e-restart-{uuid.uuid4().hex[:6]}"
    work = {
        "apiVersion": WORK,
        "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": cluster},
        "spec": {"workload": {"manifests": [configmap(name, value)]}},
    }
    hub.apply(work)
    wait_until(
        lambda: conditions(hub.get(WORK, "ManifestWork", name, cluster)).get("Applied") == "True",
        timeout=120,
        what=f"ManifestWork {cluster}/{name} Applied",
    )
    wait_value(
        lambda: (spoke.find("v1", "ConfigMap", name, "default") or {}).get("data"),
        lambda data: data == {"value": value},
        timeout=30,
        what=f"ConfigMap default/{name} on {cluster} with value {value!r}",
    )
    hub.delete(WORK, "ManifestWork", name, cluster)
    # the work agent removes its finalizer only once it has handled the deletion
    wait_until(
        lambda: hub.find(WORK, "ManifestWork", name, cluster) is None,
        timeout=120,
        what="the work agent to finalize the deleted ManifestWork",
    )
    spoke.delete("v1", "ConfigMap", name, "default")


def test_cluster2_apiserver_killed_comes_back_on_its_port_with_its_data(control_plane: ControlPlane) -> None:
    hub, spoke = clients(control_plane)
    assert control_plane.spoke2 is not None
    marker = f"e2e-marker-{uuid.uuid4().hex[:6]}"
    spoke.apply(configmap(marker, "before"))
    port, old_pid = control_plane.spoke2.port, control_plane.spoke2.apiserver.pid

    control_plane.stop_component("cluster2-apiserver", kill=True)
    assert not control_plane.spoke2.apiserver.alive and not port_in_use(port)
    with pytest.raises(KubeError):
        spoke.get("v1", "ConfigMap", marker, "default")

    control_plane.start_component("cluster2-apiserver")
    assert control_plane.spoke2.apiserver.pid != old_pid and not pid_alive(old_pid or 0)
    assert port_in_use(port) and control_plane.spoke2.ready()
    # same etcd prefix: what was there before the crash is still there
    assert spoke.get("v1", "ConfigMap", marker, "default")["data"] == {"value": "before"}
    # the klusterlet's work agent reconnects to the restarted apiserver and applies new work
    deliver_configmap(hub, spoke, "cluster2", "after-restart")
    # the state file names the new pid, so `dynamic-scoring-e2e down` stops the new process
    recorded = json.loads(control_plane.state_path.read_text())["processes"]
    assert {"cluster2-kube-apiserver": control_plane.spoke2.apiserver.pid}.items() <= {
        r["name"]: r["pid"] for r in recorded
    }.items()
    spoke.delete("v1", "ConfigMap", marker, "default")


def test_hub_apiserver_restart_is_survived_by_ocm(control_plane: ControlPlane) -> None:
    hub, _ = clients(control_plane)
    assert control_plane.hub is not None
    old_pid = control_plane.hub.apiserver.pid
    control_plane.restart_component("hub-apiserver")  # SIGTERM: a graceful stop
    assert control_plane.hub.apiserver.pid != old_pid and control_plane.hub.ready()
    # cluster1 is the hub itself: its work agent watches the restarted apiserver for its work
    deliver_configmap(hub, hub, "cluster1", "hub-restarted")

    def both_available() -> bool:
        clusters = hub.items("cluster.open-cluster-management.io/v1", "ManagedCluster")
        ok = [c for c in clusters if conditions(c).get("ManagedClusterConditionAvailable") == "True"]
        return len(ok) == 2

    wait_until(both_available, timeout=60, what="both ManagedClusters still Available")


def test_unknown_or_unrestartable_component_is_refused(control_plane: ControlPlane) -> None:
    with pytest.raises(KeyError, match="hub-kube-apiserver"):  # the message lists what exists
        control_plane.stop_component("no-such-thing")
    if control_plane.with_prometheus:
        with pytest.raises(ValueError, match="fresh port"):
            control_plane.stop_component("cluster2-load-exporter")
    assert "cluster2-kube-apiserver" in control_plane.components()
    with pytest.raises(RuntimeError, match="already running"):
        control_plane.start_component("cluster2-apiserver")


def test_runner_killed_takes_its_pods_and_runs_them_again(control_plane: ControlPlane) -> None:
    _, spoke = clients(control_plane)
    ns = f"e2e-restart-{uuid.uuid4().hex[:5]}"
    spoke.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    spoke.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "sleeper", "namespace": ns},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "sleeper"}},
                "template": {
                    "metadata": {"labels": {"app": "sleeper"}},
                    "spec": {
                        "automountServiceAccountToken": False,
                        "containers": [
                            {
                                "name": "sleeper",
                                "image": default_tag(),
                                "command": ["sleep", "3600"],
                            }
                        ],
                    },
                },
            },
        }
    )
    pods_json = control_plane.run_dir / "runner" / "pods.json"

    def pid() -> int | None:
        rows = [r for r in json.loads(pods_json.read_text()) if r["namespace"] == ns and r["ready"]]
        return int(rows[0]["pid"]) if len(rows) == 1 else None

    before = wait_until(pid, timeout=60, what="the sleeper running")
    control_plane.restart_component("runner", kill=True)
    assert not pid_alive(before)  # a SIGKILLed runner does not leave its pods running
    # (pods.json still names the old pid until the new runner's first pass rewrites it)
    wait_until(
        lambda: pid() not in (None, before), timeout=60, what="the sleeper running again under the new runner"
    )
    spoke.delete("v1", "Namespace", ns)


def test_ocm_hub_controller_restart_waits_for_its_listener(control_plane: ControlPlane) -> None:
    proc = next(p for p in control_plane.procs if p.name == "hub-addon-manager")
    listen = next(a for a in proc.argv if a.startswith("--listen="))
    port = int(listen.rsplit(":", 1)[1])
    old_pid = proc.pid
    control_plane.restart_component("hub-addon-manager", kill=True)
    # ready means: listening again on the port it listened on before
    assert proc.pid != old_pid and proc.alive and port_in_use(port)
    assert not pid_alive(old_pid or 0)
