"""Stopping the environment leaves no process and no port behind (runs last: it stops the session's)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from e2e.controlplane import ControlPlane, running
from e2e.procs import listening_ports, pid_alive, port_in_use


@pytest.mark.teardown_last
def test_down_leaves_no_process_and_no_port(control_plane: ControlPlane) -> None:
    cli = [sys.executable, "-m", "e2e.cli", f"--run-dir={control_plane.run_dir}"]
    status = subprocess.run([*cli, "status"], capture_output=True, text=True, check=False)
    assert status.returncode == 0, status.stdout + status.stderr
    records = json.loads(control_plane.state_path.read_text())["processes"]
    assert len(records) >= 15 and "processes running" in status.stdout
    pids = {r["pid"] for r in records}
    ports = listening_ports(pids)
    runner_pods = json.loads((control_plane.run_dir / "runner" / "pods.json").read_text())
    pod_pids = {p["pid"] for p in runner_pods if p["pid"]}
    assert len(ports) >= 10  # apiservers, etcd, controllers, Prometheus, exporters
    down = subprocess.run([*cli, "down"], capture_output=True, text=True, check=False)
    assert down.returncode == 0, down.stdout + down.stderr
    assert running(control_plane.state_path) == []
    assert not [p for p in ports if port_in_use(p)]
    # (zombies of this test process may remain until it reaps them; they hold nothing)
    assert not [pid for pid in pids | pod_pids if pid_alive(pid)]
    after = subprocess.run([*cli, "status"], capture_output=True, text=True, check=False)
    assert after.returncode == 1 and "0/" in after.stdout
