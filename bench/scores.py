"""How long a large AddOnPlacementScore takes to reach the hub: our agent beside the upstream Go agent.

    python -m bench aps-write                       # 4,096 and 10,000 items, 6 cycles each
    DS_BENCH_APS_SIZES=4096 DS_BENCH_APS_CYCLES=2 DS_BENCH_APS_ROUNDS=1 python -m bench aps-write

A scorer answering with thousands of per-series results (one per pod, item names of about 40
characters) produces an APS of hundreds of kilobytes, and every cycle rewrites all of it.  The
number that matters to a Placement is how soon after the scoring API answered the new scores are
on the hub, so that is what is timed: from the moment the bench's scorer finished writing its
answer to the moment the bench's own watch on the hub delivers the APS carrying those scores
(decoded, as any hub watcher must).  It covers the agent's parsing, rendering, encoding and its
writes, and the apiserver's work on them (validation, managedFields, etcd).  The target is
"no slower than upstream": ours / upstream <= 1.0x, per size (median over the cycles).

Both agents run as real processes, one at a time so they never share the two cores, in alternating
rounds (upstream, ours, ours, upstream, ...: half of the cycles each, so that load from outside
the bench drifting over the run hits both alike), against one local control plane (no
Prometheus: source type `None`, which both support) and the same scorer:
an HTTP server on 127.0.0.1 in this process whose scores change with every request (score of item
i = (i + request number) mod 100), so every cycle changes every item and the item of pod 0 tells
which request an APS carries.  Each agent gets its own score name, so its own APS in cluster2's
namespace, and reads the same ConfigMap (`dynamic-scoring/dynamic-scoring-config` on cluster2,
key `summaries`: the upstream agent's hard-coded place, which ours reads with
`--addon-namespace=dynamic-scoring`).  The first APS write of each round is left out: it is a
create (upstream's create even drops the scores, as the status subresource ignores them), and the
APS is deleted after each round.  Beside the latency, each agent's own counters (the upstream
metric names, which ours keeps) give its mean time per cycle in the scoring call and in the APS
write (its reads plus the status write), read from its /metrics inside the namespace.  Last,
with no agent running, the bench itself times two ways of writing the status on the same
apiserver (a PUT of the whole status, as both agents do now, and the merge patch ours sent before),
to tell the apiserver's share from the agents' own.

The upstream agent binds `:8080` (metrics) and `:8443` (addon-framework's health server) on every
interface, with no flag to change either.  So both agents run in a private network namespace
(`unshare --net`; root) whose only interface is its own loopback, and a relay process
(`python -m e2e.netns relay`) listens inside it on the apiservers' and the scorer's
ports and forwards each connection to the same port on the host's 127.0.0.1.  The agents keep
their kubeconfigs unchanged, nothing they open is reachable from outside, and both pay the same
relay hop.

Also reported per agent: the APS's object size and its `metadata.managedFields` size.  Ours drops
the tracking right after its create; upstream's APS has none either, as measured here: its create
sets nothing but the name (the status is dropped), and the apiserver does not start tracking an
object on an update.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench import Row, benchmark, verdict
from e2e.netns import NetNs, server_ports

NAME = "aps-write"
NAMESPACE = "dynamic-scoring"  # upstream's hard-coded summaries namespace (common.DynamicScoringNamespace)
CONFIGMAP = "dynamic-scoring-config"  # both agents' summaries ConfigMap name
CLUSTER = "cluster2"
INTERVAL = 4  # seconds between cycles: a 10,000-item cycle ends well within it for both agents
FORMAT = "${node}-${pod}"
APS_PATH = f"/apis/cluster.open-cluster-management.io/v1alpha1/namespaces/{CLUSTER}/addonplacementscores"
VENV_BIN = Path(sys.executable).parent


def _sizes() -> list[int]:
    return [int(s) for s in os.environ.get("DS_BENCH_APS_SIZES", "4096,10000").split(",") if s]


def _cycles() -> int:
    """Measured cycles per agent and size, over all rounds."""
    return int(os.environ.get("DS_BENCH_APS_CYCLES", "6"))


def _rounds() -> int:
    """Each agent runs this many times per size, alternating, so background load hits both alike."""
    return int(os.environ.get("DS_BENCH_APS_ROUNDS", "2"))


def _labels(n: int) -> list[tuple[str, str]]:
    """`n` (node, pod) pairs rendering to 40-character item names, as a per-pod scorer's would."""
    out = []
    for i in range(n):
        suffix = f"{(i * 2654435761) % 16**8:08x}{(i * 40503) % 16**6:06x}abcdefgh"
        out.append((f"node-{i % 25:02d}", f"pod-{i:05d}-{suffix}"))
    return out


