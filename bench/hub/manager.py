"""Benchmark of the hub addon manager on a fleet of ManagedClusters created directly on the hub.

    python -m bench hub-manager                 # 1,000 and 3,500 clusters
    DS_BENCH_HUB_SIZES=1000 python -m bench hub-manager

A local control plane (no Prometheus, no runner) provides a real kube-apiserver with OCM's own
hub controllers, so OCM's addon-manager does its share (the MCA -> CMA ownerReference, config
references and the hash copy) as in production.  For each size the fleet is created (a namespace,
a ManagedCluster that is not accepted, so no klusterlet is expected, and the addon's MCA), OCM is
given time to own the MCAs, and then `dynamic-scoring-addon manager` is started as a process:

* **cold start**: seconds from the process start until every cluster has its work and
  `RegistrationApplied`, and the manager's queues are empty (target <= 60 s at 1,000);
* **writes per cluster** in that full pass, from the manager's own write counters;
* **no-op restart and resync writes**: a manager started on the converged fleet, through its start
  and one full resync (45 s period; the other runs keep the default 600 s, as installed, so no
  resync lands inside the measured cold start) (target 0);
* **peak RSS** of the manager process (VmHWM; target <= 300 MiB at 3,500);
* **template change**: the manager restarted with a different agent image (a new release's
  template); seconds until every work carries it;
* **the floor** (`bench.hub.floor`): the same writes replayed by a Go client-go program with no
  client-side rate limit, 32 in flight: the cold start's objects (every deploy work, hub Role and
  RoleBinding created again, and as many MCA status patches per cluster as the manager sent) and
  the template change's work patches.  Ours is reported as a ratio to it (goal <= 1.5x);
* **OCM's pace**: when OCM's addon-manager copied the default config's spec hash into each MCA
  (a watch of the bench's own).  Registration and deploy must wait for it, and OCM's addon-manager
  writes under its own client rate limit (50 requests a second by default), so on a fleet enabled
  at once it paces the cold start; the cold start is also reported against the slower of the floor
  and that copy;
* **OCM alone**: last, with the manager stopped, the bench edits the default config, writes its new
  hash into the CMA status itself (as `cma-config` would) and times OCM's copy into every MCA: OCM's
  own pace on this machine with nothing of ours running, the floor under the cold start;
* **request latency**: the apiserver's own mean latency for our requests
  (`apiserver_request_duration_seconds`), beside the registration workers' time per request;
* **where the time goes**: CPU seconds of the manager, the hub kube-apiserver and etcd during the
  cold start, against its wall time (2 cores: at most 2 CPU seconds per second).  With
  ``DS_BENCH_PYSPY=/path/to/py-spy`` the manager's cold start is also sampled (20 Hz, collapsed
  stacks in ``<workdir>/cold-<N>.stacks``; ``pip install py-spy`` into any venv).

For experiments: ``DS_BENCH_MANAGER_ARGS`` adds arguments to the manager's command line (for
example ``--workers 8``), and ``DS_BENCH_HUB_COLD_ONLY=1`` stops after the cold start.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench import Row, benchmark, verdict
from bench.hub.floor import FloorRun, cpu_seconds, creates, deletes, replay
from dynamic_scoring.addon.constants import DEFAULT_IMAGE, DEFAULT_IMAGE_REPOSITORY

ADDON = "dynamic-scoring"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "dynamic-scoring-addon"
RESYNC_SECONDS = 45.0
IMAGE_V2 = f"{DEFAULT_IMAGE_REPOSITORY}:bench-template-change"
IMAGE_V3 = f"{DEFAULT_IMAGE_REPOSITORY}:bench-floor"
MERGE = "application/merge-patch+json"
CLUSTER_PREFIX = "bench-c"


def _sizes() -> list[int]:
    return [int(s) for s in os.environ.get("DS_BENCH_HUB_SIZES", "1000,3500").split(",") if s]


@dataclass
class ManagerProc:
    popen: subprocess.Popen[bytes]
    port: int

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise KeyError("VmHWM")

    def stop(self) -> None:
        self.popen.terminate()
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)


def _sum(metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **want: str) -> float:
    return sum(
        v
        for (n, labels), v in metrics.items()
        if n == name and all(dict(labels).get(k) == val for k, val in want.items())
    )


def _writes(metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    """Writes to the apiserver, Events left out (advice to a human, not state)."""
    return _sum(metrics, "dynamic_scoring_controller_writes_total") - _sum(
        metrics, "dynamic_scoring_controller_writes_total", verb="event"
    )


def _start_manager(kubeconfig: Path, log: Path, image: str, resync: float | None = None) -> ManagerProc:
    """The manager as a process; `resync` None keeps its default period (600 s), as installed."""
    from e2e.procs import free_port

    port = free_port()
    popen = subprocess.Popen(
        [
            str(SCRIPT),
            "manager",
            f"--kubeconfig={kubeconfig}",
            "--no-leader-elect",
            f"--metrics-bind-address=127.0.0.1:{port}",
            *([f"--resync-period={resync}"] if resync is not None else []),
            f"--agent-image={image}",
            "--log-level=warning",
            *shlex.split(os.environ.get("DS_BENCH_MANAGER_ARGS", "")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )
    proc = ManagerProc(popen, port)
    deadline = time.monotonic() + 60
    while True:
        try:
            proc.metrics()
            return proc
        except OSError:
            if popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"manager did not start; see {log}") from None
            time.sleep(0.2)


def _sample(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling `pid` into `out` (collapsed stacks) when DS_BENCH_PYSPY names py-spy."""
    pyspy = os.environ.get("DS_BENCH_PYSPY")
    if not pyspy:
        return None
    argv = [
        pyspy,
        "record",
        "--pid",
        str(pid),
        "--rate",
        "20",
        "--format",
        "raw",
        "-o",
        str(out),
        "--nonblocking",
    ]
    return subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


