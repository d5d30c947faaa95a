"""Our hub with the upstream Go agent on cluster2 and ours on cluster1, and cluster2 switched both ways.

The installation is the addon lifecycle story's own fixture (`kubectl apply -k manifests/`, two
manager replicas run by the runner, `clusteradm addon enable` on both clusters).  cluster2 gets an
AddOnDeploymentConfig with `agentInstallNamespace: dynamic-scoring` (where the upstream agent
reads its summaries) and `AgentReplicas: "0"` (our agent Deployment scaled to 0), and the real
upstream agent from the tools cache (`e2e/upstream.py`, addon-contrib at the pinned commit) runs
for cluster2 with the hub credentials the klusterlet issued to our addon.

One DynamicScorer with source `None` points both agents at a scoring API on loopback that tells
them apart by their User-Agent (Go's HTTP client against httpx) and answers each with a value the
test sets, so a Placement choosing one cluster by the score shows whose score it counted.

The story, in file order:
1. both clusters' scores reach the Placement, and the hub reports the upstream agent's scores (the
   DynamicScorer's per-cluster status and `dynamic-scoring status`) instead of `NoReportYet`;
2. cluster2 moves to our agent and back; after the move back, the `validUntil` our agent had
   written passes without pinning cluster2's score at 0;
3. disabling the addon on cluster2 removes its AddOnPlacementScore.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.kube.timestamps import parse_time
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.ocm.score_labels import written_by_agent
from e2e.loopback import LoopbackServer, QuietHandler
from e2e.ocm import label_selected_cluster_set
from e2e.procs import wait_until, wait_value
from e2e.tests.test_addon_lifecycle import (  # the lifecycle story's installation, reused as is
    ADDON,
    ADDON_V1A1,
    MANAGER_NS,
    WORK_V1,
    Env,
    adc_ref,
    conditions,
    env,
)
from e2e.upstream import UPSTREAM_NAMESPACE, UpstreamAgent, write_hub_kubeconfig

__all__ = ["env"]  # the fixture, imported so this module gets its own installation

pytestmark = [
    pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning"),
    pytest.mark.late_tools,
]

DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
CLUSTER_V1B2 = "cluster.open-cluster-management.io/v1beta2"
SCORER = "e2e-interop"
SCORE = "interop_load"
APS = aps_name(SCORE)
ADC = "upstream-agent"
SAMPLE_ADC = Path(__file__).resolve().parents[2] / "samples" / "migration" / "upstream-agent-cluster.yaml"
NS = "interop-e2e"
SET = "interop-e2e"
MEMBER_KEY = "interop.test/member"
PLACEMENT = "interop"
INTERVAL = 5
VALID_FOR = 15
HUB_SECRET = f"{ADDON}-hub-kubeconfig"
CLI = Path(sys.executable).parent / "dynamic-scoring"


class Scorer:
    """The scoring API on loopback: `POST /score` answers the value set for the calling agent."""

    def __init__(self) -> None:
        self.values = {"upstream": 50, "ours": 50}
        self.calls = {"upstream": 0, "ours": 0}
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # the hub's probe and /config (None mode reads nothing)
                self.reply(200, b"{}")

            def do_POST(self) -> None:
                self.body()
                agent = (
                    "upstream" if self.headers.get("User-Agent", "").startswith("Go-http-client") else "ours"
                )
                outer.calls[agent] += 1
                self.reply(200, {"results": [{"metric": {}, "score": outer.values[agent]}]})

        self.loopback = LoopbackServer(Handler, name="interop-scorer")
        self.port = self.loopback.port
        self.url = self.loopback.url

    def stop(self) -> None:
        self.loopback.stop()


class Interop:
    """The installation plus this module's scorer, Placement, cluster2 config and upstream agent."""

    def __init__(self, env: Env, scorer: Scorer, workdir: Path) -> None:
        self.env = env
        self.scorer = scorer
        self.workdir = workdir
        self.upstream: UpstreamAgent | None = None

    def set_agent(self, upstream: bool) -> None:
        """cluster2's agent: upstream's (the sample ADC as documented) or ours (its AgentReplicas removed)."""
        adc = yaml.safe_load(SAMPLE_ADC.read_text())
        assert adc["metadata"] == {"name": ADC, "namespace": "cluster2"}
        assert adc["spec"]["agentInstallNamespace"] == UPSTREAM_NAMESPACE
        if not upstream:
            adc["spec"]["customizedVariables"] = []
        self.env.hub.apply(adc)

    def start_upstream(self) -> None:
        assert self.upstream is None
        spoke = self.env.spokes["cluster2"]
        hub_kubeconfig = write_hub_kubeconfig(
            spoke, UPSTREAM_NAMESPACE, HUB_SECRET, self.workdir / "hub-kubeconfig"
        )
        self.upstream = UpstreamAgent(
            self.workdir,
            "cluster2",
            hub_kubeconfig,
            self.env.kubeconfigs["cluster2"],
            addon_name=ADDON,
            ports=[self.scorer.port],
        ).start()

    def stop_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.stop()
            self.upstream = None

    def aps(self, cluster: str) -> dict[str, Any] | None:
        return self.env.hub.find(APS_V1A1, "AddOnPlacementScore", APS, cluster)

    def value(self, cluster: str) -> int | None:
        items = ((self.aps(cluster) or {}).get("status") or {}).get("scores") or []
        return next((int(i["value"]) for i in items if i.get("name") == SCORE), None)

    def decision(self) -> list[str]:
        found = self.env.hub.items(
            CLUSTER_V1B1,
            "PlacementDecision",
            NS,
            label_selector=f"cluster.open-cluster-management.io/placement={PLACEMENT}",
        )
        return sorted(d["clusterName"] for p in found for d in (p.get("status") or {}).get("decisions") or [])

    def our_agent_runs_on_cluster2(self) -> bool:
        return self.env.agent_pod("cluster2") is not None

    def cluster_report(self, cluster: str) -> dict[str, Any]:
        obj = self.env.hub.get(DS_V1A1, "DynamicScorer", SCORER, MANAGER_NS)
        entries = {e["clusterName"]: e for e in (obj.get("status") or {}).get("clusters") or []}
        return dict(entries.get(cluster) or {})