def item_name(node: str, pod: str) -> str:
    return f"{node}-{pod}"


class Scorer:
    """The scoring API: `POST /score/<n>` answers n results; records when each answer was written."""

    def __init__(self) -> None:
        self.labels: dict[int, list[tuple[str, str]]] = {}
        self.lock = threading.Lock()
        self.seq = 0
        self.finished: dict[int, float] = {}  # request number -> time.monotonic() after the last byte
        scorer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                match = re.fullmatch(r"/score/(\d+)", self.path)
                if match is None:
                    self.send_error(404)
                    return
                n = int(match.group(1))
                with scorer.lock:
                    scorer.seq += 1
                    seq = scorer.seq
                    labels = scorer.labels.setdefault(n, _labels(n))
                results = [
                    {"metric": {"node": node, "pod": pod}, "score": (i + seq) % 100}
                    for i, (node, pod) in enumerate(labels)
                ]
                body = json.dumps({"results": results}, separators=(",", ":")).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                done = time.monotonic()
                with scorer.lock:
                    scorer.finished[seq] = done

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Scorer:
        self.thread.start()
        return self

    def reset(self) -> None:
        with self.lock:
            self.seq = 0
            self.finished.clear()

    def request_for(self, score0: int) -> tuple[int, float] | None:
        """The latest finished request whose item 0 carried `score0`, and when it finished."""
        with self.lock:
            for seq in sorted(self.finished, reverse=True):
                if seq % 100 == score0:
                    return seq, self.finished[seq]
        return None

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class ApsWatch:
    """The bench's own watch on one APS: per request number, when the hub first showed its scores."""

    api: Any
    name: str
    scorer: Scorer
    item0: str
    seen: dict[int, float] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    events: int = 0
    last: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.stop_event = threading.Event()
        self.cancel: Any = None
        self.opened = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> ApsWatch:
        listed = self.api.request("GET", APS_PATH, query={"fieldSelector": f"metadata.name={self.name}"})
        self.rv = str(listed["metadata"]["resourceVersion"])
        self.thread.start()
        if not self.opened.wait(30):
            raise TimeoutError(f"watch on APS {self.name} did not open")
        return self

    def _on_open(self, cancel: Any) -> None:
        self.cancel = cancel
        self.opened.set()

    def _run(self) -> None:
        query = {
            "resourceVersion": self.rv,
            "timeoutSeconds": "600",
            "fieldSelector": f"metadata.name={self.name}",
        }
        try:
            for event in self.api.watch(APS_PATH, query, self.stop_event, on_open=self._on_open):
                now = time.monotonic()
                if event.get("type") not in ("ADDED", "MODIFIED"):
                    continue
                obj = event["object"]
                self.events += 1
                self.last = obj
                scores = (obj.get("status") or {}).get("scores") or []
                score0 = next((s["value"] for s in scores if s.get("name") == self.item0), None)
                if score0 is None:
                    continue  # upstream's create: the status subresource dropped the scores
                found = self.scorer.request_for(int(score0))
                if found is None or found[0] in self.seen:
                    continue
                seq, finished = found
                self.seen[seq] = now
                if seq > 1:  # the first cycle creates the APS: not the steady state
                    self.latencies.append(now - finished)
        except BaseException as exc:  # reported by the bench, not lost in a thread
            if not self.stop_event.is_set():
                self.error = exc

    def stop(self) -> None:
        self.stop_event.set()
        if self.cancel is not None:
            with contextlib.suppress(Exception):
                self.cancel()
        self.thread.join(10)


