"""Run the benchmarks and print a table: ``python -m bench [name ...]``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

from bench import REGISTRY, Row

MODULES = [
    "bench.agent.cycle",
    "bench.agent.hostile",
    "bench.forecast_cost",
    "bench.hub.dispatch",
    "bench.hub.manager",
    "bench.hub.probe",
    "bench.hub.registry",
    "bench.placement_quality.bias",
    "bench.placement_quality.herd",
    "bench.placement_quality.history",
    "bench.placement_quality.real",
    "bench.placement_quality.synthetic",
    "bench.placement_stability.live",
    "bench.scorer_library",
    "bench.scores",
    "bench.stabilization",
    "bench.use_case_samples",
]
"""Modules whose ``@benchmark`` functions are run; add new benchmark modules here."""


def print_table(rows: list[Row]) -> None:
    header = ("benchmark", "metric", "value", "target", "verdict")
    cells = [header] + [(r.benchmark, r.metric, r.value, r.target, r.verdict) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--workdir", type=Path, help="keep logs and payloads here (default: a temp dir)")
    parser.add_argument(
        "--quick", action="store_true", help="shorter runs where a benchmark offers one (sets BENCH_QUICK=1)"
    )
    args = parser.parse_args()
    if args.quick:
        os.environ["BENCH_QUICK"] = "1"
    for module in MODULES:
        importlib.import_module(module)
    names = args.names or list(REGISTRY)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {sorted(REGISTRY)}")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        base = args.workdir or Path(tmp)
        for name in names:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            workdir = base / name
            workdir.mkdir(parents=True, exist_ok=True)
            rows.extend(REGISTRY[name](workdir))
    print_table(rows)
    return 1 if any(r.verdict == "MISSED" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