def _deployment_replicas(env: Env, cluster: str) -> int | None:
    work = env.hub.find(WORK_V1, "ManifestWork", f"addon-{ADDON}-deploy-0", cluster)
    for m in ((work or {}).get("spec") or {}).get("workload", {}).get("manifests") or []:
        if m["kind"] == "Deployment":
            return int(m["spec"].get("replicas", 1))
    return None


@pytest.fixture(scope="module")
def interop(env: Env, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Interop]:
    hub = env.hub
    scorer = Scorer()
    spoke = env.spokes["cluster2"]
    namespace_existed = spoke.find("v1", "Namespace", UPSTREAM_NAMESPACE) is not None
    it = Interop(env, scorer, tmp_path_factory.mktemp("interop"))
    try:
        hub.apply(
            {
                "apiVersion": DS_V1A1,
                "kind": "DynamicScorer",
                "metadata": {"name": SCORER, "namespace": MANAGER_NS},
                "spec": {
                    "configURL": f"{scorer.url}/config",
                    "configSyncMode": "None",
                    "source": {"type": "None"},
                    "scoring": {
                        "host": scorer.url,
                        "path": "/score",
                        "params": {"name": SCORE, "interval": INTERVAL},
                    },
                    "scoreDimensionFormat": "${scoreName}",
                    "validForSeconds": VALID_FOR,
                },
            }
        )
        hub.apply(
            {
                "apiVersion": DS_V1A1,
                "kind": "DynamicScoringConfig",
                "metadata": {"name": "dynamic-scoring-config", "namespace": MANAGER_NS},
                "spec": {},
            }
        )
        it.set_agent(upstream=True)
        env.patch_mca_configs("cluster2", [adc_ref("cluster2", ADC)])
        hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        hub.apply(label_selected_cluster_set(SET, MEMBER_KEY))
        for cluster in ("cluster1", "cluster2"):
            hub.api.request(
                "PATCH",
                f"/apis/cluster.open-cluster-management.io/v1/managedclusters/{cluster}",
                body={"metadata": {"labels": {MEMBER_KEY: "yes"}}},
                content_type="application/merge-patch+json",
            )
        hub.apply(
            {
                "apiVersion": CLUSTER_V1B2,
                "kind": "ManagedClusterSetBinding",
                "metadata": {"name": SET, "namespace": NS},
                "spec": {"clusterSet": SET},
            }
        )
        hub.apply(
            {
                "apiVersion": CLUSTER_V1B1,
                "kind": "Placement",
                "metadata": {"name": PLACEMENT, "namespace": NS},
                "spec": {
                    "numberOfClusters": 1,
                    "clusterSets": [SET],
                    "prioritizerPolicy": {
                        "mode": "Exact",
                        "configurations": [
                            {
                                "scoreCoordinate": {
                                    "type": "AddOn",
                                    "addOn": {"resourceName": APS, "scoreName": SCORE},
                                },
                                "weight": 1,
                            }
                        ],
                    },
                },
            }
        )
        yield it
    finally:
        it.stop_upstream()
        hub.delete("v1", "Namespace", NS)
        for cluster in ("cluster1", "cluster2"):
            hub.api.request(
                "PATCH",
                f"/apis/cluster.open-cluster-management.io/v1/managedclusters/{cluster}",
                body={"metadata": {"labels": {MEMBER_KEY: None}}},
                content_type="application/merge-patch+json",
            )
        hub.delete(CLUSTER_V1B2, "ManagedClusterSet", SET)
        if env.mca("cluster2") is not None:
            env.patch_mca_configs("cluster2", None)
        hub.delete(ADDON_V1A1, "AddOnDeploymentConfig", ADC, "cluster2")
        hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", MANAGER_NS)
        hub.delete(DS_V1A1, "DynamicScorer", SCORER, MANAGER_NS)
        for cluster in ("cluster1", "cluster2"):
            hub.delete(APS_V1A1, "AddOnPlacementScore", APS, cluster)
        if not namespace_existed:
            spoke.delete("v1", "Namespace", UPSTREAM_NAMESPACE)
        scorer.stop()


