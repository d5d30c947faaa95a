"""The local OCM control plane behaves like a real one: joins, work delivery, placement, addons."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import yaml

from e2e.controlplane import ControlPlane
from e2e.image import default_tag, podman
from e2e.kube import Kubectl
from e2e.ocm import manual_addon
from e2e.procs import pid_alive, wait_until, wait_value

# v1alpha1 field paths below: on a cluster-manager hub the short name means v1beta1, where
# spec.installNamespace is an annotation and registrations have another shape
MCA_V1A1 = "managedclusteraddons.v1alpha1.addon.open-cluster-management.io"


def kubectl(cp: ControlPlane, cluster: str = "hub") -> Kubectl:
    assert cp.tools is not None and cp.hub is not None and cp.spoke2 is not None
    kc = {"hub": cp.hub, "cluster1": cp.hub, "cluster2": cp.spoke2}[cluster].admin_kubeconfig
    return Kubectl(cp.tools.kubectl, kc)


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


def test_both_clusters_accepted_joined_available(control_plane: ControlPlane) -> None:
    items = kubectl(control_plane).get_json("managedclusters")["items"]
    by_name = {mc["metadata"]["name"]: mc for mc in items}
    assert set(by_name) == {"cluster1", "cluster2"}
    for mc in by_name.values():
        assert mc["spec"]["hubAcceptsClient"] is True
        conds = conditions(mc)
        assert conds["HubAcceptedManagedCluster"] == "True"
        assert conds["ManagedClusterJoined"] == "True"
        assert conds["ManagedClusterConditionAvailable"] == "True"
    # cluster2 reports its own apiserver, not the hub's: the clusters really are separate
    urls = by_name["cluster2"]["spec"]["managedClusterClientConfigs"]
    assert urls[0]["url"] == control_plane.spoke2.server  # type: ignore[union-attr]


def test_manifestwork_reaches_cluster2_apiserver(control_plane: ControlPlane) -> None:
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    work = {
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": "cluster2"},
        "spec": {
            "workload": {
                "manifests": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": "default"},
                        "data": {"hello": "cluster2"},
                    }
                ]
            }
        },
    }
    hub, spoke = kubectl(control_plane), kubectl(control_plane, "cluster2")
    hub.apply(json.dumps(work))

    def applied() -> bool:
        mw = hub.get_json("manifestwork", name, "-n", "cluster2")
        return conditions(mw).get("Applied") == "True"

    wait_until(applied, timeout=90, what="ManifestWork Applied")
    # the work agent's write on cluster2, read there: waited for, not read once
    wait_value(
        lambda: spoke.get_json("configmap", name, "-n", "default").get("data"),
        lambda data: data == {"hello": "cluster2"},
        timeout=30,
        what=f"ConfigMap default/{name} on cluster2 with hello=cluster2",
    )
    # and not on the hub, which is cluster1's apiserver
    # (--ignore-not-found: an absent object prints nothing and exits 0; any failure of kubectl raises)
    assert hub.run("get", "configmap", name, "-n", "default", "--ignore-not-found") == ""
    hub.run("delete", "manifestwork", name, "-n", "cluster2")
    wait_until(
        lambda: spoke.run("get", "configmap", name, "-n", "default", "--ignore-not-found") == "",
        timeout=90,
        what="ConfigMap removed with its ManifestWork",
    )


def _scores(hub: Kubectl, cluster: str, value: int) -> None:
    aps = {
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
        "kind": "AddOnPlacementScore",
        "metadata": {"name": "e2e-score", "namespace": cluster},
    }
    hub.run("apply", "--server-side", "-f", "-", stdin=json.dumps(aps))
    status = {"status": {"scores": [{"name": "load", "value": value}]}}
    hub.run(
        "patch",
        "addonplacementscore",
        "e2e-score",
        "-n",
        cluster,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )


def test_placement_follows_addon_scores(control_plane: ControlPlane) -> None:
    hub = kubectl(control_plane)
    ns = f"e2e-placement-{uuid.uuid4().hex[:6]}"
    hub.run("create", "namespace", ns)
    hub.apply(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "cluster.open-cluster-management.io/v1beta2",
                    "kind": "ManagedClusterSetBinding",
                    "metadata": {"name": "global", "namespace": ns},
                    "spec": {"clusterSet": "global"},
                },
                {
                    "apiVersion": "cluster.open-cluster-management.io/v1beta1",
                    "kind": "Placement",
                    "metadata": {"name": "best", "namespace": ns},
                    "spec": {
                        "numberOfClusters": 1,
                        "clusterSets": ["global"],
                        "prioritizerPolicy": {
                            "mode": "Exact",
                            "configurations": [
                                {
                                    "scoreCoordinate": {
                                        "type": "AddOn",
                                        "addOn": {"resourceName": "e2e-score", "scoreName": "load"},
                                    },
                                    "weight": 1,
                                }
                            ],
                        },
                    },
                },
            ]
        )
    )

    def decided() -> str:
        items = hub.get_json(
            "placementdecisions", "-n", ns, "-l", "cluster.open-cluster-management.io/placement=best"
        )["items"]
        chosen = [d["clusterName"] for i in items for d in i.get("status", {}).get("decisions", [])]
        return chosen[0] if len(chosen) == 1 else ""

    _scores(hub, "cluster1", 80)
    _scores(hub, "cluster2", -20)
    wait_until(lambda: decided() == "cluster1", timeout=60, what="decision for cluster1")
    _scores(hub, "cluster1", 10)
    _scores(hub, "cluster2", 90)
    wait_until(lambda: decided() == "cluster2", timeout=60, what="decision flipped to cluster2")
    hub.run("delete", "namespace", ns, "--wait=false")
    for c in ("cluster1", "cluster2"):
        hub.run("delete", "addonplacementscore", "e2e-score", "-n", c)


def test_clusteradm_enable_and_addon_csr_signed(control_plane: ControlPlane) -> None:
    assert control_plane.tools is not None and control_plane.hub is not None
    hub, spoke = kubectl(control_plane), kubectl(control_plane, "cluster2")
    addon = f"e2e-addon-{uuid.uuid4().hex[:5]}"
    with manual_addon(control_plane.tools, control_plane.hub.admin_kubeconfig, addon, "cluster2") as out:
        _addon_csr_flow(hub, spoke, addon, out)


def _addon_csr_flow(hub: Kubectl, spoke: Kubectl, addon: str, out: str) -> None:
    assert "cluster2" in out
    mca = hub.get_json(MCA_V1A1, addon, "-n", "cluster2")
    assert mca["spec"]["installNamespace"] == "open-cluster-management-agent-addon"

    # Play the addon manager's part: declare a kube-apiserver-client registration ...
    status = {
        "status": {
            "namespace": "open-cluster-management-agent-addon",
            "registrations": [{"signerName": "kubernetes.io/kube-apiserver-client"}],
        }
    }
    hub.run(
        "patch",
        MCA_V1A1,
        addon,
        "-n",
        "cluster2",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )

    # ... the klusterlet's registration agent then asks for a certificate ...
    def csr() -> dict[str, Any] | None:
        items = hub.get_json("csr", "-l", f"open-cluster-management.io/addon-name={addon}")["items"]
        return items[0] if items else None

    request = wait_until(csr, timeout=90, what=f"CSR for addon {addon}")
    assert request["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client"
    assert request["spec"]["username"].startswith("system:open-cluster-management:cluster2")
    # ... which the addon manager approves and kube-controller-manager signs.
    hub.run("certificate", "approve", request["metadata"]["name"])

    def signed() -> str:
        got = csr()
        return got.get("status", {}).get("certificate", "") if got else ""

    cert = base64.b64decode(wait_until(signed, timeout=60, what="CSR signed by kube-controller-manager"))
    assert b"BEGIN CERTIFICATE" in cert
    # the registration agent turns it into the addon's hub kubeconfig Secret on the managed cluster
    # (it may exist before it holds the certificate: wait for all three keys)
    wait_value(
        lambda: spoke.get_json(
            "secret", f"{addon}-hub-kubeconfig", "-n", "open-cluster-management-agent-addon"
        ),
        lambda secret: {"kubeconfig", "tls.crt", "tls.key"} <= set(secret.get("data") or {}),
        timeout=90,
        what="addon hub-kubeconfig secret on cluster2 with kubeconfig, tls.crt and tls.key",
    )


def test_runner_runs_a_deployment_like_a_kubelet(control_plane: ControlPlane) -> None:
    spoke = kubectl(control_plane, "cluster2")
    ns = f"e2e-runner-{uuid.uuid4().hex[:5]}"
    spoke.run("create", "namespace", ns)
    spoke.run("create", "serviceaccount", "probe", "-n", ns)
    spoke.run("create", "secret", "generic", "probe-secret", "-n", ns, "--from-literal=value=s3cr3t")
    # the probe reads its own ConfigMaps back: let its ServiceAccount write them
    spoke.run("create", "role", "probe", "-n", ns, "--verb=create,update,get", "--resource=configmaps")
    spoke.run("create", "rolebinding", "probe", "-n", ns, "--role=probe", f"--serviceaccount={ns}:probe")
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "probe"}},
            "template": {
                "metadata": {"labels": {"app": "probe"}},
                "spec": {
                    "serviceAccountName": "probe",
                    "containers": [
                        {
                            "name": "probe",
                            "image": default_tag(),
                            # a harness command: the runner provides it in both modes (in container
                            # mode with the image's Python and the checkout's e2e/ mounted read-only)
                            "command": ["dynamic-scoring-e2e-probe"],
                            "args": ["--secret-file=/etc/probe/value", "--bind-address=:8080"],
                            "env": [
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                                {
                                    "name": "POD_NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                            ],
                            "ports": [{"containerPort": 8080}],
                            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                            "volumeMounts": [{"name": "secret", "mountPath": "/etc/probe", "readOnly": True}],
                        }
                    ],
                    "volumes": [{"name": "secret", "secret": {"secretName": "probe-secret"}}],
                },
            },
        },
    }
    spoke.apply(json.dumps(deploy))

    def available() -> bool:
        d = spoke.get_json("deployment", "probe", "-n", ns)
        return conditions(d).get("Available") == "True" and d["status"].get("readyReplicas") == 1

    wait_until(available, timeout=60, what="probe Deployment Available")
    cms = [
        c
        for c in spoke.get_json("configmaps", "-n", ns)["items"]
        if c["metadata"]["name"].startswith("probe-")
    ]
    assert len(cms) == 1
    assert cms[0]["data"]["secret"] == "s3cr3t"
    assert cms[0]["data"]["username"] == f"system:serviceaccount:{ns}:probe"

    pods_json = control_plane.run_dir / "runner" / "pods.json"

    def pod() -> dict[str, Any] | None:
        rows = [r for r in json.loads(pods_json.read_text()) if r["namespace"] == ns]
        return rows[0] if rows else None

    # the runner writes pods.json after its whole pass, the Deployment's status during it
    first = wait_value(
        pod, lambda p: bool(p and p["pid"]), timeout=30, what=f"a running probe in pods.json ({ns})"
    )
    assert first and first["pid"] and first["restarts"] == 0
    import os
    import signal

    if first.get("container"):  # a crash of the container's process, not of podman
        podman("kill", "--signal", "KILL", first["container"])
    else:
        os.kill(first["pid"], signal.SIGKILL)  # a crash
    wait_until(
        lambda: (p := pod()) is not None and p["restarts"] == 1 and p["ready"] and p["pid"] != first["pid"],
        timeout=60,
        what="probe restarted after the crash",
    )
    wait_until(available, timeout=60, what="probe Available again after restart")

    # a rotated Secret reaches the mounted file while the process runs, as the kubelet syncs it
    spoke.apply(
        json.dumps(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "probe-secret", "namespace": ns},
             "stringData": {"value": "rotated"}}
        )
    )  # fmt: skip
    mounted = Path(pod()["log"]).parent / "volumes" / "secret" / "value"  # type: ignore[index]
    wait_until(lambda: mounted.read_text() == "rotated", timeout=30, what="secret volume re-synced")

    # a changed pod template replaces the process
    before = pod()["pid"]  # type: ignore[index]
    spoke.run("set", "env", "deployment/probe", "-n", ns, "EXTRA=1")
    wait_until(
        lambda: (p := pod()) is not None and p["pid"] not in (None, before) and p["ready"],
        timeout=60,
        what="probe replaced after the template change",
    )
    wait_until(available, timeout=60, what="probe Available after the template change")

    # scale to zero stops it and still counts as available; scaling back starts it again
    spoke.run("scale", "deployment/probe", "-n", ns, "--replicas=0")
    wait_until(lambda: pod() is None, timeout=30, what="no probe process at zero replicas")
    wait_until(
        lambda: (
            conditions(spoke.get_json("deployment", "probe", "-n", ns)).get("Available") == "True"
            # the apiserver omits zero counts
            and spoke.get_json("deployment", "probe", "-n", ns)["status"].get("replicas", 0) == 0
        ),
        timeout=30,
        what="status of a Deployment scaled to zero",
    )
    spoke.run("scale", "deployment/probe", "-n", ns, "--replicas=1")
    wait_until(available, timeout=60, what="probe Available after scaling back")

    pid = pod()["pid"]  # type: ignore[index]
    spoke.run("delete", "deployment", "probe", "-n", ns)
    wait_until(lambda: pod() is None, timeout=30, what="runner dropped the deleted Deployment")
    wait_until(lambda: not pid_alive(pid), timeout=30, what=f"the deleted Deployment's process {pid} gone")
    spoke.run("delete", "namespace", ns, "--wait=false")


def test_prometheus_per_cluster_follows_shaped_load(control_plane: ControlPlane) -> None:
    from e2e.loadgen import LoadFile

    info = control_plane.clusters["cluster2"]
    assert info.prometheus_url and info.load_file
    assert control_plane.clusters["cluster1"].prometheus_url != info.prometheus_url
    LoadFile(info.load_file).set_cpu("e2e", "shaped", 2.5, node="cluster2-node")
    prom = control_plane.prometheus["cluster2"]
    query = 'sum by (pod) (rate(container_cpu_usage_seconds_total{namespace="e2e",pod="shaped"}[10s]))'

    def near(target: float) -> bool:
        result = prom.query(query)
        return bool(result) and abs(float(result[0]["value"][1]) - target) < 0.05 * target

    wait_until(lambda: near(2.5), timeout=60, what="Prometheus rate near 2.5 cores")
    LoadFile(info.load_file).set_cpu("e2e", "shaped", 0.5, node="cluster2-node")
    wait_until(lambda: near(0.5), timeout=60, what="Prometheus rate near 0.5 cores after the change")
    # cluster1's Prometheus does not see cluster2's load
    assert control_plane.prometheus["cluster1"].query(query) == []
    LoadFile(info.load_file).remove("e2e", "shaped", node="cluster2-node")
