"""The docs' tables come from a run's JSON: every row and life is there, only clear comparisons listed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bench.placement_quality.real as pq
from bench.placement_quality import closed_loop as cl
from bench.placement_quality.agreement import agree
from bench.placement_quality.confidence import Interval
from bench.placement_quality.experiment import evaluate
from bench.placement_quality.policies import LIVES
from bench.placement_quality.real import compare
from bench.placement_quality.report import (
    DASH,
    agreement,
    anticipation,
    clear_comparisons,
    closed_comparisons,
    history_report,
    main,
    regret_by_life,
    report,
    synthetic_report,
)
from bench.placement_quality.targets import judge, judge_margins


def _record() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    loads = rng.uniform(20, 80, size=(4, 200))
    published = {
        (p.name, variant, lag): rng.integers(0, 101, size=(4, 200)).astype(np.int64)
        for p in pq.REPLAYED
        if p.scored
        for variant in ("raw", "stabilized")
        for lag in (0, 1, 2)
    }
    results = evaluate(
        loads,
        published,
        {},
        forms=["exact", "margin"],
        ks=[1, 3],
        lives=list(LIVES.values()),
        step_seconds=300,
        orders=2,
    )
    comparisons = [
        {
            **{k: v for k, v in dataclasses.asdict(c).items() if k != "interval"},
            **dataclasses.asdict(c.interval),
        }
        for c in compare(results)
    ]
    half = {
        "results": [r.row() for r in results],
        "comparisons": comparisons,
        "anticipation": [a.record() for a in pq.anticipate(results)],
        "targets": [t.record() for t in judge(results, pq.PAIRS)],
        "margins": [t.record() for t in judge_margins(results, pq.MARGIN_PAIRS)],
    }
    return {"halves": {"held-out": half, "train": half}}


def test_report_has_every_table_row_and_life() -> None:
    text = report(_record())
    for heading in (
        "pick 1, Exact (held-out)",
        "margin form: AddOn 10 + Steady 1",
        "The margin recipe against Exact",
        "pick 3",
        "training half",
        "Extra staleness",
        "Idle cores short of the best cluster's",
        "Anticipation around loose ramps",
    ):
        assert heading in text
    table = regret_by_life(_record()["halves"]["held-out"]["results"], "exact", 1)
    lines = table.splitlines()
    assert lines[0] == "| policy | life 15m | life 1h | life 4h | life 12h |"
    # every row the main run replays: the free-cores scorer's, the blends' and the recipes' included, not
    # the 3-day one
    assert len(lines) == 2 + 13
    assert not any(line.startswith("| seasonal on 3 days") for line in lines)
    assert DASH + "]" not in table and all(line.count("|") == 6 for line in lines)
    margin_table = text.split("### The margin recipe against Exact, pick 1")[1].split("###")[0]
    recipes = [line for line in margin_table.splitlines() if line.startswith("| ")][1:]
    assert [line.split(" | ")[:2] for line in recipes[:2]] == [
        ["| 15m", "recipe-15m/raw"],
        ["| 15m", "recipe-15m/stabilized"],
    ]
    assert len(recipes) == len(pq.MARGIN_PAIRS) and all(line.count("|") == 10 for line in recipes)
    assert all(("| met |" in line) != ("| **missed** |" in line) for line in recipes)


def test_only_comparisons_whose_interval_excludes_zero_are_listed() -> None:
    held = [
        {
            "life": "1h",
            "form": "exact",
            "k": 1,
            "a": "x",
            "b": "y",
            "difference": -1.0,
            "low": -1.5,
            "high": -0.5,
        },
        {
            "life": "1h",
            "form": "exact",
            "k": 1,
            "a": "x",
            "b": "z",
            "difference": 0.1,
            "low": -0.2,
            "high": 0.4,
        },
        {
            "life": "1h",
            "form": "exact",
            "k": 1,
            "a": "random",
            "b": "y",
            "difference": 5.0,
            "low": 4,
            "high": 6,
        },
    ]
    table = clear_comparisons(held, [])
    assert len(table.splitlines()) == 3
    assert "-1.00 [-1.50, -0.50]" in table


def test_main_needs_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 1
    assert "run `python -m bench placement-quality" in capsys.readouterr().err
    assert main([]) == 2


def test_the_closed_loop_tables_list_every_setup_and_only_scored_comparisons() -> None:
    base = np.tile(np.linspace(20, 80, 4)[:, None], (1, 120))
    setups = [*cl.setups_for([], [3.0], ["1h"]), cl.Setup("cpu", "raw", "exact", 3.0, "1h")]
    loops = cl.make_loops(setups, base, 20)
    for loop in loops:
        for step in range(20, 120):
            scores = np.rint(100 - loop.total(step - 1)).astype(np.int64) if loop.setup.scored else None
            loop.step(step, scores)
    results = [cl.judge(loop, 20, 300) for loop in loops]
    comparisons = [
        {
            **{k: v for k, v in dataclasses.asdict(c).items() if k != "interval"},
            **dataclasses.asdict(c.interval),
        }
        | {"verdict": c.verdict}
        for c in cl.compare_loops(results)
    ]
    record = _record() | {"closed_loop": {"results": [r.row() for r in results], "comparisons": comparisons}}
    text = report(record)
    assert "### Closed loop (held-out clusters)" in text
    table = text.split("### Closed loop (held-out clusters)")[1]
    for name in (*cl.LOOP_BASELINES, "cpu/raw"):
        assert f"| {name} |" in table
    listed = closed_comparisons(comparisons).splitlines()[2:]
    assert len(listed) == len(cl.LOOP_BASELINES)  # cpu against each baseline; baseline pairs left out
    assert all(line.startswith("| 1h | 3 % | cpu/raw") for line in listed)


def test_the_synthetic_report_has_its_tables_and_sets_shared_comparisons_beside_the_real_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = _record()
    ours = real["halves"]["held-out"]["comparisons"][:3]
    theirs = [dict(c, difference=-1.5, low=-2.0, high=-1.0) for c in ours]  # clear, a better
    pairs = agree([dict(c, difference=1.5, low=1.0, high=2.0) for c in ours], theirs).pairs  # a worse
    record = {
        "halves": {"synthetic": real["halves"]["held-out"]},
        "closed_loop": {"results": [], "comparisons": []},
        "agreement": {"open_loop": {"pairs": pairs}, "closed_loop": None},
    }
    text = synthetic_report(record)
    assert "### Synthetic fleet: mean regret by life, pick 1, Exact" in text
    assert "(the real run was not in the same work directory)" in text
    table = agreement(pairs)
    assert len(table.splitlines()) == 2 + len(pairs) == 5
    assert "**opposite**" in table and "| 15m exact k=1 |" in table
    (tmp_path / "placement-quality-synthetic.json").write_text(json.dumps(record))
    (tmp_path / "placement-quality.json").write_text(json.dumps(real))
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.index("pick 1, Exact (held-out)") < out.index("### Synthetic fleet")


def test_the_full_run_replays_the_training_half_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pq.TRAIN_ENV, raising=False)
    fleet, halves, steps = pq._fleet(quick=False)
    assert list(halves) == ["held-out"] and steps == fleet.loads.shape[1]
    assert {fleet.roles[i] for i in halves["held-out"]} == {"test"}
    monkeypatch.setenv(pq.TRAIN_ENV, "1")
    _, both, _ = pq._fleet(quick=False)
    assert list(both) == ["held-out", "train"] and {fleet.roles[i] for i in both["train"]} == {"train"}
    _, quick, _ = pq._fleet(quick=True)
    assert list(quick) == ["held-out"] and len(quick["held-out"]) == 5


def test_anticipation_is_listed_per_life_and_placer_and_called_only_on_enough_ramps() -> None:
    records = _record()["halves"]["held-out"]["anticipation"]
    assert {a["definition"] for a in records} == {"sustained", "loose"}
    table = anticipation(records, "loose")
    lines = table.splitlines()
    assert lines[0].startswith("| life | placer | ramps |")
    shown = [r for r in records if r["definition"] == "loose"]
    assert len(lines) == 2 + len(shown) and all(line.count("|") == 8 for line in lines)
    assert "### Anticipation around sustained ramps" in report(_record())
    # The verdict: nothing without ramps, "too few" below 200 however clear, then the interval's sign.
    clear = pq.Anticipation("1h", "loose", "reactive/raw", 5, 0.3, 0.1, Interval(0.2, 0.1, 0.3, 5))
    assert clear.verdict == "too few ramps (5 < 200)"
    assert dataclasses.replace(clear, events=250).verdict == "drawn to ramps"
    away = dataclasses.replace(clear, events=250, interval=Interval(-0.2, -0.3, -0.1, 250))
    assert away.verdict == "keeps away from ramps"
    unclear = dataclasses.replace(away, interval=Interval(-0.1, -0.3, 0.1, 250))
    assert unclear.verdict == "no difference shown"
    none = pq.Anticipation("1h", "loose", "static", 0, None, None, None)
    assert none.verdict == "no ramps" and none.record()["difference"] is None


def test_the_defaults_table_lists_every_pair_with_its_verdict_and_the_training_half_beside_it() -> None:
    record = _record()
    text = report(record)
    head = "### The seasonal sample's defaults against the alternatives, pick 1, Exact"
    assert head in text
    table = text.split(head)[1].split("###")[0].strip().splitlines()
    assert len(table) == 2 + len(pq.PAIRS)
    with_target = [line for line in table[2:] if "| met |" in line or "| **missed** |" in line]
    assert len(with_target) == sum(p.gain is not None for p in pq.PAIRS) == 6
    assert all(line.count("|") == 10 for line in table)
    # The blend at 1 h appears as the sample now; at 4 h the sample now is the seasonal forecast itself.
    assert any(line.startswith("| 1h | blend-1h | seasonal-1h |") for line in table)
    assert any(line.startswith("| 4h | seasonal-4h | random |") for line in table)


def test_the_history_report_sets_three_days_against_one_on_both_halves() -> None:
    record = _record()
    for half in record["halves"].values():
        half["targets"] = [
            {
                "life": "1h",
                "label": "seasonal3d-1h/raw",
                "other": "seasonal-1h/raw",
                "gain": None,
                "mine": 0.8,
                "theirs": 0.8,
                "difference": 0.0,
                "low": -0.2,
                "high": 0.2,
                "lower": 0.0,
                "met": None,
            },
        ]
    text = history_report(record)
    assert "Three days against one" in text and "training half, 6-day blocks" in text
    assert "| 1h | seasonal3d-1h | seasonal-1h | 0.80 against 0.80 | +0 % | +0.00 [-0.20, +0.20] |" in text
