"""The placement-quality plots: the pure helpers on hand-computed values, and both PNGs from tiny inputs."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.placement_quality import plots
from bench.placement_quality.policies import STABILIZATION
from bench.placement_quality.prometheus import step_time
from bench.placement_quality.ranking import FORMS
from bench.placement_quality.replay import Timeline, decide, decide_static, stabilize

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DAY = 288
NAMES = ["east", "north", "west"]


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking the signature."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE
    assert head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def _workdir(tmp_path: Path) -> Path:
    """A run's two files for 3 clusters, a warm-up day and two judged days, deterministic values."""
    rng = np.random.default_rng(7)
    timeline = Timeline(DAY, 2 * DAY)
    judged = timeline.judged
    hours = np.arange(DAY + judged) / 12
    loads = np.vstack([50 + 20 * np.sin(2 * np.pi * (hours - 8 * i) / 24) for i in range(3)])
    loads += rng.normal(0, 3, loads.shape)
    scored = list(timeline.scored)
    scores = {
        p: np.clip(100 - loads[:, scored] + rng.normal(0, 2, (3, len(scored))), 0, 100).astype(np.int64)
        for p in ("reactive", "cpu")
    }
    arrays: dict[str, Any] = {
        "loads": loads,
        "warmup_steps": np.asarray(DAY),
        "first_scored_sample": np.asarray(timeline.first_scored),
        **scores,
    }
    np.savez_compressed(tmp_path / "placement-quality-scores.npz", **arrays)
    results: list[dict[str, Any]] = []
    for form in FORMS:
        for k in (1, 3):
            row = {"policy": "static", "variant": "-", "form": "-", "k": k, "lag": 0, "life_steps": 12}
            results.append(row | {"regret_mean": 8.0 + k, "changes_per_day": 0.0})
            for i, policy in enumerate(scores):
                for variant, churn in (("raw", 40.0 + i), ("stabilized", 10.0 + i)):
                    regret = 1.0 + i / 4 + (0.5 if variant == "stabilized" else 0.0)
                    row = {"policy": policy, "variant": variant, "form": form, "k": k}
                    results.append(row | {"regret_mean": regret, "changes_per_day": churn})
                    # Other lags and lives are recorded too; the churn plot draws lag 0 at 1 h only.
                    results.append(row | {"regret_mean": 99.0, "changes_per_day": churn, "lag": 2})
    setup = {"quick": True, "clusters": NAMES, "days": 3, "judged_steps": judged}
    oracle = {"1h": [{"changes_per_day": 20.0, "regret": 0.01}, {"changes_per_day": 0.0, "regret": 4.0}]}
    record = {"setup": setup, "results": results, "oracle": oracle}
    (tmp_path / "placement-quality.json").write_text(json.dumps(record))
    return tmp_path


def test_plot_all_writes_both_pngs(tmp_path: Path) -> None:
    paths = plots.plot_all(_workdir(tmp_path))
    assert paths == [tmp_path / "placement-quality-day.png", tmp_path / "placement-quality-churn.png"]
    for path in paths:
        assert path.stat().st_size > 10_000
        width, height = _png_size(path)
        assert 600 <= width <= 2000
        assert 400 <= height <= 1500


def test_plot_day_refuses_a_day_that_is_not_judged(tmp_path: Path) -> None:
    loads = np.full((3, 2 * DAY), 50.0)
    timeline = Timeline(DAY, DAY)
    scores = {"reactive": np.full((3, len(timeline.scored)), 50, dtype=np.int64)}
    with pytest.raises(ValueError, match="day 1 is not one of the 1"):
        plots.plot_day(loads, timeline, scores, NAMES, tmp_path / "x.png", day=1)
    with pytest.raises(ValueError, match="do not match"):
        plots.plot_day(loads, timeline, scores, NAMES[:2], tmp_path / "x.png")


def test_plot_churn_regret_draws_a_zero_regret(tmp_path: Path) -> None:
    results = [
        {
            "policy": "static",
            "variant": "-",
            "form": "exact",
            "k": 1,
            "regret_mean": 4.0,
            "changes_per_day": 0,
        },
        {
            "policy": "cpu",
            "variant": "raw",
            "form": "exact",
            "k": 1,
            "regret_mean": 0.0,
            "changes_per_day": 9,
        },
    ]
    out = plots.plot_churn_regret(results, tmp_path / "zero.png")
    assert _png_size(out)[0] > 300
    # With a pick-3 result, each pick's panel gets its own oracle line.
    three = [{**r, "k": 3} for r in results]
    frontier = [{"changes_per_day": 0.0, "regret": 2.0}, {"changes_per_day": 20.0, "regret": 0.0}]
    both = plots.plot_churn_regret([*results, *three], tmp_path / "two.png", {1: frontier, 3: frontier})
    assert _png_size(both)[0] > _png_size(out)[0]


