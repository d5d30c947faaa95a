"""Anticipation around ramps: which load shapes are ramps, and live shares against a policy's base rate."""

from __future__ import annotations

import numpy as np
import pytest

from bench.placement_quality.anticipation import RAMPS, Ramp, ramp_events, shares
from bench.placement_quality.experiment import evaluate

SUSTAINED = RAMPS["sustained"]


def _ramping(steps: int = 96, at: int = 40, run: int = 8, baseline: float = 50.0) -> np.ndarray:
    """A cluster near ``baseline`` (small wobble, so percentiles are well defined) that dips well below
    its median, then climbs to the top for ``run`` steps from ``at``."""
    x = baseline + np.sin(np.arange(steps)) * 2.0
    x[at - 14 : at] = 20.0
    x[at : at + run] = 95.0
    return x


def test_a_sustained_climb_out_of_a_quiet_spell_is_one_ramp_at_its_first_hot_step() -> None:
    events = ramp_events(_ramping()[None, :], SUSTAINED)
    assert events.tolist() == [[0, 40]]


@pytest.mark.parametrize(
    ("why", "series"),
    [
        ("a blip shorter than 30 minutes", _ramping(run=3)),
        ("a climb from an already busy cluster", np.where(np.arange(96) < 40, 70.0, _ramping())),
    ],
)
def test_blips_and_busy_starts_are_not_ramps(why: str, series: np.ndarray) -> None:
    assert ramp_events(series[None, :], SUSTAINED).shape == (0, 2), why


def test_a_ramp_needs_its_quiet_window_and_its_run_inside_the_series() -> None:
    assert ramp_events(_ramping(at=8)[None, :], SUSTAINED).shape == (0, 2)  # quiet window before step 0
    assert ramp_events(_ramping(steps=44, at=40)[None, :], SUSTAINED).shape == (0, 2)  # run cut off
    with pytest.raises(ValueError, match="quiet <= above"):
        Ramp(above=50.0, quiet=75.0)


def test_shares_count_live_decisions_on_the_ramping_cluster_against_the_base_rate() -> None:
    # Three clusters, ten decisions; a ramp on cluster 1 at step 6, lives of 4 steps (decisions 3..6).
    picks = np.array([[0], [1], [1], [2], [1], [0], [0], [1], [1], [1]], dtype=np.int64)
    live, base = shares(picks, np.array([[1, 6]]), life_steps=4, clusters=3)
    assert live.tolist() == [0.25]  # of decisions 3, 4, 5, 6 only 4 chose cluster 1
    assert base.tolist() == [0.6]  # 6 of the 10 decisions did
    # Pick k: a decision counts when cluster 1 is any of its clusters; windows are cut at step 0.
    pairs = np.array([[1, 0], [2, 0], [0, 1]], dtype=np.int64)
    live, base = shares(pairs, np.array([[1, 1]]), life_steps=5, clusters=3)
    assert (live.tolist(), base.tolist()) == ([0.5], [pytest.approx(2 / 3)])
    with pytest.raises(ValueError, match="past the 3 decisions"):
        shares(pairs, np.array([[1, 3]]), life_steps=2, clusters=3)


def test_evaluate_tells_a_policy_that_avoids_ramps_from_one_drawn_to_them() -> None:
    steps = 96
    ramping = _ramping(steps)
    loads = np.vstack([ramping, np.full(steps, 50.0) + np.cos(np.arange(steps)), np.full(steps, 55.0)])
    quiet = ramping < 45.0  # before the ramp, the ramping cluster is the quietest
    # "Reactive" prefers the ramping cluster while it is quiet; "foresight" keeps off it then.
    reactive = np.vstack([np.where(quiet, 90, 10), np.full(steps, 50), np.full(steps, 40)]).astype(np.int64)
    foresight = np.vstack([np.where(quiet, 5, 60), np.full(steps, 50), np.full(steps, 40)]).astype(np.int64)
    # Both decide on the previous step's score, as the causal replay aligns them.
    published = {
        ("reactive", "raw", 0): np.roll(reactive, 1, axis=1),
        ("foresight", "raw", 0): np.roll(foresight, 1, axis=1),
    }
    results = evaluate(loads, published, {}, forms=["exact"], ks=[1], lives=[6], step_seconds=300, orders=4)
    by = {r.label: r.ramps["sustained"] for r in results}
    assert {name: r.events for name, r in by.items()} == dict.fromkeys(by, 1)
    assert by["reactive/raw"].excess is not None and by["reactive/raw"].excess.low > 0.5
    assert by["foresight/raw"].excess is not None and by["foresight/raw"].excess.high < 0.0
    assert by["static"].excess is not None and by["static"].excess.median == 0.0  # always its base rate
    row = next(r for r in results if r.label == "reactive/raw").row()
    assert row["ramp_sustained_events"] == 1 and row["ramp_sustained_live"] == 1.0
