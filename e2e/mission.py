"""The whole loop as a user runs it, as steps shared by `make demo` (e2e.demo) and the mission test.

install the hub side with the documented Helm command -> `clusteradm addon enable` on both
clusters -> start the seasonal sample scorer -> register it as the sample DynamicScorer
cpu-seasonal-4h -> the sample Placement (the margin recipe) picks the cluster with the most CPU
headroom -> shift the synthetic load -> the decision follows.

One thing the local environment needs that a real fleet does not: each managed cluster has its
own Prometheus on its own loopback port, while a DynamicScorer names one `source.host` for every
cluster.  In a fleet that host is the same in-cluster Service name resolving to each cluster's
own Prometheus, or one multi-tenant store (Mimir, Cortex, Thanos) that picks the tenant from the
`X-Scope-OrgID` header.  The demo does the latter: `TenantGateway` forwards each query to the
Prometheus of the tenant named in the header, and the header's value comes from a Secret the user
creates in each cluster's agent namespace (`spec.source.auth.headers[].secretKeyRef`), exactly as
the agent's documented multi-tenant setup works.  Like any Secret the agent sends, it carries the
`dynamic-scoring.open-cluster-management.io/allowed-hosts` annotation naming the gateway's host
and port: without it the agent refuses to send the header (`SecretNotBound`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.timestamps import parse_time
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION, destination
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.loadgen import CAPACITY_CORES, LoadFile
from e2e.loopback import LoopbackServer, QuietHandler
from e2e.ocm import clusteradm
from e2e.procs import Proc, StartupError, free_port, wait_until

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "e2e" / "build-tools.sh"
CHART = REPO / "charts" / "dynamic-scoring"
ADDON = "dynamic-scoring"
NAMESPACE = "dynamic-scoring"  # the chart's (and manifests/') namespace
RELEASE = "dynamic-scoring"
INSTALL_NS = "open-cluster-management-agent-addon"
CLUSTERS = ("cluster1", "cluster2")
MANAGER = "dynamic-scoring-addon-manager"
DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
CLUSTER_V1B2 = "cluster.open-cluster-management.io/v1beta2"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
WORK_V1 = "work.open-cluster-management.io/v1"
CRD_NAMES = (
    "dynamicscorers.dynamic-scoring.open-cluster-management.io",
    "dynamicscoringconfigs.dynamic-scoring.open-cluster-management.io",
)
SCORER = "cpu-seasonal-4h"  # the DynamicScorer the sample Placement reads (work that stays hours)
SCORE = "cpu_seasonal_4h"  # its score name
USER_NS = "dynamic-scoring-samples"  # where the sample Placement lives (samples/placement/placement.yaml)
PLACEMENT = "least-loaded"
SAMPLE_SCORER = REPO / "samples" / "crs" / "cpu-seasonal-scorer.yaml"
SAMPLE_CONFIG = REPO / "samples" / "crs" / "dynamicscoringconfig.yaml"
SAMPLE_PLACEMENT = REPO / "samples" / "placement" / "placement.yaml"
TENANT_SECRET = "demo-metrics-tenant"
TENANT_HEADER = "X-Scope-OrgID"
DEMO_PODS = ("app-1", "app-2")
# cores: headroom 35 and 65 % of 4 cores, -50 and +50 once the sample's band maps 20..80 onto -100..100
HEAVY, LIGHT = 2.6, 1.4

Progress = Callable[[str], None]


def sample_documents(path: Path) -> list[JSON]:
    """The YAML documents of one sample file, as a user would `kubectl apply -f` it."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@functools.cache