def test_a_run_with_a_closed_loop_gets_the_closed_loop_plot(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    record = json.loads((workdir / "placement-quality.json").read_text())
    closed = [
        {
            "policy": p,
            "variant": v,
            "life": life,
            "size": size,
            "hot_share": share * size,
            "slowdown": 2 + share * size,
        }
        for p, v, share in (("seasonal-1h", "raw", 0.05), ("power-of-two", "-", 0.001))
        for size in (1.0, 3.0, 6.0)
        for life in ("1h", "4h")
    ]
    record["closed_loop"] = {"results": closed, "comparisons": []}
    (workdir / "placement-quality.json").write_text(json.dumps(record))
    paths = plots.plot_all(workdir)
    assert paths[-1] == workdir / "placement-quality-closed.png"
    assert _png_size(paths[-1])[0] > 600
    with pytest.raises(ValueError, match="12h"):
        plots.plot_closed_loop(closed, tmp_path / "x.png", life="12h")


def test_plot_churn_regret_needs_a_plotted_form(tmp_path: Path) -> None:
    additive = [{"policy": "static", "variant": "-", "form": "additive", "k": 1, "regret_mean": 1.0}]
    with pytest.raises(ValueError, match="exact or margin"):
        plots.plot_churn_regret(additive, tmp_path / "x.png")


def test_hindsight_best_is_the_lowest_mean_over_the_life() -> None:
    loads = np.array([[1.0, 1.0, 5.0, 5.0], [2.0, 2.0, 0.0, 0.0]])
    # j=0: 1 vs 2; j=1: (1+5)/2=3 vs (2+0)/2=1; j=2: 5 vs 0; j=3: the life runs past the series.
    assert plots.hindsight_best(loads, 2).tolist() == [0, 1, 1, -1]
    assert plots.hindsight_best(loads, 1).tolist() == [0, 0, 1, 1]
    assert plots.hindsight_best(loads, 5).tolist() == [-1, -1, -1, -1]
    assert plots.hindsight_best(np.array([[3.0, 3.0], [3.0, 3.0]]), 2).tolist() == [0, -1]  # tie: first


def test_hindsight_best_refuses_an_empty_life() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        plots.hindsight_best(np.zeros((2, 3)), 0)


def test_representative_day_is_closest_to_the_median_day() -> None:
    # Days of 4 steps with 0, 3 and 1 changes inside them: median 1, so day 2.
    decisions = [0, 0, 0, 0, 0, 1, 0, 1, 2, 2, 1, 1]
    assert plots.representative_day(decisions, 4) == 2
    # A change across a day boundary (day 0 ends on 1, day 1 starts on 0) is not counted.
    assert plots.representative_day([0, 1, 1, 1, 0, 0, 0, 0], 4) == 0  # 1 and 0: median 0.5, tie: first
    # A partial last day is left out: days of 3 with 2, 0 and 2 changes (median 2), then [1, 0, 1, 0].
    assert plots.representative_day([0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 1, 0], 3) == 0


def test_representative_day_needs_a_whole_day() -> None:
    with pytest.raises(ValueError, match="one day of 4"):
        plots.representative_day([0, 1, 0], 4)


def test_decision_rows_are_the_replays_exact_k1_picks() -> None:
    raw = np.array([[10, 50, 50, 20], [30, 40, 60, 20], [20, 20, 55, 90]], dtype=np.int64)
    rows = plots.decision_rows({"cpu raw": raw}, NAMES)
    assert list(rows) == ["static", "cpu raw"]
    assert rows["static"].tolist() == [d[0] for d in decide_static(4, NAMES, 1, "exact")]
    assert rows["cpu raw"].tolist() == [1, 0, 1, 2]  # the highest score


def test_day_series_are_the_lag_0_scores_raw_and_stabilized() -> None:
    timeline = Timeline(warmup=DAY, judged=4)
    raw = np.arange(3 * len(timeline.scored), dtype=np.int64).reshape(3, -1) % 97
    series = plots.day_series({"cpu": raw, "predict-1h": raw}, timeline)
    assert list(series) == ["cpu raw", "cpu stabilized"]  # only the day plot's policies
    assert series["cpu raw"].tolist() == timeline.aligned(raw).tolist()
    times = [float(step_time(s)) for s in timeline.scored]
    assert (
        series["cpu stabilized"].tolist() == timeline.aligned(stabilize(raw, times, STABILIZATION)).tolist()
    )
    decided = decide(series["cpu raw"], NAMES, 1, "exact", "quality", "score")
    assert plots.decision_rows(series, NAMES)["cpu raw"].tolist() == [d[0] for d in decided]


def test_cluster_colours_share_a_hue_per_family_and_never_repeat() -> None:
    names = [*(f"alibaba-b{i}" for i in range(2)), *(f"google-w{i}" for i in range(4)), "azure-w0"]
    colours = plots.cluster_colours(names)
    assert len(set(colours)) == len(names)
    reds = [c for c in colours[:2]]
    blues = [c for c in colours[2:6]]
    assert all(r[0] > r[2] for r in reds)  # shades of red
    assert all(b[2] > b[0] for b in blues)  # shades of blue
    assert colours == plots.cluster_colours(names)
