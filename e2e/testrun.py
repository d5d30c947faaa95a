"""`python -m e2e.testrun` (behind `make test`): every check and test tier, overlapped with the tool build.

Why not plain make prerequisites: on a machine whose tools cache is empty, building the pinned Go
components takes most of an hour, and make would run every test only after the last of them.  The
tiers need different tools, so this runs them in the order the tools arrive:

1. one background `e2e/build-tools.sh` for every component, those the control plane needs first;
2. meanwhile: lint (Python), the image, and the unit, component and packaging tiers, which need no
   Go tool;
3. once the control plane's tools are built: actionlint, then the integration and e2e tiers;
4. once their tools are built: the tests marked `late_tools` (Argo CD, Kueue, kueue-addon, the
   upstream Go addon, the Collector), while OCM v1.2.1 builds; then the OCM-contract e2e tests on
   that older release.

When every tool is already cached it runs lint and the image, then the integration and e2e tiers
with a second pytest run always beside them: first the tiers that start no control plane, then the
compat run with a control plane of its own.

Every step runs even when an earlier one failed (except those whose tools failed to build), so one
failure does not hide another; the summary at the end lists each step, its time and its result.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import click

from e2e.tools import BUILD_SCRIPT

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COMPAT_OCM = "v1.2.1"
# What the control plane and lint need, in the order the first tests need them.
CONTROL_PLANE_TOOLS = ("actionlint", "etcd", "k8s", "ocm13", "clusteradm", "helm", "ocm-api")
# What only the tests marked late_tools need, then what only the compat run needs (OCM v1.2.1).
LATE_TOOLS = ("otelcol", "argocd", "kueue", "kueue-addon", "upstream", "kube-rbac-proxy")
COMPAT_TOOLS = ("ocm",)
ALL_TOOLS = (*CONTROL_PLANE_TOOLS, *LATE_TOOLS, *COMPAT_TOOLS)
LATE = "late_tools"
# The tiers that start no control plane: what runs beside the tool build (cold) or beside the
# integration and e2e tiers (warm).
NO_CONTROL_PLANE = "(unit or component or packaging)"
BESIDE_TMP = Path(os.environ.get("TMPDIR", "/tmp")) / f"ds-testrun-{os.getpid()}"


@dataclass
class Step:
    """One step's name, time and result, for the summary."""

    name: str
    seconds: float
    ok: bool
    note: str = ""


@dataclass
class Beside:
    """A step running in the background, and the log its output goes to."""

    name: str
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float
    ended: list[float] = field(default_factory=list)
    """When the process exited (set by a waiter thread), so the summary shows its own minutes
    rather than how long the foreground step kept it waiting."""