CONTROLLERS = ("cma-config", "addon-config", "registration", "csr-approver", "deploy")


def _quiet(
    proc: ManagerProc, done: Any, timeout: float, timeline: list[tuple[float, dict[str, float]]] | None = None
) -> tuple[float, dict[Any, float]]:
    """Poll until `done(metrics)` and the writes stop with empty queues; (time of the last write, metrics).

    With `timeline`, each poll appends (monotonic time, writes so far per controller).
    """
    deadline = time.monotonic() + timeout
    last_writes, last_change = -1.0, time.monotonic()
    while True:
        metrics = proc.metrics()
        writes = _writes(metrics)
        now = time.monotonic()
        if timeline is not None:
            timeline.append(
                (
                    now,
                    {
                        c: _sum(metrics, "dynamic_scoring_controller_writes_total", controller=c)
                        for c in CONTROLLERS
                    },
                )
            )
        if writes != last_writes:
            last_writes, last_change = writes, now
        queued = _sum(metrics, "dynamic_scoring_controller_queue_depth")
        if done(metrics) and queued == 0 and now - last_change >= 3.0:
            return last_change, metrics
        if now > deadline:
            raise TimeoutError(f"not converged in {timeout:.0f}s: writes {writes}, queued {queued}")
        time.sleep(0.5)


class _HashWatch:
    """When OCM copied the default config's spec hash into each MCA (a watch of our own).

    Registration and deploy wait for that hash, so OCM's pace bounds the cold start: shown beside
    our writes, it tells our share of the time from OCM's.
    """

    def __init__(self, api: Any, want: str | None = None) -> None:
        """Watch every MCA of the addon for a spec hash: any hash, or `want` when given."""
        from dynamic_scoring.kube.informer import Informer, WatchEvent
        from dynamic_scoring.kube.resources import MANAGED_CLUSTER_ADDONS

        self.first: dict[str, float] = {}
        self.informer = Informer(api, MANAGED_CLUSTER_ADDONS, field_selector="metadata.name=dynamic-scoring")

        def hashed(ref: dict[str, Any]) -> bool:
            value = (ref.get("desiredConfig") or {}).get("specHash")
            return bool(value) and (want is None or value == want)

        def on_event(event: WatchEvent) -> None:
            refs = (event.obj.get("status") or {}).get("configReferences") or []
            if any(hashed(r) for r in refs):
                self.first.setdefault(str(event.obj["metadata"]["namespace"]), time.monotonic())

        self.informer.add_handler(on_event)
        self.informer.start()
        self.informer.wait_synced(120)

    def report(self, started: float) -> str:
        times = sorted(t - started for t in self.first.values())
        if not times:
            return "none"
        return (
            f"{len(times)} MCAs; first {max(0.0, times[0]):.1f}s, half {times[len(times) // 2]:.1f}s, "
            f"last {times[-1]:.1f}s"
        )

    def last(self, started: float) -> float:
        """Seconds from `started` until the last MCA had its hash (0 if all had it before)."""
        return max([0.0, *(t - started for t in self.first.values())])

    def stop(self) -> None:
        self.informer.stop()


