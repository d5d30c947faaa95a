"""The process runner runs the Deployments this project ships as the kubelet would.

The hub manager and the agent carry security contexts, resources, probes on named ports, env from
the downward API and from ConfigMaps/Secrets, `$(VAR)` in args, a Secret mounted as a directory,
node placement and several replicas.  This test gives the runner all of them at once.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

import pytest

from e2e.controlplane import ControlPlane
from e2e.image import default_tag, image_id, podman
from e2e.kube import Client
from e2e.procs import pid_alive, wait_until, wait_value

IMAGE = default_tag()  # the image `make image` builds; the runner runs it with podman


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


def probe_deployment(ns: str, name: str, *, replicas: int, secret_key: str = "value") -> dict[str, Any]:
    container = {
        "name": "probe",
        "image": IMAGE,
        "command": ["dynamic-scoring-e2e-probe"],
        "args": [
            "--secret-file=/etc/probe/value",
            "--bind-address=:8080",
            "--report-env=POD_NAMESPACE",
            "--report-env=NODE",
            "--report-env=FROM_CM",
            "--report-env=FROM_SECRET",
            "--report-env=COMBINED",
            "--report-env=MISSING_OPTIONAL",
            "--label=$(POD_NAMESPACE)",
            "--literal=$$(POD_NAMESPACE)",
        ],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "level"}}},
            {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "creds", "key": secret_key}}},
            {
                "name": "MISSING_OPTIONAL",
                "valueFrom": {"secretKeyRef": {"name": "absent", "key": "x", "optional": True}},
            },
            {"name": "COMBINED", "value": "$(POD_NAMESPACE)/$(FROM_CM)"},
        ],
        "ports": [{"name": "health", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 1},
        "livenessProbe": {
            "httpGet": {"path": "/livez", "port": "health"},
            "initialDelaySeconds": 20,  # the probe takes seconds to start on a loaded machine
            "periodSeconds": 1,
            "failureThreshold": 2,
        },
        "resources": {
            "requests": {"cpu": "10m", "memory": "32Mi"},
            "limits": {"cpu": "200m", "memory": "128Mi"},
        },
        "securityContext": {
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "creds", "mountPath": "/etc/probe", "readOnly": True},
            {"name": "scratch", "mountPath": "/scratch"},
            {"name": "projected", "mountPath": "/var/run/projected", "readOnly": True},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccountName": "probe",
                    "securityContext": {
                        "runAsNonRoot": True,
                        "fsGroup": 65532,  # the Secret volume is 0440: readable through the group
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{"key": "node-role.kubernetes.io/infra", "operator": "Exists"}],
                    "containers": [container],
                    "volumes": [
                        {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o440}},
                        {"name": "scratch", "emptyDir": {}},
                        {
                            "name": "projected",
                            "projected": {
                                "sources": [
                                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                                    {
                                        "configMap": {
                                            "name": "settings",
                                            "items": [{"key": "level", "path": "level"}],
                                        }
                                    },
                                ]
                            },
                        },
                    ],
                },
            },
        },
    }


def unavailable_reason(spoke: Client, ns: str, name: str) -> str:
    """The Deployment's `Available=False` message, once the runner has written one."""

    def message() -> str:
        cond = conditions(spoke.get("apps/v1", "Deployment", name, ns)).get("Available", {})
        return str(cond.get("message", "")) if cond.get("status") == "False" else ""

    return str(wait_until(message, timeout=60, what=f"{name}: Available=False with a reason"))


def listed_replicas(control_plane: ControlPlane, ns: str) -> list[dict[str, Any]]:
    """The namespace's rows of pods.json, once the runner lists any.

    The runner writes a Deployment's status while it syncs and pods.json after the whole pass, so a
    status seen a moment ago may not be in pods.json yet.
    """
    path = control_plane.run_dir / "runner" / "pods.json"

    def rows() -> list[dict[str, Any]]:
        return [r for r in json.loads(path.read_text()) if r["namespace"] == ns]

    return list(wait_until(rows, timeout=30, what=f"pods.json rows of {ns}"))


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Any:
    assert control_plane.spoke2 is not None
    spoke = Client(control_plane.spoke2.admin_kubeconfig)
    ns = f"e2e-runner-{uuid.uuid4().hex[:5]}"
    rbac = "rbac.authorization.k8s.io/v1"
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "probe", "namespace": ns}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": ns},
            "stringData": {"value": "s3cr3t"},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": ns},
            "data": {"level": "debug"},
        },
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "probe", "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "update", "get"]}],
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "probe", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "probe"},
            "subjects": [{"kind": "ServiceAccount", "name": "probe", "namespace": ns}],
        },
    ]
    for obj in objects:
        spoke.apply(obj)
    yield spoke, ns
    spoke.delete("v1", "Namespace", ns)


