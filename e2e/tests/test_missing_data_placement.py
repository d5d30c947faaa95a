"""A Placement ranks the cluster without the metric last, because of the stated missing-data score.

On the session's control plane, with the addon installed from `manifests/` and enabled on both
clusters (the lifecycle story's fixture), real agents, one real Prometheus serving both clusters
(each agent substitutes its own name for `${cluster}` in the query), and a scoring API on loopback
that scores each series by its mean.  Only cluster1 has the series the query selects (shaped to -40).  With
`missingData: {score: -100}`, cluster2's agent writes -100 (reason NoData) without calling the
scorer, and an AddOn prioritizer picks cluster1 (-40 > -100).  Without it, cluster2 has no score,
which OCM counts as 0, and the same Placement picks cluster2 instead: the gap the default closes.
"""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.ocm.naming import aps_name
from e2e.controlplane import ControlPlane
from e2e.loadgen import LoadFile
from e2e.procs import Proc, free_port, wait_until, wait_value
from e2e.tests.test_addon_lifecycle import CLUSTERS, MANAGER_NS, Env, env

REPO = Path(__file__).resolve().parents[2]
DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
SCORE = "e2e_gpu_free"
SCORER = "e2e-gpu-free"
USER_NS = "e2e-missing-data"
PLACEMENT = "gpu-free"
METRIC_NS = "e2e-missing-data"
# One central Prometheus (cluster1's) for both agents; each agent puts its own name in the query, and
# only a pod on node cluster1-gpu exists, so cluster2's agent gets no series.
# The series is shaped to the score wanted: the scorer's mean of it is -40 on cluster1.
QUERY = f'container_cpu_usage_seconds_total{{namespace="{METRIC_NS}", node="${{cluster}}-gpu"}} * 0 - 40'

__all__ = ["env"]  # the fixture, imported so this module gets its own installation

pytestmark = pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning")