def _phases(timeline: list[tuple[float, dict[str, float]]], started: float) -> str:
    """When each controller wrote its first, half and last writes, in seconds from `started`.

    Shows the cold start's pipeline: registration first, then (once OCM copied the config hash
    into the MCAs) deploy and addon-config.
    """
    if not timeline:
        return "-"
    final = timeline[-1][1]
    parts = []
    for c in CONTROLLERS:
        total = final.get(c, 0.0)
        if total == 0:
            continue

        def at(share: float, c: str = c, total: float = total) -> float:
            return next(t for t, w in timeline if w.get(c, 0.0) >= max(1.0, share * total)) - started

        parts.append(f"{c} {total:.0f} (first {at(0.0):.1f}s, half {at(0.5):.1f}s, last {at(1.0):.1f}s)")
    return "; ".join(parts)


# The requests the manager's cold start is made of, as the apiserver labels them: (verb, resource,
# subresource, version).  OCM's controllers read and write MCAs as v1beta1, so v1alpha1 is ours.
OUR_REQUESTS = (
    ("POST", "roles", "", "v1"),
    ("POST", "rolebindings", "", "v1"),
    ("POST", "manifestworks", "", "v1"),
    ("PATCH", "managedclusteraddons", "status", "v1alpha1"),
    ("GET", "managedclusteraddons", "", "v1alpha1"),
)


