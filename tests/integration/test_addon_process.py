"""`dynamic-scoring-addon manager` as a process on the real hub: health, metrics, logs, leadership, exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.kube.api import Conflict, KubeAPI
from dynamic_scoring.kube.resources import LEASES, MANAGED_CLUSTER_ADDONS
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.procs import free_port, wait_until
from tests.integration.test_addon_controllers import ADDON_V1A1, add_cluster, hub_install

SCRIPT = Path(sys.executable).parent / "dynamic-scoring-addon"
REPO = Path(__file__).resolve().parents[2]
ADDON = "dynamic-scoring"


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    port: int
    log: Path

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


@pytest.fixture
def start(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Any]:
    assert control_plane.hub is not None
    kubeconfig = control_plane.hub.admin_kubeconfig
    # the registry controllers watch the scorer CRDs: the manager is ready once they are served
    hub = Client(kubeconfig)
    for crd in ("dynamicscorers.yaml", "dynamicscoringconfigs.yaml"):
        hub.apply_yaml((Path(__file__).resolve().parents[2] / "manifests" / "crds" / crd).read_text())
    procs: list[Proc] = []

    def run(name: str, *extra: str) -> Proc:
        port = free_port()
        log = tmp_path / f"{name}.log"
        popen = subprocess.Popen(
            [
                str(SCRIPT),
                "manager",
                f"--kubeconfig={kubeconfig}",
                f"--namespace={namespace}",
                f"--metrics-bind-address=127.0.0.1:{port}",
                "--leader-election-lease-duration=4",
                "--leader-election-renew-deadline=3",
                "--leader-election-retry-period=0.5",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb"),
        )
        proc = Proc(popen, port, log)
        procs.append(proc)
        return proc

    yield run
    for proc in procs:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait(10)


def test_help_lists_every_flag() -> None:
    out = subprocess.run(
        [str(SCRIPT), "manager", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in (
        "--kubeconfig",
        "--metrics-bind-address",
        "--leader-elect",
        "--resync-period",
        "--log-level",
    ):
        assert flag in out


def test_health_metrics_json_logs_handover_and_exit_codes(api: KubeAPI, namespace: str, start: Any) -> None:
    first: Proc = start("first")
    wait_until(
        lambda: first.get("/readyz") == (200, "leading\n"), timeout=60, what="first leads and is ready"
    )
    assert first.get("/healthz")[0] == 200
    second: Proc = start("second")
    wait_until(lambda: second.get("/readyz") == (200, "standby\n"), timeout=30, what="second stands by")
    # the gauges are set by the processes' own threads: wait for a scrape that shows them
    wait_until(
        lambda: (
            (scrape := first.get("/metrics"))[0] == 200
            and "dynamic_scoring_manager_leader 1.0" in scrape[1]
            and 'dynamic_scoring_controller_queue_depth{controller="deploy"}' in scrape[1]
        ),
        timeout=30,
        what="first's /metrics (200) with dynamic_scoring_manager_leader 1.0 and the deploy queue depth",
    )
    wait_until(
        lambda: "dynamic_scoring_manager_leader 0.0" in second.get("/metrics")[1],
        timeout=30,
        what="second's /metrics with dynamic_scoring_manager_leader 0.0",
    )

    # a reconcile's log lines carry the controller and the object's key
    ghost = namespace  # a namespace without a ManagedCluster of that name
    api.request(
        "POST",
        MANAGED_CLUSTER_ADDONS.path(ghost),
        body={
            "apiVersion": MANAGED_CLUSTER_ADDONS.api_version,
            "kind": MANAGED_CLUSTER_ADDONS.kind,
            "metadata": {"name": ADDON, "namespace": ghost},
            "spec": {"installNamespace": "x"},
        },
    )
    wait_until(
        lambda: any(
            line.get("key") == f"{ghost}/{ADDON}"
            and line.get("controller") == "registration"
            and line.get("reason") == "ManagedClusterNotFound"
            for line in first.lines()
        ),
        timeout=30,
        what="a JSON log line naming the ghost MCA",
    )

    # SIGTERM: exit 0 and release the Lease, so the standby takes over at once
    first.popen.send_signal(signal.SIGTERM)
    assert first.popen.wait(20) == 0
    wait_until(lambda: second.get("/readyz") == (200, "leading\n"), timeout=15, what="second took over")

    # a leader that cannot renew (someone else holds the Lease) stops and exits non-zero
    lease_path = LEASES.path(namespace, f"{ADDON}-addon-manager")

    def steal() -> bool:
        lease = api.request("GET", lease_path)
        lease["spec"].update({"holderIdentity": "a-thief", "leaseDurationSeconds": 3600})
        try:
            api.request("PUT", lease_path, body=lease)
        except Conflict:  # the leader renewed in between (every 0.5 s here)
            return False
        return True

    wait_until(steal, timeout=10, interval=0.05, what="the Lease taken by someone else")
    assert second.popen.wait(30) == 1
    assert any(line["level"] == "error" and "lost lease" in line["message"] for line in second.lines())


def _work_image(hub: Client, cluster: str) -> tuple[int, str] | None:
    """The deploy work's generation and the agent image it deploys, or None before it exists."""
    work = hub.find("work.open-cluster-management.io/v1", "ManifestWork", f"addon-{ADDON}-deploy-0", cluster)
    if work is None:
        return None
    images = {
        c["image"]
        for m in work["spec"]["workload"]["manifests"]
        if m.get("kind") == "Deployment"
        for c in m["spec"]["template"]["spec"]["containers"]
    }
    assert len(images) == 1, images
    return int(work["metadata"]["generation"]), images.pop()