@pytest.fixture(scope="module")
def scorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`tests/component/scorer_app.py` on loopback: /mean/scoring scores each series by its mean."""
    port = free_port()
    workdir = tmp_path_factory.mktemp("missing-data-scorer")
    app = REPO / "tests" / "component" / "scorer_app.py"
    proc = Proc(
        "missing-data-scorer", [sys.executable, str(app), "--port", str(port)], workdir / "scorer.log"
    )
    proc.start()
    base = f"http://127.0.0.1:{port}"

    def call(method: str, path: str, body: bytes | None = None) -> bytes:
        request = urllib.request.Request(f"{base}{path}", data=body, method=method)
        with urllib.request.urlopen(request, timeout=5) as resp:
            data: bytes = resp.read()
            return data

    def healthy() -> bool:
        try:
            return call("GET", "/healthz") == b"ok"
        except OSError:
            return False

    try:
        wait_until(healthy, timeout=30, what="the scorer's /healthz", proc=proc)
        yield base
    finally:
        proc.stop()


def dynamic_scorer(base: str, prometheus: str, *, default: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "configURL": f"{base}/config",
        "configSyncMode": "None",
        "source": {
            "host": prometheus,
            "params": {"query": QUERY, "range": 60},
        },
        "scoring": {"host": base, "path": "/mean/scoring", "params": {"name": SCORE, "interval": 5}},
    }
    if default is not None:
        spec["missingData"] = {"score": default}
    return {
        "apiVersion": DS_V1A1,
        "kind": "DynamicScorer",
        "metadata": {"name": SCORER, "namespace": MANAGER_NS},
        "spec": spec,
    }


PLACEMENT_OBJECTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": USER_NS}},
    {
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": "global", "namespace": USER_NS},
        "spec": {"clusterSet": "global"},
    },
    {
        "apiVersion": CLUSTER_V1B1,
        "kind": "Placement",
        "metadata": {"name": PLACEMENT, "namespace": USER_NS},
        "spec": {
            "clusterSets": ["global"],
            "numberOfClusters": 1,
            "prioritizerPolicy": {
                "mode": "Exact",
                "configurations": [
                    {
                        "scoreCoordinate": {
                            "type": "AddOn",
                            "addOn": {"resourceName": aps_name(SCORE), "scoreName": SCORE},
                        },
                        "weight": 1,
                    }
                ],
            },
        },
    },
]


def aps(env: Env, cluster: str) -> dict[str, Any]:
    found = env.hub.find(APS_V1A1, "AddOnPlacementScore", aps_name(SCORE), cluster)
    return (found or {}).get("status") or {}


def scores(env: Env, cluster: str) -> dict[str, int]:
    return {s["name"]: int(s["value"]) for s in aps(env, cluster).get("scores") or []}


def reason(env: Env, cluster: str) -> str:
    conds = [c for c in aps(env, cluster).get("conditions") or [] if c.get("type") == "ScoresUpToDate"]
    return str(conds[0].get("reason")) if conds else ""


def decision(env: Env) -> list[str]:
    decisions = env.hub.items(
        CLUSTER_V1B1,
        "PlacementDecision",
        USER_NS,
        label_selector=f"cluster.open-cluster-management.io/placement={PLACEMENT}",
    )
    return sorted(
        d["clusterName"] for pd in decisions for d in (pd.get("status") or {}).get("decisions") or []
    )


def test_the_cluster_without_the_metric_ranks_last_because_of_the_default_score(
    env: Env, control_plane: ControlPlane, scorer: str
) -> None:
    infos = {c: control_plane.clusters[c] for c in CLUSTERS}
    if not all(i.prometheus_url and i.load_file for i in infos.values()):
        pytest.skip("needs the per-cluster Prometheus servers (DS_E2E_PROMETHEUS=1)")
    load_file = infos["cluster1"].load_file
    assert load_file is not None
    load = LoadFile(load_file)
    hub = env.hub
    load.set_cpu(METRIC_NS, "gpu-probe", 0.5, node="cluster1-gpu")
    hub.apply(
        {
            "apiVersion": DS_V1A1,
            "kind": "DynamicScoringConfig",
            "metadata": {"name": "dynamic-scoring-config", "namespace": MANAGER_NS},
            "spec": {},
        }
    )
    try:
        hub.apply(dynamic_scorer(scorer, infos["cluster1"].prometheus_url, default=-100))
        for obj in PLACEMENT_OBJECTS:
            hub.apply(obj)

        wait_until(
            lambda: scores(env, "cluster1") == {SCORE: -40} and scores(env, "cluster2") == {SCORE: -100},
            timeout=120,
            what="-40 on cluster1 and the stated -100 on cluster2",
        )
        # the reasons are read anew: wait for them rather than read them once after the scores
        wait_value(
            lambda: (reason(env, "cluster1"), reason(env, "cluster2")),
            lambda reasons: reasons == ("Scored", "NoData"),
            timeout=60,
            what="ScoresUpToDate reasons Scored on cluster1 and NoData on cluster2",
        )
        wait_until(lambda: decision(env) == ["cluster1"], timeout=90, what="the Placement picking cluster1")

        # Without the stated score, cluster2's agent writes nothing, Placement counts 0 > -40.
        hub.apply(dynamic_scorer(scorer, infos["cluster1"].prometheus_url, default=None))
        wait_until(
            lambda: scores(env, "cluster2") == {} and reason(env, "cluster2") == "Scored",
            timeout=60,
            what="cluster2's APS without scores",
        )
        wait_until(lambda: decision(env) == ["cluster2"], timeout=90, what="the Placement picking cluster2")
    finally:
        load.remove(METRIC_NS, "gpu-probe", node="cluster1-gpu")
        hub.delete("v1", "Namespace", USER_NS)
        hub.delete(DS_V1A1, "DynamicScorer", SCORER, MANAGER_NS)
        hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", MANAGER_NS)
