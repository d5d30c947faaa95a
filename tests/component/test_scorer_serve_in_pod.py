"""``serve`` told to listen on loopback inside a pod says, at start, that nothing can reach it.

The scorer runs as a real process (the library's own ``serve``), with the variable the kubelet sets in
every pod; it listens on 127.0.0.1 only, as every server a test starts must.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCORER = """
import sys

from dynamic_scoring.scorer import ScorerApp, result, serve

# The module, not the function the package exports under the same name.  The test may itself run in
# a container, so it names the marker files.
sys.modules["dynamic_scoring.scorer.serve"].CONTAINER_MARKERS = tuple(sys.argv[1:])

serve(ScorerApp(lambda request: [result(1)], name="in_pod", query="up"), host="127.0.0.1", port=0)
"""


def _start_and_read(env: dict[str, str], *markers: str) -> str:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCORER, *markers],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "listening on http://" in line:
                break
        return "".join(lines)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        proc.stderr.close()


def test_loopback_in_a_container_is_warned_about(tmp_path: Path) -> None:
    (tmp_path / ".containerenv").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    out = _start_and_read(env, str(tmp_path / ".containerenv"))
    assert f"in a container ({tmp_path / '.containerenv'} exists)" in out, out


def test_loopback_in_a_pod_is_warned_about() -> None:
    out = _start_and_read({**os.environ, "KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert "listening on http://127.0.0.1:" in out, out
    assert "nothing outside this container can reach the scorer" in out
    assert "in a Kubernetes pod (KUBERNETES_SERVICE_HOST is set)" in out


def test_loopback_on_a_plain_host_is_not() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    out = _start_and_read(env, "/nonexistent/.containerenv")
    assert "listening on http://127.0.0.1:" in out, out
    assert "WARNING" not in out