def test_upstream_agent_on_cluster2_and_ours_on_cluster1_both_reach_the_placement(interop: Interop) -> None:
    it = interop
    env = it.env
    wait_until(
        lambda: _deployment_replicas(env, "cluster2") == 0 and not it.our_agent_runs_on_cluster2(),
        timeout=120,
        what="cluster2's agent Deployment delivered with 0 replicas and no agent of ours running there",
    )
    # The documented order: the hub prepares the score first, so the upstream agent only updates its
    # status (an object the upstream agent created itself is another owner's without the opt-in).
    wait_until(
        lambda: (aps := it.aps("cluster2")) is not None and written_by_agent(aps, ADDON),
        timeout=60,
        what="cluster2's AddOnPlacementScore prepared by the hub",
    )
    it.start_upstream()
    it.scorer.values.update(upstream=70, ours=30)
    wait_until(
        lambda: it.value("cluster2") == 70 and it.value("cluster1") == 30,
        timeout=120,
        what="cluster2 scored by the upstream agent (70) and cluster1 by ours (30)",
    )
    assert it.upstream is not None and it.upstream.alive
    aps = it.aps("cluster2")
    assert aps is not None
    assert written_by_agent(aps, ADDON), aps["metadata"]  # prepared by the hub
    assert "validUntil" not in aps["status"] and not aps["status"].get("conditions")
    wait_until(
        lambda: it.decision() == ["cluster2"], timeout=60, what="the Placement choosing cluster2 (70 > 30)"
    )

    it.scorer.values.update(upstream=10, ours=90)
    wait_until(
        lambda: it.decision() == ["cluster1"], timeout=60, what="the Placement choosing cluster1 (90 > 10)"
    )
    wait_until(lambda: it.value("cluster2") == 10, timeout=60, what="the upstream agent's next score (10)")

    report = wait_until(
        lambda: (r := it.cluster_report("cluster2")).get("reason") == "ScoresWithoutCondition" and r,
        timeout=90,
        what="cluster2's report on the DynamicScorer",
    )
    assert report["status"] == "True", report
    # the Distributed condition is re-read: wait for it rather than take one read after the report
    wait_value(
        lambda: conditions(env.hub.get(DS_V1A1, "DynamicScorer", SCORER, MANAGER_NS)).get("Distributed"),
        lambda distributed: "scoring on 2 of 2" in (distributed or {}).get("message", ""),
        timeout=60,
        what="the DynamicScorer's Distributed condition saying 'scoring on 2 of 2'",
    )

    out = subprocess.run(
        [
            str(CLI),
            "status",
            "--cluster",
            "cluster2",
            "-o",
            "json",
            "--kubeconfig",
            str(env.kubeconfigs["cluster1"]),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    (cluster,) = json.loads(out.stdout)["clusters"]
    (score,) = [s for s in cluster["scores"] if s["name"] == APS]
    assert score["items"] == [{"name": SCORE, "value": 10}], score
    assert score["condition"] is None and score["validUntil"] is None


def test_cluster2_moves_to_our_agent_and_back_without_a_stale_expiry(interop: Interop) -> None:
    it = interop
    env = it.env
    it.scorer.values.update(upstream=80, ours=20)
    it.stop_upstream()
    it.set_agent(upstream=False)
    wait_until(
        lambda: (
            it.our_agent_runs_on_cluster2()
            and it.value("cluster2") == 20
            and "validUntil" in ((it.aps("cluster2") or {}).get("status") or {})
        ),
        timeout=120,
        what="our agent running on cluster2 and writing its score (20) with a validUntil",
    )
    wait_value(
        lambda: conditions(it.aps("cluster2")).get("ScoresUpToDate", {}).get("status"),
        lambda status: status == "True",
        timeout=60,
        what="ScoresUpToDate=True on cluster2's score, written by our agent",
    )

    # and back: the rollback a cautious user does
    it.set_agent(upstream=True)
    wait_until(
        lambda: not it.our_agent_runs_on_cluster2() and _deployment_replicas(env, "cluster2") == 0,
        timeout=120,
        what="our agent on cluster2 stopped",
    )
    last = parse_time(((it.aps("cluster2") or {}).get("status") or {}).get("validUntil"))
    it.start_upstream()
    wait_until(
        lambda: it.value("cluster2") == 80,
        timeout=120,
        what="cluster2 scored by the upstream agent again (80)",
    )
    # what only our agent writes (validUntil, the condition) goes in the hub manager's own status
    # patch after the upstream agent's write: wait for it
    wait_value(
        lambda: (it.aps("cluster2") or {}).get("status") or {},
        lambda status: "validUntil" not in status and not status.get("conditions"),
        timeout=60,
        what="cluster2's score without validUntil and conditions under the upstream agent",
    )
    wait_until(
        lambda: it.decision() == ["cluster2"], timeout=60, what="the Placement choosing cluster2 (80 > 20)"
    )
    # Past the validUntil our agent last wrote (plus the expiry controller's margin): had it stayed,
    # Placement would now count cluster2 as 0 and choose cluster1.
    if last is not None:
        wait_until(
            lambda: dt.datetime.now(dt.UTC) > last + dt.timedelta(seconds=3),
            timeout=VALID_FOR + 10,
            what="our agent's last validUntil passed",
            interval=0.5,
        )
    time_past = time.monotonic()
    wait_until(
        lambda: it.decision() == ["cluster2"] and time.monotonic() - time_past > INTERVAL,
        timeout=INTERVAL + 30,
        what="cluster2 still chosen an interval after our agent's validUntil",
        interval=0.5,
    )
    assert it.value("cluster2") == 80
    meta = (it.aps("cluster2") or {}).get("metadata") or {}
    assert "dynamic-scoring.open-cluster-management.io/expired" not in (meta.get("annotations") or {})
    assert it.cluster_report("cluster2").get("reason") != "ScoresExpired"


def test_disabling_cluster2_removes_its_score(interop: Interop) -> None:
    it = interop
    it.stop_upstream()
    it.env.clusteradm("addon", "disable", "--names", ADDON, "--clusters", "cluster2")
    wait_until(lambda: it.aps("cluster2") is None, timeout=90, what="cluster2's score garbage-collected")
    assert it.aps("cluster1") is not None
