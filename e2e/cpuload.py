"""`python -m e2e.cpuload -- <command>`: run a command (a test tier) while busy processes take every core.

Why.  A developer's warm, quiet machine hides tests that race the clock: a wait that usually takes
2 s, asserted to take under 5 s, passes there and fails in CI, where the Go tool build takes both
cores beside the tiers.  This makes that condition on purpose and repeatable, so a flake hunt can
fail here first: ``--runs 3`` runs the command three times in a row under the load and stops at the
first red run.  `make test-loaded` runs the integration and e2e tiers this way.

The load is plain Python busy loops at the default priority, one per core unless ``--workers`` says
otherwise: each competes with the tests' processes (apiservers, controllers, agents, pytest) for CPU
as a compiler would.  A worker watches its parent and exits when the parent is gone, so even a
SIGKILLed run leaves no spinning process behind.  Each run's line reports its minutes and the
1-minute load average, the evidence that the load was there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence

import click

# Spins until its parent (this process) is gone; checks every few million iterations (~0.1 s).
SPIN = (
    "import os\n"
    "parent = os.getppid()\n"
    "while os.getppid() == parent:\n"
    "    for _ in range(2_000_000):\n"
    "        pass\n"
)


def start_workers(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` busy processes at the default priority; stop them with `stop_workers`."""
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]


def stop_workers(workers: Sequence[subprocess.Popen[bytes]]) -> None:
    """Kill every worker and reap it, so none outlives the run."""
    for worker in workers:
        if worker.poll() is None:
            worker.kill()
    for worker in workers:
        worker.wait()


def say(message: str) -> None:
    """One progress line, timestamped like the rest of the harness's output."""
    print(f"[cpuload {time.strftime('%H:%M:%S')}] {message}", flush=True)


def run_loaded(command: Sequence[str], *, workers: int, runs: int) -> int:
    """Run `command` `runs` times in a row under `workers` busy processes; the first failing code, or 0."""
    load = start_workers(workers)
    try:
        for run in range(1, runs + 1):
            say(f"run {run}/{runs} under {workers} busy worker(s): {' '.join(command)}")
            began = time.monotonic()
            code = subprocess.call(list(command))
            minutes = (time.monotonic() - began) / 60
            dead = sum(worker.poll() is not None for worker in load)
            loadavg = os.getloadavg()[0]
            verdict = "passed" if code == 0 else f"FAILED (exit {code})"
            say(f"run {run}/{runs} {verdict} in {minutes:.1f} min; load average {loadavg:.1f}")
            if dead:
                say(f"{dead} worker(s) died during the run: the load was not there; not counted")
                return 1
            if code != 0:
                say(f"stopped at run {run} of {runs}: {runs - run} not run")
                return code
        say(f"all {runs} run(s) passed under load")
        return 0
    finally:
        stop_workers(load)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=os.cpu_count() or 1,
    show_default="one per core",
    help="Busy processes to run beside the command.",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Times in a row; stops at the first red.",
)
@click.argument("command", nargs=-1, required=True)
def main(workers: int, runs: int, command: tuple[str, ...]) -> None:
    """Run COMMAND (after `--`) under a CPU load that takes every core, RUNS times in a row.

    Example, the flake hunt of docs/development.md:

        python -m e2e.cpuload --runs 3 -- .venv/bin/pytest -m "integration or e2e"
    """
    sys.exit(run_loaded(command, workers=workers, runs=runs))


if __name__ == "__main__":
    main()