def test_runner_runs_what_the_manager_and_agent_deployments_carry(
    control_plane: ControlPlane, namespace: tuple[Client, str]
) -> None:
    spoke, ns = namespace
    spoke.apply(probe_deployment(ns, "probe", replicas=2))
    pods_json = control_plane.run_dir / "runner" / "pods.json"

    def pods() -> list[dict[str, Any]]:
        rows = [r for r in json.loads(pods_json.read_text()) if r["namespace"] == ns]
        return sorted(rows, key=lambda r: str(r["pod"]))

    def available() -> bool:
        d = spoke.get("apps/v1", "Deployment", "probe", ns)
        return (
            conditions(d).get("Available", {}).get("status") == "True"
            and d["status"].get("readyReplicas") == 2
        )

    wait_until(available, timeout=90, what="two probe replicas Available")
    # pods.json is written after the runner's whole pass, the status during it (see listed_replicas)
    rows = wait_value(
        pods,
        lambda rows: len(rows) == 2 and len({r["pid"] for r in rows}) == 2,  # each replica its own process
        timeout=30,
        what=f"two rows of {ns} in pods.json, each with its own process",
    )
    assert rows[0]["ports"]["8080"] != rows[1]["ports"]["8080"]  # and its own port
    reports = {
        c["metadata"]["name"]: c["data"]
        for c in spoke.items("v1", "ConfigMap", ns)
        if c["metadata"]["name"].startswith("probe-probe-")
    }
    assert set(reports) == {f"probe-{r['pod']}" for r in rows}
    for data in reports.values():
        assert data["secret"] == "s3cr3t"  # the Secret mounted as a directory
        assert data["username"] == f"system:serviceaccount:{ns}:probe"
        assert json.loads(data["env"]) == {
            "POD_NAMESPACE": ns,
            "NODE": "e2e-node",
            "FROM_CM": "debug",
            "FROM_SECRET": "s3cr3t",
            "COMBINED": f"{ns}/debug",
            "MISSING_OPTIONAL": None,
        }
        argv = json.loads(data["argv"])
        assert f"--label={ns}" in argv and "--literal=$(POD_NAMESPACE)" in argv

    # each replica is a container of the built image, as the image's non-root user, on a read-only
    # root where only the emptyDir is writable, under its memory limit
    built = image_id(IMAGE).removeprefix("sha256:")
    for row in rows:
        name = row["container"]
        assert name and podman("inspect", "--format", "{{.ImageID}}", name).strip() == built
        assert podman("exec", name, "id", "-u").strip() == "65532"
        assert podman("inspect", "--format", "{{.HostConfig.Memory}}", name).strip() == str(128 * 2**20)
        podman("exec", name, "touch", "/scratch/written")
        # one projected volume holds both sources; its token is the pod user's
        assert podman("exec", name, "cat", "/var/run/projected/level").strip() == "debug"
        assert podman("exec", name, "sh", "-c", "test -r /var/run/projected/token && echo ok").strip() == "ok"
        out = podman("exec", name, "sh", "-c", "touch /written 2>&1 || echo refused", check=False)
        assert "Read-only file system" in out and "refused" in out

    # liveness: replica 0 starts failing /livez; the runner kills and restarts it, not replica 1
    first, second = rows
    with urllib.request.urlopen(f"http://127.0.0.1:{first['ports']['8080']}/fail", timeout=2) as r:
        assert r.status == 200

    def restarted_by_liveness() -> bool:
        now = {r["pod"]: r for r in pods()}
        row = now.get(first["pod"])
        return bool(row and row["liveness_restarts"] == 1 and row["pid"] not in (None, first["pid"]))

    wait_until(restarted_by_liveness, timeout=60, what="replica 0 restarted after failing liveness")
    assert not pid_alive(first["pid"])
    wait_until(available, timeout=60, what="both replicas Available after the liveness restart")
    after = {r["pod"]: r for r in pods()}
    assert after[second["pod"]]["pid"] == second["pid"] and after[second["pod"]]["restarts"] == 0


def test_missing_secret_key_is_a_clear_status_and_nothing_runs(
    control_plane: ControlPlane, namespace: tuple[Client, str]
) -> None:
    spoke, ns = namespace
    spoke.apply(probe_deployment(ns, "broken", replicas=1, secret_key="nope"))

    text = unavailable_reason(spoke, ns, "broken")
    assert 'CreateContainerConfigError: key "nope" in secret "creds" not found' in text
    assert [r["pid"] for r in listed_replicas(control_plane, ns)] == [None]


def test_an_image_not_in_local_storage_is_err_image_pull_and_nothing_runs(
    control_plane: ControlPlane, namespace: tuple[Client, str]
) -> None:
    spoke, ns = namespace
    missing = IMAGE.rpartition(":")[0] + ":not-built-here"
    deployment = probe_deployment(ns, "unpulled", replicas=1)
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = missing
    spoke.apply(deployment)

    text = unavailable_reason(spoke, ns, "unpulled")
    assert f'ErrImagePull: image "{missing}" is not present in local storage' in text
    assert "make image" in text
    assert [r["pid"] for r in listed_replicas(control_plane, ns)] == [None], (
        "it must never fall back to the checkout"
    )


def test_run_as_non_root_refuses_a_root_user_as_the_kubelet_does(
    control_plane: ControlPlane, namespace: tuple[Client, str]
) -> None:
    spoke, ns = namespace
    deployment = probe_deployment(ns, "rooted", replicas=1)
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsUser"] = 0
    spoke.apply(deployment)

    text = unavailable_reason(spoke, ns, "rooted")
    assert "CreateContainerConfigError: container's runAsUser breaks non-root policy" in text
