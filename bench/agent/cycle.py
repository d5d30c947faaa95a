"""Agent benchmarks: one large cycle against the raw exchange, and memory with 20 small scorers.

Targets (docs/agent.md, "Benchmarks"): a cycle over 10,000 series x 60 points (about 17 MB) takes
at most 1.1x (1.5x at worst) of the time the same fetch and scoring exchanges take for a client that only
moves bytes; the cycle's peak resident memory stays under baseline + 2x the payload; an agent with
20 ordinary scorers stays under 80 MiB resident.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import Row, benchmark, verdict
from e2e.procs import Proc, free_port, wait_until

MIB = 1024 * 1024


def prometheus_payload(series: int, points: int, seed: int = 7) -> bytes:
    """A ``query_range`` answer shaped like ``sum by (node, namespace, pod) (rate(...))``."""
    rng = random.Random(seed)
    start = 1_700_000_000
    result = []
    for i in range(series):
        metric = {
            "namespace": f"team-{i % 40:02d}",
            "node": f"worker-{i % 25:02d}",
            "pod": f"app-{i:05d}-7d9f8c6b5d-x2k4q",
        }
        values = [[start + 60 * j, f"{rng.uniform(0, 4):.9f}"] for j in range(points)]
        result.append({"metric": metric, "values": values})
    body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return json.dumps(body, separators=(",", ":")).encode()


class Servers:
    """The replay server and the trivial scorer, as processes on 127.0.0.1."""

    def __init__(self, workdir: Path, big: bytes, small: bytes) -> None:
        (workdir / "big.json").write_bytes(big)
        (workdir / "small.json").write_bytes(small)
        self.procs: list[Proc] = []
        self.ports: dict[str, int] = {}
        for name, argv in [
            ("replay-big", ["replay", "--file", str(workdir / "big.json")]),
            ("replay-small", ["replay", "--file", str(workdir / "small.json")]),
            ("scorer", ["scorer"]),
        ]:
            port = free_port()
            proc = Proc(
                name,
                [sys.executable, "-m", "bench.agent.servers", *argv, "--port", str(port)],
                workdir / f"{name}.log",
            )
            self.procs.append(proc.start())
            self.ports[name] = port
            wait_until(_prober(port), timeout=30, what=f"{name} to listen", proc=proc)

    def url(self, name: str, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}{path}"

    def stop(self) -> None:
        for proc in self.procs:
            proc.stop()


def _prober(port: int) -> Callable[[], bool]:
    return lambda: _answers(port)


def _answers(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_child(workdir: Path, *args: str, sample: bool = False) -> tuple[dict[str, Any], int]:
    """Run ``bench.agent.child`` and return its JSON result and (if asked) the peak VmRSS seen from
    outside."""
    log = (workdir / "child.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.agent.child", *args], stdout=subprocess.PIPE, stderr=log
    )
    peak = 0
    if sample:
        stop = threading.Event()

        def watch() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, _rss_kib(proc.pid))
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    out, _ = proc.communicate(timeout=600)
    if sample:
        stop.set()
        watcher.join()
    log.close()
    if proc.returncode != 0:
        raise RuntimeError(f"bench child {args[0]} failed ({proc.returncode}); see {workdir / 'child.log'}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result, peak


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _ratio_rows(name: str, result: dict[str, Any], source: str) -> list[Row]:
    raw_s = statistics.median(result["raw"])
    agent_s = statistics.median(result["agent"])
    ratio = agent_s / raw_s
    runs = len(result["raw"])
    return [
        Row(name, f"raw fetch+score, {source} (median of {runs})", f"{raw_s * 1000:.0f} ms"),
        Row(name, f"agent whole cycle (median of {runs})", f"{agent_s * 1000:.0f} ms"),
        Row(
            name,
            "cycle / raw",
            f"{ratio:.2f}x",
            "<= 1.1x (1.5x at worst)",
            verdict(ratio <= 1.1, ratio <= 1.5),
        ),
    ]


@benchmark("agent-cycle")
def agent_cycle(workdir: Path) -> list[Row]:
    """Replay server: the source costs only the transfer, so the agent's own overhead shows most."""
    big = prometheus_payload(10_000, 60)
    small = prometheus_payload(20, 60)
    servers = Servers(workdir, big, small)
    try:
        source = servers.url("replay-big", "/api/v1/query_range")
        small_source = servers.url("replay-small", "/api/v1/query_range")
        scorer = servers.url("scorer", "/scoring")
        compared, _ = run_child(
            workdir, "compare", "--source", source, "--raw-source", source, "--scorer", scorer, "--runs", "15"
        )
        agent, _ = run_child(
            workdir,
            "cycle",
            "--source",
            source,
            "--small-source",
            small_source,
            "--scorer",
            scorer,
            "--runs",
            "3",
        )
    finally:
        servers.stop()
    payload_mib = len(big) / MIB
    baseline_mib = int(agent["baseline_kib"]) / 1024
    peak_mib = int(agent["peak_kib"]) / 1024
    allowed = baseline_mib + 2 * payload_mib
    return [
        Row("agent-cycle", "payload (10,000 series x 60 points)", f"{payload_mib:.1f} MiB"),
        *_ratio_rows("agent-cycle", compared, "replay server"),
        Row("agent-cycle", "RSS before the cycle (baseline)", f"{baseline_mib:.1f} MiB"),
        Row(
            "agent-cycle",
            "peak RSS during the cycles",
            f"{peak_mib:.1f} MiB (+{peak_mib - baseline_mib:.1f})",
            f"<= {allowed:.1f} MiB (baseline + 2x payload)",
            verdict(peak_mib <= allowed),
        ),
    ]


