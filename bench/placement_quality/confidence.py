"""How sure a placement-quality comparison is: bands over tie orders and paired block-bootstrap intervals.

Two sources of doubt, kept apart because they answer different questions:

* **Tie order.**  OCM breaks a tie between equal totals by cluster name, and integer scores tie at the top
  on a good share of steps, so one fixed set of names quietly favours whichever clusters sort first.  The
  benchmark therefore decides every combination under many random name orders and reports the median,
  with the lowest and highest as a :class:`Band`: a gap between two policies smaller than their bands is
  an artefact of naming, not of scoring.
* **Sampling.**  A week of traces is one draw of the weather.  :func:`paired_block_bootstrap` resamples
  whole blocks of consecutive steps (hours, so that a burst and its aftermath stay together), the same
  blocks for both policies (paired: both placed at the same steps against the same loads), and gives a
  percentile 95 % interval for the difference of their mean regrets.  A sentence "A beats B" is only
  written when that interval excludes 0.

Pure numpy, no I/O; seeded generators only, so a run is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

BLOCK_STEPS = 48
"""Bootstrap block: 48 steps of 300 s, four hours (long enough to hold a burst and its decay)."""

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Band:
    """A measure over tie orders: the median and the lowest and highest value seen."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Band:
        """The band of ``values`` (at least one)."""
        if not values:
            raise ValueError("a band needs at least one value")
        arr = np.asarray(values, dtype=np.float64)
        return cls(median=float(np.median(arr)), low=float(arr.min()), high=float(arr.max()))


@dataclass(frozen=True)
class Interval:
    """The mean of ``a - b`` over the paired steps and its bootstrap interval at :data:`LEVEL`."""

    difference: float
    low: float
    high: float
    steps: int

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies wholly on one side of 0: the sign of the difference is shown."""
        return self.low > 0.0 or self.high < 0.0

    def verdict(self, a: str, b: str) -> str:
        """What may be said of ``a - b`` (lower is better): which is lower, or that no difference is shown."""
        if not self.excludes_zero:
            return "no difference shown"
        return f"{a} lower" if self.difference < 0 else f"{b} lower"


def block_starts(steps: int, block: int, resamples: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Start indices of a circular block bootstrap: ``resamples`` rows of ``ceil(steps / block)`` starts.

    Starts are uniform over every step, and a block running past the end wraps to the beginning
    (Politis and Romano's circular blocks), so every step is drawn equally often.  Blocks that had to
    fit inside the series would draw the first and last steps less often than the middle ones, which
    biases the resampled means against whatever happens at the ends (a burst in the last hours) and can
    leave the measured difference outside its own interval.  With fewer steps than a block, the block
    is the series.
    """
    if steps < 1 or block < 1 or resamples < 1:
        raise ValueError(f"need steps, block and resamples >= 1, got {steps}, {block}, {resamples}")
    block = min(block, steps)
    per_row = -(-steps // block)
    if block == steps:
        return np.zeros((resamples, per_row), dtype=np.int64)
    return rng.integers(0, steps, size=(resamples, per_row), dtype=np.int64)


def paired_block_bootstrap(
    a: ArrayLike,
    b: ArrayLike,
    *,
    block: int = BLOCK_STEPS,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> Interval:
    """Mean of ``a - b`` (paired per step) and its circular block bootstrap percentile interval.

    ``a`` and ``b`` are per-step values of two policies judged at the same steps (for example each
    placement's lifetime regret, averaged over tie orders).  Each resample draws whole blocks of
    ``block`` consecutive steps with replacement, cuts the concatenation to the series' length and
    takes the mean difference; the interval is the ``(1 - level) / 2`` and ``(1 + level) / 2``
    quantiles of those means.  Blocks keep the autocorrelation of load (a busy hour is followed by
    another) that a per-step bootstrap would ignore, which would make the interval too narrow.

    Raises:
        ValueError: the two series differ in length, are empty, or hold a non-finite value.
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"need two 1-D series of the same non-zero length, got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("the paired series must be finite")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be within (0, 1), got {level}")
    diff = x - y
    steps = diff.size
    size = min(block, steps)
    starts = block_starts(steps, size, resamples, np.random.default_rng(seed))
    index = (starts[:, :, None] + np.arange(size)[None, None, :]).reshape(resamples, -1)[:, :steps] % steps
    means = diff[index].mean(axis=1)
    low, high = np.quantile(means, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return Interval(difference=float(diff.mean()), low=float(low), high=float(high), steps=steps)


def effective_clusters(loads: ArrayLike) -> float:
    """How many independent clusters the fleet's loads amount to: the participation ratio of their
    correlation matrix's eigenvalues, ``(sum l)^2 / sum l^2``.

    It is the number of clusters for independent series and 1 when every series is a multiple of one;
    four identical copies of one series plus eight independent ones count as 6 (144 / 24).  A constant
    series (no variance) is dropped: it carries no information to correlate.

    Raises:
        ValueError: ``loads`` is not 2-D clusters x steps with at least two steps.
    """
    arr = np.asarray(loads, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(f"loads must be clusters x steps with at least 2 steps, got shape {arr.shape}")
    varying = arr[np.std(arr, axis=1) > 0.0]
    if varying.shape[0] == 0:
        return 0.0
    if varying.shape[0] == 1:
        return 1.0
    eigen = np.clip(np.linalg.eigvalsh(np.corrcoef(varying)), 0.0, None)
    return float(eigen.sum() ** 2 / np.square(eigen).sum())


__all__ = [
    "BLOCK_STEPS",
    "LEVEL",
    "RESAMPLES",
    "Band",
    "Interval",
    "block_starts",
    "effective_clusters",
    "paired_block_bootstrap",
]
