"""Stopping the environment leaves no process and no port behind (runs last: it stops the session's)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from e2e.controlplane import CLUSTERS, ControlPlane, running
from e2e.procs import listening_ports, pid_alive, port_in_use


@pytest.mark.teardown_last
def test_down_leaves_no_process_and_no_port(control_plane: ControlPlane) -> None:
    cli = [sys.executable, "-m", "e2e.cli", f"--run-dir={control_plane.run_dir}"]
    status = subprocess.run([*cli, "status"], capture_output=True, text=True, check=False)
    assert status.returncode == 0, status.stdout + status.stderr
    records = json.loads(control_plane.state_path.read_text())["processes"]
    names = {r["name"] for r in records}
    # what must run in every configuration, and the Prometheus pair per cluster only when asked for
    assert {"etcd", "hub-kube-apiserver", "cluster2-kube-apiserver", "runner"} <= names, names
    prometheus = {f"{c}-{part}" for c in CLUSTERS for part in ("prometheus", "load-exporter")}
    assert (prometheus <= names) if control_plane.with_prometheus else not (prometheus & names), names
    assert sorted(r["name"] for r in records) == sorted(p.name for p in control_plane.procs)
    assert f"{len(records)}/{len(records)} processes running" in status.stdout, status.stdout
    pids = {r["pid"] for r in records}
    ports = listening_ports(pids)
    runner_pods = json.loads((control_plane.run_dir / "runner" / "pods.json").read_text())
    pod_pids = {p["pid"] for p in runner_pods if p["pid"]}
    # at least etcd (client and peer) and both apiservers listen; every listener is checked below
    assert len(ports) >= 4, ports
    down = subprocess.run([*cli, "down"], capture_output=True, text=True, check=False)
    assert down.returncode == 0, down.stdout + down.stderr
    assert running(control_plane.state_path) == []
    assert not [p for p in ports if port_in_use(p)]
    # (zombies of this test process may remain until it reaps them; they hold nothing)
    assert not [pid for pid in pids | pod_pids if pid_alive(pid)]
    after = subprocess.run([*cli, "status"], capture_output=True, text=True, check=False)
    assert after.returncode == 1 and "0/" in after.stdout