def _summary(score_name: str, scorer_port: int, n: int) -> dict[str, Any]:
    """One upstream ScorerSummary (all 16 keys) with source type `None`."""
    return {
        "name": "aps-write-bench",
        "scoreName": score_name,
        "sourceType": "None",
        "sourceEndpoint": "",
        "sourceEndpointAuthName": "",
        "sourceEndpointAuthKey": "",
        "sourceQuery": "",
        "sourceRange": 0,
        "sourceStep": 0,
        "scoringEndpoint": f"http://127.0.0.1:{scorer_port}/score/{n}",
        "scoringInterval": INTERVAL,
        "scoringEndpointAuthName": "",
        "scoringEndpointAuthKey": "",
        "location": "External",
        "scoreDestination": "AddOnPlacementScore",
        "scoreDimensionFormat": FORMAT,
    }


def _apply_configmap(api: Any, summaries: list[dict[str, Any]]) -> None:
    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}"
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": NAMESPACE},
        "data": {"summaries": json.dumps(summaries)},
    }
    from dynamic_scoring.kube.api import NotFound

    try:
        api.request("PUT", path, body=body)
    except NotFound:
        api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", body=body)


def _ensure_namespace(api: Any, name: str) -> None:
    from dynamic_scoring.kube.api import Conflict

    with contextlib.suppress(Conflict):
        api.request(
            "POST",
            "/api/v1/namespaces",
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )


@dataclass
class Run:
    """One agent at one size: the latencies and the final APS."""

    agent: str
    size: int
    latencies: list[float]
    aps: dict[str, Any]
    events: int
    score_s: float | None = None  # the agent's own mean seconds per measured cycle: scoring call
    write_s: float | None = None  # ... and APS write (both agents: GET + status write)