@dataclass
class Run:
    """The steps run so far, and what a failed build makes impossible."""

    steps: list[Step] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def say(self, message: str) -> None:
        """A progress line with the minutes since the start, on stderr like build-tools.sh's."""
        elapsed = time.monotonic() - self.started
        click.echo(f"[make test {elapsed / 60:5.1f} min] {message}", err=True)

    def run(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> bool:
        """Run one step in the repository, its output straight to the terminal; True when it passed."""
        self.say(f"{name}: {' '.join(argv)}")
        start = time.monotonic()
        code = subprocess.run(list(argv), cwd=REPO, env=env, check=False).returncode
        ok = code == 0
        self.steps.append(Step(name, time.monotonic() - start, ok, "" if ok else f"exit {code}"))
        verdict = "passed" if ok else f"FAILED (exit {code})"
        self.say(f"{name}: {verdict} in {self.steps[-1].seconds / 60:.1f} min")
        return ok

    def start(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Beside:
        """Start a step in the background, its output to a log shown by `finish` (not interleaved)."""
        self.say(f"{name}: {' '.join(argv)} (output shown when it ends)")
        log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - closed by finish, not here
        proc = subprocess.Popen(
            list(argv), cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        step = Beside(name, proc, log, time.monotonic())

        def waiter() -> None:
            proc.wait()
            step.ended.append(time.monotonic())

        threading.Thread(target=waiter, name=f"wait {name}", daemon=True).start()
        return step

    def finish(self, step: Beside) -> bool:
        """Wait for a background step, print its output and record it; True when it passed."""
        try:
            code = step.proc.wait()
        except BaseException:  # an interrupted run stops the step's whole process group
            os.killpg(step.proc.pid, signal.SIGTERM)
            step.proc.wait()
            raise
        seconds = (step.ended[0] if step.ended else time.monotonic()) - step.started
        ok = code == 0
        self.steps.append(Step(step.name, seconds, ok, "" if ok else f"exit {code}"))
        step.log.seek(0)
        self.say(f"{step.name}: its output follows")
        sys.stdout.flush()
        sys.stdout.buffer.write(step.log.read())
        sys.stdout.flush()
        step.log.close()
        verdict = "passed" if ok else f"FAILED (exit {code})"
        self.say(f"{step.name}: {verdict} in {seconds / 60:.1f} min")
        return ok

    def skip(self, name: str, why: str) -> None:
        """Record a step that cannot run; it counts as a failure."""
        self.steps.append(Step(name, 0.0, False, f"not run: {why}"))
        self.say(f"{name}: not run: {why}")

    def summary(self) -> bool:
        """Print every step with its minutes and result; True when all passed."""
        total = time.monotonic() - self.started
        click.echo("\nmake test: step, minutes, result", err=True)
        for step in self.steps:
            result = "ok" if step.ok else (step.note or "failed")
            click.echo(f"  {step.name:<44} {step.seconds / 60:6.1f}  {result}", err=True)
        ok = all(step.ok for step in self.steps)
        click.echo(f"  {'total':<44} {total / 60:6.1f}  {'passed' if ok else 'FAILED'}", err=True)
        return ok


def build_tools_argv(*components: str) -> list[str]:
    """build-tools.sh for `components`: builds what is missing, waits for what another run builds."""
    return [str(BUILD_SCRIPT), *components]


def all_cached() -> bool:
    """True when every component is in the tools cache (build-tools.sh builds nothing then)."""
    env = {**os.environ, "DS_TOOLS_CACHED_ONLY": "1"}
    argv = build_tools_argv(*ALL_TOOLS)
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    return done.returncode == 0


def make(target: str) -> list[str]:
    """A Makefile target, so lint and the image stay defined in one place."""
    return ["make", "--no-print-directory", target]


def pytest(marks: str, *, beside: str = "") -> list[str]:
    """The venv's pytest for a marker expression (every test when empty).

    `beside` names a run beside another pytest: no cache writes (both would write `.pytest_cache`)
    and its own temporary root under BESIDE_TMP, so neither run's cleanup of old temporary
    directories meets the other's.
    """
    argv = [str(BIN / "pytest")] + (["-m", marks] if marks else [])
    if beside:
        BESIDE_TMP.mkdir(parents=True, exist_ok=True)  # pytest makes --basetemp but not its parent
        argv += ["-p", "no:cacheprovider", "--basetemp", str(BESIDE_TMP / beside)]
    return argv


COMPAT_STEP = f"OCM-contract e2e tests on OCM {COMPAT_OCM}"
COMPAT_MARKS = "e2e and ocm_contract"


def compat_env() -> dict[str, str]:
    """The environment of the compat run: the same tests on the older OCM release."""
    return {**os.environ, "DS_OCM_VERSION": COMPAT_OCM}


def compat(run: Run) -> None:
    """The OCM-contract e2e tests once more, on the older OCM release."""
    run.run(COMPAT_STEP, pytest(COMPAT_MARKS), env=compat_env())


def warm(run: Run) -> None:
    """Every tool cached: lint and the image, then three pytest runs, never more than two at a time.

    The integration and e2e tiers (one control plane, about 22 minutes) are the long pole.  Beside
    them run first the unit, component and packaging tiers (about 10 minutes there; they mostly wait
    on their loopback servers and subprocesses), then, as soon as those end, the OCM-contract e2e
    tests on OCM v1.2.1 (about 4 minutes alone) with a control plane of their own: two control
    planes on one host share nothing (free loopback ports, their own run directories, podman
    containers labelled per runner, image tags per run), and run one after the other these took
    another 4 minutes at the end.  The two background runs' output is kept in logs and shown after
    the foreground run's, not interleaved.
    """
    run.say("every tool is cached: lint, image, then the tiers, a second pytest run always beside the first")
    run.run("lint", make("lint"))
    if not run.run("image", make("image")):
        run.skip("pytest: every tier", "the image did not build")
        compat(run)
        return
    tiers = pytest(NO_CONTROL_PLANE, beside="tiers")
    beside = run.start("pytest: unit, component, packaging (beside)", tiers)
    later: list[Beside] = []
    lock = threading.Lock()
    stopping = threading.Event()

    def then_compat() -> None:
        beside.proc.wait()
        with lock:
            if not stopping.is_set():
                argv = pytest(COMPAT_MARKS, beside="compat")
                later.append(run.start(f"{COMPAT_STEP} (beside)", argv, compat_env()))

    starter = threading.Thread(target=then_compat, name="compat after the tiers", daemon=True)
    starter.start()
    try:
        run.run("pytest: integration, e2e", pytest("integration or e2e"))
    except BaseException:  # interrupted: the background runs are in sessions of their own
        with lock:
            stopping.set()
            for step in later:
                os.killpg(step.proc.pid, signal.SIGTERM)
        raise
    finally:
        run.finish(beside)
        starter.join()  # it has started the compat run, or decided not to
        for step in later:
            run.finish(step)
        shutil.rmtree(BESIDE_TMP, ignore_errors=True)


def cold(run: Run) -> None:
    """Tools missing: build them in the background and run each tier as soon as its tools are there."""
    run.say(
        "tools missing: building them in the background (progress lines start with [build-tools]); "
        "meanwhile lint, the image and the tiers that need no Go tool"
    )
    start = time.monotonic()
    builder = subprocess.Popen(
        build_tools_argv(*ALL_TOOLS),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # so an interrupted run stops the whole build
    )
    try:
        run.run("lint (Python)", make("lint-python"))
        image = run.run("image", make("image"))
        run.run("pytest: unit, component, packaging", pytest(f"{NO_CONTROL_PLANE} and not {LATE}"))
        # waits for the background build of each (a lock per component), or builds what it has not reached
        if not run.run("tools: the control plane's", build_tools_argv(*CONTROL_PLANE_TOOLS)):
            run.skip("the integration and e2e tiers", "the control plane's tools did not build")
            return
        run.run("lint (workflows, actionlint)", make("lint-workflows"))
        if image:
            run.run("pytest: integration, e2e", pytest(f"(integration or e2e) and not {LATE}"))
        else:
            run.skip("pytest: integration, e2e", "the image did not build")
        # the late tests as soon as their tools are there, while OCM v1.2.1 builds for the compat run
        late = run.run("tools: the late tests'", build_tools_argv(*LATE_TOOLS))
        if late and image:
            run.run(f"pytest: {LATE} (Argo CD, Kueue, upstream, Collector)", pytest(LATE))
        else:
            run.skip(f"pytest: {LATE}", "their tools or the image did not build")
        run.say("waiting for the background build of the remaining tools")
        code = builder.wait()
        run.steps.append(Step("tools: every one (background)", time.monotonic() - start, code == 0))
        if code != 0:
            run.skip("compat", f"the tool build failed (exit {code}); its log is above")
        elif image:
            compat(run)
        else:
            run.skip("compat", "the image did not build")
    finally:
        if builder.poll() is None:
            os.killpg(builder.pid, signal.SIGTERM)
            builder.wait()


@click.command()
def main() -> None:
    """Lint, the image, every test tier and the OCM-contract tests on OCM v1.2.1: what `make test` runs.

    With tools missing from the cache it builds them in the background and starts each tier as soon
    as what it needs is built; it prints a summary of every step's time at the end.
    """
    run = Run()
    if all_cached():
        warm(run)
    else:
        cold(run)
    if not run.summary():
        sys.exit(1)


if __name__ == "__main__":
    main()
