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


def _index(results: Sequence[Result]) -> dict[tuple[str, str, int, int, int], Result]:
    """``results`` by (label, form, k, lag, life steps)."""
    return {(r.label, r.form, r.k, r.lag, r.life_steps): r for r in results}


def _key(label: str, steps: int) -> tuple[str, str, int, int, int]:
    return (label, "-" if label in BASELINES else "exact", 1, 0, steps)


def judge(results: Sequence[Result], pairs: Sequence[Pair]) -> list[Target]:
    """Each pair's outcome from one half's results; a pair whose policy was not replayed is left out."""
    index = _index(results)
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


@dataclass(frozen=True)
class MarginPair:
    """A margin recipe (``recipe``, judged in the margin form) against ``exact`` (judged in Exact) at
    ``life``, with ``previous`` (the recipe before, in the margin form) shown beside them.

    The target: the recipe's mean regret at most ``within`` above Exact's, with at most ``share`` of
    Exact's decision changes a day.
    """

    life: str
    recipe: str
    exact: str
    previous: str | None = None
    within: float = 0.10
    share: float = 1 / 3


@dataclass(frozen=True)
class MarginTarget:
    """A margin pair's outcome: regrets and changes a day of the recipe, Exact and the previous recipe,
    and the paired bootstrap's interval of the recipe's regret minus Exact's."""

    pair: MarginPair
    regret: float
    changes: float
    exact_regret: float
    exact_changes: float
    previous_regret: float | None
    previous_changes: float | None
    difference: float
    low: float
    high: float

    @property
    def above(self) -> float:
        """How much higher the recipe's mean regret is than Exact's, as a share (negative: lower)."""
        return self.regret / self.exact_regret - 1.0 if self.exact_regret else 0.0

    @property
    def change_share(self) -> float:
        """The recipe's decision changes a day as a share of Exact's."""
        return self.changes / self.exact_changes if self.exact_changes else 0.0

    @property
    def met(self) -> bool:
        """Regret within ``within`` of Exact's at no more than ``share`` of its changes."""
        return self.above <= self.pair.within and self.change_share <= self.pair.share

    def record(self) -> dict[str, Any]:
        """The JSON form: the pair, the measures, the interval, both shares and the verdict."""
        out: dict[str, Any] = {**asdict(self.pair), **{k: v for k, v in asdict(self).items() if k != "pair"}}
        return out | {"above": self.above, "change_share": self.change_share, "met": self.met}


def judge_margins(results: Sequence[Result], pairs: Sequence[MarginPair]) -> list[MarginTarget]:
    """Each margin pair's outcome (pick 1, lag 0); a pair whose policies were not replayed is left out."""
    index = _index(results)
    out = []
    for pair in pairs:
        steps = LIVES[pair.life]
        recipe = index.get((pair.recipe, "margin", 1, 0, steps))
        exact = index.get((pair.exact, "exact", 1, 0, steps))
        previous = None if pair.previous is None else index.get((pair.previous, "margin", 1, 0, steps))
        if recipe is None or exact is None:
            continue
        interval = paired_block_bootstrap(recipe.per_step, exact.per_step)
        out.append(
            MarginTarget(
                pair,
                float(recipe.per_step.mean()),
                recipe.changes_per_day.median,
                float(exact.per_step.mean()),
                exact.changes_per_day.median,
                None if previous is None else float(previous.per_step.mean()),
                None if previous is None else previous.changes_per_day.median,
                interval.difference,
                interval.low,
                interval.high,
            )
        )
    return out


def margin_rows(benchmark: str, half: str, found: Sequence[MarginTarget]) -> list[Row]:
    """One row per margin pair: the recipe against Exact (and the previous recipe), with the verdict."""
    out = []
    for t in found:
        p = t.pair
        before = (
            ""
            if t.previous_regret is None or t.previous_changes is None
            else f"; previous recipe {t.previous_regret:.2f} at {t.previous_changes:.1f}"
        )
        out.append(
            Row(
                benchmark,
                f"{half} life {p.life} k=1: {p.recipe} margin against {p.exact} Exact",
                f"regret {t.regret:.2f} against {t.exact_regret:.2f} ({100 * t.above:+.0f} %),"
                f" difference {t.difference:+.2f} [{t.low:+.2f}, {t.high:+.2f}];"
                f" changes/day {t.changes:.1f} against {t.exact_changes:.1f}"
                f" ({t.change_share:.2f} of Exact's){before}",
                f"regret <= +{100 * p.within:.0f} %, changes <= {p.share:.2f}",
                verdict(t.met),
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


__all__ = ["MarginPair", "MarginTarget", "Pair", "Target", "judge", "judge_margins", "margin_rows", "rows"]
