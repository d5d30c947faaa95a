"""`e2e/build-tools.sh` never looks hung: a plan, `[i/n]` per build, a heartbeat, and what is left.

Real builds into a fresh tools root: the Collector (built with the Collector builder, a few seconds
when the shared Go caches are warm) and the ocm-api CRDs, with the Go module and build caches of
the real tools cache shared, as `make tools` shares them between components.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from e2e.gobuild import tools_root
from e2e.procs import wait_until
from e2e.tools import BUILD_SCRIPT


def _env(root: Path) -> dict[str, str]:
    shared = tools_root()
    return {
        **os.environ,
        "DS_TOOLS_CACHE": str(root),
        "GOMODCACHE_OVERRIDE": str(shared / "gomod"),
        "GOCACHE_OVERRIDE": str(shared / "gocache"),
        "DS_TOOLS_HEARTBEAT": "1",
    }


def _build(root: Path, *components: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BUILD_SCRIPT), *components],
        env=_env(root),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_build_prints_its_plan_each_step_a_heartbeat_and_what_is_left(tmp_path: Path) -> None:
    done = _build(tmp_path, "ocm-api")
    assert done.returncode == 0, done.stderr

    done = _build(tmp_path, "ocm-api", "otelcol")
    assert done.returncode == 0, done.stderr
    err = done.stderr
    # the plan: what will be built with its typical cold time, the total, and what is cached
    assert re.search(
        r"to build: otelcol \(~3 min\); about ~3 min in all on 2 cores; cached: ocm-api\n", err
    ), err
    assert re.search(
        r"\[1/1\] otelcol v0\.160\.0: building, typically ~3 min cold; about ~3 min left in all", err
    )
    # at least one heartbeat while it builds (every DS_TOOLS_HEARTBEAT = 1 s)
    assert re.search(r"  otelcol: 0m0\ds so far \(a cold build typically takes ~3 min\)", err), err
    assert re.search(r"otelcol v0\.160\.0: built in \dm\d\ds -> ", err), err
    assert f"otelcol={tmp_path}/otelcol-v0.160.0-" in done.stdout
    binary = next(tmp_path.glob("otelcol-v0.160.0-*/bin/otelcol-ds"))
    assert os.access(binary, os.X_OK)

    # the heartbeat stopped with the build: no sleep of the ticker is left behind
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert "sleep 1\n" not in ps.replace("\r", ""), ps


def test_a_second_run_says_it_waits_for_the_build_in_progress(tmp_path: Path) -> None:
    log = tmp_path / "first.err"
    with log.open("w") as err:
        first = subprocess.Popen(
            [str(BUILD_SCRIPT), "otelcol"], env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=err
        )
    try:
        wait_until(
            lambda: "[1/1] otelcol" in log.read_text(), timeout=60, what="the first run building otelcol"
        )
        second = _build(tmp_path, "otelcol")
        assert first.wait(timeout=600) == 0, log.read_text()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert second.returncode == 0, second.stderr
    assert "otelcol: another build of it is running; waiting for it" in second.stderr, second.stderr
    assert re.search(r"otelcol v0\.160\.0: cached at ", second.stderr), second.stderr
    assert "building" not in second.stderr, second.stderr
