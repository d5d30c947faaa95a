"""Issue 6's hostile peers, measured: memory with 100,000 results, a gzip bomb, a padded source.

Numbers, not pass/fail tests (those are in ``tests/component/test_hostile_peers.py``): resident
memory of the agent process before, while and after a scorer answers 100,000 results (5 MB), the
``/metrics`` size meanwhile, the memory peak while a 1 MB gzip answer that inflates to 1 GiB is
refused, and the event loop's worst stall while a source answer padded with whitespace goes through.
Targets: the design's 80 MiB resident for an agent with ordinary scorers, and no stall a person
would notice (0.25 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench import Row, benchmark, verdict
from bench.agent.cycle import _prober, prometheus_payload, run_child
from e2e.procs import Proc, free_port, wait_until

PAD_MIB = 24
"""Under the 32 MiB per-query source limit, so the padded answer is read and forwarded."""


def _server(workdir: Path, name: str, *argv: str) -> tuple[Proc, str]:
    port = free_port()
    proc = Proc(
        name,
        [sys.executable, "-m", "bench.agent.servers", *argv, "--port", str(port)],
        workdir / f"{name}.log",
    )
    proc.start()
    wait_until(_prober(port), timeout=60, what=f"{name} to listen", proc=proc)
    return proc, f"http://127.0.0.1:{port}"


@benchmark("hostile")
def hostile(workdir: Path) -> list[Row]:
    (workdir / "small.json").write_bytes(prometheus_payload(20, 60))
    procs: list[Proc] = []
    try:
        urls: dict[str, str] = {}
        for name, argv in [
            ("small", ["replay", "--file", str(workdir / "small.json")]),
            ("scorer", ["scorer"]),
            ("many", ["many", "--count", "100000"]),
            ("full", ["many", "--count", "4096"]),
            ("bomb", ["bomb", "--mib", "1024"]),
            ("pad", ["pad", "--mib", str(PAD_MIB)]),
        ]:
            proc, urls[name] = _server(workdir, name, *argv)
            procs.append(proc)
        result, _ = run_child(
            workdir,
            "hostile",
            "--small-source", urls["small"] + "/api/v1/query_range",
            "--scorer", urls["scorer"] + "/scoring",
            "--many", urls["many"] + "/scoring",
            "--full", urls["full"] + "/scoring",
            "--bomb", urls["bomb"] + "/scoring",
            "--pad", urls["pad"] + "/api/v1/query_range",
        )  # fmt: skip
    finally:
        for proc in procs:
            proc.stop()
    mib = 1024.0
    base = result["baseline_kib"] / mib
    peak = result["many_peak_kib"] / mib
    removed = result["removed_rss_kib"] / mib
    bomb = result["bomb_growth_kib"] / mib
    stall = result["pad_worst_stall_s"]
    name = "hostile"
    return [
        Row(name, "resident memory, baseline (1 scorer)", f"{base:.1f} MiB"),
        Row(name, f"100,000 results: outcome ({result['many_reason']})", f"peak {peak:.1f} MiB", "< 80 MiB",
            verdict(peak < 80)),
        Row(name, "100,000 results: /metrics size", f"{result['many_metrics_bytes'] / 1024:.0f} KiB"),
        Row(name, "after the scorer is removed", f"{removed:.1f} MiB", "< 80 MiB", verdict(removed < 80)),
        Row(name, "4,096 results: resident", f"{result['full_rss_kib'] / mib:.1f} MiB"),
        Row(name, "  after removal / after malloc_trim",
            f"{result['full_removed_rss_kib'] / mib:.1f} / {result['full_trimmed_rss_kib'] / mib:.1f} MiB"),
        Row(name, f"1 GiB gzip bomb: outcome ({result['bomb_reason']})",
            f"+{bomb:.1f} MiB in {result['bomb_seconds']:.2f} s", "< +24 MiB", verdict(bomb < 24)),
        Row(name, f"{PAD_MIB} MiB padded source: worst loop stall ({result['pad_reason']})",
            f"{stall * 1000:.0f} ms", "< 250 ms", verdict(stall < 0.25, stall < 0.5)),
    ]  # fmt: skip
