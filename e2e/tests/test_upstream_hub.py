"""Upstream's hub components driving this project's agent, in both DynamicScorer sync modes.

A user who rolls the hub back to upstream's Go addon (its addon manager and its DynamicScorer
manager) keeps agents of ours on managed clusters until they are replaced, or mixes both.  This
module shows that our agent works under upstream's hub: it reads the summaries upstream's manager
delivers, writes the AddOnPlacementScores with only the hub credentials upstream's addon
registration issues (upstream's agent RBAC), and removes the scores of withdrawn scorers.

The setup, on the session's control plane:

* the hub's DynamicScorer and DynamicScoringConfig CRDs are this project's (`manifests/crds/`, a
  superset accepting upstream's spellings), as after a rollback that kept them; installed only
  when missing and then removed at the end.  Upstream's manager needs nothing of upstream's own
  CRDs: their fields are a subset of ours, and the defaults of ours (`location: Internal`,
  `scoreDestination: AddOnPlacementScore`) supply the two fields upstream's manager requires;
* upstream's ClusterManagementAddOn `dynamic-scoring-framework`, with its install strategy changed
  from upstream's `Placements` to `Manual` (upstream's placements would install it wherever they
  select), and an AddOnDeploymentConfig as its default config giving upstream's install namespace
  `dynamic-scoring`; the addon is then enabled on cluster2 only, by its ManagedClusterAddOn;
* upstream's addon manager and DynamicScorer manager, from the tools cache, as processes
  (`e2e.upstream.UpstreamHub`), against the hub admin's kubeconfig;
* upstream's singleton DynamicScoringConfig `dynamic-scoring-config` and the DynamicScorers in the
  namespace `upstream-hub-e2e`.  Upstream's manager writes one summaries ManifestWork per managed
  cluster, cluster1 (the hub itself) included: its ConfigMap targets the namespace
  `dynamic-scoring`, which the hub does not have (our addon is not installed), so on cluster1 it
  is never applied;
* no upstream agent: our agent runs as a process for cluster2 (the harness only runs our image's
  Deployments, so upstream's agent Deployment, delivered to cluster2, never runs), with the hub
  kubeconfig the klusterlet wrote for upstream's addon, reading the summaries ConfigMap upstream's
  manager delivers to `dynamic-scoring`;
* one scoring API on loopback, serving `/healthz` (upstream's manager probes it), a `/config` and
  a `/score` per scorer (a path prefix each).

Our own addon is not installed during this module: its manager would fight upstream's over the
DynamicScorers.  Upstream's manager probes and syncs every 30 s (a constant there), so each step
waits up to a minute for it.  (Upstream's DynamicScorer reconciler writes a new scorer's status
with an empty `healthStatus`, which the enum refuses, upstream's own CRD's as ours, until its
first probe sets it: errors in its log, no effect on the story.)

The three DynamicScorers are applied at once (one 30 s wait for upstream's probe and sync serves
all three); the stories, in file order: None mode; Full mode with the `/config` this project's
scorer library serves, as the sample scorers do (no `scoring.host`); Full mode with `scoring.host`
(observed: upstream drops that scorer); clean-up.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from dynamic_scoring.kube.api import NotFound
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.scorer import ScorerApp
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.loopback import LoopbackServer, QuietHandler
from e2e.ocm import install_crds
from e2e.procs import Proc, free_port, group_alive, port_in_use, wait_until, wait_value
from e2e.upstream import UPSTREAM_NAMESPACE, UpstreamHub, write_hub_kubeconfig

pytestmark = [
    pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning"),
    pytest.mark.late_tools,
]

REPO = Path(__file__).resolve().parents[2]
ADDON = "dynamic-scoring-framework"  # upstream's addon name
OUR_ADDON = "dynamic-scoring"
CLUSTER = "cluster2"
CLUSTERS = ("cluster1", "cluster2")
HUB_NS = "upstream-hub-e2e"
ADC = "upstream-hub-e2e"
HUB_SECRET = f"{ADDON}-hub-kubeconfig"  # upstream's templates: "<addon name>-hub-kubeconfig"
CONFIG = "dynamic-scoring-config"  # upstream's singleton DynamicScoringConfig, and its ConfigMap
CONFIG_WORK = "dynamic-scoring-config-manifestwork"
ADDON_WORK = f"addon-{ADDON}-deploy-0"
UPSTREAM_RBAC = f"open-cluster-management:{ADDON}:agent"  # upstream's Role/RoleBinding on the hub
DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
WORK_V1 = "work.open-cluster-management.io/v1"
RBAC_V1 = "rbac.authorization.k8s.io/v1"
CRD_V1 = "apiextensions.k8s.io/v1"
CRD_FILES = (
    REPO / "manifests" / "crds" / "dynamicscorers.yaml",
    REPO / "manifests" / "crds" / "dynamicscoringconfigs.yaml",
)
CRDS = (
    "dynamicscorers.dynamic-scoring.open-cluster-management.io",
    "dynamicscoringconfigs.dynamic-scoring.open-cluster-management.io",
)
AGENT = Path(sys.executable).parent / "dynamic-scoring-agent"
INTERVAL = 5
SYNC = 30  # upstream's DynamicScorerHealthCheckInterval: probe and /config sync period (seconds)
# An HTTP 403 or "forbidden"; not the milliseconds of a log timestamp ("16:38:11,403").
FORBIDDEN = re.compile(r"(?<!,)\b403\b|forbidden", re.IGNORECASE)
MERGE = "application/merge-patch+json"

NONE_SCORER, NONE_SCORE = "upstream-hub-none", "upstream_hub_none"
FULL_SCORER, FULL_SCORE = "upstream-hub-full", "upstream_hub_full"
HOST_SCORER, HOST_SCORE = "upstream-hub-full-host", "upstream_hub_full_host"


# ------------------------------------------------------------------------------------- the scorer
class Scorer:
    """The scoring API on loopback: `/healthz`, and per prefix `GET /<p>/config`, `POST /<p>/score`."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, Any]] = {}
        self.results: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[tuple[str, str, str]] = []  # (method, path, User-Agent)
        self.lock = threading.Lock()
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                outer._record("GET", self.path, self.headers.get("User-Agent", ""))
                if self.path == "/healthz":
                    self.reply(200, {"status": "ok"})
                    return
                prefix, _, rest = self.path.strip("/").partition("/")
                config = outer.configs.get(prefix)
                if rest == "config" and config is not None:
                    self.reply(200, config)
                else:
                    self.reply(404, {"detail": "not found"})

            def do_POST(self) -> None:
                self.body()
                outer._record("POST", self.path, self.headers.get("User-Agent", ""))
                prefix, _, rest = self.path.strip("/").partition("/")
                results = outer.results.get(prefix)
                if rest == "score" and results is not None:
                    self.reply(200, {"results": results})
                else:
                    self.reply(404, {"detail": "not found"})

        self.loopback = LoopbackServer(Handler, name="upstream-hub-scorer")
        self.port = self.loopback.port
        self.url = self.loopback.url

    def _record(self, method: str, path: str, agent: str) -> None:
        with self.lock:
            self.requests.append((method, path, agent))

    def count(self, method: str, path: str) -> int:
        with self.lock:
            return sum(1 for m, p, _ in self.requests if m == method and p == path)

    def stop(self) -> None:
        self.loopback.stop()


