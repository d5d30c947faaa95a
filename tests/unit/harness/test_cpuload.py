"""`e2e.cpuload`: the command runs under busy workers, N times in a row, and no worker outlives it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from e2e import cpuload
from e2e.procs import pid_alive, wait_until


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` so far (from /proc, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """The workers `run_loaded` starts, kept for the test to look at afterwards."""
    seen: list[subprocess.Popen[bytes]] = []
    real = cpuload.start_workers

    def recording(count: int) -> list[subprocess.Popen[bytes]]:
        workers = real(count)
        seen.extend(workers)
        return workers

    monkeypatch.setattr(cpuload, "start_workers", recording)
    return seen


def test_the_command_runs_each_time_beside_busy_workers_that_are_gone_after(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    runs = tmp_path / "runs"
    probe = "import sys, pathlib\npathlib.Path(sys.argv[1]).open('a').write('run\\n')\n"
    code = cpuload.run_loaded([sys.executable, "-c", probe, str(runs)], workers=2, runs=3)
    assert code == 0
    assert runs.read_text().splitlines() == ["run"] * 3
    assert len(started) == 2
    assert all(worker.returncode is not None for worker in started)  # reaped
    assert not any(pid_alive(worker.pid) for worker in started)


def test_a_red_run_stops_the_series_with_its_exit_code(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    runs = tmp_path / "runs"
    second_fails = (
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "n = len(p.read_text().splitlines()) + 1 if p.exists() else 1\n"
        "p.open('a').write(f'{n}\\n')\n"
        "sys.exit(3 if n == 2 else 0)\n"
    )
    code = cpuload.run_loaded([sys.executable, "-c", second_fails, str(runs)], workers=1, runs=5)
    assert code == 3
    assert runs.read_text().splitlines() == ["1", "2"]  # runs 3 to 5 never started
    assert not any(pid_alive(worker.pid) for worker in started)


def test_a_worker_spends_cpu_and_exits_when_its_parent_is_killed() -> None:
    # a parent that starts one worker, says its pid and then waits to be killed
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from e2e.cpuload import start_workers\n"
            "(w,) = start_workers(1)\n"
            "print(w.pid, flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    try:
        wait_until(lambda: _cpu_seconds(pid) > 0.3, timeout=60, what=f"worker {pid} busy")
    finally:
        parent.kill()
        parent.wait()
    wait_until(lambda: not pid_alive(pid), timeout=60, what=f"worker {pid} gone after its parent")


def test_help_says_how_to_hunt_flakes() -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(cpuload.main, ["--help"])
    assert result.exit_code == 0
    assert "--runs" in result.output and "--workers" in result.output
