"""The placement-stability benchmark's plot: load, published scores and decisions over one scenario.

matplotlib draws it: a well-kept library for exactly this, installed with the ``bench`` extra
(``pip install -e '.[bench]'``) because nothing but this plot needs it, and ``make test`` does not
run the benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.placement_stability.churn import Sample
from bench.placement_stability.setup import CLUSTERS, POLICIES, RAW, STABLE

COLOURS = {"cluster1": "tab:blue", "cluster2": "tab:orange"}


def plot(samples: Sequence[Sample], title: str, out: Path) -> Path:
    """Write a three-panel PNG to ``out``: each cluster's true headroom, its published raw and
    stabilized scores, and the cluster each policy's Placement chose."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError(
            "the placement-stability plots need matplotlib: pip install -e '.[bench]'"
        ) from exc
    t = [s.t for s in samples]
    fig, (load, scores, decided) = plt.subplots(
        3, 1, sharex=True, figsize=(9, 8), height_ratios=(1, 2, 1.8), constrained_layout=True
    )
    for c in CLUSTERS:
        load.plot(t, [s.loads.get(c) for s in samples], color=COLOURS[c], label=c)
        raw = [s.scores.get((RAW, c)) for s in samples]
        stable = [s.scores.get((STABLE, c)) for s in samples]  # tolerance 3 (the -tol6 not drawn)
        scores.step(t, raw, where="post", color=COLOURS[c], alpha=0.35, linewidth=1, label=f"{c} raw")
        scores.step(t, stable, where="post", color=COLOURS[c], linewidth=2, label=f"{c} stabilized")
    load.set_ylabel("true headroom\n(mean, points)")
    load.legend(loc="upper right", fontsize="small")
    scores.set_ylabel("published score")
    scores.legend(loc="upper right", fontsize="small", ncol=2)
    for row, policy in enumerate(POLICIES):
        y = [
            row + (0.3 if s.decisions.get(policy) == ("cluster2",) else -0.3)
            if s.decisions.get(policy)
            else None
            for s in samples
        ]
        decided.step(t, y, where="post", color="black", linewidth=1.5)
    decided.set_yticks(
        range(len(POLICIES)), [f"{p}\n(low c1, high c2)" for p in POLICIES], fontsize="x-small"
    )
    decided.set_ylim(-0.6, len(POLICIES) - 0.4)
    decided.set_ylabel("decision")
    decided.set_xlabel("seconds (compressed 6x: a 5 s interval for 30 s)")
    fig.suptitle(f"placement-stability: {title}")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out
