"""Whether stabilization re-ranks clusters: ``python -m bench placement-quality placement-quality-bias``.

Why.  The agent's stabilizer publishes a rise only after it has held for ``riseWindowSeconds``, at the
window's lowest value, and a fall at once when ``fallWindowSeconds`` is 0 (the HPA-like setting the
docs recommended).  Under noise the published score then sits below the raw one, and by more the
noisier the cluster: a volatility penalty that changes the order of clusters with the same mean.  With
the fall window equal to the rise window the rule is symmetric, and the offset should vanish.  This
benchmark measures the offset per trace family for each setting, and what each setting does to
regret and decision changes.

How.  It reads the raw scores the main run saved (``placement-quality-scores.npz`` in the
``placement-quality`` work directory, so run both with one ``--workdir``), feeds each policy's raw
scores through the agent's own ``Stabilizer`` under each of :data:`SETTINGS`, and reports, per policy:
the mean of published minus raw per trace family, the spread between the families (the re-ranking a
quiet and a noisy cluster of the same mean would see), and regret and decision changes at the policy's
life in ``mode: Exact``, pick 1, under 20 tie orders (``bench.placement_quality.experiment``), with the
paired block bootstrap's interval of the difference against the rise-only setting.  The
target from the issue: a setting is rank-neutral when its spread is at most :data:`NEUTRAL_SPREAD`.
It costs seconds; the held-out half only (the scores file holds no other).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench import Row, benchmark, verdict
from bench.placement_quality import prometheus as prom
from bench.placement_quality import replay
from bench.placement_quality.confidence import paired_block_bootstrap
from bench.placement_quality.experiment import evaluate
from bench.placement_quality.policies import BY_NAME, LIVES, STABILIZATION
from bench.placement_quality.real import NAME as REAL_NAME
from bench.placement_quality.traces import STEP_SECONDS
from dynamic_scoring.agent.items.stabilization import Stabilization

NAME = "placement-quality-bias"
SETTINGS: dict[str, Stabilization] = {
    "rise-only": STABILIZATION,
    "symmetric": Stabilization(
        tolerance=STABILIZATION.tolerance,
        rise_window_seconds=STABILIZATION.rise_window_seconds,
        fall_window_seconds=STABILIZATION.rise_window_seconds,
    ),
    "tolerance-only": Stabilization(tolerance=STABILIZATION.tolerance),
}
"""The benchmark's setting (tolerance 3, a rise must hold 900 s, falls at once), the same with falls
held as long as rises, and the tolerance alone."""
POLICIES = ("reactive", "cpu", "blend-1h", "seasonal-4h", "seasonal-12h")
NEUTRAL_SPREAD = 1.0
"""Points: the most a setting's offset may differ between trace families to count as rank-neutral."""


def family_offsets(
    raw: NDArray[np.int64], published: NDArray[np.int64], names: Sequence[str]
) -> dict[str, float]:
    """The mean of published minus raw score per trace family (``alibaba-b0`` is ``alibaba``)."""
    per_cluster = (published.astype(np.float64) - raw.astype(np.float64)).mean(axis=1)
    families: dict[str, list[float]] = {}
    for name, offset in zip(names, per_cluster.tolist(), strict=True):
        families.setdefault(name.split("-", 1)[0], []).append(offset)
    return {family: float(np.mean(values)) for family, values in families.items()}


def spread(offsets: Mapping[str, float]) -> float:
    """How far apart the families' offsets are: the re-ranking between a quiet and a noisy cluster."""
    return max(offsets.values()) - min(offsets.values())


def _load(workdir: Path) -> tuple[dict[str, NDArray[np.int64]], NDArray[np.float64], int, int, list[str]]:
    """The main run's raw scores, loads, warm-up, first scored sample and held-out cluster names."""
    folder = workdir.parent / REAL_NAME
    scores, record = folder / f"{REAL_NAME}-scores.npz", folder / f"{REAL_NAME}.json"
    if not scores.is_file() or not record.is_file():
        raise SystemExit(
            f"{NAME} needs the main run's scores: run `python -m bench {REAL_NAME} {NAME} --workdir DIR`"
            f" (looked for {scores})"
        )
    data = np.load(scores)
    names = json.loads(record.read_text())["halves"]["held-out"]["clusters"]
    raw = {p: data[p] for p in POLICIES if p in data.files}
    return raw, data["loads"], int(data["warmup_steps"]), int(data["first_scored_sample"]), names


@benchmark(NAME)
def placement_quality_bias(workdir: Path) -> list[Row]:
    """Offsets per family, their spread, and regret per stabilization setting; see the module docstring."""
    raw, loads, warmup, first, names = _load(workdir)
    scored = next(iter(raw.values())).shape[1]
    times = [float(prom.step_time(first + j)) for j in range(scored)]
    timeline = replay.Timeline(warmup, loads.shape[1] - warmup)
    judged = loads[:, warmup:]
    rows: list[Row] = []
    for policy, values in raw.items():
        life = BY_NAME[policy].life or "1h"
        # Each series is its own "policy" to the judge: "raw", then one per setting.
        series = {"raw": values} | {
            label: replay.stabilize(values, times, settings) for label, settings in SETTINGS.items()
        }
        aligned = {(label, "raw", 0): timeline.aligned(scores, 0) for label, scores in series.items()}
        results = evaluate(
            judged, aligned, {}, forms=["exact"], ks=[1], lives=[LIVES[life]], step_seconds=STEP_SECONDS
        )
        by_label = {r.policy: r for r in results}
        base = by_label["raw"]
        rows.append(
            Row(
                NAME,
                f"{policy} life {life} exact k=1 raw",
                f"regret {base.regret.median:.2f}, changes/day {base.changes_per_day.median:.1f}",
            )
        )
        for label in SETTINGS:
            offsets = family_offsets(values, series[label], names)
            r = by_label[label]
            gap = spread(offsets)
            rows.append(
                Row(
                    NAME,
                    f"{policy} life {life} exact k=1 {label}",
                    "offset "
                    + ", ".join(f"{family} {offset:+.2f}" for family, offset in offsets.items())
                    + f"; spread {gap:.2f}; regret {r.regret.median:.2f},"
                    f" changes/day {r.changes_per_day.median:.1f}",
                    f"spread <= {NEUTRAL_SPREAD:g} (rank-neutral)",
                    verdict(gap <= NEUTRAL_SPREAD),
                )
            )
        for label in ("symmetric", "tolerance-only"):
            interval = paired_block_bootstrap(by_label[label].per_step, by_label["rise-only"].per_step)
            rows.append(
                Row(
                    NAME,
                    f"{policy} life {life} exact k=1: {label} - rise-only regret",
                    f"{interval.difference:+.2f} [{interval.low:+.2f}, {interval.high:+.2f}]:"
                    f" {interval.verdict(label, 'rise-only')}",
                )
            )
    return rows