# ------------------------------------------------------------------------------------- the stack
def snapshot(hub: Client, spoke: Client) -> dict[str, list[str]]:
    """Names of what this module creates or what upstream's components create, hub and cluster2."""

    def names(client: Client, api: str, kind: str, namespace: str | None = None) -> list[str]:
        try:
            found = client.items(api, kind, namespace)
        except NotFound:  # a kind not served (a CRD not installed)
            return []
        return sorted(f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in found)

    shot = {
        "hub CRDs": [n for n in names(hub, CRD_V1, "CustomResourceDefinition") if "dynamic-scoring" in n],
        "hub namespaces": names(hub, "v1", "Namespace"),
        "hub ClusterManagementAddOns": names(hub, ADDON_V1A1, "ClusterManagementAddOn"),
        "hub ManagedClusterAddOns": names(hub, ADDON_V1A1, "ManagedClusterAddOn"),
        "hub AddOnDeploymentConfigs": names(hub, ADDON_V1A1, "AddOnDeploymentConfig"),
        "hub DynamicScorers": names(hub, DS_V1A1, "DynamicScorer"),
        "hub DynamicScoringConfigs": names(hub, DS_V1A1, "DynamicScoringConfig"),
        "hub ClusterRoleBindings": [
            n for n in names(hub, RBAC_V1, "ClusterRoleBinding") if "dynamic-scoring" in n
        ],
        "cluster2 namespaces": names(spoke, "v1", "Namespace"),
        "cluster2 ClusterRoleBindings": [
            n for n in names(spoke, RBAC_V1, "ClusterRoleBinding") if "dynamic-scoring" in n
        ],
    }
    for cluster in CLUSTERS:
        shot[f"hub ManifestWorks in {cluster}"] = names(hub, WORK_V1, "ManifestWork", cluster)
        shot[f"hub AddOnPlacementScores in {cluster}"] = names(hub, APS_V1A1, "AddOnPlacementScore", cluster)
        shot[f"hub Roles in {cluster}"] = names(hub, RBAC_V1, "Role", cluster)
        shot[f"hub RoleBindings in {cluster}"] = names(hub, RBAC_V1, "RoleBinding", cluster)
    return shot


