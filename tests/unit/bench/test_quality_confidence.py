"""Bands over tie orders, the paired block bootstrap and the effective number of clusters."""

from __future__ import annotations

import numpy as np
import pytest

from bench.placement_quality.confidence import Band, block_starts, effective_clusters, paired_block_bootstrap


def test_band_is_median_low_high() -> None:
    assert Band.of([3.0, 1.0, 2.0, 10.0]) == Band(median=2.5, low=1.0, high=10.0)
    with pytest.raises(ValueError, match="at least one"):
        Band.of([])


def test_block_starts_cover_every_step_and_a_short_series_is_one_block() -> None:
    starts = block_starts(100, 48, 500, np.random.default_rng(0))
    assert starts.shape == (500, 3)
    assert starts.min() == 0 and starts.max() == 99  # circular: a block may start anywhere and wrap
    assert block_starts(10, 48, 4, np.random.default_rng(0)).tolist() == [[0]] * 4


def test_a_burst_at_the_end_is_drawn_as_often_as_the_middle() -> None:
    # Blocks confined to the series would rarely draw the last steps: the interval would miss the mean.
    burst = np.zeros(300)
    burst[-10:] = 100.0
    interval = paired_block_bootstrap(burst, np.zeros(300))
    assert interval.difference == pytest.approx(100 / 30)
    assert interval.low < interval.difference < interval.high


def test_a_real_difference_excludes_zero_and_noise_does_not() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(5.0, 2.0, 1500)
    better = base - 0.5 + rng.normal(0.0, 0.3, 1500)
    interval = paired_block_bootstrap(better, base)
    assert interval.difference == pytest.approx(-0.5, abs=0.05)
    assert interval.high < 0.0 and interval.excludes_zero
    same = paired_block_bootstrap(base + rng.normal(0.0, 0.3, 1500), base)
    assert same.low < 0.0 < same.high and not same.excludes_zero


def test_blocks_widen_the_interval_of_autocorrelated_differences() -> None:
    # A slowly wandering difference: a per-step bootstrap would be far too sure of its mean.
    rng = np.random.default_rng(2)
    walk = np.convolve(rng.normal(0.0, 1.0, 2000), np.ones(60) / 60, mode="same")
    blocked = paired_block_bootstrap(walk, np.zeros_like(walk), block=48)
    single = paired_block_bootstrap(walk, np.zeros_like(walk), block=1)
    assert blocked.high - blocked.low > 3 * (single.high - single.low)


def test_bootstrap_refuses_unpaired_or_broken_input() -> None:
    with pytest.raises(ValueError, match="same non-zero length"):
        paired_block_bootstrap([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        paired_block_bootstrap([1.0, np.nan], [1.0, 2.0])


def test_effective_clusters_counts_independent_series() -> None:
    rng = np.random.default_rng(3)
    independent = rng.normal(size=(8, 5000))
    assert effective_clusters(independent) == pytest.approx(8.0, rel=0.02)
    one = rng.normal(size=5000)
    copies = np.vstack([one, 2 * one + 1, one, one])
    assert effective_clusters(copies) == pytest.approx(1.0)
    mixed = np.vstack([copies, independent])
    assert effective_clusters(mixed) == pytest.approx(144 / 24, rel=0.02)
    assert effective_clusters(np.vstack([np.ones(10), rng.normal(size=10)])) == 1.0
