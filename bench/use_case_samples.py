"""The use-case sample scorers (GPU, cost, power, latency): time per request, small and at design load.

Each runs in process behind the scorer library's HTTP server on loopback, and the conformance check
sends it what the agent would: 3 series of 20 points, and 10,000 series of 60 points (about 14 MB,
the agent's design load), labelled so that the scorer recognises them (the DCGM exporter's metric
names, probe targets) or with the parameters it needs (a price table, a power cap).  The check's
own p50 and max are reported; every scorer must also pass the check.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Any

from bench import Row, benchmark


def _cases(workdir: Path) -> dict[str, tuple[Any, dict[str, Any]]]:
    from dynamic_scoring.samples.scorers import cost, gpu, latency, power
    from dynamic_scoring.samples.scorers.prices import PriceFile
    from dynamic_scoring.samples.scorers.server import build_app, build_parser

    def app(module: Any, score: Any) -> Any:
        args = build_parser("bench", module.DEFAULTS).parse_args([])
        return build_app(args, argparse.ArgumentParser(), module.DEFAULTS.description, score)

    prices = workdir / "prices.json"
    prices.write_text(
        json.dumps({"*": {"rates": [{"from": "00:00", "price": 0.2}, {"from": "12:00", "price": 0.3}]}})
    )
    dcgm = [
        {"__name__": m, "Hostname": f"node-{i}", "gpu": "0"}
        for i in range(50)
        for m in (gpu.UTIL, gpu.FB_USED, gpu.FB_FREE)
    ]
    probes = [
        {"__name__": m, "instance": f"target-{i}"}
        for i in range(20)
        for m in (latency.DURATION, latency.SUCCESS)
    ]
    per_pod = {"dimension_format": "${scoreName}-${pod}"}
    return {
        "gpu": (app(gpu, gpu.score), {"series_labels": dcgm}),
        "cost": (app(cost, functools.partial(cost.score, prices=PriceFile(str(prices)))), per_pod),
        "power": (app(power, power.score), {"params": {"capWatts": 1000}, **per_pod}),
        "latency": (app(latency, latency.score), {"series_labels": probes}),
    }


@benchmark("use-case-samples")
def use_case_samples(workdir: Path) -> list[Row]:
    """Each use-case sample through the conformance check: small and 10,000-series requests."""
    from dynamic_scoring.scorer.testing import check_app

    rows: list[Row] = []
    for name, (app, options) in _cases(workdir).items():
        report = check_app(app, **options)
        timing = {t["input"]: t for t in report.to_json()["latency"]}
        rows.append(
            Row("use-case-samples", f"{name}: 3 series x 20, p50", f"{timing['small']['p50'] * 1000:.1f} ms")
        )
        rows.append(
            Row(
                "use-case-samples",
                f"{name}: 10,000 series x 60",
                f"{timing['large']['max']:.2f} s",
                "< 30 s (the agent's deadline)",
                "ok" if timing["large"]["max"] < 30 else "MISSED",
            )
        )
        rows.append(
            Row(
                "use-case-samples",
                f"{name}: conforms",
                str(report.ok),
                "True",
                "ok" if report.ok else "MISSED",
            )
        )
    return rows
