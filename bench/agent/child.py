"""The measured side of the agent benchmarks, run as its own process so its memory is its own.

Modes (JSON result on stdout):

* ``compare``: alternately, the raw exchange and an agent cycle.  The raw exchange is what one cycle
  does on the wire, by a client that only moves bytes (``httpx`` GET of the source's answer, POST of
  those bytes to the scorer); alternating makes drift in the servers' speed hit both alike.
* ``cycle``: real agent cycles (``Supervisor.run_once``: credentials, fetch, validation, scoring
  call, response validation, items, metrics, publish to the in-memory publisher).  Reports each
  cycle's time, the resident memory before the first large cycle and its high-water mark.
* ``steady``: a ``Supervisor`` running ``--scorers`` small scorers plus the health server, for
  ``--seconds``; the parent samples this process's memory from ``/proc``.
* ``hostile``: issue 6's hostile peers against a running ``Supervisor``: resident memory and
  ``/metrics`` size with a scorer answering 100,000 results, and after that scorer is removed; the
  peak with a gzip bomb as the scorer; the event loop's worst stall with a padded source answer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import time
from pathlib import Path

import httpx

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.server import HealthServer
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.contract.wire import ScorerSummary
from dynamic_scoring.outbound.addresses import AddressPolicy

LOOPBACK = AddressPolicy.parse("127.0.0.0/8")
"""The agent's address-policy opt-in: the benchmark's Prometheus and scorers listen on 127.0.0.1."""


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


DEFAULT_QUERY = "sum by (node, namespace, pod) (rate(container_cpu_usage_seconds_total[1m]))"


def summary(
    name: str, source: str, scorer: str, interval: int = 60, query: str = DEFAULT_QUERY
) -> ScorerSummary:
    return ScorerSummary.model_validate(
        {
            "name": name,
            "scoreName": name,
            "sourceType": "Prometheus",
            "sourceEndpoint": source,
            "sourceQuery": query,
            "sourceRange": 3600,
            "sourceStep": 60,
            "scoringEndpoint": scorer,
            "scoringInterval": interval,
            "scoreDestination": "AddOnPlacementScore",
            "scoreDimensionFormat": "${meta}",
        }
    )


def new_supervisor() -> Supervisor:
    settings = AgentSettings(initial_jitter_seconds=1.0, extra_ca_files=(), address_policy=LOOPBACK)
    return Supervisor(
        cluster_name="bench",
        secrets=MemorySecrets(),
        publisher=MemoryPublisher(),
        metrics=AgentMetrics(),
        settings=settings,
    )


async def cycle(args: argparse.Namespace) -> dict[str, object]:
    sup = new_supervisor()
    small = summary("warmup", args.small_source, args.scorer)
    big = summary("bench", args.source, args.scorer, query=args.query)
    for _ in range(3):
        outcome = await sup.run_once(small)
        assert outcome.succeeded, outcome.condition
    gc.collect()
    baseline = status_kib("VmRSS")
    reset_peak()
    times = []
    peaks = []
    for _ in range(args.runs + 1):
        began = time.perf_counter()
        outcome = await sup.run_once(big)
        times.append(time.perf_counter() - began)
        assert outcome.succeeded, outcome.condition
        peaks.append(status_kib("VmHWM"))
    stages = {}
    for stage in ("fetch", "score", "write"):
        labels = {"score_name": "bench", "stage": stage}
        total = (
            sup.metrics.registry.get_sample_value("dynamic_scoring_stage_duration_seconds_sum", labels) or 0.0
        )
        count = (
            sup.metrics.registry.get_sample_value("dynamic_scoring_stage_duration_seconds_count", labels)
            or 1.0
        )
        stages[stage] = total / count
    await sup.close()
    return {
        "times": times[1:],
        "first": times[0],
        "baseline_kib": baseline,
        "peak_kib": max(peaks),
        "stages": stages,
    }


async def compare(args: argparse.Namespace) -> dict[str, object]:
    """Raw exchanges and agent cycles alternately in one process, so drift affects both alike."""
    sup = new_supervisor()
    big = summary("bench", args.source, args.scorer, query=args.query)
    raw_times, agent_times = [], []
    async with httpx.AsyncClient(timeout=60) as client:
        for run in range(args.runs + 1):
            end = int(time.time())
            url = args.raw_source.replace("END", str(end)).replace("START", str(end - 3600))
            began = time.perf_counter()
            got = await client.get(url)
            body = got.content
            sent = await client.post(args.scorer, content=body, headers={"Content-Type": "application/json"})
            _ = sent.content
            raw_s = time.perf_counter() - began
            del got, body
            began = time.perf_counter()
            outcome = await sup.run_once(big)
            agent_s = time.perf_counter() - began
            assert outcome.succeeded, outcome.condition
            if run:  # the first round opens the connections
                raw_times.append(raw_s)
                agent_times.append(agent_s)
    await sup.close()
    return {"raw": raw_times, "agent": agent_times}


async def steady(args: argparse.Namespace) -> dict[str, object]:
    sup = new_supervisor()
    server = HealthServer(sup.metrics, lambda: sup.ready, port=0)
    server.start()
    await sup.apply(
        [
            summary(f"scorer-{i:02d}", args.small_source, args.scorer, interval=args.interval)
            for i in range(args.scorers)
        ]
    )
    await asyncio.sleep(args.seconds)
    cycles = sum(w.cycles for w in sup.workers.values())
    failures = sum(1 for w in sup.workers.values() if w.last_outcome is None or not w.last_outcome.succeeded)
    await sup.close()
    server.stop()
    return {"cycles": cycles, "failing_scorers": failures}


async def _until_cycles(sup: Supervisor, name: str, cycles: int, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while (w := sup.workers.get(name)) is None or w.cycles < cycles:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: {cycles} cycles not done in {limit}s")
        await asyncio.sleep(0.05)


def malloc_trim() -> None:
    """Ask glibc to hand freed heap pages back to the system (what ``Supervisor`` does after a removal)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


