"""The herd sweep's plan: what it compares, and that every setup is one the closed loop can run."""

from __future__ import annotations

import numpy as np

from bench.placement_quality import closed_loop as cl
from bench.placement_quality import herd
from bench.placement_quality.closed_loop import LOOP_BASELINES
from bench.placement_quality.policies import BY_NAME
from bench.placement_quality.spread import Spread


def test_every_setup_names_a_replayed_policy_and_a_known_form_beside_every_baseline() -> None:
    for plan in (herd.HELD_OUT, herd.TRAINING):
        setups = herd.setups(plan)
        scored = [s for s in setups if s.scored]
        for s in scored:
            assert s.policy in BY_NAME
            assert s.form in ("exact", "margin") or Spread.parse(s.form) is not None, s.form
        assert len({(s.life, s.size, s.label) for s in setups}) == len(setups)  # no label twice
        for life, (sizes, _) in plan.items():
            for size in sizes:
                here = {s.policy for s in setups if not s.scored and (s.life, s.size) == (life, size)}
                assert here == set(LOOP_BASELINES)
    assert set(herd.BASELINES) <= set(LOOP_BASELINES)


def test_the_sweep_holds_the_recipe_and_the_alternatives_it_was_chosen_from() -> None:
    forms = {
        (life, s.form) for life in herd.HELD_OUT for s in herd.setups({life: herd.HELD_OUT[life]}) if s.scored
    }
    assert {("1h", "balance-3"), ("4h", "balance-3-steady7"), ("12h", "balance-3-steady7")} <= forms
    assert {
        ("1h", "balance-1"),
        ("1h", "balance-10"),
        ("1h", "inflight-3-1"),
        ("4h", "balance-3-steady1"),
    } <= forms
    assert {("1h", "exact"), ("4h", "margin"), ("12h", "margin")} <= forms  # one decision for all
    training = {(s.life, s.form) for s in herd.setups(herd.TRAINING) if s.scored}
    assert training == {("1h", "exact"), ("1h", "balance-3"), ("4h", "margin"), ("4h", "balance-3")}


def test_the_open_run_prices_each_spread_form_against_one_decision_for_all_at_size_zero() -> None:
    setups = herd.setups(herd.OPEN)
    assert {s.size for s in setups} == {0.0}
    scored = {(s.life, s.form) for s in setups if s.scored}
    assert {("1h", "exact"), ("1h", "balance-3"), ("4h", "margin"), ("12h", "balance-3-steady7")} <= scored


def test_at_size_zero_placed_work_adds_nothing_and_the_rows_carry_the_spreads_regret() -> None:
    # three clusters at 40, 45 and 90 %, scores that know it: one decision for all always picks the
    # coolest (regret 0); Balance 3 outweighs a 10-point lead, sends work to the second and pays 5 a step
    base = np.tile(np.array([[40.0], [45.0], [90.0]]), (1, 80))
    setups = herd.setups({"1h": ((0.0,), ("recipe-1h+exact", "recipe-1h+balance-3"))})
    loops = cl.make_loops(setups, base, 20)
    for loop in loops:
        for step in range(20, 80):
            scores = np.rint(100 - 2 * loop.total(step - 1)).astype(np.int64) if loop.setup.scored else None
            loop.step(step, scores)
    assert not any(loop.added.any() for loop in loops)
    results = [cl.judge(loop, 20, 300) for loop in loops]
    by_label = {r.setup.label: r for r in results}
    assert by_label["recipe-1h/raw"].regret == 0
    assert by_label["recipe-1h/raw+balance-3"].regret > 0
    simulated = cl.Simulated(results, cl.compare_loops(results), 0, 0.0, loops)
    rows = {row.metric: row.value for row in herd.open_rows(simulated)}
    spread = rows["open life 1h: recipe-1h/raw - recipe-1h/raw+balance-3 regret"]
    assert spread.endswith("recipe-1h/raw lower")
    assert "open life 1h: recipe-1h/raw+balance-3 - random regret" in rows
    assert rows["open life 1h round-robin"].startswith("regret ")  # every setup's own regret
    assert not any(metric.endswith("- round-robin regret") for metric in rows)  # compared with two only