class Stack:
    """Upstream's hub, our agent for cluster2, the scorer, and every object the module created."""

    def __init__(self, cp: ControlPlane, workdir: Path) -> None:
        assert cp.hub is not None and cp.spoke2 is not None
        self.hub = Client(cp.hub.admin_kubeconfig, timeout=10)
        self.spoke = Client(cp.spoke2.admin_kubeconfig, timeout=10)
        self.hub_kubeconfig = cp.hub.admin_kubeconfig
        self.spoke_kubeconfig = cp.spoke2.admin_kubeconfig
        self.workdir = workdir
        self.before = snapshot(self.hub, self.spoke)
        self.crds_created = [n for n in CRDS if self.hub.find(CRD_V1, "CustomResourceDefinition", n) is None]
        self.spoke_namespace_existed = self.spoke.find("v1", "Namespace", UPSTREAM_NAMESPACE) is not None
        self.scorer: Scorer | None = None
        self.upstream: UpstreamHub | None = None
        self.agent: Proc | None = None
        self.metrics_port = 0
        self.pgids: list[int] = []  # process groups started, checked at the end
        self.notes: list[str] = []  # what the clean-up observed of upstream's behaviour

    # -- set-up ----------------------------------------------------------------------------------
    def start(self) -> None:
        hub = self.hub
        if self.crds_created:
            install_crds(hub, CRD_FILES)
        hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HUB_NS}})
        hub.apply(
            {
                "apiVersion": ADDON_V1A1,
                "kind": "AddOnDeploymentConfig",
                "metadata": {"name": ADC, "namespace": HUB_NS},
                "spec": {"agentInstallNamespace": UPSTREAM_NAMESPACE},
            }
        )
        hub.apply(
            {
                "apiVersion": ADDON_V1A1,
                "kind": "ClusterManagementAddOn",
                "metadata": {"name": ADDON},
                "spec": {
                    "addOnMeta": {"displayName": ADDON, "description": "upstream's addon, e2e"},
                    "supportedConfigs": [
                        {
                            "group": "addon.open-cluster-management.io",
                            "resource": "addondeploymentconfigs",
                            "defaultConfig": {"name": ADC, "namespace": HUB_NS},
                        }
                    ],
                    "installStrategy": {"type": "Manual"},
                },
            }
        )
        self.scorer = Scorer()
        self.upstream = UpstreamHub(self.workdir / "upstream", self.hub_kubeconfig).start()
        for proc in (self.upstream.addon_manager, self.upstream.manager):
            if proc is not None and proc.pid is not None:
                self.pgids.append(proc.pid)
        if self.upstream.netns is not None:
            self.pgids += [
                p.pid for p in (self.upstream.netns.holder, self.upstream.netns.relay) if p and p.pid
            ]
        hub.apply(
            {
                "apiVersion": DS_V1A1,
                "kind": "DynamicScoringConfig",
                "metadata": {"name": CONFIG, "namespace": HUB_NS},
                "spec": {},
            }
        )
        hub.apply(
            {
                "apiVersion": ADDON_V1A1,
                "kind": "ManagedClusterAddOn",
                "metadata": {"name": ADDON, "namespace": CLUSTER},
                "spec": {},
            }
        )
        hub_kubeconfig = write_hub_kubeconfig(
            self.spoke, UPSTREAM_NAMESPACE, HUB_SECRET, self.workdir / "hub-kubeconfig"
        )
        self.metrics_port = free_port()
        self.agent = Proc(
            "our-agent",
            [
                str(AGENT),
                f"--hub-kubeconfig={hub_kubeconfig}",
                f"--managed-kubeconfig={self.spoke_kubeconfig}",
                f"--cluster-name={CLUSTER}",
                f"--addon-namespace={UPSTREAM_NAMESPACE}",
                f"--addon-name={ADDON}",
                f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                "--log-level=info",
                "--allow-cidr=127.0.0.0/8",  # the scorers of this test listen on 127.0.0.1
            ],
            self.workdir / "our-agent.log",
        ).start()
        assert self.agent.pid is not None
        self.pgids.append(self.agent.pid)
        wait_until(
            lambda: self.metrics() is not None, timeout=60, what="our agent serving /metrics", proc=self.agent
        )

    # -- reading ---------------------------------------------------------------------------------
    def metrics(self) -> str | None:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())

    def agent_log(self) -> str:
        assert self.agent is not None
        return self.agent.log_path.read_text(errors="replace")

    def forbidden_lines(self) -> list[str]:
        return [line for line in self.agent_log().splitlines() if FORBIDDEN.search(line)]

    def failures(self) -> dict[str, float]:
        """Our agent's failed cycles by (score, stage, reason), from its metrics."""
        out: dict[str, float] = {}
        for line in (self.metrics() or "").splitlines():
            if line.startswith("dynamic_scoring_failures_total{"):
                labels, value = line.rsplit(" ", 1)
                if float(value):
                    out[labels] = float(value)
        return out

    def scorer_obj(self, name: str) -> dict[str, Any] | None:
        return self.hub.find(DS_V1A1, "DynamicScorer", name, HUB_NS)

    def work_summaries(self, cluster: str) -> list[dict[str, Any]] | None:
        """The summaries upstream's manager put in the cluster's ManifestWork (None: no work yet)."""
        work = self.hub.find(WORK_V1, "ManifestWork", CONFIG_WORK, cluster)
        if work is None:
            return None
        (cm,) = work["spec"]["workload"]["manifests"]
        assert cm["kind"] == "ConfigMap" and cm["metadata"]["namespace"] == UPSTREAM_NAMESPACE, cm
        found: list[dict[str, Any]] = json.loads(cm["data"]["summaries"] or "null") or []
        return found

    def delivered(self) -> list[dict[str, Any]]:
        """The summaries in the ConfigMap on cluster2 (what our agent reads)."""
        cm = self.spoke.find("v1", "ConfigMap", CONFIG, UPSTREAM_NAMESPACE)
        found: list[dict[str, Any]] = (
            json.loads(((cm or {}).get("data") or {}).get("summaries") or "null") or []
        )
        return found

    def delivered_summary(self, score: str) -> dict[str, Any] | None:
        return next((s for s in self.delivered() if s.get("scoreName") == score), None)

    def items(self, score: str) -> dict[str, int] | None:
        aps = self.hub.find(APS_V1A1, "AddOnPlacementScore", aps_name(score), CLUSTER)
        if aps is None:
            return None
        return {i["name"]: int(i["value"]) for i in (aps.get("status") or {}).get("scores") or []}

    def our_addon_absent(self) -> bool:
        return self.hub.find(ADDON_V1A1, "ClusterManagementAddOn", OUR_ADDON) is None and not any(
            m["metadata"]["name"] == OUR_ADDON for m in self.hub.items(ADDON_V1A1, "ManagedClusterAddOn")
        )

    # -- clean-up ----------------------------------------------------------------------------------
    def _gone(self, client: Client, api: str, kind: str, name: str, namespace: str | None = None) -> bool:
        try:
            return client.find(api, kind, name, namespace) is None
        except NotFound:  # the kind itself is gone
            return True

    def _delete_and_wait(
        self, client: Client, api: str, kind: str, name: str, namespace: str | None, timeout: float
    ) -> None:
        """Delete, wait for it to go; a finalizer whose controller could not act is then removed."""
        with contextlib.suppress(NotFound):
            client.delete(api, kind, name, namespace)
        try:
            wait_until(
                lambda: self._gone(client, api, kind, name, namespace),
                timeout=timeout,
                what=f"{kind} {namespace}/{name} gone",
            )
        except Exception:
            self.notes.append(f"{kind} {namespace}/{name} kept by a finalizer: removed by the test")
            with contextlib.suppress(NotFound):
                path = client.resource(api, kind).path(namespace, name)
                client.api.request("PATCH", path, body={"metadata": {"finalizers": None}}, content_type=MERGE)
            wait_until(
                lambda: self._gone(client, api, kind, name, namespace),
                timeout=60,
                what=f"{kind} {namespace}/{name} gone",
            )

    def stop(self) -> None:
        """Delete everything in the reverse order, while upstream's controllers still run (finalizers).

        Upstream's addon manager creates its agent Role and RoleBinding in the cluster's namespace
        without an owner, so they outlive the addon (observed, noted in `notes`); they are deleted
        here.  Idempotent: the clean-up test calls it, and the fixture again in case a test failed.
        """
        hub, spoke = self.hub, self.spoke
        served = not self._gone(hub, CRD_V1, "CustomResourceDefinition", CRDS[0])
        if served:
            for obj in hub.items(DS_V1A1, "DynamicScorer", HUB_NS):
                hub.delete(DS_V1A1, "DynamicScorer", obj["metadata"]["name"], HUB_NS)
            # upstream's manager withdraws its ManifestWorks and removes its finalizer
            self._delete_and_wait(hub, DS_V1A1, "DynamicScoringConfig", CONFIG, HUB_NS, 60)
        for cluster in CLUSTERS:
            self._delete_and_wait(hub, WORK_V1, "ManifestWork", CONFIG_WORK, cluster, 60)
        if self.agent is not None:
            self.agent.stop()
        # upstream's addon manager withdraws its ManifestWork (namespace, RBAC, Deployment on cluster2)
        self._delete_and_wait(hub, ADDON_V1A1, "ManagedClusterAddOn", ADDON, CLUSTER, 90)
        self._delete_and_wait(hub, WORK_V1, "ManifestWork", ADDON_WORK, CLUSTER, 60)
        self._delete_and_wait(hub, ADDON_V1A1, "ClusterManagementAddOn", ADDON, None, 60)
        if self.upstream is not None:
            self.upstream.stop()
        if self.scorer is not None:
            self.scorer.stop()
        # upstream's permission config creates these without an owner: nothing deletes them
        for kind in ("RoleBinding", "Role"):
            if not self._gone(hub, RBAC_V1, kind, UPSTREAM_RBAC, CLUSTER):
                self.notes.append(f"upstream's {kind} {CLUSTER}/{UPSTREAM_RBAC} outlived the addon")
                self._delete_and_wait(hub, RBAC_V1, kind, UPSTREAM_RBAC, CLUSTER, 30)
        for score in (NONE_SCORE, FULL_SCORE, HOST_SCORE):
            for cluster in CLUSTERS:
                self._delete_and_wait(hub, APS_V1A1, "AddOnPlacementScore", aps_name(score), cluster, 30)
        self._delete_and_wait(hub, ADDON_V1A1, "AddOnDeploymentConfig", ADC, HUB_NS, 30)
        self._delete_and_wait(hub, "v1", "Namespace", HUB_NS, None, 90)
        if not self.spoke_namespace_existed:
            self._delete_and_wait(spoke, "v1", "Namespace", UPSTREAM_NAMESPACE, None, 90)
        for name in self.crds_created:
            self._delete_and_wait(hub, CRD_V1, "CustomResourceDefinition", name, None, 60)