@benchmark("agent-cycle-prometheus")
def agent_cycle_prometheus(workdir: Path) -> list[Row]:
    """A real Prometheus as the source: its query evaluation is part of both measurements."""
    from e2e.prometheus import PrometheusServer, synthetic_cpu_openmetrics

    now = time.time()
    pods: dict[tuple[str, ...], float] = {
        (f"team-{i % 40:02d}", f"app-{i:05d}", f"worker-{i % 25:02d}"): (i % 400) / 100 for i in range(10_000)
    }
    prom = PrometheusServer(workdir / "prometheus", lookback_delta="1d")
    prom.backfill(
        synthetic_cpu_openmetrics(pods, now - 3700, now - 60, 60, kind="gauge", metric="bench_cpu_cores")
    )
    servers = Servers(workdir, b"", prometheus_payload(20, 60))
    try:
        prom.start()
        raw_source = f"{prom.query_range_url}?end=END&query=bench_cpu_cores&start=START&step=60"
        compared, _ = run_child(
            workdir,
            "compare",
            "--source",
            prom.query_range_url,
            "--query",
            "bench_cpu_cores",
            "--raw-source",
            raw_source,
            "--scorer",
            servers.url("scorer", "/scoring"),
            "--runs",
            "15",
        )
    finally:
        servers.stop()
        prom.stop()
    return _ratio_rows("agent-cycle-prometheus", compared, "real Prometheus")


@benchmark("agent-steady")
def agent_steady(workdir: Path) -> list[Row]:
    servers = Servers(workdir, b"", prometheus_payload(50, 60))
    try:
        result, peak_kib = run_child(
            workdir,
            "steady",
            "--small-source",
            servers.url("replay-small", "/api/v1/query_range"),
            "--scorer",
            servers.url("scorer", "/scoring"),
            "--scorers",
            "20",
            "--interval",
            "2",
            "--seconds",
            "30",
            sample=True,
        )
    finally:
        servers.stop()
    peak_mib = peak_kib / 1024
    return [
        Row("agent-steady", "cycles in 30 s (20 scorers, 2 s interval)", str(result["cycles"])),
        Row(
            "agent-steady",
            "failing scorers",
            str(result["failing_scorers"]),
            "0",
            verdict(result["failing_scorers"] == 0),
        ),
        Row(
            "agent-steady",
            "peak RSS, 20 scorers",
            f"{peak_mib:.1f} MiB",
            "<= 80 MiB",
            verdict(peak_mib <= 80),
        ),
    ]
