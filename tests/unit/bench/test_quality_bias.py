"""Stabilization's offset per trace family: the rise-only rule penalises noise, a symmetric one does not."""

from __future__ import annotations

import numpy as np

from bench.placement_quality import replay
from bench.placement_quality.bias import NEUTRAL_SPREAD, SETTINGS, family_offsets, spread


def _noisy_fleet() -> tuple[np.ndarray, list[str], list[float]]:
    """Two quiet and two noisy clusters around the same mean score of 50, one sample every 300 s."""
    rng = np.random.default_rng(3)
    steps = 600
    quiet = 50 + rng.normal(0, 1.0, (2, steps))
    noisy = 50 + rng.normal(0, 8.0, (2, steps))
    raw = np.clip(np.rint(np.vstack([quiet, noisy])), 0, 100).astype(np.int64)
    return raw, ["azure-b0", "azure-b1", "alibaba-b0", "alibaba-b1"], [300.0 * j for j in range(steps)]


def test_offsets_are_averaged_per_family_and_the_spread_is_their_range() -> None:
    raw = np.array([[10, 10], [20, 20], [30, 30]], dtype=np.int64)
    published = np.array([[8, 8], [20, 18], [30, 30]], dtype=np.int64)
    offsets = family_offsets(raw, published, ["a-b0", "a-b1", "b-b0"])
    assert offsets == {"a": (-2.0 + -1.0) / 2, "b": 0.0}
    assert spread(offsets) == 1.5


def test_the_rise_only_rule_ranks_a_noisy_cluster_below_a_quiet_one_of_the_same_mean() -> None:
    raw, names, times = _noisy_fleet()
    rise_only = family_offsets(raw, replay.stabilize(raw, times, SETTINGS["rise-only"]), names)
    assert rise_only["alibaba"] < rise_only["azure"] - 3  # a penalty on the noisy family
    assert spread(rise_only) > NEUTRAL_SPREAD


def test_symmetric_windows_and_the_tolerance_alone_are_rank_neutral() -> None:
    raw, names, times = _noisy_fleet()
    for label in ("symmetric", "tolerance-only"):
        offsets = family_offsets(raw, replay.stabilize(raw, times, SETTINGS[label]), names)
        assert spread(offsets) <= NEUTRAL_SPREAD, (label, offsets)
