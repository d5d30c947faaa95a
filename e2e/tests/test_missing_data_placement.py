"""A Placement ranks the cluster without the metric last, because of the stated missing-data score.

On the session's control plane, with the addon installed from `manifests/` and enabled on both
clusters (the lifecycle story's fixture), real agents, one real Prometheus serving both clusters
(each agent substitutes its own name for `${cluster}` in the query), and a scoring API on loopback
that scores each series by its mean.  Only cluster1 has the series the query selects (shaped to -40).  With
`missingData: {score: -100}`, cluster2's agent writes -100 (reason NoData) without calling the
scorer, and an AddOn prioritizer picks cluster1 (-40 > -100).  Without it, cluster2 has no score,
which OCM counts as 0, and the same Placement picks cluster2 instead: the gap the default closes.

The same installation then runs the use-case samples as a user applies them (docs/samples.md): the
GPU scorer, whose cluster without GPUs gets the missing-data score, and the cost scorer, whose
decision follows a change of price.
"""

from __future__ import annotations

import functools
import json
import sys
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

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


def healthy(base: str) -> bool:
    """Whether the scorer at ``base`` answers its health check."""
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as resp:
            return bool(resp.status == 200 and resp.read() == b"ok")
    except OSError:
        return False


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
    try:
        wait_until(lambda: healthy(base), timeout=30, what="the scorer's /healthz", proc=proc)
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


# -- the use-case samples: GPU jobs and the cheapest cluster with room ---------------------------

SAMPLES = REPO / "samples"
USE_NS = "e2e-use-cases"
GPU_LABELS = {"gpu": "0", "UUID": "GPU-e2e-0", "device": "nvidia0", "modelName": "NVIDIA A100-SXM4-40GB"}


def sample(path: str, kind: str, name: str | None = None) -> dict[str, Any]:
    """One document of a sample file, as the user would apply it."""
    docs = [d for d in yaml.safe_load_all((SAMPLES / path).read_text()) if d and d["kind"] == kind]
    found: list[dict[str, Any]] = [d for d in docs if name is None or d["metadata"]["name"] == name]
    assert found, (path, kind, name)
    return found[0]


def on_this_machine(scorer: dict[str, Any], base: str, prometheus: str, query: str) -> dict[str, Any]:
    """A sample DynamicScorer pointed at this machine: what a user edits for their own fleet.

    The scorer's address, the metrics store, and the query's cluster matcher: one Prometheus (cluster1's)
    holds both clusters' series here, as a central store would, so each agent selects its own with
    ``${cluster}``.  A short interval so that the test does not wait a minute per cycle.
    """
    spec = scorer["spec"]
    spec["configURL"] = f"{base}/config"
    spec["scoring"]["host"] = base
    spec["scoring"]["params"]["interval"] = 5
    spec["source"]["host"] = prometheus
    spec["source"]["params"].update(query=query, range=60, step=5)
    return scorer


def use_case_placement(path: str) -> dict[str, Any]:
    placement = sample(path, "Placement")
    placement["metadata"]["namespace"] = USE_NS
    return placement


def decided(env: Env, placement: str) -> list[str]:
    decisions = env.hub.items(
        CLUSTER_V1B1,
        "PlacementDecision",
        USE_NS,
        label_selector=f"cluster.open-cluster-management.io/placement={placement}",
    )
    return sorted(
        d["clusterName"] for pd in decisions for d in (pd.get("status") or {}).get("decisions") or []
    )


def score_of(env: Env, cluster: str, score: str) -> int | None:
    found = env.hub.find(APS_V1A1, "AddOnPlacementScore", aps_name(score), cluster) or {}
    values = {s["name"]: int(s["value"]) for s in (found.get("status") or {}).get("scores") or []}
    return values.get(score)


def prices(cluster1: float, cluster2: float) -> dict[str, Any]:
    """Both clusters' price in force from an hour ago until two hours ahead (UTC), the night rate 0.10 after.

    The sample DynamicScorer averages the price over the next hour (``horizon: 3600``), which then
    stays inside today's rate; the night rate only widens the table's spread to 0.10.
    """

    def hhmm(hours: float) -> str:
        return (datetime.now(UTC) + timedelta(hours=hours)).strftime("%H:%M")

    def day(price: float) -> dict[str, Any]:
        return {"rates": [{"from": hhmm(-1), "price": price}, {"from": hhmm(2), "price": 0.10}]}

    return {"cluster1": day(cluster1), "cluster2": day(cluster2)}


@pytest.fixture
def sample_scorers(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """The GPU and cost sample scorers on loopback, as `python -m`; the cost one reads a price file."""
    price_file = tmp_path / "prices.json"
    price_file.write_text(json.dumps(prices(0.30, 0.20)))
    procs = []
    bases = []
    for module, extra in (("gpu", []), ("cost", ["--prices", str(price_file)])):
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            f"dynamic_scoring.samples.scorers.{module}",
            "--port",
            str(port),
            *extra,
        ]
        proc = Proc(f"sample-{module}", argv, tmp_path / f"{module}.log", cwd=REPO)
        proc.start()
        procs.append(proc)
        bases.append(f"http://127.0.0.1:{port}")
    try:
        for proc, base in zip(procs, bases, strict=True):
            wait_until(
                functools.partial(healthy, base), timeout=30, what=f"{proc.name}'s /healthz", proc=proc
            )
        yield bases[0], bases[1], price_file
    finally:
        for proc in procs:
            proc.stop()