def helm_binary() -> Path:
    """The pinned helm, built from the Go module proxy on first use (e2e/build-tools.sh helm)."""
    proc = subprocess.run([str(BUILD_SCRIPT), "helm"], capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        name, _, path = line.partition("=")
        if name == "helm" and path:
            return Path(path) / "bin" / "helm"
    raise StartupError(f"building helm failed:\n{proc.stderr[-3000:]}")


def install_command(helm: Path | str = "helm", *extra: str) -> list[str]:
    """The documented install (docs/install.md), as argv."""
    return [
        str(helm),
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        *extra,
    ]


class TenantGateway:
    """One Prometheus URL for every cluster: the `X-Scope-OrgID` header picks whose data answers.

    The same contract as a multi-tenant Mimir/Cortex query frontend, reduced to a forwarder: a
    request without the header, or naming an unknown tenant, gets 400 with a message saying so.
    """

    def __init__(self, upstreams: dict[str, str]) -> None:
        self.upstreams = dict(upstreams)
        gateway = self

        class Handler(QuietHandler):
            def _forward(self, body: bytes | None) -> None:
                tenant = self.headers.get(TENANT_HEADER, "")
                upstream = gateway.upstreams.get(tenant)
                if upstream is None:
                    msg = f"{TENANT_HEADER} must name one of {sorted(gateway.upstreams)}, got {tenant!r}"
                    self.reply(400, {"status": "error", "error": msg})
                    return
                req = urllib.request.Request(upstream + self.path, data=body, method=self.command)
                if body is not None:
                    req.add_header(
                        "Content-Type", self.headers.get("Content-Type", "application/octet-stream")
                    )
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        self.reply(resp.status, resp.read())
                except urllib.error.HTTPError as exc:
                    self.reply(exc.code, exc.read())
                except OSError as exc:
                    self.reply(502, {"status": "error", "error": str(exc)})

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.body())

        self._loopback = LoopbackServer(Handler, name="tenant-gateway", start=False)

    @property
    def url(self) -> str:
        """Base URL: what the DynamicScorer's `source.host` names."""
        return self._loopback.url

    def start(self) -> TenantGateway:
        """Serve in a background thread."""
        self._loopback.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._loopback.stop()


@dataclass(frozen=True)
class Flip:
    """Seconds from a load shift to the scores crossing and to the Placement's new decision."""

    to: str
    scores_crossed: float
    decided: float
    score_to_decision: float


@dataclass
class Row:
    """One cluster's line in the view."""

    cluster: str
    score: int | None
    written_ago: float | None
    expires_in: float | None
    condition: str
    load: float
    chosen: bool


