"""The herd sweep: which spread form keeps Placements off one cluster (``placement-quality-herd``).

Why.  The main run's closed loop carries the recipe (``Balance`` 3 beside the score at 10, ``Steady``
7 for work that stays) beside the herding scorers and the baselines.  How that recipe was chosen needs
the alternatives beside it: ``Balance`` at 1 and 10, an in-flight account that forgets after 15
minutes, ``Steady`` at 1 and 3, and one decision for all (the plain form).  This benchmark runs them in
the same closed loop (``bench.placement_quality.closed_loop``, spread forms in
``bench.placement_quality.spread``) on the held-out clusters, and the chosen weight with the plain form
on the training half, which played no part in the choice (docs/placement-quality.md, "Against the
herd"); and
what the spread costs where there is no herd: the same recipe forms with workloads of size 0, judged on
the open loop's regret (:data:`OPEN`).

How.  One ``closed_loop.simulate`` per half over :data:`HELD_OUT` or :data:`TRAINING`, each setup
beside every loop baseline; the rows are every setup's load, time above 80 %, slowdown and moves a day,
and each scored setup's comparison with power-of-two choices and round-robin on slowdown, time above
80 % and the per-step 95th percentile of load.  About 40 scored simulations of 40-50 s each on 2 cores:
about half an hour, and a few minutes for the size-0 run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench import Row, benchmark
from bench.placement_quality import closed_loop, real
from bench.placement_quality.fleet import Fleet, real_fleet
from bench.placement_quality.traces import STEP_SECONDS

NAME = "placement-quality-herd"

Plan = Mapping[str, tuple[tuple[float, ...], tuple[str, ...]]]
"""Per life: the workload sizes and the scored setups (``policy+form``) run at each."""

_STAY_FORMS = (
    "margin",
    "balance-1",
    "balance-3",
    "balance-3-steady1",
    "balance-3-steady3",
    "balance-3-steady7",
)
HELD_OUT: Plan = {
    "1h": (
        (1.0, 3.0, 6.0),
        tuple(f"recipe-1h+{f}" for f in ("exact", "balance-1", "inflight-3-1", "balance-3", "balance-10")),
    ),
    "4h": ((3.0, 6.0), tuple(f"recipe-4h+{f}" for f in _STAY_FORMS)),
    "12h": ((3.0,), tuple(f"recipe-12h+{f}" for f in _STAY_FORMS)),
}
"""The sweep on the held-out clusters: the alternatives the recipe was chosen from."""

TRAINING: Plan = {
    "1h": ((3.0, 6.0), ("recipe-1h+exact", "recipe-1h+balance-3")),
    "4h": ((6.0,), ("recipe-4h+margin", "recipe-4h+balance-3")),
}
"""The check on the training half: the chosen weight against one decision for all."""

OPEN: Plan = {
    "1h": ((0.0,), ("recipe-1h+exact", "recipe-1h+balance-3")),
    "4h": ((0.0,), tuple(f"recipe-4h+{f}" for f in ("margin", "balance-3", "balance-3-steady7"))),
    "12h": ((0.0,), tuple(f"recipe-12h+{f}" for f in ("margin", "balance-3", "balance-3-steady7"))),
}
"""The price of the spread when there is no herd to avoid: the held-out clusters with workloads of size 0
(placed work adds no load, as in the open loop), where ``regret`` is the open loop's."""

BASELINES = ("power-of-two", "round-robin")
"""The placers each scored setup is compared with."""


def setups(plan: Plan) -> list[closed_loop.Setup]:
    """Every setup of ``plan``, each life's beside every loop baseline."""
    return [
        s for life, (sizes, scored) in plan.items() for s in closed_loop.setups_for(scored, sizes, [life])
    ]


def _say(msg: str) -> None:
    print(f"  [{NAME}] {msg}", file=sys.stderr, flush=True)


def rows(half: str, simulated: closed_loop.Simulated) -> list[Row]:
    """Every setup's measures and slowdown comparisons (as the main run prints them), and each scored
    setup against :data:`BASELINES` on time above 80 % and the 95th percentile of load."""
    out = real.closed_setup_rows(simulated, prefix=f"{half} ")
    out.extend(
        Row(
            NAME,
            f"{half} closed life {c.life} size {c.size:g} %: {c.a} - {c.b} {c.measure}",
            f"{c.interval.difference:+.3f} [{c.interval.low:+.3f}, {c.interval.high:+.3f}]: {c.verdict}",
        )
        for c in simulated.comparisons
        if "/" in c.a and c.b in BASELINES and c.measure != "slowdown"
    )
    return out


def open_rows(simulated: closed_loop.Simulated) -> list[Row]:
    """The size-0 run: every setup's regret, and each scored setup's regret against the other scored
    setups of its life (what the spread costs) and against random and power-of-two choices."""
    out = [
        Row(NAME, f"open life {r.setup.life} {r.setup.label}", f"regret {r.regret:.2f}")
        for r in simulated.results
    ]
    out.extend(
        Row(
            NAME,
            f"open life {c.life}: {c.a} - {c.b} regret",
            f"{c.interval.difference:+.3f} [{c.interval.low:+.3f}, {c.interval.high:+.3f}]: {c.verdict}",
        )
        for c in simulated.comparisons
        if c.measure == "regret" and "/" in c.a and ("/" in c.b or c.b in ("random", "power-of-two"))
    )
    return out


def simulate(
    workdir: Path, fleet: Fleet, half: str, rows_of: Sequence[int], plan: Plan
) -> closed_loop.Simulated:
    """The closed loop of ``plan`` on the fleet's clusters ``rows_of`` (one half)."""
    names = tuple(fleet.names[i] for i in rows_of)
    return closed_loop.simulate(
        workdir / f"{NAME}-{half}",
        names,
        fleet.loads[list(rows_of)],
        real.WARMUP,
        setups(plan),
        step_seconds=STEP_SECONDS,
        progress=_say,
    )


@benchmark(NAME)
def placement_quality_herd(workdir: Path) -> list[Row]:
    """The sweep on the held-out half and the check on the training half; see the module docstring."""
    fleet = real_fleet(real.FLEET_DAYS)
    held_out = [i for i, r in enumerate(fleet.roles) if r == "test"]
    halves = {
        "held-out": (held_out, HELD_OUT),
        "training": ([i for i, r in enumerate(fleet.roles) if r == "train"], TRAINING),
        "open": (held_out, OPEN),
    }
    out: list[Row] = []
    record: dict[str, object] = {}
    for half, (rows_of, plan) in halves.items():
        simulated = simulate(workdir, fleet, half, rows_of, plan)
        out.append(Row(NAME, f"{half}: simulations / real cycles / seconds", f"{len(simulated.results)}"
                       f" / {simulated.cycles} / {simulated.seconds:.1f}"))  # fmt: skip
        out.extend(open_rows(simulated) if plan is OPEN else rows(half, simulated))
        record[half] = {
            "results": [r.row() for r in simulated.results],
            "comparisons": [
                {"life": c.life, "size": c.size, "measure": c.measure, "a": c.a, "b": c.b}
                | {"difference": c.interval.difference, "low": c.interval.low, "high": c.interval.high}
                | {"verdict": c.verdict}
                for c in simulated.comparisons
            ],
        }
    (workdir / f"{NAME}.json").write_text(json.dumps(record, indent=2))
    return out


__all__ = [
    "BASELINES",
    "HELD_OUT",
    "NAME",
    "OPEN",
    "TRAINING",
    "Plan",
    "open_rows",
    "placement_quality_herd",
    "rows",
    "setups",
    "simulate",
]
