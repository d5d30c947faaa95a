"""The herd sweep's plan: what it compares, and that every setup is one the closed loop can run."""

from __future__ import annotations

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