@dataclass
class Mission:
    """The steps, against a running `ControlPlane` (its Prometheus servers and runner included)."""

    cp: ControlPlane
    progress: Progress = print
    interval: int = 5
    window: int = 5
    work_dir: Path = field(default_factory=lambda: Path(".e2e-mission"))
    scorer_proc: Proc | None = None
    gateway: TenantGateway | None = None
    helm: Path | None = None
    # the managed clusters the steps enable, score and compare (the Kueue test uses two workers)
    clusters: tuple[str, ...] = CLUSTERS
    # the Placement `decision` reads: (namespace, name)
    placement_ref: tuple[str, str] = (USER_NS, PLACEMENT)
    # which of the sample file's DynamicScorers the steps register and read (the Kueue samples read
    # the one-hour one)
    scorer: str = SCORER

    @property
    def valid_for_seconds(self) -> int:
        """The demo scorer's ``validForSeconds``: a successful score stays valid this long."""
        return max(3 * self.interval, 30)

    def __post_init__(self) -> None:
        assert self.cp.hub is not None and self.cp.tools is not None
        self.hub = Client(self.cp.hub.admin_kubeconfig, timeout=10)
        self.spokes = {
            c: self.hub if c == "cluster1" else Client(self.cp.clusters[c].kubeconfig, timeout=10)
            for c in self.clusters
        }
        self.tools = self.cp.tools
        self.work_dir = self.work_dir.resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)

    # ----------------------------------------------------------------- install
    def helm_env(self) -> dict[str, str]:
        """Helm's caches and config inside the work dir, so nothing lands in the user's home."""
        return {
            **os.environ,
            "HELM_CACHE_HOME": str(self.work_dir / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(self.work_dir / "helm" / "config"),
            "HELM_DATA_HOME": str(self.work_dir / "helm" / "data"),
        }

    def run_helm(self, *args: str) -> str:
        """Run helm against the hub; raises with its output on failure."""
        assert self.cp.hub is not None
        if self.helm is None:
            self.helm = helm_binary()
        argv = [str(self.helm), *args, f"--kubeconfig={self.cp.hub.admin_kubeconfig}"]
        proc = subprocess.run(
            argv, capture_output=True, text=True, check=False, env=self.helm_env(), timeout=300
        )
        if proc.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} failed: {proc.stdout}{proc.stderr}")
        return proc.stdout

    def install(self, *extra: str) -> None:
        """`helm install dynamic-scoring charts/dynamic-scoring -n dynamic-scoring --create-namespace`."""
        self.run_helm(*install_command("helm", *extra)[1:])
        self.wait_manager()

    def manager_available(self) -> bool:
        """The manager Deployment reports every replica available (the runner feeds its status)."""
        dep = self.hub.find("apps/v1", "Deployment", MANAGER, NAMESPACE)
        if dep is None:
            return False
        want = (dep.get("spec") or {}).get("replicas", 1)
        st = dep.get("status") or {}
        return bool(
            st.get("observedGeneration") == dep["metadata"]["generation"]
            and st.get("updatedReplicas") == want
            and st.get("availableReplicas") == want
        )

    def wait_manager(self, timeout: float = 90) -> None:
        """Until every manager replica runs and one holds the leader Lease."""

        def leader() -> str:
            lease = self.hub.find("coordination.k8s.io/v1", "Lease", MANAGER, NAMESPACE)
            return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

        wait_until(
            lambda: self.manager_available() and leader(), timeout=timeout, what="the addon manager up"
        )

    def enable(self, *clusters: str) -> str:
        """`clusteradm addon enable --names dynamic-scoring --clusters ...`."""
        assert self.cp.hub is not None
        names = ",".join(clusters or self.clusters)
        return clusteradm(
            self.tools, self.cp.hub.admin_kubeconfig, "addon", "enable", "--names", ADDON, "--clusters", names
        )

    def disable(self, *clusters: str) -> str:
        """`clusteradm addon disable --names dynamic-scoring --clusters ...`."""
        assert self.cp.hub is not None
        names = ",".join(clusters or self.clusters)
        return clusteradm(
            self.tools,
            self.cp.hub.admin_kubeconfig,
            "addon",
            "disable",
            "--names",
            ADDON,
            "--clusters",
            names,
        )

    def uninstall(self, *, crds: bool = True, timeout: float = 120) -> None:
        """The documented uninstall (docs/install.md): release, then namespace, then (optionally) CRDs.

        Helm never deletes what a chart's `crds/` installed; deleting the CRDs also deletes every
        DynamicScorer and DynamicScoringConfig left anywhere, which is why it is a separate step.
        """
        self.run_helm("uninstall", RELEASE, "--namespace", NAMESPACE)
        self.hub.delete("v1", "Namespace", NAMESPACE)
        if crds:
            for name in CRD_NAMES:
                self.hub.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
        wait_until(
            lambda: (
                self.hub.find("v1", "Namespace", NAMESPACE) is None
                and not (
                    crds
                    and any(
                        self.hub.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", n)
                        for n in CRD_NAMES
                    )
                )
            ),
            timeout=timeout,
            what=f"namespace {NAMESPACE} (and the CRDs) deleted",
        )

    # ----------------------------------------------------------------- the user's side
    def tenant_secrets(self) -> None:
        """What the user creates on each cluster before enabling: the namespace and the tenant Secret.

        Once the gateway runs, the Secret is bound to its host and port (the allowed-hosts
        annotation), as a user binds a Secret to the metrics store it is meant for.
        """
        metadata: JSON = {"name": TENANT_SECRET, "namespace": INSTALL_NS}
        if self.gateway is not None:
            metadata["annotations"] = {ALLOWED_HOSTS_ANNOTATION: destination(self.gateway.url).entry}
        for cluster, client in self.spokes.items():
            client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": INSTALL_NS}})
            secret = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata}
            client.apply({**secret, "stringData": {"tenant": cluster}})

    def start_gateway(self) -> TenantGateway:
        """The one metrics URL every cluster's agent queries (see the module docstring).

        The tenant Secrets are then bound to it: its port is only known now.
        """
        upstreams = {c: self.cp.clusters[c].prometheus_url for c in self.clusters}
        missing = [c for c, url in upstreams.items() if not url]
        if missing:
            raise StartupError(f"no Prometheus for {missing}: the control plane runs without Prometheus")
        self.gateway = TenantGateway(upstreams).start()
        self.tenant_secrets()
        return self.gateway

    def start_scorer(self) -> str:
        """The seasonal sample scorer (`python -m dynamic_scoring.samples.scorers.seasonal`) on loopback.

        The demo's window holds seconds, not a day, so the scorer forecasts what it does on a fresh
        cluster: the window's mean load, which follows a load shift within an interval.
        """
        port = free_port()
        argv = [sys.executable, "-m", "dynamic_scoring.samples.scorers.seasonal", "--port", str(port)]
        argv += ["--capacity-cores", str(CAPACITY_CORES), "--interval", str(self.interval)]
        log = self.work_dir / "sample-seasonal-scorer.log"
        self.scorer_proc = Proc("sample-seasonal-scorer", argv, log, cwd=REPO)
        self.scorer_proc.start()
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)

        wait_until(healthy, timeout=30, what="the sample scorer's /healthz", proc=self.scorer_proc)
        return base

    @functools.cached_property
    def score_name(self) -> str:
        """The score name the registered sample DynamicScorer publishes (its ``params.name``).

        Read from the sample file once: ``score`` polls with it.
        """
        return str(self.sample_scorer()["spec"]["scoring"]["params"]["name"])

    def sample_scorer(self) -> JSON:
        """``self.scorer``'s document in samples/crs/cpu-seasonal-scorer.yaml, as the user applies it."""
        found = [d for d in sample_documents(SAMPLE_SCORER) if d["metadata"]["name"] == self.scorer]
        assert len(found) == 1 and found[0]["kind"] == "DynamicScorer", (SAMPLE_SCORER, self.scorer)
        return found[0]

    def dynamic_scorer(self, base: str) -> JSON:
        """The sample DynamicScorer (samples/crs/cpu-seasonal-scorer.yaml), pointed at this machine.

        What a user edits when applying the sample to their own fleet is all that changes: where the
        scorer and the metrics are, and the demo's short window (seconds, not the day and an hour the
        forecast needs, so it scores the recent mean).  The score name, horizon and band stay the
        sample's, so the sample Placement's margin is the recipe's: 10 points, 3 of headroom.
        """
        assert self.gateway is not None
        scorer = self.sample_scorer()
        spec = scorer["spec"]
        spec.update(configURL=f"{base}/config", validForSeconds=self.valid_for_seconds)
        spec["source"].update(
            host=self.gateway.url,
            params={
                # irate over 5 s on a 1 s scrape: the score follows a load change within seconds
                "query": "sum(irate(container_cpu_usage_seconds_total[5s]))",
                "range": self.window,
                "step": 1,
            },
            auth={
                "headers": [{"name": TENANT_HEADER, "secretKeyRef": {"name": TENANT_SECRET, "key": "tenant"}}]
            },
        )
        spec["scoring"].update(host=base, params={**spec["scoring"]["params"], "interval": self.interval})
        return scorer

    def register(self, base: str) -> None:
        """The sample DynamicScorer, the sample DynamicScoringConfig, and the sample Placement."""
        self.hub.apply(self.dynamic_scorer(base))
        for doc in sample_documents(SAMPLE_CONFIG):
            self.hub.apply(doc)
        self.placement()

    def placement(self) -> None:
        """The sample Placement (samples/placement/placement.yaml): its namespace, binding and Placement.

        It weighs the four-hour seasonal score (x10) and ``Steady`` (x1): the margin recipe.
        """
        for doc in sample_documents(SAMPLE_PLACEMENT):
            self.hub.apply(doc)

    def delete_scorer(self) -> None:
        """Delete the DynamicScorer (its scores must follow)."""
        self.hub.delete(DS_V1A1, "DynamicScorer", self.scorer, NAMESPACE)

    # ----------------------------------------------------------------- load and observation
    def load_file(self, cluster: str) -> LoadFile:
        """The cluster's load exporter input."""
        path = self.cp.clusters[cluster].load_file
        if path is None:
            raise StartupError(f"{cluster} has no load exporter: the control plane runs without Prometheus")
        return LoadFile(path)

    def set_load(self, cluster: str, total_cores: float) -> None:
        """Make the cluster's whole load `total_cores`, spread over its demo pods.

        Every other entry is dropped (a pod another test added would change the cluster's total);
        Prometheus sees the change within a scrape (1 s).
        """
        share = total_cores / len(DEMO_PODS)
        self.load_file(cluster).write(
            [
                {
                    "namespace": "demo",
                    "pod": pod,
                    "node": f"{cluster}-node",
                    "container": "app",
                    "cores": share,
                }
                for pod in DEMO_PODS
            ]
        )

    def load_of(self, cluster: str) -> float:
        """The cores the cluster's demo pods use now."""
        return sum(float(e["cores"]) for e in self.load_file(cluster).read())

    def aps(self, cluster: str) -> JSON | None:
        """This scorer's AddOnPlacementScore in the cluster's namespace on the hub."""
        return self.hub.find(APS_V1A1, "AddOnPlacementScore", aps_name(self.score_name), cluster)

    def score(self, cluster: str) -> int | None:
        """The published score, if the APS has one."""
        for item in ((self.aps(cluster) or {}).get("status") or {}).get("scores") or []:
            if item.get("name") == self.score_name:
                return int(item["value"])
        return None

    def decision(self) -> list[str]:
        """The clusters the Placement's PlacementDecisions name now."""
        decisions = self.hub.items(
            CLUSTER_V1B1,
            "PlacementDecision",
            self.placement_ref[0],
            label_selector=f"cluster.open-cluster-management.io/placement={self.placement_ref[1]}",
        )
        return sorted(
            d["clusterName"] for pd in decisions for d in (pd.get("status") or {}).get("decisions") or []
        )

    def rows(self) -> list[Row]:
        """What the live view shows, read from the hub now."""
        now = dt.datetime.now(dt.UTC)
        chosen = set(self.decision())
        rows = []
        for cluster in self.clusters:
            aps = self.aps(cluster) or {}
            status = aps.get("status") or {}
            until = parse_time(status.get("validUntil", ""))
            # The agent keeps no managedFields (whose times said when status was written); it sets
            # validUntil to its write's time plus the scorer's validForSeconds.
            last = until - dt.timedelta(seconds=self.valid_for_seconds) if until else None
            cond: dict[str, Any] = next(iter(status.get("conditions") or []), {})
            rows.append(
                Row(
                    cluster=cluster,
                    score=self.score(cluster),
                    written_ago=(now - last).total_seconds() if last else None,
                    expires_in=(until - now).total_seconds() if until else None,
                    condition=f"{cond.get('type', '-')}={cond.get('status', '-')}" if cond else "-",
                    load=self.load_of(cluster),
                    chosen=cluster in chosen,
                )
            )
        return rows

    def wait_ranked(self, leader: str, timeout: float) -> None:
        """Until both clusters have scores, `leader`'s is the higher, and the Placement chose it."""

        def ranked() -> bool:
            scores = {c: s for c in self.clusters if (s := self.score(c)) is not None}
            if len(scores) < len(self.clusters):
                return False
            top = all(scores[leader] > v for c, v in scores.items() if c != leader)
            return top and self.decision() == [leader]

        wait_until(
            ranked, timeout=timeout, what=f"scores on both clusters and the Placement choosing {leader}"
        )

    def margin(self) -> float:
        """The incumbent margin of the Placement `decision` reads, in points of this mission's score.

        `Steady` gives the chosen cluster 100 at its weight; the score counts at its own weight, so
        a challenger takes over only when its score leads by more than this (0 without `Steady`).
        """
        namespace, name = self.placement_ref
        placement = self.hub.get(CLUSTER_V1B1, "Placement", name, namespace)
        weights: dict[str, int] = {}
        for c in placement["spec"]["prioritizerPolicy"]["configurations"]:
            coordinate = c["scoreCoordinate"]
            weights[coordinate.get("builtIn") or coordinate["addOn"]["scoreName"]] = int(c["weight"])
        return 100.0 * weights.get("Steady", 0) / weights[self.score_name]

    def shift(self, to: str, timeout: float) -> Flip:
        """Move the load away from `to` and time the scores crossing, then the decision following.

        Polls the hub every 0.1 s: each time is when this process saw the change, so each is late
        by at most one poll (two GETs, ~10-20 ms here) after the apiserver had it.
        """
        other = next(c for c in self.clusters if c != to)
        start = time.monotonic()
        self.set_load(other, HEAVY)
        self.set_load(to, LIGHT)
        crossed: float | None = None
        deadline = start + timeout
        margin = self.margin()
        while time.monotonic() < deadline:
            if crossed is None:
                a, b = self.score(to), self.score(other)
                # the sample Placement keeps its choice until a challenger leads by the margin
                if a is not None and b is not None and a > b + margin:
                    crossed = time.monotonic()
            if self.decision() == [to]:
                decided = time.monotonic()
                return Flip(
                    to=to,
                    scores_crossed=(crossed or decided) - start,
                    decided=decided - start,
                    score_to_decision=decided - (crossed or decided),
                )
            time.sleep(0.1)
        raise StartupError(
            f"the Placement did not choose {to} within {timeout:.0f}s of the load shift "
            f"(scores now: {[(c, self.score(c)) for c in self.clusters]}, decision {self.decision()})"
        )

    # ----------------------------------------------------------------- teardown
    def stop_local(self) -> None:
        """Stop what this object started in this process (scorer, gateway); idempotent."""
        if self.scorer_proc is not None:
            self.scorer_proc.stop()
            self.scorer_proc = None
        if self.gateway is not None:
            self.gateway.stop()
            self.gateway = None


@contextlib.contextmanager
def timed(progress: Progress, what: str, t0: float) -> Iterator[None]:
    """Print `what`, run the block, print how long it took and the time since `t0`."""
    progress(f"[{time.monotonic() - t0:6.1f}s] {what} ...")
    start = time.monotonic()
    yield
    progress(f"[{time.monotonic() - t0:6.1f}s]   done: {what} ({time.monotonic() - start:.1f}s)")