@pytest.fixture(scope="module")
def stack(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(control_plane, tmp_path_factory.mktemp("upstream-hub"))
    assert s.our_addon_absent(), "our addon is installed: its manager would fight upstream's"
    # upstream's manager sends cluster1 (the hub) a ConfigMap for this namespace: it must not exist there
    assert s.hub.find("v1", "Namespace", UPSTREAM_NAMESPACE) is None, (
        "the hub has the namespace dynamic-scoring"
    )
    try:
        s.start()
        yield s
    finally:
        s.stop()


# ------------------------------------------------------------------------------------- helpers
def timed(what: str, t0: float, check: Callable[[], Any], timeout: float, interval: float = 0.25) -> float:
    """Wait for `check`, print and return the seconds since `t0`."""
    wait_until(check, timeout=timeout, what=what, interval=interval)
    took = time.monotonic() - t0
    print(f"  {what}: {took:.1f} s")
    return took


def assert_clean_agent(s: Stack) -> None:
    """Nothing our agent asked the hub was refused under upstream's agent RBAC, and no cycle failed."""
    assert s.agent is not None and s.agent.alive, s.agent_log()[-3000:]
    assert s.forbidden_lines() == [], s.forbidden_lines()
    assert s.failures() == {}, s.failures()


def none_scorer(s: Stack) -> dict[str, Any]:
    """The None-mode DynamicScorer: everything in the spec."""
    assert s.scorer is not None
    s.scorer.results["none"] = [
        {"metric": {"node": "n1"}, "score": 42},
        {"metric": {"node": "n2"}, "score": 17},
    ]
    return {
        "apiVersion": DS_V1A1,
        "kind": "DynamicScorer",
        "metadata": {"name": NONE_SCORER, "namespace": HUB_NS},
        "spec": {
            "description": "None mode under upstream's hub",
            "configURL": f"{s.scorer.url}/none/config",
            "configSyncMode": "None",
            "source": {"type": "None"},
            "scoring": {
                "host": s.scorer.url,
                "path": "/none/score",
                "params": {"name": NONE_SCORE, "interval": INTERVAL},
            },
            "scoreDimensionFormat": "${scoreName}-${node}",
        },
    }


def full_scorer(s: Stack) -> dict[str, Any]:
    """The Full-mode DynamicScorer whose `/config` is the scorer library's (no `scoring.host`)."""
    assert s.scorer is not None
    # The /config of this project's scorer library (what the sample scorers serve): no scoring.host
    # unless advertised, so upstream's manager uses the origin of configURL, as upstream's sample does.
    app = ScorerApp(
        score=lambda request: [],
        name=FULL_SCORE,
        description="Full mode under upstream's hub",
        source_type="None",
        scoring_path="/full/score",
        interval=INTERVAL,
    )
    config = json.loads(app.config().model_dump_json())
    assert config["scoring"]["host"] == ""
    s.scorer.configs["full"] = config
    s.scorer.results["full"] = [{"metric": {}, "score": 73}]
    return {
        "apiVersion": DS_V1A1,
        "kind": "DynamicScorer",
        "metadata": {"name": FULL_SCORER, "namespace": HUB_NS},
        # nothing of the scoring in the spec: score name, path, interval come from /config only
        "spec": {
            "description": "Full mode under upstream's hub",
            "configURL": f"{s.scorer.url}/full/config",
            "configSyncMode": "Full",
        },
    }


def host_scorer(s: Stack) -> dict[str, Any]:
    """The Full-mode DynamicScorer whose `/config` names a `scoring.host`."""
    assert s.scorer is not None
    config = {
        "name": HOST_SCORER,
        "description": "Full mode with scoring.host",
        "source": {"type": "None", "path": "", "params": {"query": "", "range": 0, "step": 0}},
        "scoring": {
            "host": s.scorer.url,
            "path": "/host/score",
            "params": {"name": HOST_SCORE, "interval": INTERVAL},
        },
    }
    s.scorer.configs["host"] = config
    s.scorer.results["host"] = [{"metric": {}, "score": 55}]
    return {
        "apiVersion": DS_V1A1,
        "kind": "DynamicScorer",
        "metadata": {"name": HOST_SCORER, "namespace": HUB_NS},
        "spec": {
            "description": "Full mode with scoring.host",
            "configURL": f"{s.scorer.url}/host/config",
            "configSyncMode": "Full",
        },
    }


@pytest.fixture(scope="module")
def applied(stack: Stack) -> float:
    """The three DynamicScorers, applied at once; the time they were applied.

    Upstream's manager probes and syncs every 30 s: one wait serves all three stories.
    """
    objs = [none_scorer(stack), full_scorer(stack), host_scorer(stack)]
    t0 = time.monotonic()
    for obj in objs:
        stack.hub.apply(obj)
    return t0


# ------------------------------------------------------------------------------------- the story
def test_none_mode_upstream_hub_feeds_our_agent_and_withdrawing_removes_the_score(
    stack: Stack, applied: float
) -> None:
    """None mode: the spec alone, probed by upstream's manager, scored by our agent under upstream's RBAC.

    The rollback case: upstream's hub decides, our agent (with the credentials upstream's addon got)
    publishes; withdrawing the DynamicScorer must withdraw its score, or Placement keeps using it.
    """
    s = stack
    assert s.scorer is not None and s.upstream is not None
    print()
    t0 = applied
    timed(
        "probed Active by upstream's manager",
        t0,
        lambda: ((s.scorer_obj(NONE_SCORER) or {}).get("status") or {}).get("healthStatus") == "Active",
        timeout=SYNC + 30,
    )
    assert s.scorer.count("GET", "/healthz") >= 1
    timed("summary in the ConfigMap on cluster2", t0, lambda: s.delivered_summary(NONE_SCORE), timeout=60)
    summary = s.delivered_summary(NONE_SCORE)
    assert summary is not None
    assert summary["scoringEndpoint"] == f"{s.scorer.url}/none/score", summary
    assert (summary["sourceType"], summary["scoringInterval"]) == ("None", INTERVAL), summary
    expected = {f"{NONE_SCORE}-n1": 42, f"{NONE_SCORE}-n2": 17}
    timed("our agent's AddOnPlacementScore on the hub", t0, lambda: s.items(NONE_SCORE) == expected, 60)
    # the credentials are the ones issued to upstream's addon, bound by upstream's Role only
    cert = x509.load_pem_x509_certificate((s.workdir / "hub-kubeconfig" / "tls.crt").read_bytes())
    (cn,) = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    assert str(cn.value).startswith(f"system:open-cluster-management:cluster:{CLUSTER}:addon:{ADDON}:agent:")
    role = s.hub.get(RBAC_V1, "Role", UPSTREAM_RBAC, CLUSTER)
    assert any("addonplacementscores" in r.get("resources", []) for r in role["rules"]), role
    mca = s.hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, CLUSTER)

    def owner_uids() -> list[str]:
        aps = s.hub.get(APS_V1A1, "AddOnPlacementScore", aps_name(NONE_SCORE), CLUSTER)
        return [o["uid"] for o in aps["metadata"].get("ownerReferences") or []]

    # our agent read upstream's ManagedClusterAddOn (upstream's Role allows it) and owns the score by it;
    # a score written before it knew the owner is adopted in a metadata patch of its own: wait for it
    wait_value(
        owner_uids,
        lambda uids: uids == [mca["metadata"]["uid"]],
        timeout=30,
        what=f"the score owned by ManagedClusterAddOn {CLUSTER}/{ADDON} (uid {mca['metadata']['uid']}) only",
    )
    assert s.scorer.count("POST", "/none/score") >= 1
    assert_clean_agent(s)

    t1 = time.monotonic()
    s.hub.delete(DS_V1A1, "DynamicScorer", NONE_SCORER, HUB_NS)
    timed("summary withdrawn from cluster2", t1, lambda: s.delivered_summary(NONE_SCORE) is None, 60)
    timed("score removed after the DynamicScorer's deletion", t1, lambda: s.items(NONE_SCORE) is None, 60)
    assert_clean_agent(s)
    assert s.our_addon_absent()