def test_the_gpu_and_cost_samples_place_on_real_agents_and_follow_gpus_and_prices(
    env: Env, control_plane: ControlPlane, sample_scorers: tuple[str, str, Path]
) -> None:
    """The GPU and cost samples (scorers, DynamicScorers, Placements) on both clusters' real agents.

    GPU: only cluster1 has a GPU (DCGM exporter gauges, 30 % busy): it scores 70 and cluster2, with no
    series, the sample's missing-data -100, so `most-free-gpus` picks cluster1; two idle GPUs arriving
    on cluster2 (100) move it there. Cost: both clusters a quarter busy (room), cluster2 cheaper (75)
    than cluster1 (50) over the next hour:
    `cheapest-with-room` picks cluster2; rewriting the price file (the ConfigMap's edit) so that
    cluster1 is the cheaper moves the decision to cluster1 (the table's spread then 0.10 to 0.20:
    100 and 50).
    """
    infos = {c: control_plane.clusters[c] for c in CLUSTERS}
    if not all(i.prometheus_url and i.load_file for i in infos.values()):
        pytest.skip("needs the per-cluster Prometheus servers (DS_E2E_PROMETHEUS=1)")
    gpu_base, cost_base, price_file = sample_scorers
    central, load_file = infos["cluster1"].prometheus_url, infos["cluster1"].load_file
    assert central and load_file
    load, hub = LoadFile(load_file), env.hub

    def gpu_card(cluster: str, index: int, util: float) -> None:
        labels = {
            **GPU_LABELS,
            "gpu": str(index),
            "UUID": f"GPU-{cluster}-{index}",
            "device": f"nvidia{index}",
        }
        labels |= {"Hostname": f"{cluster}-node", "cluster": cluster}
        for metric, value in (("DCGM_FI_DEV_GPU_UTIL", util), ("DCGM_FI_DEV_FB_USED", 0.0)):
            load.set_gauge(metric, labels, value)
        load.set_gauge("DCGM_FI_DEV_FB_FREE", labels, 40_960.0)

    gpu_card("cluster1", 0, 30.0)
    for cluster in CLUSTERS:
        load.set_cpu(USE_NS, f"{cluster}-app", 1.0, node=f"{cluster}-node")  # a quarter of 4 cores
    gpu_query = (
        '{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE", cluster="${cluster}"}'
    )
    cost_query = (
        "label_replace(sum(rate(container_cpu_usage_seconds_total"
        f'{{namespace="{USE_NS}", node="${{cluster}}-node"}}[1m]))'
        ' / sum(machine_cpu_cores), "cluster", "${cluster}", "", "")'
    )
    scorers = [
        on_this_machine(
            sample("crs/gpu-free-scorer.yaml", "DynamicScorer", "gpu-free"), gpu_base, central, gpu_query
        ),
        on_this_machine(
            sample("crs/cost-scorer.yaml", "DynamicScorer", "cost"), cost_base, central, cost_query
        ),
    ]
    placements = [use_case_placement("placement/gpu.yaml"), use_case_placement("placement/cost.yaml")]
    hub.apply(
        {
            "apiVersion": DS_V1A1,
            "kind": "DynamicScoringConfig",
            "metadata": {"name": "dynamic-scoring-config", "namespace": MANAGER_NS},
            "spec": {},
        }
    )
    try:
        for obj in scorers:
            hub.apply(obj)
        hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": USE_NS}})
        binding = sample("placement/placement.yaml", "ManagedClusterSetBinding")
        hub.apply({**binding, "metadata": {**binding["metadata"], "namespace": USE_NS}})
        for obj in placements:
            hub.apply(obj)

        wait_until(
            lambda: (
                (score_of(env, "cluster1", "gpu_free"), score_of(env, "cluster2", "gpu_free")) == (70, -100)
            ),
            timeout=120,
            what="gpu_free 70 on cluster1 (one GPU 30 % busy) and the missing-data -100 on cluster2",
        )
        wait_until(
            lambda: decided(env, "most-free-gpus") == ["cluster1"], timeout=90, what="GPU jobs on cluster1"
        )
        gpu_card("cluster2", 0, 0.0)
        gpu_card("cluster2", 1, 0.0)
        wait_until(
            lambda: decided(env, "most-free-gpus") == ["cluster2"], timeout=120, what="GPU jobs on cluster2"
        )
        assert score_of(env, "cluster2", "gpu_free") == 100

        # prices 0.30 and 0.20 in a table from 0.10 to 0.30, both clusters with room: 50 and 75
        wait_value(
            lambda: (score_of(env, "cluster1", "cost"), score_of(env, "cluster2", "cost")),
            lambda found: found == (50, 75),
            timeout=120,
            what="cost 50 on cluster1 (0.30) and 75 on cluster2 (0.20), both with room",
        )
        wait_until(
            lambda: decided(env, "cheapest-with-room") == ["cluster2"], timeout=90, what="cost on cluster2"
        )
        price_file.write_text(json.dumps(prices(0.10, 0.20)))  # cluster1's tariff drops
        wait_until(
            lambda: decided(env, "cheapest-with-room") == ["cluster1"], timeout=120, what="cost on cluster1"
        )
    finally:
        load.remove_gauges("DCGM_FI_DEV_")
        for cluster in CLUSTERS:
            load.remove(USE_NS, f"{cluster}-app", node=f"{cluster}-node")
        hub.delete("v1", "Namespace", USE_NS)
        for obj in scorers:
            hub.delete(DS_V1A1, "DynamicScorer", obj["metadata"]["name"], MANAGER_NS)
        hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", MANAGER_NS)