async def hostile(args: argparse.Namespace) -> dict[str, object]:
    publisher = MemoryPublisher()
    sup = Supervisor(
        cluster_name="bench",
        secrets=MemorySecrets(),
        publisher=publisher,
        metrics=AgentMetrics(),
        settings=AgentSettings(initial_jitter_seconds=1.0, extra_ca_files=(), address_policy=LOOPBACK),
    )
    server = HealthServer(sup.metrics, lambda: sup.ready, port=0)
    server.start()
    await sup.apply([summary("warmup", args.small_source, args.scorer, interval=1)])
    await _until_cycles(sup, "warmup", 2)
    gc.collect()
    out: dict[str, object] = {"baseline_kib": status_kib("VmRSS")}

    reset_peak()
    crowd = summary("crowd", args.small_source, args.many, interval=2)
    crowd = crowd.model_copy(update={"score_dimension_format": "${pod}"})
    await sup.apply([summary("warmup", args.small_source, args.scorer, interval=1), crowd])
    await _until_cycles(sup, "crowd", 2)
    outcome = sup.workers["crowd"].last_outcome
    out["many_reason"] = outcome.condition.reason if outcome else ""
    out["many_peak_kib"] = status_kib("VmHWM")
    out["many_rss_kib"] = status_kib("VmRSS")
    out["many_metrics_bytes"] = len(sup.metrics.exposition())
    await sup.apply([summary("warmup", args.small_source, args.scorer, interval=1)])
    gc.collect()
    out["removed_rss_kib"] = status_kib("VmRSS")
    out["removed_metrics_bytes"] = len(sup.metrics.exposition())

    # A large answer (4,096 results), then removed: how much memory comes back.
    full = summary("full", args.small_source, args.full, interval=2)
    full = full.model_copy(update={"score_dimension_format": "${pod}"})
    await sup.apply([summary("warmup", args.small_source, args.scorer, interval=1), full])
    await _until_cycles(sup, "full", 3)
    gc.collect()
    out["full_rss_kib"] = status_kib("VmRSS")
    await sup.apply([summary("warmup", args.small_source, args.scorer, interval=1)])
    publisher.published.clear()  # the in-memory publisher's history is the benchmark's, not the agent's
    gc.collect()
    out["full_removed_rss_kib"] = status_kib("VmRSS")
    malloc_trim()
    out["full_trimmed_rss_kib"] = status_kib("VmRSS")

    gc.collect()
    bomb_base = status_kib("VmRSS")
    reset_peak()
    started = time.monotonic()
    bomb = await sup.run_once(summary("bomb", args.small_source, args.bomb))
    out["bomb_seconds"] = time.monotonic() - started
    out["bomb_reason"] = bomb.condition.reason
    out["bomb_growth_kib"] = status_kib("VmHWM") - bomb_base

    worst = 0.0
    stop = False

    async def tick() -> None:
        nonlocal worst
        last = time.monotonic()
        while not stop:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            worst = max(worst, now - last - 0.01)
            last = now

    ticker = asyncio.create_task(tick())
    padded = await sup.run_once(summary("padded", args.pad, args.scorer))
    stop = True
    await ticker
    out["pad_reason"] = padded.condition.reason
    out["pad_worst_stall_s"] = worst
    await sup.close()
    server.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["cycle", "compare", "steady", "hostile"])
    parser.add_argument("--raw-source", default="", help="URL for the raw GET; END and START are replaced")
    parser.add_argument("--source", default="")
    parser.add_argument("--small-source", default="")
    parser.add_argument("--query", default=DEFAULT_QUERY)
    parser.add_argument("--scorer", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scorers", type=int, default=20)
    parser.add_argument("--interval", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--many", default="", help="hostile: a scorer answering 100,000 results")
    parser.add_argument("--bomb", default="", help="hostile: a scorer answering a gzip bomb")
    parser.add_argument("--full", default="", help="hostile: a scorer answering 4,096 results")
    parser.add_argument("--pad", default="", help="hostile: a source answering a whitespace-padded body")
    args = parser.parse_args()
    modes = {"cycle": cycle, "compare": compare, "steady": steady, "hostile": hostile}
    print(json.dumps(asyncio.run(modes[args.mode](args))), flush=True)


if __name__ == "__main__":
    main()
