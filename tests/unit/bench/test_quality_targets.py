"""Named comparisons: both regrets, the relative change, the interval, and a verdict that can fail."""

from __future__ import annotations

import numpy as np

from bench.placement_quality.confidence import Band
from bench.placement_quality.experiment import Result
from bench.placement_quality.policies import LIVES
from bench.placement_quality.real import MARGIN_PAIRS, PAIRS, TARGET_GAIN
from bench.placement_quality.targets import MarginPair, Pair, judge, judge_margins, margin_rows, rows


def _result(policy: str, variant: str, per_step: np.ndarray, life: str = "1h") -> Result:
    band = Band(float(per_step.mean()), float(per_step.mean()), float(per_step.mean()))
    return Result(
        policy=policy,
        variant=variant,
        form="-" if variant == "-" else "exact",
        k=1,
        lag=0,
        life_steps=LIVES[life],
        regret=band,
        regret_p95=band,
        exposure=None,
        changes_per_day=Band(0.0, 0.0, 0.0),
        writes_per_cluster_day=None,
        per_step=per_step,
    )


def _results() -> list[Result]:
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 0.2, 500)
    return [
        _result("new", "raw", 1.0 + noise),
        _result("random", "-", 5.0 + rng.normal(0.0, 0.2, 500)),
        _result("close", "raw", 1.1 + noise + rng.normal(0.0, 0.3, 500)),
    ]


def test_a_clear_large_gain_meets_its_target_and_a_small_one_does_not() -> None:
    found = judge(
        _results(),
        [Pair("1h", "new/raw", "random", 0.3), Pair("1h", "new/raw", "close/raw", 0.3)],
    )
    against_random, against_close = found
    assert against_random.mine < 1.1 and against_random.theirs > 4.9
    assert against_random.lower > 0.75 and against_random.high < 0 and against_random.met is True
    assert 0 < against_close.lower < 0.3 and against_close.met is False  # 9 % lower: below the target


def test_a_pair_without_a_target_has_no_verdict_and_missing_policies_are_left_out() -> None:
    found = judge(_results(), [Pair("1h", "new/raw", "random"), Pair("1h", "absent/raw", "random")])
    assert len(found) == 1 and found[0].met is None
    (row,) = rows("bench", "held-out", found)
    assert row.target == row.verdict == ""
    t = found[0]
    assert row.value.startswith(f"regret {t.mine:.2f} against {t.theirs:.2f} (+80 % lower)")
    assert found[0].record()["label"] == "new/raw" and found[0].record()["met"] is None


def test_a_missed_target_prints_missed() -> None:
    found = judge(_results(), [Pair("1h", "close/raw", "new/raw", 0.3)])  # higher regret: not lower at all
    assert found[0].lower < 0 and found[0].met is False
    assert rows("bench", "held-out", found)[0].verdict == "MISSED"


def test_the_main_runs_pairs_hold_the_issues_targets_once_each() -> None:
    keyed = [(p.life, p.label, p.other) for p in PAIRS]
    assert len(keyed) == len(set(keyed))
    with_target = {(p.life, p.other) for p in PAIRS if p.gain == TARGET_GAIN}
    assert with_target == {(life, o) for life in ("1h", "4h", "12h") for o in ("random", "reactive/raw")}
    assert ("1h", "blend-1h/raw", "seasonal-1h/raw") in keyed  # the blend against the sample before it
    assert ("12h", "even-12h/raw", "seasonal-12h/raw") in keyed  # what blending would cost where it stops


def _margin_result(policy: str, form: str, per_step: np.ndarray, changes: float) -> Result:
    mean = float(per_step.mean())
    return Result(
        policy=policy,
        variant="raw",
        form=form,
        k=1,
        lag=0,
        life_steps=LIVES["1h"],
        regret=Band(mean, mean, mean),
        regret_p95=Band(mean, mean, mean),
        exposure=None,
        changes_per_day=Band(changes, changes, changes),
        writes_per_cluster_day=None,
        per_step=per_step,
    )


def test_a_margin_recipe_meets_its_target_only_close_to_exact_and_with_few_changes() -> None:
    rng = np.random.default_rng(1)
    base = 1.0 + rng.normal(0.0, 0.1, 400)
    found = judge_margins(
        [
            _margin_result("plain", "exact", base, 30.0),
            _margin_result("plain", "margin", base + 1.0, 2.0),  # the recipe before: few changes, much worse
            _margin_result("good", "margin", base * 1.05, 8.0),  # +5 %, 0.27 of the changes
            _margin_result("churny", "margin", base * 1.05, 12.0),  # +5 %, 0.40 of the changes
            _margin_result("worse", "margin", base * 1.2, 5.0),  # +20 %
        ],
        [
            MarginPair("1h", f"{name}/raw", "plain/raw", "plain/raw")
            for name in ("good", "churny", "worse", "absent")
        ],
    )
    good, churny, worse = found  # the absent recipe is left out
    assert abs(good.above - 0.05) < 1e-9 and abs(good.change_share - 8 / 30) < 1e-9 and good.met
    assert not churny.met and not worse.met
    assert good.previous_regret is not None and good.previous_regret > 1.9 and good.previous_changes == 2.0
    assert good.low > 0  # 5 % above Exact is a real difference, and the interval says so
    verdicts = [r.verdict for r in margin_rows("bench", "held-out", found)]
    assert verdicts == ["ok", "MISSED", "MISSED"]
    assert "previous recipe" in margin_rows("bench", "held-out", found)[0].value
    assert good.record()["met"] is True and good.record()["recipe"] == "good/raw"


def test_the_main_runs_margin_pairs_put_each_lifes_recipe_against_the_shipped_forecast() -> None:
    keyed = {(p.life, p.recipe, p.exact) for p in MARGIN_PAIRS}
    assert len(keyed) == len(MARGIN_PAIRS)
    assert ("1h", "recipe-1h/raw", "blend-1h/raw") in keyed
    assert ("12h", "recipe-12h/stabilized", "seasonal-12h/raw") in keyed
    assert ("1h", "cpu-recipe/raw", "cpu/raw") in keyed
    assert all(p.within == 0.10 and abs(p.share - 1 / 3) < 1e-12 for p in MARGIN_PAIRS)
