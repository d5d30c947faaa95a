"""Named comparisons: both regrets, the relative change, the interval, and a verdict that can fail."""

from __future__ import annotations

import numpy as np

from bench.placement_quality.confidence import Band
from bench.placement_quality.experiment import Result
from bench.placement_quality.policies import LIVES
from bench.placement_quality.real import PAIRS, TARGET_GAIN
from bench.placement_quality.targets import Pair, judge, rows


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
