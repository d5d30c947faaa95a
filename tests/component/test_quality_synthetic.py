"""The synthetic-fleet benchmark end to end on loopback, shrunk to 3 clusters and 2 scorers.

What is proven: the run replays the synthetic clusters through real agent cycles (every scored policy
has results at every life, and the cycle count is policies x clusters x scored samples), labels them
synthetic in its rows and files, runs the closed loop with its scored setups and every baseline, and,
with a real run's JSON beside it, sets the comparisons both make side by side (an agreement that was
never computed, or keyed wrongly, would share nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench.placement_quality.synthetic as syn
from bench.placement_quality import closed_loop as cl
from bench.placement_quality.policies import LIVES
from bench.placement_quality.real import QUICK_ENV


def test_a_shrunk_synthetic_run_replays_judges_loops_and_compares_with_the_real_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(QUICK_ENV, "1")
    monkeypatch.setattr(syn, "QUICK_CLUSTERS", 3)
    monkeypatch.setattr(syn, "QUICK_POLICY_NAMES", ("reactive", "free-cores"))
    monkeypatch.setattr(syn, "QUICK_CLOSED_POLICIES", ("reactive",))
    # A real run's comparisons: one the synthetic run also makes (clear, cpu worse), one it cannot.
    real = {
        "halves": {
            "held-out": {
                "comparisons": [
                    {"life": "1h", "form": "exact", "k": 1, "lag": 0, "a": "random", "b": "reactive/raw"}
                    | {"difference": 1.0, "low": 0.5, "high": 1.5, "steps": 500},
                    {"life": "1h", "form": "exact", "k": 1, "lag": 0, "a": "seasonal-1h/raw", "b": "cpu/raw"}
                    | {"difference": -1.0, "low": -1.5, "high": -0.5, "steps": 500},
                ]
            }
        },
        "closed_loop": {"comparisons": []},
    }
    (tmp_path / "placement-quality").mkdir()
    (tmp_path / "placement-quality" / "placement-quality.json").write_text(json.dumps(real))
    workdir = tmp_path / syn.NAME
    workdir.mkdir()

    rows = syn.placement_quality_synthetic(workdir)

    record = json.loads((workdir / f"{syn.NAME}.json").read_text())
    setup = record["setup"]
    assert setup["synthetic"] and setup["fleet_summary"]["synthetic"]
    assert [c.split("-s")[0] for c in setup["clusters"]] == ["alibaba", "google", "azure"]
    judged = setup["judged_steps"]
    assert judged == 288 - setup["warmup_steps"]
    results = record["halves"]["synthetic"]["results"]
    for policy in ("reactive", "free-cores"):
        for life in LIVES.values():
            assert any(r["policy"] == policy and r["life_steps"] == life and r["lag"] == 0 for r in results)
    assert not any(r["policy"].startswith(("seasonal", "predict", "cpu")) for r in results)

    # Every decision is judged on idle cores too; the scorer that reads each cluster's capacity from
    # Prometheus leaves far fewer idle cores on the table than the one that reads utilisation alone.
    def cores(policy: str) -> float:
        return float(
            next(
                r["core_regret_mean"]
                for r in results
                if r["policy"] == policy
                and r["variant"] in ("raw", "-")
                and r["form"] in ("exact", "-")
                and r["k"] == 1
                and r["lag"] == 0
                and r["life_steps"] == LIVES["1h"]
            )
        )

    assert cores("free-cores") < 0.5 * cores("reactive") and cores("random") > cores("free-cores")
    comparisons = record["halves"]["synthetic"]["comparisons"]
    assert {c["measure"] for c in comparisons} == {"regret", "core_regret"}
    cycles = next(r.value for r in rows if r.metric.startswith("real cycles"))
    assert int(cycles) == 2 * 3 * (judged + 2)  # scored from two samples earlier, for lags 1 and 2
    closed = record["closed_loop"]["results"]
    assert sorted(r["policy"] for r in closed) == sorted(["reactive", *cl.LOOP_BASELINES])
    shared = record["agreement"]["open_loop"]
    assert shared["shared"] == 1 and shared["pairs"][0]["a"] == "random"
    assert record["agreement"]["closed_loop"]["shared"] == 0
    assert all(r.benchmark == syn.NAME for r in rows)
    assert any(r.metric.startswith("synthetic life 1h exact k=1 reactive/raw") for r in rows)
    assert any(r.metric == "agreement with the real fleet, open loop" and "1 shared" in r.value for r in rows)