def _server_latency(kubectl: Path, kubeconfig: Path) -> dict[tuple[str, ...], tuple[float, float]]:
    """(sum of seconds, count) of `apiserver_request_duration_seconds` for each of OUR_REQUESTS."""
    text = subprocess.run(
        [str(kubectl), f"--kubeconfig={kubeconfig}", "get", "--raw", "/metrics"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    found: dict[tuple[str, ...], list[float]] = {}
    for line in text.splitlines():
        for suffix, index in (("_sum{", 0), ("_count{", 1)):
            if not line.startswith("apiserver_request_duration_seconds" + suffix):
                continue
            labels = dict(
                part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].split('",')
            )
            key = tuple(labels.get(k, "").strip('"') for k in ("verb", "resource", "subresource", "version"))
            if key in OUR_REQUESTS:
                found.setdefault(key, [0.0, 0.0])[index] += float(line.rsplit(" ", 1)[1])
    return {k: (v[0], v[1]) for k, v in found.items()}


def _latency_report(
    before: dict[tuple[str, ...], tuple[float, float]],
    after: dict[tuple[str, ...], tuple[float, float]],
    metrics: dict[Any, float],
) -> str:
    """The apiserver's own mean latency for our requests, against the registration workers' view.

    The registration controller's time per request (its reconcile seconds over the requests it
    sent: writes, refused writes and the GET after each refusal) minus the apiserver's mean is what
    the round trip costs on our side (client, TLS, the interpreter's lock, the network).
    """
    parts = []
    total_s = total_n = 0.0
    for key in OUR_REQUESTS:
        s1, n1 = after.get(key, (0.0, 0.0))
        s0, n0 = before.get(key, (0.0, 0.0))
        n = n1 - n0
        if n > 0:
            parts.append(
                f"{key[0]} {key[1]}{'/' + key[2] if key[2] else ''} {1000 * (s1 - s0) / n:.0f} ms (n={n:.0f})"
            )
            if key[0] != "GET":
                total_s += s1 - s0
                total_n += n
    spent = _sum(
        metrics, "dynamic_scoring_controller_reconcile_duration_seconds_sum", controller="registration"
    )
    sent = _sum(metrics, "dynamic_scoring_controller_writes_total", controller="registration") + 2 * _sum(
        metrics, "dynamic_scoring_controller_write_errors_total", controller="registration"
    )
    client = f"; registration: {1000 * spent / sent:.0f} ms per request it sent" if sent else ""
    server = f"; apiserver mean over our writes {1000 * total_s / total_n:.0f} ms" if total_n else ""
    return ", ".join(parts) + server + client


def _populate(api: Any, count: int) -> float:
    from dynamic_scoring.kube.resources import MANAGED_CLUSTER_ADDONS, MANAGED_CLUSTERS, NAMESPACES

    def one(i: int) -> None:
        name = f"{CLUSTER_PREFIX}{i:05d}"
        api.request("POST", NAMESPACES.path(), body={"metadata": {"name": name}})
        api.request(
            "POST",
            MANAGED_CLUSTERS.path(),
            body={
                "apiVersion": "cluster.open-cluster-management.io/v1",
                "kind": "ManagedCluster",
                "metadata": {"name": name},
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

    started = time.monotonic()
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(one, range(count)))
    return time.monotonic() - started


def _owned_by_ocm(api: Any) -> int:
    from dynamic_scoring.kube.resources import MANAGED_CLUSTER_ADDONS

    items = api.request(
        "GET", MANAGED_CLUSTER_ADDONS.path(), query={"fieldSelector": f"metadata.name={ADDON}"}
    )["items"]
    return sum(
        1
        for m in items
        if m["metadata"].get("ownerReferences") and m.get("status", {}).get("configReferences")
    )


def _hub_state(api: Any) -> tuple[int, int, int]:
    """(works, works with the v2 image, MCAs with RegistrationApplied=True), read from the hub."""
    from dynamic_scoring.kube.resources import MANAGED_CLUSTER_ADDONS, MANIFEST_WORKS

    works = api.request(
        "GET",
        MANIFEST_WORKS.path(),
        query={"labelSelector": f"open-cluster-management.io/addon-name={ADDON}"},
    )["items"]
    v2 = sum(1 for w in works if IMAGE_V2 in str(w["spec"]["workload"]["manifests"]))
    mcas = api.request(
        "GET", MANAGED_CLUSTER_ADDONS.path(), query={"fieldSelector": f"metadata.name={ADDON}"}
    )["items"]
    registered = sum(
        1
        for m in mcas
        if any(
            c["type"] == "RegistrationApplied" and c["status"] == "True"
            for c in m.get("status", {}).get("conditions") or []
        )
    )
    return len(works), v2, registered


def _ours(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in items if o["metadata"].get("namespace", "").startswith(CLUSTER_PREFIX)]


def _floor(kubeconfig: Path, api: Any, status_per_cluster: int) -> tuple[FloorRun, FloorRun]:
    """The floor of the template change and of the cold start, on the fleet the manager converged.

    Runs after the manager has stopped.  The template change's floor patches every deploy work's
    manifests to another image.  The cold start's floor deletes the works, hub Roles and
    RoleBindings (not timed) and creates them again, with `status_per_cluster` status patches of
    each MCA (a condition message changed, so each is a real write), all in one timed replay.
    """
    from dynamic_scoring.kube.resources import (
        MANAGED_CLUSTER_ADDONS,
        MANIFEST_WORKS,
        ROLE_BINDINGS,
        ROLES,
    )

    label = {"labelSelector": f"open-cluster-management.io/addon-name={ADDON}"}
    works = _ours(api.list_all(MANIFEST_WORKS.path(), label)[0])
    managed = {"labelSelector": f"app.kubernetes.io/managed-by={ADDON}"}
    roles = _ours(api.list_all(ROLES.path(), managed)[0])
    bindings = _ours(api.list_all(ROLE_BINDINGS.path(), managed)[0])
    mcas = _ours(api.list_all(MANAGED_CLUSTER_ADDONS.path(), {"fieldSelector": f"metadata.name={ADDON}"})[0])

    patches = [
        {
            "method": "PATCH",
            "path": MANIFEST_WORKS.path(w["metadata"]["namespace"], w["metadata"]["name"]),
            "contentType": MERGE,
            "body": {
                "spec": {
                    "workload": {
                        "manifests": json.loads(
                            json.dumps(w["spec"]["workload"]["manifests"]).replace(IMAGE_V2, IMAGE_V3)
                        )
                    }
                }
            },
        }
        for w in works
    ]
    change = replay(kubeconfig, patches)

    works = _ours(api.list_all(MANIFEST_WORKS.path(), label)[0])
    replay(
        kubeconfig,
        deletes("/apis/work.open-cluster-management.io/v1/namespaces/{ns}/manifestworks/{name}", works)
        + deletes("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{name}", roles)
        + deletes("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{name}", bindings),
    )
    status = []
    for mca in mcas:
        conditions = (mca.get("status") or {}).get("conditions") or []
        for n in range(status_per_cluster):
            changed = [{**c, "message": f"{c.get('message', '')} (floor {n})"} for c in conditions]
            status.append(
                {
                    "method": "PATCH",
                    "path": MANAGED_CLUSTER_ADDONS.path(mca["metadata"]["namespace"], ADDON, "status"),
                    "contentType": MERGE,
                    "body": {"status": {"conditions": changed}},
                }
            )
    cold = replay(
        kubeconfig,
        creates("/apis/work.open-cluster-management.io/v1/namespaces/{ns}/manifestworks", works)
        + creates("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", roles)
        + creates("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", bindings)
        + status,
    )
    return change, cold


def _ocm_alone(api: Any, count: int) -> tuple[float, str]:
    """OCM's hash copy with no manager running: seconds until every MCA has a new default-config hash.

    Edits the default AddOnDeploymentConfig and writes its new spec hash into the CMA status
    itself, as the manager's `cma-config` controller would, then watches OCM's addon-manager copy
    it into every MCA.  Nothing of ours runs, so this is OCM's own pace on this machine: the
    floor under any cold start that must wait for the hash.
    """
    from dynamic_scoring.addon.config.hashes import cma_hash_patch
    from dynamic_scoring.addon.config.spec_hash import spec_hash
    from dynamic_scoring.kube.resources import ADDON_DEPLOYMENT_CONFIGS, CLUSTER_MANAGEMENT_ADDONS

    adc = api.request(
        "PATCH",
        ADDON_DEPLOYMENT_CONFIGS.path("dynamic-scoring", "dynamic-scoring-default"),
        body={
            "spec": {
                "customizedVariables": [
                    {"name": "LogLevel", "value": "debug"},
                    {"name": "MetricsBindAddress", "value": ":8080"},
                ]
            }
        },
        content_type=MERGE,
    )
    cma = api.request("GET", CLUSTER_MANAGEMENT_ADDONS.path(None, ADDON))
    patch = cma_hash_patch(cma, lambda _ns, _name: adc)
    assert patch is not None, "the CMA names no default config to hash"
    watch = _HashWatch(api, want=spec_hash(adc))
    try:
        started = time.monotonic()
        api.request(
            "PATCH",
            CLUSTER_MANAGEMENT_ADDONS.path(None, ADDON, "status"),
            body={"status": patch},
            content_type=MERGE,
        )
        allowed = 120 + 0.3 * count
        while len(watch.first) < count:
            if time.monotonic() - started > allowed:
                raise TimeoutError(
                    f"OCM copied the hash into {len(watch.first)} of {count} MCAs in {allowed:.0f}s"
                )
            time.sleep(0.5)
        return watch.last(started), watch.report(started)
    finally:
        watch.stop()


def _measure(workdir: Path, count: int) -> list[Row]:
    from dynamic_scoring.kube.api import KubeAPI
    from e2e.controlplane import ControlPlane
    from e2e.kube import Client

    name = f"hub-manager-{count}"
    cp = ControlPlane(workdir / f"ocm-{count}", with_prometheus=False, with_runner=False)
    cp.up()
    rows: list[Row] = []
    proc: ManagerProc | None = None
    try:
        assert cp.hub is not None
        kubeconfig = cp.hub.admin_kubeconfig
        api = KubeAPI(kubeconfig, timeout=120)
        hub = Client(kubeconfig)
        for file in (
            "crds/dynamicscorers.yaml",  # the scorer registry's controllers run in the same manager
            "crds/dynamicscoringconfigs.yaml",
            "namespace.yaml",
            "clustermanagementaddon.yaml",
            "addondeploymentconfig.yaml",
        ):
            hub.apply_yaml((REPO / "manifests" / file).read_text())
        created = _populate(api, count)
        print(f"[{name}] created {count} clusters in {created:.0f}s", file=sys.stderr, flush=True)
        allowed = 120 + 0.2 * count  # OCM's own controllers need about 0.1 s per MCA on 2 cores
        deadline = time.monotonic() + allowed
        while _owned_by_ocm(api) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"OCM's addon-manager did not take the MCAs in {allowed:.0f}s; "
                    f"see {cp.run_dir}/logs/hub-addon-manager.log"
                )
            time.sleep(2)

        log = workdir / f"manager-{count}.log"
        servers = {"apiserver": cp.hub.apiserver.pid, "etcd": cp.etcd.proc.pid if cp.etcd else None}
        cpu_before = {k: cpu_seconds(pid) for k, pid in servers.items() if pid}
        assert cp.tools is not None
        hashed = _HashWatch(KubeAPI(kubeconfig, timeout=120))
        latency_before = _server_latency(cp.tools.kubectl, kubeconfig)
        started = time.monotonic()
        proc = _start_manager(kubeconfig, log, DEFAULT_IMAGE)
        sampler = _sample(proc.popen.pid, workdir / f"cold-{count}.stacks")

        def all_works(metrics: dict[Any, float]) -> bool:
            return (
                _sum(metrics, "dynamic_scoring_controller_writes_total", controller="deploy", verb="create")
                >= count
            )

        timeline: list[tuple[float, dict[str, float]]] = []
        last_write, metrics = _quiet(proc, all_works, timeout=900, timeline=timeline)
        cold = last_write - started
        print(f"[{name}] writes over time: {_phases(timeline, started)}", file=sys.stderr)
        print(f"[{name}] OCM's config hash in the MCAs: {hashed.report(started)}", file=sys.stderr)
        ocm_paced = hashed.last(started)
        hashed.stop()
        latency = _latency_report(latency_before, _server_latency(cp.tools.kubectl, kubeconfig), metrics)
        print(f"[{name}] request latency: {latency}", file=sys.stderr)
        refused = {
            c: _sum(metrics, "dynamic_scoring_controller_write_errors_total", controller=c)
            for c in CONTROLLERS
        }
        reconciles = {
            c: _sum(metrics, "dynamic_scoring_controller_reconcile_total", controller=c) for c in CONTROLLERS
        }
        print(
            f"[{name}] refused writes (409s and errors): {refused}; reconciles: {reconciles}",
            file=sys.stderr,
        )
        if sampler is not None:
            sampler.send_signal(signal.SIGINT)  # py-spy writes what it sampled and exits
            sampler.wait(60)
        # CPU to the end of the quiet period (3 s of nothing after the last write): near enough
        cpu = {k: cpu_seconds(pid) - cpu_before[k] for k, pid in servers.items() if pid}
        cpu["manager"] = cpu_seconds(proc.popen.pid)
        cpu_wall = time.monotonic() - started
        mca_status_writes = _sum(
            metrics,
            "dynamic_scoring_controller_writes_total",
            verb="status",
            resource="managedclusteraddons.addon.open-cluster-management.io",
        )
        print(f"[{name}] CPU s: {cpu} in {cpu_wall:.0f}s", file=sys.stderr)
        if os.environ.get("DS_BENCH_HUB_COLD_ONLY"):  # an experiment on the cold start alone
            return [Row(name, "cold start to all works (s)", f"{cold:.1f}")]
        works, _, registered = _hub_state(api)
        assert works == count and registered == count, (works, registered)
        per_cluster = _writes(metrics) / count
        breakdown = ", ".join(
            f"{c}:{_sum(metrics, 'dynamic_scoring_controller_writes_total', controller=c) / count:.2f}"
            for c in CONTROLLERS
        )
        print(
            f"[{name}] converged in {cold:.1f}s; writes/cluster {per_cluster:.2f} ({breakdown})",
            file=sys.stderr,
        )

        peak = proc.peak_rss_mib()
        proc.stop()
        proc = None

        # a new release: the same fleet, a different agent image in the template
        started = time.monotonic()
        proc = _start_manager(kubeconfig, log, IMAGE_V2)

        def all_patched(metrics: dict[Any, float]) -> bool:
            return (
                _sum(metrics, "dynamic_scoring_controller_writes_total", controller="deploy", verb="patch")
                >= count
            )

        change_timeline: list[tuple[float, dict[str, float]]] = []
        last_write, _ = _quiet(proc, all_patched, timeout=900, timeline=change_timeline)
        change = last_write - started
        print(
            f"[{name}] template change, writes over time: {_phases(change_timeline, started)}",
            file=sys.stderr,
        )
        _, v2, _ = _hub_state(api)
        assert v2 == count, v2
        peak = max(peak, proc.peak_rss_mib())
        proc.stop()
        proc = None

        # a restart on the converged fleet and one full resync: nothing to write in either
        proc = _start_manager(kubeconfig, log, IMAGE_V2, resync=RESYNC_SECONDS)

        def reconciled(m: dict[Any, float]) -> float:
            return _sum(m, "dynamic_scoring_controller_reconcile_total", controller="deploy")

        _, started_pass = _quiet(proc, lambda m: reconciled(m) >= count, timeout=RESYNC_SECONDS + 300)
        after_start = reconciled(started_pass)
        _quiet(proc, lambda m: reconciled(m) >= after_start + count, timeout=RESYNC_SECONDS * 4 + 300)
        resync_writes = _writes(proc.metrics())
        peak = max(peak, proc.peak_rss_mib())
        proc.stop()
        proc = None

        status_per_cluster = max(1, round(mca_status_writes / count))
        floor_change, floor_cold = _floor(kubeconfig, api, status_per_cluster)
        print(
            f"[{name}] floor: cold start {floor_cold.seconds:.1f}s ({floor_cold.requests} writes, "
            f"{floor_cold.per_second:.0f}/s), template change {floor_change.seconds:.1f}s",
            file=sys.stderr,
        )

        ocm_alone, ocm_alone_report = _ocm_alone(api, count)
        print(f"[{name}] OCM alone, a new hash: {ocm_alone_report}", file=sys.stderr)

        rows += [
            Row(
                name,
                "cold start to all works (s)",
                f"{cold:.1f}",
                "<= 60 at 1000",
                verdict(count > 1000 or cold <= 60),
            ),
            Row(name, "writes per cluster, full pass", f"{per_cluster:.2f} ({breakdown})"),
            Row(
                name,
                "writes on a no-op restart and resync",
                f"{resync_writes:.0f}",
                "0",
                verdict(resync_writes == 0),
            ),
            Row(
                name,
                "manager peak RSS (MiB)",
                f"{peak:.0f}",
                "<= 300 at 3500",
                verdict(count < 3500 or peak <= 300),
            ),
            Row(name, "template change to every work (s)", f"{change:.1f}"),
            Row(
                name,
                "floor: cold start's writes by client-go, 32 in flight (s)",
                f"{floor_cold.seconds:.1f} ({floor_cold.requests} writes, {floor_cold.per_second:.0f}/s)",
            ),
            Row(
                name,
                "cold start / floor",
                f"{cold / floor_cold.seconds:.2f}x",
                "<= 1.5x",
                verdict(cold <= 1.5 * floor_cold.seconds),
            ),
            Row(
                name,
                "OCM's config hash in every MCA (s; registration and deploy wait for it)",
                f"{ocm_paced:.1f}",
            ),
            Row(name, "cold start's last write after OCM's last hash (s)", f"{cold - ocm_paced:.1f}"),
            Row(
                name,
                "OCM alone, no manager: a new default-config hash in every MCA (s)",
                f"{ocm_alone:.1f}",
            ),
            Row(
                name,
                "cold start / the slower of the floor and OCM's hash copy",
                f"{cold / max(floor_cold.seconds, ocm_paced):.2f}x",
                "<= 1.5x",
                verdict(cold <= 1.5 * max(floor_cold.seconds, ocm_paced)),
            ),
            Row(
                name,
                "floor: template change's work patches (s)",
                f"{floor_change.seconds:.1f} ({floor_change.per_second:.0f}/s)",
            ),
            Row(
                name,
                "template change / floor",
                f"{change / floor_change.seconds:.2f}x",
                "<= 1.5x",
                verdict(change <= 1.5 * floor_change.seconds),
            ),
            Row(
                name,
                f"CPU s during the cold start ({cpu_wall:.0f} s wall, 2 cores)",
                ", ".join(f"{k} {v:.0f}" for k, v in sorted(cpu.items())),
            ),
            Row(name, "request latency in the cold start (apiserver's own, ours)", latency),
            Row(name, "fleet creation (s, not the manager)", f"{created:.0f}"),
            Row(
                name,
                "machine load average (1/5/15 min) at the end",
                " / ".join(f"{x:.1f}" for x in os.getloadavg()),
            ),
        ]
    finally:
        if proc is not None:
            proc.stop()
        problems = cp.down()
        if problems:
            print(f"[{name}] teardown: {problems}", file=sys.stderr)
    return rows


@benchmark("hub-manager")
def hub_manager(workdir: Path) -> list[Row]:
    """Cold start, writes, resync, memory and template rollout at each fleet size."""
    rows: list[Row] = []
    for count in _sizes():
        rows += _measure(workdir, count)
    return rows
