"""The agent's OTLP receiver under load: ``python -m bench.agent.otlp [--seconds 10]``.

Prints three numbers (docs/opentelemetry.md quotes them):

1. sustained datapoints per second into the receiver: a pusher *process* posts protobuf
   ``ExportMetricsServiceRequest``s of 1,000 gauge points (10,000 distinct series, all selected, so
   every point is decoded, matched and stored) over two keep-alive connections for ``--seconds``;
2. resident memory per 10,000 held series, with one point each and with a full hour at a 60 s step
   (62 points each), measured in a fresh child process so that nothing else is in its heap;
3. a scoring cycle's time (``Supervisor.run_once`` reading 1,000 selected series of 61 points from
   the store and posting them to a scorer process) with and without the pusher running, as the
   median and the 95th percentile of ``--cycles`` cycles.

The receiver decodes on its own threads (off the event loop) and at most two requests at once; the
third number shows what that costs the cycles on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing as mp
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1 import metrics_pb2

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.source.otlp.receiver import OtlpReceiver
from dynamic_scoring.agent.source.otlp.selection import parse_selector
from dynamic_scoring.agent.source.otlp.store import SeriesStore
from dynamic_scoring.agent.source.otlp.translation import Flattened, Point
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.contract.wire import ScorerSummary
from dynamic_scoring.outbound.addresses import AddressPolicy
from e2e.procs import Proc, free_port, wait_until

POINTS_PER_REQUEST = 1_000
SERIES = 10_000


def build_request(metric: str, first_series: int, count: int, t_ns: int) -> ExportMetricsServiceRequest:
    """One request of ``count`` gauge points of ``metric``, series ``pod-<n>`` from ``first_series``."""
    req = ExportMetricsServiceRequest()
    rm = req.resource_metrics.add()
    rm.resource.attributes.add(key="service.name").value.string_value = "bench"
    m = rm.scope_metrics.add().metrics.add(name=metric, gauge=metrics_pb2.Gauge())
    for i in range(count):
        p = m.gauge.data_points.add(time_unix_nano=t_ns, as_double=float(i % 100))
        p.attributes.add(key="pod").value.string_value = f"pod-{(first_series + i) % SERIES:05d}"
    return req


def push(url: str, seconds: float, metric: str, connections: int = 2) -> None:
    """The pusher process: post requests over ``connections`` keep-alive connections for ``seconds``."""
    templates = [build_request(metric, k * POINTS_PER_REQUEST, POINTS_PER_REQUEST, 0) for k in range(10)]
    stop = time.monotonic() + seconds

    def one(worker: int) -> None:
        with httpx.Client(timeout=30) as client:
            k = worker
            while time.monotonic() < stop:
                req = templates[k % len(templates)]
                now = time.time_ns()
                for p in req.resource_metrics[0].scope_metrics[0].metrics[0].gauge.data_points:
                    p.time_unix_nano = now
                client.post(
                    url, content=req.SerializeToString(), headers={"Content-Type": "application/x-protobuf"}
                )
                k += connections

    threads = [threading.Thread(target=one, args=(w,)) for w in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def start_pusher(url: str, seconds: float, metric: str) -> Any:
    proc = mp.get_context("spawn").Process(target=push, args=(url, seconds, metric), daemon=True)
    proc.start()
    return proc


def throughput(seconds: float) -> float:
    store = SeriesStore(max_series=SERIES * 2)
    store.configure([parse_selector("bench_load")], 600, 10)
    receiver = OtlpReceiver(store, port=0)
    receiver.start()
    try:
        pusher = start_pusher(f"http://127.0.0.1:{receiver.port}/v1/metrics", seconds + 2, "bench.load")
        time.sleep(2)  # the pusher process starts and warms up
        before, began = store.stats.points_received, time.monotonic()
        time.sleep(seconds)
        received, elapsed = store.stats.points_received - before, time.monotonic() - began
        pusher.join(30)
    finally:
        receiver.stop()
    return received / elapsed


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise KeyError("VmRSS")


def _held_memory(points_per_series: int, queue: Any) -> None:
    store = SeriesStore(max_series=SERIES, max_points_per_series=10_000)
    store.configure([parse_selector("load")], 3600, 60)
    now = time.time()
    gc.collect()
    base = _rss_kib()
    labels = [(("pod", f"pod-{i:05d}"), ("service_name", "bench")) for i in range(SERIES)]
    for k in range(points_per_series):
        t = now - (points_per_series - 1 - k) * 60
        store.ingest(Flattened([Point("load", "load", lab, t, float(k), "gauge") for lab in labels]))
    del labels
    gc.collect()
    assert store.series_held == SERIES
    queue.put((_rss_kib() - base) / 1024)


def held_memory(points_per_series: int) -> float:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_held_memory, args=(points_per_series, queue))
    proc.start()
    value: float = queue.get(timeout=300)
    proc.join(30)
    return value


async def cycle_times(scorer_url: str, cycles: int, with_ingest: bool) -> tuple[float, float]:
    store = SeriesStore(max_series=SERIES * 2)
    store.configure([parse_selector("cycle_load")], 3600, 60)
    now = time.time()
    labels = [(("pod", f"pod-{i:04d}"),) for i in range(1_000)]
    for k in range(61):
        t = now - (60 - k) * 60
        store.ingest(
            Flattened([Point("cycle_load", "cycle_load", lab, t, float(k), "gauge") for lab in labels])
        )
    receiver = OtlpReceiver(store, port=0)
    receiver.start()
    store.configure([parse_selector("cycle_load"), parse_selector("bench_load")], 3600, 60)
    sup = Supervisor(
        cluster_name="bench",
        secrets=MemorySecrets(),
        publisher=MemoryPublisher(),
        metrics=AgentMetrics(process_collectors=False),
        settings=AgentSettings(extra_ca_files=(), address_policy=AddressPolicy.parse("127.0.0.0/8")),
        otlp_store=store,
    )
    summary = ScorerSummary.model_validate(
        {
            "name": "otlp-bench",
            "scoreName": "otlp-bench",
            "sourceType": "OpenTelemetry",
            "sourceQuery": "cycle_load",
            "sourceRange": 3600,
            "sourceStep": 60,
            "scoringEndpoint": scorer_url,
            "scoringInterval": 60,
            "scoreDestination": "None",
        }
    )
    pusher = None
    try:
        if with_ingest:
            pusher = start_pusher(f"http://127.0.0.1:{receiver.port}/v1/metrics", 600, "bench.load")
            deadline = time.monotonic() + 30
            while store.stats.points_received < 10 * POINTS_PER_REQUEST and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        times = []
        for _ in range(cycles + 2):
            began = time.perf_counter()
            outcome = await sup.run_once(summary)
            times.append(time.perf_counter() - began)
            assert outcome.succeeded, outcome.condition
        times = times[2:]  # the first cycles open connections
        received = store.stats.points_received
    finally:
        if pusher is not None:
            pusher.terminate()
            pusher.join(10)
        await sup.close()
        receiver.stop()
    if with_ingest:
        print(f"    (points received while cycling: {received:,})", file=sys.stderr)
    times.sort()
    return statistics.median(times), times[max(0, round(0.95 * len(times)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the throughput run pushes")
    parser.add_argument("--cycles", type=int, default=20, help="scoring cycles per cycle-time run")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp"), help="where the scorer's log goes")
    args = parser.parse_args()

    rate = throughput(args.seconds)
    print(
        f"sustained ingest: {rate:,.0f} datapoints/s "
        f"({POINTS_PER_REQUEST} points per protobuf request, 2 connections)"
    )
    one = held_memory(1)
    hour = held_memory(62)
    print(f"RSS per 10,000 held series: {one:.1f} MiB with 1 point each, {hour:.1f} MiB with 62 points each")

    port = free_port()
    scorer = Proc(
        "bench-scorer",
        [sys.executable, "-m", "bench.agent.servers", "scorer", "--port", str(port)],
        args.workdir / "bench-otlp-scorer.log",
    ).start()
    try:
        wait_until(lambda: _listening(port), timeout=30, what="the scorer to listen", proc=scorer)
        url = f"http://127.0.0.1:{port}/scoring"
        quiet = asyncio.run(cycle_times(url, args.cycles, with_ingest=False))
        busy = asyncio.run(cycle_times(url, args.cycles, with_ingest=True))
    finally:
        scorer.stop()
    print(
        "scoring cycle (1,000 series x 61 points from the store): "
        f"median {quiet[0] * 1000:.0f} ms, p95 {quiet[1] * 1000:.0f} ms without ingest; "
        f"median {busy[0] * 1000:.0f} ms, p95 {busy[1] * 1000:.0f} ms while the pusher runs"
    )


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    main()