def _run_agent(
    workdir: Path,
    agent: str,
    size: int,
    cp: Any,
    scorer: Scorer,
    netns: NetNs,
    upstream_bin: Path,
) -> Run:
    from dynamic_scoring.kube.api import KubeAPI
    from e2e.procs import Proc, free_port, wait_until

    hub_kc = cp.hub.admin_kubeconfig
    spoke_kc = cp.spoke2.admin_kubeconfig
    hub = KubeAPI(hub_kc)
    spoke = KubeAPI(spoke_kc)
    score_name = f"aps-bench-{agent}-{size}"
    labels = _labels(size)
    scorer.reset()
    _apply_configmap(spoke, [_summary(score_name, scorer.port, size)])
    watch = ApsWatch(hub, score_name, scorer, item_name(*labels[0])).start()
    metrics_port = free_port()
    metrics_url = f"http://127.0.0.1:{metrics_port if agent == 'ours' else 8080}/metrics"
    if agent == "ours":
        argv = [
            str(VENV_BIN / "dynamic-scoring-agent"),
            f"--hub-kubeconfig={hub_kc}",
            f"--managed-kubeconfig={spoke_kc}",
            f"--cluster-name={CLUSTER}",
            f"--addon-namespace={NAMESPACE}",
            "--addon-name=dynamic-scoring",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}",
            "--log-level=warning",
            "--allow-cidr=127.0.0.0/8",  # the benchmark's scorer listens on 127.0.0.1
        ]
    else:
        argv = [
            str(upstream_bin),
            "agent",
            f"--kubeconfig={spoke_kc}",
            f"--hub-kubeconfig={hub_kc}",
            f"--managed-kubeconfig={spoke_kc}",
            f"--cluster-name={CLUSTER}",
            f"--addon-namespace={NAMESPACE}",
            "--addon-name=dynamic-scoring",
        ]
    proc = Proc(f"{agent}-{size}", netns.argv(argv), workdir / f"agent-{agent}-{size}.log")
    cycles = max(1, -(-_cycles() // _rounds()))
    stats: tuple[float | None, float | None] = (None, None)
    try:
        proc.start()
        wait_until(
            lambda: watch.error is not None or watch.seen,
            timeout=INTERVAL * 3 + 90,
            what=f"the first APS with scores from {agent} at {size} items (saw {watch.events} events)",
            proc=proc,
            interval=0.1,
        )
        time.sleep(0.5)  # the agent counts a cycle's write after the apiserver answered it
        before, seq_before = netns.scrape(metrics_url), max(watch.seen, default=0)
        wait_until(
            lambda: watch.error is not None or len(watch.latencies) >= cycles,
            timeout=INTERVAL * (cycles + 3) + 90,
            what=f"{cycles} APS updates from {agent} at {size} items (saw {watch.events} events)",
            proc=proc,
            interval=0.5,
        )
        if watch.error is not None:
            raise RuntimeError(f"watch on {score_name} failed: {watch.error!r}")
        time.sleep(0.5)
        after, seq_after = netns.scrape(metrics_url), max(watch.seen)
        stats = _per_cycle(before, after, seq_after - seq_before)
    finally:
        proc.stop()
        watch.stop()
    aps = hub.request("GET", f"{APS_PATH}/{score_name}")
    (workdir / f"aps-{agent}-{size}.json").write_text(json.dumps(aps, indent=1))
    with contextlib.suppress(Exception):
        hub.request("DELETE", f"{APS_PATH}/{score_name}")
    return Run(agent, size, watch.latencies[:cycles], aps, watch.events, *stats)


def _write_costs(api: Any, size: int, reps: int = 6) -> dict[str, float]:
    """Median seconds of the writes the two agents make, sent straight from the bench (no agent).

    Both agents replace the status (a PUT to `/status`: upstream after a full GET, ours after a
    metadata GET when it wrote the version the hub holds); ours sent a JSON merge patch before.
    Timing them alone on the same apiserver separates the apiserver's share of the write from each
    agent's own.
    """
    from dynamic_scoring.kube.api import MERGE_PATCH

    name = f"aps-bench-direct-{size}"
    labels = _labels(size)
    api.request(
        "POST",
        APS_PATH,
        body={
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
            "kind": "AddOnPlacementScore",
            "metadata": {"name": name},
        },
    )
    times: dict[str, list[float]] = {"GET": [], "PUT status": [], "merge-PATCH status": []}
    try:
        for k in range(2 * reps):
            items = [{"name": item_name(*nl), "value": (i + k) % 100} for i, nl in enumerate(labels)]
            t = time.monotonic()
            obj = api.request("GET", f"{APS_PATH}/{name}")
            times["GET"].append(time.monotonic() - t)
            t = time.monotonic()
            if k % 2 == 0:
                obj.setdefault("status", {})["scores"] = items
                api.request("PUT", f"{APS_PATH}/{name}/status", body=obj)
                times["PUT status"].append(time.monotonic() - t)
            else:
                body = {"status": {"scores": items}}
                api.request("PATCH", f"{APS_PATH}/{name}/status", body=body, content_type=MERGE_PATCH)
                times["merge-PATCH status"].append(time.monotonic() - t)
    finally:
        with contextlib.suppress(Exception):
            api.request("DELETE", f"{APS_PATH}/{name}")
    return {k: statistics.median(v) for k, v in times.items()}


def _per_cycle(
    before: dict[str, float], after: dict[str, float], cycles: int
) -> tuple[float | None, float | None]:
    """Mean seconds per cycle of the scoring call and of the write, from the agents' shared counters."""
    if cycles <= 0:
        return None, None
    out = []
    for name in ("dynamic_scoring_perform_seconds_total", "dynamic_scoring_send_seconds_total"):
        out.append((after.get(name, 0.0) - before.get(name, 0.0)) / cycles if name in after else None)
    return out[0], out[1]


def _upstream_bin(workdir: Path) -> Path:
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [str(repo / "e2e" / "build-tools.sh"), "upstream"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    (workdir / "build-tools.log").write_text(out.stdout + out.stderr)
    for line in out.stdout.splitlines():
        if line.startswith("upstream="):
            return Path(line.split("=", 1)[1]) / "bin" / "dynamic-scoring-addon"
    raise RuntimeError(f"build-tools.sh printed no upstream=<dir>; see {workdir / 'build-tools.log'}")


def _merge(runs: list[Run]) -> Run:
    """One agent's rounds at one size as one run: all latencies, mean per-cycle stage times."""

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.fmean(known) if known else None

    return Run(
        runs[0].agent,
        runs[0].size,
        [x for r in runs for x in r.latencies],
        runs[-1].aps,
        sum(r.events for r in runs),
        mean([r.score_s for r in runs]),
        mean([r.write_s for r in runs]),
    )


def _rows(runs: list[Run]) -> list[Row]:
    rows: list[Row] = []
    by = {
        (r.agent, r.size): _merge([x for x in runs if (x.agent, x.size) == (r.agent, r.size)]) for r in runs
    }
    for size in sorted({r.size for r in runs}):
        medians: dict[str, float] = {}
        for agent in ("ours", "upstream"):
            run = by.get((agent, size))
            if run is None:
                continue
            med = statistics.median(run.latencies)
            medians[agent] = med
            spread = ", ".join(f"{x * 1000:.0f}" for x in run.latencies)
            aps = run.aps
            fields = (aps.get("metadata") or {}).get("managedFields")
            managed = f"{len(json.dumps(fields)):,} B" if fields else "none"
            rows += [
                Row(
                    NAME,
                    f"{size:,} items, {agent}: scorer answer -> hub watch (median)",
                    f"{med * 1000:.0f} ms",
                ),
                Row(NAME, f"{size:,} items, {agent}: each cycle (ms)", spread),
                Row(
                    NAME,
                    f"{size:,} items, {agent}: APS object / managedFields",
                    f"{len(json.dumps(aps)) / 1024:.0f} KiB / {managed}",
                ),
            ]
            if run.score_s is not None and run.write_s is not None:
                rows.append(
                    Row(
                        NAME,
                        f"{size:,} items, {agent}: own metrics per cycle: scoring call / APS write",
                        f"{run.score_s * 1000:.0f} ms / {run.write_s * 1000:.0f} ms",
                    )
                )
        if len(medians) == 2:
            ratio = medians["ours"] / medians["upstream"]
            rows.append(
                Row(
                    NAME,
                    f"{size:,} items: ours / upstream",
                    f"{ratio:.2f}x",
                    "<= 1.0x",
                    verdict(ratio <= 1.0),
                )
            )
    return rows


@benchmark(NAME)
def aps_write(workdir: Path) -> list[Row]:
    """Each agent alone, per size: start it, time `cycles` APS updates after its first, stop it."""
    from dynamic_scoring.kube.api import KubeAPI
    from e2e.controlplane import ControlPlane

    upstream_bin = _upstream_bin(workdir)
    started = time.monotonic()
    cp = ControlPlane(workdir / "cp", with_prometheus=False, with_runner=False, progress=print)
    scorer: Scorer | None = None
    netns: NetNs | None = None
    runs: list[Run] = []
    direct: dict[int, dict[str, float]] = {}
    try:
        cp.up()
        assert cp.hub is not None and cp.spoke2 is not None
        _ensure_namespace(KubeAPI(cp.spoke2.admin_kubeconfig), NAMESPACE)
        scorer = Scorer().start()
        ports = sorted(
            {*server_ports(cp.hub.admin_kubeconfig), *server_ports(cp.spoke2.admin_kubeconfig), scorer.port}
        )
        netns = NetNs(workdir, ports)
        for size in _sizes():
            for n in range(_rounds()):
                for agent in ("upstream", "ours") if n % 2 == 0 else ("ours", "upstream"):
                    print(f"aps-write: {agent} at {size} items, round {n + 1}", file=sys.stderr, flush=True)
                    runs.append(_run_agent(workdir, agent, size, cp, scorer, netns, upstream_bin))
        hub = KubeAPI(cp.hub.admin_kubeconfig)
        direct = {size: _write_costs(hub, size) for size in _sizes()}
    finally:
        if netns is not None:
            netns.stop()
        if scorer is not None:
            scorer.stop()
        cp.down()
    rows = _rows(runs)
    for size, costs in direct.items():
        rows.append(
            Row(
                NAME,
                f"{size:,} items, bench alone (median): " + " / ".join(costs),
                " / ".join(f"{v * 1000:.0f} ms" for v in costs.values()),
            )
        )
    rows.append(Row(NAME, "bench wall time (with the control plane)", f"{time.monotonic() - started:.0f} s"))
    return rows
