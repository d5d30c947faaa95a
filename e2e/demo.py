"""`make demo`: the whole loop on this machine, with a live view of scores and the Placement's choice.

Steps (each printed with its elapsed time): tools (built or reused) -> the local OCM control plane
in `.e2e/demo` -> `helm install` of the hub side -> `clusteradm addon enable` on cluster1 and
cluster2 -> the seasonal sample scorer and its DynamicScorer cpu-seasonal-4h -> the sample
Placement (AddOn 10 + Steady 1 on a score banded 20..80 % onto -100..100) choosing the cluster with
the most CPU headroom.  The demo's Prometheus window is seconds, not the day the forecast needs, so
the scorer scores the recent mean, as on a freshly installed cluster.  Then the live view
refreshes in place every second while the synthetic load moves from one cluster to the other
every `--shift-every` seconds, so the decision follows.

Ctrl-C (or SIGTERM) stops the scorer, the gateway and every process of the control plane, and
checks no port is left held.  `--once` runs the same steps without the live view: one load shift,
wait for the decision to follow, print the measured latency, tear down, exit 0 (1 if it did not).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from dynamic_scoring.ctl.placement_model import Explanation, explain
from dynamic_scoring.ctl.status import CLEAR, Fleet, read_fleet
from dynamic_scoring.ctl.status import render as render_status
from dynamic_scoring.ctl.why import load_placement, read_state
from dynamic_scoring.kube.api import KubeError
from e2e.controlplane import ControlPlane, running, stop_recorded
from e2e.mission import CLUSTERS, HEAVY, LIGHT, PLACEMENT, USER_NS, Mission, timed
from e2e.procs import StartupError

RUN_DIR = Path(".e2e/demo")


def render(
    fleet: Fleet,
    placement: Explanation,
    loads: dict[str, float],
    elapsed: float,
    notes: list[str],
    now: dt.datetime | None = None,
) -> str:
    """The live view: `dynamic-scoring status` for the demo's clusters, plus `why` for the Placement.

    The table and the problems under it are `dynamic_scoring.ctl.status.render`, the very text the `status`
    command prints; the Placement's lines are `why`'s one-line verdicts, computed as OCM's placement
    controller computes them and checked against its PlacementDecision.  So what the demo shows is
    what a user gets from the CLI on a real hub.
    """
    chosen = ", ".join(v.name for v in placement.clusters if v.decided) or "no cluster yet"
    check = "agrees" if not placement.disagreements else "DISAGREES"
    extra = [
        f"Placement {placement.namespace}/{placement.name} chooses: {chosen}   (why: {check})",
        *(f"  {v.name}: {v.verdict()}" for v in placement.clusters),
        "demo load: " + ", ".join(f"{c} {loads[c]:.1f} cores" for c in sorted(loads)),
    ]
    lines = [
        f"dynamic-scoring demo  {elapsed:5.0f}s          Ctrl-C stops and tears everything down",
        "",
        render_status(fleet, now or dt.datetime.now(dt.UTC), extra),
    ]
    return "\n".join([*lines, "", *notes])


def view(m: Mission, elapsed: float, notes: list[str]) -> str:
    """Read the hub now and render the live view (a failed read is shown, the demo goes on)."""
    now = dt.datetime.now(dt.UTC)
    try:
        fleet = read_fleet(m.hub.api, CLUSTERS)
        state = read_state(m.hub.api, load_placement(m.hub.api, USER_NS, PLACEMENT))
    except KubeError as exc:
        return f"dynamic-scoring demo  {elapsed:5.0f}s  could not read the hub: {exc}"
    return render(fleet, explain(state, now), {c: m.load_of(c) for c in CLUSTERS}, elapsed, notes, now)


def decided(m: Mission) -> list[str]:
    """The Placement's decision now, or none while the hub cannot be read (the view says why)."""
    try:
        return m.decision()
    except KubeError:
        return []


def interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM behaves like Ctrl-C: unwind through the teardown."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Command line of `python -m e2e.demo`."""
    parser = argparse.ArgumentParser(prog="python -m e2e.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--once", action="store_true", help="no live view: one shift, check, tear down")
    parser.add_argument("--run-dir", type=Path, default=RUN_DIR, help="where the control plane runs")
    parser.add_argument("--interval", type=int, default=5, help="scoring interval in seconds")
    parser.add_argument("--shift-every", type=float, default=45, help="seconds between load shifts")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, interrupt)
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(msg, flush=True)

    cp = ControlPlane(args.run_dir, progress=lambda m: say(f"[{time.monotonic() - t0:6.1f}s]     {m}"))
    mission: Mission | None = None
    code = 1
    try:
        state = args.run_dir / "state.json"
        if state.exists() and running(state):  # a demo killed without its teardown (kill -9, a crash)
            say(f"stopping what a previous demo left running in {args.run_dir}")
            stop_recorded(state)
        with timed(say, "tools and the local OCM control plane (hub = cluster1, cluster2)", t0):
            cp.up()
        mission = Mission(cp, progress=say, interval=args.interval, work_dir=args.run_dir / "mission")
        m = mission
        m.set_load("cluster1", LIGHT)
        m.set_load("cluster2", HEAVY)
        with timed(
            say,
            "helm install dynamic-scoring charts/dynamic-scoring -n dynamic-scoring --create-namespace",
            t0,
        ):
            m.install()
        with timed(say, "tenant Secrets the agents' Prometheus header reads (user objects)", t0):
            m.tenant_secrets()
        with timed(say, "clusteradm addon enable --names dynamic-scoring --clusters cluster1,cluster2", t0):
            m.enable()
        with timed(
            say,
            "seasonal sample scorer (python -m dynamic_scoring.samples.scorers.seasonal), metrics gateway",
            t0,
        ):
            m.start_gateway()
            base = m.start_scorer()
        with timed(say, f"DynamicScorer {m.scorer}, DynamicScoringConfig, Placement", t0):
            m.register(base)
        with timed(say, "first scores on both clusters and the first decision", t0):
            m.wait_ranked("cluster1", timeout=180)
        if args.once:
            say(view(m, time.monotonic() - t0, ["load is on cluster2; moving it to cluster1"]))
            flip = m.shift("cluster2", timeout=60)
            say(view(m, time.monotonic() - t0, []))
            say(
                f"[{time.monotonic() - t0:6.1f}s] load shift -> scores crossed {flip.scores_crossed:.1f}s, "
                f"decision followed {flip.decided:.1f}s (score-to-decision {flip.score_to_decision:.2f}s)"
            )
            code = 0
        else:
            code = live(m, t0, args.shift_every)
    except KeyboardInterrupt:
        say("\ninterrupted")
        code = 0 if not args.once else 130
    except (StartupError, RuntimeError) as exc:
        say(f"demo failed: {exc}\nlogs: {args.run_dir.resolve() / 'logs'}")
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the teardown short
        say(f"[{time.monotonic() - t0:6.1f}s] tearing down (scorer, gateway, control plane)")
        if mission is not None:
            mission.stop_local()
        problems = cp.down()
        if problems:
            say("teardown left: " + "; ".join(problems))
            code = code or 1
        else:
            say(f"[{time.monotonic() - t0:6.1f}s] stopped; no process or port left")
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return code


def live(m: Mission, t0: float, shift_every: float) -> int:
    """Redraw the view every second; move the load to the other cluster every `shift_every` s."""
    heavy = "cluster2"
    last_shift = time.monotonic()
    followed: float | None = None
    shifts = 0
    width = shutil.get_terminal_size().columns
    while True:
        now = time.monotonic()
        if now - last_shift >= shift_every:
            heavy = CLUSTERS[0] if heavy == CLUSTERS[1] else CLUSTERS[1]
            light = CLUSTERS[0] if heavy == CLUSTERS[1] else CLUSTERS[1]
            m.set_load(heavy, HEAVY)
            m.set_load(light, LIGHT)
            last_shift, followed, shifts = now, None, shifts + 1
        light = CLUSTERS[0] if heavy == CLUSTERS[1] else CLUSTERS[1]
        if shifts and followed is None and decided(m) == [light]:
            followed = time.monotonic() - last_shift
        notes = [
            f"load is on {heavy}; it moves to {light} in {max(0.0, shift_every - (now - last_shift)):.0f}s"
        ]
        if shifts and followed is None:
            notes.append(f"load moved {now - last_shift:.0f}s ago; waiting for the decision to follow")
        elif followed is not None:
            notes.append(f"the decision followed the load to {light} {followed:.1f}s after it moved")
        text = view(m, now - t0, notes)
        sys.stdout.write(CLEAR + "\n".join(line[:width] for line in text.splitlines()) + "\n")
        sys.stdout.flush()
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
