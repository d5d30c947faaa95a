"""Benchmark of the scorer registry's distribution on a fleet of enabled clusters.

    python -m bench registry                      # 1,000 and 3,500 clusters
    DS_BENCH_REGISTRY_SIZES=1000 python -m bench registry

A local control plane (no Prometheus, no runner) provides the real hub kube-apiserver.  For each size
the fleet is created directly: a namespace, a ManagedCluster (labelled ``tier=gold`` on every fourth)
and the addon's ManagedClusterAddOn with ``status.namespace`` set, as the registration controller
would.  Twenty DynamicScorers point at one real scorer on loopback (so they turn Active); four select
``tier=gold`` clusters, and the DynamicScoringConfig masks one score on every tenth cluster.  The
scorer and distribution controllers run in-process on their own ``ControllerManager``.

Measured, from the controllers' own write counters and the apiserver:

* **cold start**: seconds until every cluster's config work exists with its summaries;
* **one scorer changed** (its interval, on a scorer sent to every unmasked cluster): seconds from the
  edit until the last affected work is patched (target <= 30 s at 1,000), and work writes per affected
  cluster (target exactly 1);
* **no-op resync**: every cluster's work key and the plan reconciled again; writes (target 0);
* **the floor** (`bench.hub.floor`), once the controllers have stopped: the same writes replayed by a Go
  client-go program with no client-side rate limit, 32 in flight.  For the scorer change: a patch of
  every config work with the same edit (another interval); for the cold start: every config work
  deleted (not timed) and created again.  Ours is reported as a ratio to it (goal <= 1.5x).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench import Row, benchmark, verdict
from bench.hub.floor import FloorRun, creates, deletes, replay
from dynamic_scoring.addon.registry.probe_settings import ProbeSettings

ADDON = "dynamic-scoring"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"
REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "dynamic-scoring"
SCORERS = 20
SELECTING = 4
WORKS = "manifestworks.work.open-cluster-management.io"


def _sizes() -> list[int]:
    return [int(s) for s in os.environ.get("DS_BENCH_REGISTRY_SIZES", "1000,3500").split(",") if s]


class _Healthz(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b"ok"
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _populate(api: Any, count: int) -> float:
    from dynamic_scoring.kube.resources import MANAGED_CLUSTER_ADDONS, MANAGED_CLUSTERS, NAMESPACES

    def one(i: int) -> None:
        name = f"bench-r{i:05d}"
        api.request("POST", NAMESPACES.path(), body={"metadata": {"name": name}})
        labels = {"tier": "gold"} if i % 4 == 0 else {}
        api.request(
            "POST",
            MANAGED_CLUSTERS.path(),
            body={
                "apiVersion": "cluster.open-cluster-management.io/v1",
                "kind": "ManagedCluster",
                "metadata": {"name": name, "labels": labels},
                "spec": {"hubAcceptsClient": False},
            },
        )
        api.request(
            "POST",
            MANAGED_CLUSTER_ADDONS.path(name),
            body={
                "apiVersion": ADDON_V1A1,
                "kind": "ManagedClusterAddOn",
                "metadata": {"name": ADDON, "namespace": name},
                "spec": {"installNamespace": "open-cluster-management-agent-addon"},
            },
        )
        api.request(
            "PATCH",
            MANAGED_CLUSTER_ADDONS.path(name, ADDON, "status"),
            body={"status": {"namespace": "open-cluster-management-agent-addon"}},
            content_type="application/merge-patch+json",
        )

    started = time.monotonic()
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(one, range(count)))
    return time.monotonic() - started


def _served(hub: Any) -> bool:
    try:
        hub.items(DS_V1A1, "DynamicScorer", NAMESPACE)
    except Exception:
        return False
    return True


def _scorer(i: int, url: str, interval: int = 30) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "configURL": f"{url}/config",
        "source": {"host": "http://prometheus.example:9090", "params": {"query": f"metric_{i}"}},
        "scoring": {"host": url, "params": {"name": f"bench_score_{i:02d}", "interval": interval}},
    }
    if i < SELECTING:
        spec["clusterSelector"] = {"matchLabels": {"tier": "gold"}}
    return {
        "apiVersion": DS_V1A1,
        "kind": "DynamicScorer",
        "metadata": {"name": f"bench-scorer-{i:02d}", "namespace": NAMESPACE},
        "spec": spec,
    }


def _floor(kubeconfig: Path, api: Any) -> tuple[FloorRun, FloorRun]:
    """The floor of the scorer change (every config work patched alike) and of the cold start."""
    from dynamic_scoring.kube.resources import MANIFEST_WORKS

    label = {"labelSelector": f"open-cluster-management.io/addon-name={ADDON}"}
    works = [
        w
        for w in api.list_all(MANIFEST_WORKS.path(), label)[0]
        if w["metadata"]["name"] == f"addon-{ADDON}-config"
    ]

    def edited(work: dict[str, Any]) -> Any:
        before = json.dumps(work["spec"]["workload"]["manifests"])
        after = before.replace('\\"scoringInterval\\":45', '\\"scoringInterval\\":60')
        assert after != before, "the floor's edit must change every work, as the scorer change did"
        return json.loads(after)

    patches = [
        {
            "method": "PATCH",
            "path": MANIFEST_WORKS.path(w["metadata"]["namespace"], w["metadata"]["name"]),
            "contentType": "application/merge-patch+json",
            "body": {"spec": {"workload": {"manifests": edited(w)}}},
        }
        for w in works
    ]
    change = replay(kubeconfig, patches)
    works = [
        w
        for w in api.list_all(MANIFEST_WORKS.path(), label)[0]
        if w["metadata"]["name"] == f"addon-{ADDON}-config"
    ]
    path = "/apis/work.open-cluster-management.io/v1/namespaces/{ns}/manifestworks"
    replay(kubeconfig, deletes(path + "/{name}", works))
    cold = replay(kubeconfig, creates(path, works))
    return change, cold


def _measure(workdir: Path, count: int) -> list[Row]:
    from dynamic_scoring.addon.controllers import HubContext
    from dynamic_scoring.addon.controllers.distribution.controller import distribution_controller
    from dynamic_scoring.addon.controllers.registry.controller import scorer_controller
    from dynamic_scoring.kube.api import KubeAPI
    from dynamic_scoring.kube.controller import ControllerManager
    from dynamic_scoring.kube.resources import DYNAMIC_SCORERS, MANIFEST_WORKS
    from e2e.controlplane import ControlPlane
    from e2e.kube import Client

    name = f"registry-{count}"
    cp = ControlPlane(workdir / f"ocm-{count}", with_prometheus=False, with_runner=False)
    cp.up()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    stop = threading.Event()
    runner: threading.Thread | None = None
    rows: list[Row] = []
    try:
        assert cp.hub is not None
        api = KubeAPI(cp.hub.admin_kubeconfig, timeout=120)
        hub = Client(cp.hub.admin_kubeconfig)
        hub.apply_yaml((REPO / "manifests" / "namespace.yaml").read_text())
        for crd in ("dynamicscorers.yaml", "dynamicscoringconfigs.yaml"):
            hub.apply_yaml((REPO / "manifests" / "crds" / crd).read_text())
        from e2e.procs import wait_until

        wait_until(lambda: _served(hub), timeout=60, what="the DynamicScorer CRD served", interval=0.2)
        created = _populate(api, count)
        print(f"[{name}] created {count} clusters in {created:.0f}s", file=sys.stderr, flush=True)
        masks = [
            {"clusterName": f"bench-r{i:05d}", "scoreName": "bench_score_19"} for i in range(0, count, 10)
        ]
        hub.apply(
            {
                "apiVersion": DS_V1A1,
                "kind": "DynamicScoringConfig",
                "metadata": {"name": "dynamic-scoring-config", "namespace": NAMESPACE},
                "spec": {"masks": masks},
            }
        )
        for i in range(SCORERS):
            hub.apply(_scorer(i, url))

        registry = ControllerManager(KubeAPI(cp.hub.admin_kubeconfig, timeout=60))
        ctx = HubContext(
            registry.api,
            registry,
            NAMESPACE,
            "unused:0",
            resync_seconds=3600,
            stop=stop,
            workers=8,
            probe=ProbeSettings.build(allow_cidrs="127.0.0.0/8"),  # the bench scorer is on loopback
        )
        for factory in (scorer_controller, distribution_controller):
            for controller in factory(ctx):
                registry.add(controller)
        (distribution,) = [c for c in registry.controllers if c.name == "distribution"]
        metrics = registry.metrics

        def writes(verb: str) -> float:
            labels = {"controller": "distribution", "verb": verb, "resource": WORKS}
            value = metrics.registry.get_sample_value("dynamic_scoring_controller_writes_total", labels)
            return value or 0.0

        started = time.monotonic()
        runner = threading.Thread(target=registry.run, args=(stop,), daemon=True)
        runner.start()
        works = registry.informer(
            MANIFEST_WORKS, label_selector=f"open-cluster-management.io/addon-name={ADDON}"
        )
        scorers = registry.informer(DYNAMIC_SCORERS, namespace=NAMESPACE)

        def expected(i: int) -> int:
            gold = i % 4 == 0
            return (SCORERS if gold else SCORERS - SELECTING) - (1 if i % 10 == 0 else 0)

        def full() -> bool:
            for i in range(count):
                work = works.get(f"bench-r{i:05d}/addon-{ADDON}-config")
                if work is None:
                    return False
                payload = work["spec"]["workload"]["manifests"][0]["data"]["summaries"]
                if payload.count('"scoreName"') != expected(i):
                    return False
            return len(distribution.queue) == 0

        while not full():
            if time.monotonic() - started > 600:
                raise TimeoutError(f"cold start: {writes('create'):.0f} of {count} works after 600 s")
            time.sleep(0.5)
        cold = time.monotonic() - started
        cold_writes = (writes("create") + writes("patch")) / count
        print(f"[{name}] cold start {cold:.1f}s", file=sys.stderr, flush=True)

        # the no-op resync: the plan and every work key again
        def settled() -> None:
            quiet_since = time.monotonic()
            last = writes("patch") + writes("create") + writes("delete")
            while time.monotonic() - quiet_since < 2.0 or len(distribution.queue):
                time.sleep(0.2)
                now = writes("patch") + writes("create") + writes("delete")
                if now != last:
                    last, quiet_since = now, time.monotonic()

        settled()
        before = writes("patch") + writes("create") + writes("delete")
        distribution.enqueue("@plan")
        for i in range(count):
            distribution.enqueue(f"work/bench-r{i:05d}")
        settled()
        resync_writes = writes("patch") + writes("create") + writes("delete") - before

        # one scorer changed: scorer 10 goes to every cluster (no selector, no mask)
        patches = writes("patch")
        edited = time.monotonic()
        hub.apply(_scorer(10, url, interval=45))
        while writes("patch") - patches < count:
            if time.monotonic() - edited > 300:
                break
            time.sleep(0.05)
        change = time.monotonic() - edited
        settled()
        patched = writes("patch") - patches
        per_cluster = patched / count
        changed = sum(
            1
            for w in works.list()
            if w["metadata"]["name"] == f"addon-{ADDON}-config"
            and '"scoringInterval":45' in w["spec"]["workload"]["manifests"][0]["data"]["summaries"]
        )
        del scorers
        print(
            f"[{name}] change {change:.1f}s, {patched:.0f} patches ({per_cluster:.3f}/cluster), "
            f"resync {resync_writes:.0f}, "
            f"{changed} of {count} works carry the edit",
            file=sys.stderr,
            flush=True,
        )
        assert changed == count, changed

        stop.set()  # the floor runs with the controllers gone
        if runner is not None:
            runner.join(60)
            runner = None
        floor_change, floor_cold = _floor(cp.hub.admin_kubeconfig, api)
        print(
            f"[{name}] floor: change {floor_change.seconds:.1f}s, cold start {floor_cold.seconds:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        rows += [
            Row(name, "cold start to every config work (s)", f"{cold:.1f}"),
            Row(name, "work writes per cluster, cold start", f"{cold_writes:.2f}"),
            Row(
                name,
                "one scorer changed -> every affected work (s)",
                f"{change:.1f}",
                "<= 30",
                verdict(change <= 30),
            ),
            Row(
                name,
                "work writes per affected cluster",
                f"{per_cluster:.3f} ({patched:.0f} patches)",
                "1",
                verdict(per_cluster == 1.0),
            ),
            Row(name, "writes on a no-op resync", f"{resync_writes:.0f}", "0", verdict(resync_writes == 0)),
            Row(
                name,
                "floor: the same work patches by client-go, 32 in flight (s)",
                f"{floor_change.seconds:.1f} ({floor_change.per_second:.0f}/s)",
            ),
            Row(
                name,
                "scorer change / floor",
                f"{change / floor_change.seconds:.2f}x",
                "<= 1.5x",
                verdict(change <= 1.5 * floor_change.seconds),
            ),
            Row(
                name,
                "floor: every config work created by client-go (s)",
                f"{floor_cold.seconds:.1f} ({floor_cold.per_second:.0f}/s)",
            ),
            Row(name, "cold start / floor", f"{cold / floor_cold.seconds:.2f}x"),
            Row(name, "fleet creation (s, not the controllers)", f"{created:.0f}"),
        ]
    finally:
        stop.set()
        if runner is not None:
            runner.join(60)
        server.shutdown()
        server.server_close()
        problems = cp.down()
        if problems:
            print(f"[{name}] teardown: {problems}", file=sys.stderr)
    return rows


@benchmark("registry")
def registry(workdir: Path) -> list[Row]:
    """Distribution at each fleet size: cold start, one scorer change, writes, no-op resync."""
    rows: list[Row] = []
    for count in _sizes():
        rows += _measure(workdir, count)
    return rows