def test_full_mode_upstream_manager_syncs_config_without_scoring_host(stack: Stack, applied: float) -> None:
    """Full mode: upstream's manager fetches `/config` and distributes what it says, not the spec.

    The spec names no score, path or interval, so a score on the hub can only come from the synced
    `/config`, which is the one this project's scorer library serves (as the sample scorers do): no
    `scoring.host`, so the origin of configURL is used, as with upstream's sample scorer.
    """
    s = stack
    assert s.scorer is not None
    config = s.scorer.configs["full"]
    print()
    t0 = applied
    timed(
        "/config synced by upstream's manager",
        t0,
        lambda: ((s.scorer_obj(FULL_SCORER) or {}).get("status") or {}).get("lastSyncedConfig"),
        timeout=SYNC + 30,
    )
    # the probe's verdict may land in another status write than the sync: wait for it as well
    status = wait_value(
        lambda: (s.scorer_obj(FULL_SCORER) or {})["status"],
        lambda st: st.get("healthStatus") == "Active",
        timeout=SYNC + 30,
        what=f"{FULL_SCORER} healthStatus Active",
    )
    synced = status["lastSyncedConfig"]
    assert (synced["scoring"]["path"], synced["scoring"]["params"]) == (
        "/full/score",
        config["scoring"]["params"],
    )
    assert not synced["scoring"].get("host"), synced
    assert s.scorer.count("GET", "/full/config") >= 1
    timed("summary in the ConfigMap on cluster2", t0, lambda: s.delivered_summary(FULL_SCORE), timeout=60)
    summary = s.delivered_summary(FULL_SCORE)
    assert summary is not None
    assert summary["name"] == FULL_SCORER
    assert summary["scoringEndpoint"] == f"{s.scorer.url}/full/score", summary
    assert (summary["sourceType"], summary["scoringInterval"]) == ("None", INTERVAL), summary
    timed(
        "our agent's AddOnPlacementScore on the hub", t0, lambda: s.items(FULL_SCORE) == {FULL_SCORE: 73}, 60
    )
    assert s.scorer.count("POST", "/full/score") >= 1
    assert_clean_agent(s)

    t1 = time.monotonic()
    s.hub.delete(DS_V1A1, "DynamicScorer", FULL_SCORER, HUB_NS)
    timed("score removed after the DynamicScorer's deletion", t1, lambda: s.items(FULL_SCORE) is None, 60)
    assert_clean_agent(s)


