"""Named comparisons a product decision rests on: one policy against another at one life, Exact, pick 1.

Why a module.  The benchmark's comparison rows pair every policy with every other, which answers "is
A better than B" for any A and B but not "did this change meet its target".  A decision (the seasonal
sample's blend, its days of history) names its own pairs, and each pair here carries both mean
regrets, the relative change, and the paired block bootstrap's 95 % interval of the difference, so
that the row says whether the target is met and the note can quote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench import Row, verdict
from bench.placement_quality.confidence import paired_block_bootstrap
from bench.placement_quality.experiment import BASELINES, Result
from bench.placement_quality.policies import LIVES


@dataclass(frozen=True)
class Pair:
    """``label`` against ``other`` at ``life``; ``gain`` is the target (a share lower), None for none."""

    life: str
    label: str
    other: str
    gain: float | None = None


@dataclass(frozen=True)
class Target:
    """A pair's outcome: mean regrets (Exact, pick 1, lag 0) and the interval of their difference."""

    pair: Pair
    mine: float
    theirs: float
    difference: float
    low: float
    high: float

    @property
    def lower(self) -> float:
        """How much lower ``label``'s mean regret is, as a share of ``other``'s (negative: higher)."""
        return 1.0 - self.mine / self.theirs if self.theirs else 0.0

    @property
    def met(self) -> bool | None:
        """The target met: at least ``gain`` lower and the interval below 0; None without a target."""
        if self.pair.gain is None:
            return None
        return self.lower >= self.pair.gain and self.high < 0

    def record(self) -> dict[str, Any]:
        """The JSON form: the pair, both regrets, the interval, the relative change and the verdict."""
        out: dict[str, Any] = {**asdict(self.pair), **{k: v for k, v in asdict(self).items() if k != "pair"}}
        return out | {"lower": self.lower, "met": self.met}


def _key(label: str, steps: int) -> tuple[str, str, int, int, int]:
    return (label, "-" if label in BASELINES else "exact", 1, 0, steps)


def judge(results: Sequence[Result], pairs: Sequence[Pair]) -> list[Target]:
    """Each pair's outcome from one half's results; a pair whose policy was not replayed is left out."""
    index = {(r.label, r.form, r.k, r.lag, r.life_steps): r for r in results}
    out = []
    for pair in pairs:
        steps = LIVES[pair.life]
        mine, theirs = index.get(_key(pair.label, steps)), index.get(_key(pair.other, steps))
        if mine is None or theirs is None:
            continue
        interval = paired_block_bootstrap(mine.per_step, theirs.per_step)
        out.append(
            Target(
                pair,
                float(mine.per_step.mean()),
                float(theirs.per_step.mean()),
                interval.difference,
                interval.low,
                interval.high,
            )
        )
    return out


def rows(benchmark: str, half: str, found: Sequence[Target]) -> list[Row]:
    """One row per pair: both regrets, how much lower, the interval, and the target's verdict."""
    out = []
    for t in found:
        p = t.pair
        target = "" if p.gain is None else f">= {100 * p.gain:.0f} % lower, interval below 0"
        out.append(
            Row(
                benchmark,
                f"{half} life {p.life} exact k=1: {p.label} against {p.other}",
                f"regret {t.mine:.2f} against {t.theirs:.2f} ({100 * t.lower:+.0f} % lower),"
                f" difference {t.difference:+.2f} [{t.low:+.2f}, {t.high:+.2f}]",
                target,
                "" if t.met is None else verdict(t.met),
            )
        )
    return out


__all__ = ["Pair", "Target", "judge", "rows"]