def test_a_leader_frozen_past_its_lease_writes_nothing_when_it_runs_again(
    control_plane: ControlPlane, namespace: str, start: Any
) -> None:
    """SIGSTOP the leader past its lease; the standby leads; SIGCONT: the old one is fenced and exits.

    The two replicas are told different agent images, so every write of the old leader would show
    on the deploy work: its spec would go back to the old image and its generation would move.
    """
    assert control_plane.hub is not None
    hub = Client(control_plane.hub.admin_kubeconfig)
    hub_install(hub)
    cluster = f"fence-{uuid.uuid4().hex[:6]}"
    add_cluster(hub, cluster)
    common = ("--namespace=dynamic-scoring", f"--leader-election-namespace={namespace}")
    try:
        first: Proc = start("first", *common, "--agent-image=example.com/agent:old")
        wait_until(lambda: first.get("/readyz") == (200, "leading\n"), timeout=60, what="first leads")
        second: Proc = start("second", *common, "--agent-image=example.com/agent:new")
        wait_until(lambda: second.get("/readyz") == (200, "standby\n"), timeout=30, what="second stands by")
        wait_until(
            lambda: (_work_image(hub, cluster) or (0, ""))[1] == "example.com/agent:old",
            timeout=60,
            what="the deploy work written by the first leader",
        )

        os.kill(first.popen.pid, signal.SIGSTOP)
        frozen = time.monotonic()
        wait_until(lambda: second.get("/readyz") == (200, "leading\n"), timeout=30, what="second took over")
        wait_until(
            lambda: (_work_image(hub, cluster) or (0, ""))[1] == "example.com/agent:new",
            timeout=30,
            what="the deploy work rewritten by the new leader",
        )
        after_takeover = _work_image(hub, cluster)
        print(f"measured: standby led and rewrote the work {time.monotonic() - frozen:.1f}s after the freeze")

        os.kill(first.popen.pid, signal.SIGCONT)
        resumed = time.monotonic()
        assert first.popen.wait(30) == 1  # leadership lost: exit so that the kubelet restarts it
        print(f"measured: the old leader exited {time.monotonic() - resumed:.1f}s after it ran again")
        messages = [line["message"] for line in first.lines()]
        assert any("lost lease" in m for m in messages), messages[-5:]
        refused = sum("Fenced" in m for m in messages)
        print(f"measured: {refused} write(s) of the old leader refused by the fence after it resumed")
        # the new leader still leads, and the work is as it wrote it: not one write of the old one
        assert second.get("/readyz") == (200, "leading\n")
        assert _work_image(hub, cluster) == after_takeover
    finally:
        hub.delete(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)
        hub.delete("cluster.open-cluster-management.io/v1", "ManagedCluster", cluster)