def test_full_mode_with_scoring_host_upstream_drops_the_scorer(stack: Stack, applied: float) -> None:
    """Observed upstream behaviour, not ours: a synced `scoring.host` makes upstream's manager build
    the scoring URL from the synced `source.host` instead; with no source host (a None source) the
    URL is the bare path, invalid, and the scorer is left out of every cluster's summaries."""
    s = stack
    assert s.scorer is not None and s.upstream is not None
    config = s.scorer.configs["host"]
    print()
    t0 = applied
    timed(
        "/config synced by upstream's manager",
        t0,
        lambda: ((s.scorer_obj(HOST_SCORER) or {}).get("status") or {}).get("lastSyncedConfig"),
        timeout=SYNC + 30,
    )
    status = wait_value(
        lambda: (s.scorer_obj(HOST_SCORER) or {})["status"],
        lambda st: st.get("healthStatus") == "Active",
        timeout=SYNC + 30,
        what=f"{HOST_SCORER} healthStatus Active",
    )
    assert status["lastSyncedConfig"] == config, status  # the sync itself works, scoring.host included
    # the summaries are rebuilt on that status update; upstream's manager logs why it skips the scorer
    # (its message names the source endpoint; the URL it rejects is url.JoinPath("", "/host/score"))
    dropped = re.compile(
        rf'"Failed to get valid Source Full Endpoint" err="invalid Scoring Full URL: host/score" '
        rf'scorer="{HOST_SCORER}"'
    )
    timed(
        "upstream's manager logging the scorer's scoring URL as invalid",
        t0,
        lambda: dropped.search(s.upstream.log("manager") if s.upstream else ""),
        timeout=60,
    )
    for cluster in CLUSTERS:
        # the works are written after that log line, by upstream's manager: wait for each to exist
        summaries = wait_value(
            partial(s.work_summaries, cluster),
            lambda found: found is not None,
            timeout=60,
            what=f"upstream's summaries ManifestWork in {cluster}",
        )
        assert summaries is not None
        assert [x["name"] for x in summaries if x["name"] == HOST_SCORER] == [], summaries
    assert s.delivered_summary(HOST_SCORE) is None, s.delivered()
    assert s.items(HOST_SCORE) is None
    assert s.scorer.count("POST", "/host/score") == 0
    assert_clean_agent(s)


def test_cleanup_stops_everything_and_leaves_the_hub_as_found(stack: Stack) -> None:
    """Every process stops, every object goes (hub, cluster2): the next module finds the hub as found."""
    s = stack
    assert s.our_addon_absent()
    print()
    t0 = time.monotonic()
    s.stop()
    print(f"  clean-up: {time.monotonic() - t0:.1f} s")
    for note in s.notes:
        print(f"  observed: {note}")
    # upstream's controllers still ran when their objects were deleted, so their finalizers went
    assert [n for n in s.notes if "finalizer" in n] == [], s.notes
    assert s.agent is not None and not s.agent.alive
    assert s.upstream is not None and not s.upstream.alive
    assert [p for p in s.pgids if group_alive(p)] == []
    assert s.scorer is not None and not port_in_use(s.scorer.port)
    assert not port_in_use(s.metrics_port) and not port_in_use(s.upstream.probe_port)
    after = snapshot(s.hub, s.spoke)
    assert {k: v for k, v in after.items() if v != s.before[k]} == {}, {
        k: (s.before[k], v) for k, v in after.items() if v != s.before[k]
    }
