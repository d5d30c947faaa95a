"""The samples on the real hub of the local control plane.

* The DynamicScorer and DynamicScoringConfig samples apply with ``--validate=strict`` and nothing
  is pruned; the plain Kubernetes objects of the samples pass a strict server-side dry run.
* OCM's own placement controller decides the sample Placement from AddOnPlacementScores created
  here, and the PlacementDecisions carry exactly what Argo CD's ``clusterDecisionResource``
  generator (through the sample ConfigMap) and OCM's Kueue admission check read: the label
  ``cluster.open-cluster-management.io/placement=<name>`` and ``status.decisions[].clusterName``.
  The decision follows when the scores flip.
* The GPU sample Placement ranks a cluster without GPUs (the DynamicScorer's missing-data score)
  below one whose GPUs are all busy, and follows free GPUs.
* The sample RBAC lets the ApplicationSet controller read PlacementDecisions in ``argocd`` only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from dynamic_scoring.contract.wire import ScorerConfig, ScoringResponse
from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.loadgen import LoadFile
from e2e.procs import Proc, free_port, wait_until

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CRDS = SAMPLES.parent / "manifests" / "crds"
GROUP = "dynamic-scoring.open-cluster-management.io"
PLACEMENT_LABEL = "cluster.open-cluster-management.io/placement"
CONSUMER_NAMESPACES = ("dynamic-scoring-samples", "argocd", "kueue-system")
APPSET_SA = "system:serviceaccount:argocd:argocd-applicationset-controller"


def load(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SAMPLES / path).read_text()) if d is not None]


def strict(hub: Kubectl, objects: list[dict[str, Any]], *extra: str) -> subprocess.CompletedProcess[str]:
    args = [str(hub.binary), f"--kubeconfig={hub.kubeconfig}", "apply", "--server-side", "--validate=strict"]
    return subprocess.run(
        [*args, *extra, "-f", "-"],
        input=yaml.safe_dump_all(objects),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Kubectl:
    assert control_plane.hub is not None and control_plane.tools is not None
    kubectl = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    kubectl.run("apply", "--server-side", "--force-conflicts", "-k", str(CRDS))
    for plural in ("dynamicscorers", "dynamicscoringconfigs"):
        kubectl.run("wait", "--for=condition=Established", "--timeout=60s", f"crd/{plural}.{GROUP}")
    return kubectl


@pytest.fixture(scope="module")
def consumer_namespaces(hub: Kubectl) -> Iterator[tuple[str, ...]]:
    """The namespaces the samples name (created once, removed with everything in them at the end)."""
    for ns in CONSUMER_NAMESPACES:
        hub.apply(yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    yield CONSUMER_NAMESPACES
    for ns in CONSUMER_NAMESPACES:
        hub.run("delete", "namespace", ns, "--wait=false")


@pytest.fixture
def scratch(hub: Kubectl) -> Iterator[str]:
    name = f"samples-{uuid.uuid4().hex[:8]}"
    hub.run("create", "namespace", name)
    yield name
    hub.run("delete", "namespace", name, "--wait=false")


def test_scorer_samples_apply_strictly_and_keep_every_field(hub: Kubectl, scratch: str) -> None:
    # In a scratch namespace, so that a manager running in this session does not act on them.
    objects = [*load("crs/cpu-headroom-scorer.yaml"), *load("crs/cpu-forecast-scorer.yaml")]
    objects += load("crs/gpu-free-scorer.yaml") + load("crs/cost-scorer.yaml") + load("crs/power-scorer.yaml")
    objects += load("crs/latency-scorer.yaml")
    objects += load("crs/dynamicscoringconfig.yaml")
    (openshift,) = load("openshift/cpu-headroom-scorer.yaml")
    openshift["metadata"]["name"] = "cpu-headroom-openshift"  # beside the plain one
    objects.append(openshift)
    for o in objects:
        o["metadata"]["namespace"] = scratch
    result = strict(hub, objects)
    assert result.returncode == 0, result.stderr
    for o in objects:
        kind = "dynamicscorer" if o["kind"] == "DynamicScorer" else "dynamicscoringconfig"
        stored = hub.get_json(f"{kind}.{GROUP}", o["metadata"]["name"], "-n", scratch)
        assert stored["spec"] == o["spec"], o["metadata"]["name"]


def test_plain_kubernetes_samples_pass_a_strict_server_dry_run(
    hub: Kubectl, consumer_namespaces: tuple[str, ...]
) -> None:
    objects = [
        *load("crs/sample-scorers.yaml"),
        *load("argocd/configmap.yaml"),
        *load("argocd/rbac.yaml"),
        *load("monitoring/agent-metrics-service.yaml"),
    ]
    result = strict(hub, [o for o in objects if o["kind"] == "Namespace"], "--dry-run=server")
    assert result.returncode == 0, result.stderr
    # A dry run creates nothing, so the namespaced objects need their namespaces to exist.
    namespaced = [o for o in objects if o["kind"] != "Namespace"]
    needed = {o["metadata"]["namespace"] for o in namespaced}
    existing = set(hub.run("get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}").split())
    created = needed - existing
    for ns in created:
        hub.run("create", "namespace", ns)
    try:
        result = strict(hub, namespaced, "--dry-run=server")
        assert result.returncode == 0, result.stderr
        # Strictness is real: an unknown field is refused.
        broken = json.loads(json.dumps(next(o for o in namespaced if o["kind"] == "Deployment")))
        broken["spec"]["replicaz"] = 2
        refused = strict(hub, [broken], "--dry-run=server")
        assert refused.returncode != 0 and "replicaz" in refused.stderr
    finally:
        for ns in created:
            hub.run("delete", "namespace", ns, "--wait=true", "--timeout=120s")


# -- Placement, Argo CD and Kueue readers -------------------------------------------------------------


def set_score(hub: Kubectl, cluster: str, aps: str, item: str, value: int) -> None:
    obj = {
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
        "kind": "AddOnPlacementScore",
        "metadata": {"name": aps, "namespace": cluster},
    }
    hub.run("apply", "--server-side", "-f", "-", stdin=json.dumps(obj))
    valid_until = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"status": {"scores": [{"name": item, "value": value}], "validUntil": valid_until}}
    hub.run(
        "patch", "addonplacementscore", aps, "-n", cluster, "--subresource=status", "--type=merge",
        "-p", json.dumps(status),
    )  # fmt: skip


def set_cluster_scores(hub: Kubectl, cluster: str, value: int) -> None:
    """Both seasonal samples' scores: the four-hour one (sample and Argo CD) and the one-hour one (Kueue)."""
    set_score(hub, cluster, "cpu-seasonal-4h", "cpu_seasonal_4h", value)
    set_score(hub, cluster, "cpu-seasonal", "cpu_seasonal", value)


def argocd_generator_clusters(hub: Kubectl, namespace: str, placement: str) -> list[str]:
    """What the clusterDecisionResource generator yields, read the way it reads (through the ConfigMap)."""
    [configmap] = load("argocd/configmap.yaml")
    data = configmap["data"]
    group = data["apiVersion"].split("/")[0]
    items = hub.get_json(f"{data['kind']}.{group}", "-n", namespace, "-l", f"{PLACEMENT_LABEL}={placement}")
    return sorted(
        entry[data["matchKey"]]
        for item in items["items"]
        for entry in item.get("status", {}).get(data["statusListKey"], [])
    )


def kueue_clusters(hub: Kubectl, placement: str) -> list[str]:
    """The clusters OCM's Kueue admission check puts into MultiKueueConfig.spec.clusters."""
    [check] = [
        o
        for o in load("kueue/multikueue.yaml")
        if o["kind"] == "AdmissionCheck"
        and o["spec"]["controllerName"] == "open-cluster-management.io/placement"
    ]
    params = check["spec"]["parameters"]
    assert params["name"] == placement
    hub.get_json(f"placements.{params['apiGroup']}", params["name"], "-n", "kueue-system")  # it exists
    items = hub.get_json(
        f"placementdecisions.{params['apiGroup']}",
        "-n",
        "kueue-system",
        "-l",
        f"{PLACEMENT_LABEL}={placement}",
    )
    return sorted(d["clusterName"] for i in items["items"] for d in i.get("status", {}).get("decisions", []))


@pytest.fixture
def placements(hub: Kubectl, consumer_namespaces: tuple[str, ...]) -> Iterator[str]:
    objects = [
        *load("placement/placement.yaml"),
        *load("argocd/placement.yaml"),
        *load("kueue/placement.yaml"),
    ]
    result = strict(hub, objects)
    assert result.returncode == 0, result.stderr
    try:
        yield "least-loaded"
    finally:
        for cluster in ("cluster1", "cluster2"):
            hub.run("delete", "addonplacementscore", "cpu-seasonal-4h", "cpu-seasonal", "-n", cluster,
                    "--ignore-not-found")  # fmt: skip
        for o in objects:
            if o["kind"] != "Namespace":
                resource = f"{o['kind'].lower()}s.cluster.open-cluster-management.io"
                name, namespace = o["metadata"]["name"], o["metadata"]["namespace"]
                hub.run("delete", resource, name, "-n", namespace, "--ignore-not-found")


def test_placement_decisions_carry_what_argocd_and_kueue_read_and_follow_a_flip(
    hub: Kubectl, placements: str
) -> None:
    # 10 x score: cluster1 600, cluster2 -400
    set_cluster_scores(hub, "cluster1", 60)
    set_cluster_scores(hub, "cluster2", -40)

    def decided() -> tuple[list[str], list[str], list[str]]:
        return (
            argocd_generator_clusters(hub, "dynamic-scoring-samples", placements),
            argocd_generator_clusters(hub, "argocd", placements),
            kueue_clusters(hub, placements),
        )

    wait_until(
        lambda: decided() == (["cluster1"],) * 3, timeout=90, what="every Placement to decide cluster1"
    )
    decisions = hub.get_json("placementdecisions", "-n", "argocd", "-l", f"{PLACEMENT_LABEL}={placements}")
    [decision] = decisions["items"]
    assert decision["metadata"]["labels"][PLACEMENT_LABEL] == placements
    assert [d["clusterName"] for d in decision["status"]["decisions"]] == ["cluster1"]

    # cluster2 leads by 5 points: the jobs' Placement (no Steady) moves; the recipe's (Steady 1 at
    # AddOn 10, a 10-point margin) keeps its cluster: 10 x 0 + 100 against 10 x 5.
    set_cluster_scores(hub, "cluster1", 0)
    set_cluster_scores(hub, "cluster2", 5)
    wait_until(
        lambda: decided()[2] == ["cluster2"], timeout=90, what="the Kueue Placement to move to cluster2"
    )
    assert decided()[:2] == (["cluster1"], ["cluster1"]), "a 5-point lead moved the margin recipe's Placement"

    # cluster2 leads by 30 points, past the margin: every copy follows.
    set_cluster_scores(hub, "cluster1", -20)
    set_cluster_scores(hub, "cluster2", 10)
    flipped = time.monotonic()
    wait_until(
        lambda: decided() == (["cluster2"],) * 3, timeout=90, what="every Placement to follow to cluster2"
    )
    print(
        f"score flip to all three decisions following: {time.monotonic() - flipped:.1f} s"
    )  # docs/samples.md


def test_the_gpu_placement_ranks_a_cluster_without_gpus_below_one_whose_gpus_are_busy(
    hub: Kubectl, placements: str
) -> None:
    # samples/placement/gpu.yaml beside the sample Placement, whose namespace and binding it uses.
    objects = load("placement/gpu.yaml")
    others = [*load("placement/cost.yaml"), *load("placement/ai-ran.yaml"), *load("placement/latency.yaml")]
    result = strict(hub, [*objects, *others], "--dry-run=server")  # every use-case Placement applies
    assert result.returncode == 0, result.stderr
    result = strict(hub, objects)
    assert result.returncode == 0, result.stderr
    [placement] = objects

    def decided() -> list[str]:
        return argocd_generator_clusters(hub, "dynamic-scoring-samples", placement["metadata"]["name"])

    try:
        # cluster1's GPUs are all busy (0); cluster2 has none, so its agent writes missingData (-100).
        # Without that score cluster2 would count 0 too, and the tie could go either way.
        set_score(hub, "cluster1", "gpu-free", "gpu_free", 0)
        set_score(hub, "cluster2", "gpu-free", "gpu_free", -100)
        wait_until(lambda: decided() == ["cluster1"], timeout=90, what="the GPU Placement to pick cluster1")
        set_score(hub, "cluster2", "gpu-free", "gpu_free", 50)  # GPUs arrive on cluster2, half of one free
        wait_until(
            lambda: decided() == ["cluster2"], timeout=90, what="the GPU Placement to move to cluster2"
        )
    finally:
        hub.run("delete", "placements.cluster.open-cluster-management.io", placement["metadata"]["name"],
                "-n", "dynamic-scoring-samples", "--ignore-not-found")  # fmt: skip
        for cluster in ("cluster1", "cluster2"):
            hub.run("delete", "addonplacementscore", "gpu-free", "-n", cluster, "--ignore-not-found")


def test_sample_rbac_lets_the_applicationset_controller_read_decisions_in_argocd_only(
    hub: Kubectl, consumer_namespaces: tuple[str, ...]
) -> None:
    result = strict(hub, load("argocd/rbac.yaml"))
    assert result.returncode == 0, result.stderr

    def can(
        verb: str, namespace: str, resource: str = "placementdecisions.cluster.open-cluster-management.io"
    ) -> str:
        return hub.run(
            "auth", "can-i", verb, resource, "-n", namespace, f"--as={APPSET_SA}", check=False
        ).strip()

    wait_until(lambda: can("list", "argocd") == "yes", timeout=30, what="the RoleBinding to take effect")
    assert can("watch", "argocd") == "yes" and can("get", "argocd") == "yes"
    assert can("update", "argocd") == "no" and can("delete", "argocd") == "no"
    assert can("list", "kueue-system") == "no"
    assert can("list", "argocd", "secrets") == "no"


# -- the simple scorer's default query on the control plane's own Prometheus -----------------------


def test_cpu_scorer_default_query_scores_each_clusters_load(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The load exporter's series, queried with the scorer's own /config query, score as the formula says.

    The window is shortened to one step (the /config's 300 s would include the exporter's first
    minute, when ``rate(...[1m])`` is still ramping up); the query is the scorer's, verbatim.
    """
    clusters = ("cluster1", "cluster2")
    if not all(control_plane.clusters[c].prometheus_url for c in clusters):
        pytest.skip("needs the per-cluster Prometheus servers (DS_E2E_PROMETHEUS=1)")
    port = free_port()
    proc = Proc(
        "sample-cpu",
        [sys.executable, "-m", "dynamic_scoring.samples.scorers.cpu", "--port", str(port)],
        tmp_path / "sample-cpu.log",
        cwd=SAMPLES.parent,
    ).start()
    base = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                return bool(response.read() == b"ok")

        wait_until(healthy, timeout=30, what="the sample scorer", proc=proc)
        with urllib.request.urlopen(f"{base}/config", timeout=5) as response:
            config = ScorerConfig.model_validate_json(response.read())

        def score(cluster: str) -> float | None:
            end = time.time()
            params = {
                "query": config.source.params.query,
                "start": repr(end - 15),
                "end": repr(end),
                "step": "15",
            }
            url = f"{control_plane.clusters[cluster].prometheus_url}{config.source.path}?{urlencode(params)}"
            with urllib.request.urlopen(url, timeout=10) as response:
                data = json.load(response)["data"]["result"]
            body = json.dumps({"data": data}).encode()
            request = urllib.request.Request(base + config.scoring.path, data=body, method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                results = ScoringResponse.model_validate_json(response.read()).results
            return results[0].score if results else None

        def expected(cluster: str) -> float:
            load_file = control_plane.clusters[cluster].load_file
            assert load_file is not None
            cores = sum(float(e["cores"]) for e in LoadFile(Path(load_file)).read())
            return 100 * (1 - min(cores / 4.0, 1.0))

        def converged() -> dict[str, float] | None:
            got = {c: score(c) for c in clusters}
            ok = all(v is not None and abs(v - expected(c)) < 0.5 for c, v in got.items())
            return {c: v for c, v in got.items() if v is not None} if ok else None

        # rate(...[1m]) is exact once the exporter has been scraped for a minute (1 s scrapes).
        final = wait_until(converged, timeout=180, interval=2, what="scores matching each cluster's load")
        print(f"cpu_headroom on the local clusters: {final}")  # docs/samples.md
    finally:
        proc.stop()


def test_the_sample_placement_says_why_it_selects_nothing_and_the_documented_fix_works(
    hub: Kubectl, placements: str
) -> None:
    """A hub whose clusters are not in `default` (docs/openshift.md, cluster sets), on OCM's controller.

    The sample Placement binds `default`, where ACM and `clusteradm init` put every cluster. Here
    both clusters move to a set of their own, as on a hub that sorts clusters into sets: the
    Placement's condition says `AllManagedClusterSetsEmpty`, as the docs say. The documented fix,
    binding a set the clusters are in (`global`, which holds every cluster) and naming it in
    `spec.clusterSets`, makes it select them again.
    """
    ns, set_label = "dynamic-scoring-samples", "cluster.open-cluster-management.io/clusterset"

    def satisfied() -> tuple[str, str, int]:
        placement = hub.get_json("placements.cluster.open-cluster-management.io", placements, "-n", ns)
        status = placement.get("status") or {}
        conditions: list[dict[str, Any]] = status.get("conditions") or []
        cond = next((c for c in conditions if c["type"] == "PlacementSatisfied"), {})
        return (
            str(cond.get("status")),
            str(cond.get("reason")),
            int(status.get("numberOfSelectedClusters") or 0),
        )

    wait_until(lambda: satisfied()[2] == 1, timeout=60, what="the sample Placement selecting a cluster")
    hub.run("apply", "--server-side", "-f", "-", stdin=json.dumps(
        {"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
         "metadata": {"name": "e2e-sorted"}}
    ))  # fmt: skip
    try:
        for cluster in ("cluster1", "cluster2"):
            hub.run("label", "managedcluster", cluster, f"{set_label}=e2e-sorted", "--overwrite")
        wait_until(
            lambda: satisfied()[:2] == ("False", "AllManagedClusterSetsEmpty"),
            timeout=60,
            what="PlacementSatisfied=False/AllManagedClusterSetsEmpty with no cluster in default",
        )
        binding = {
            "apiVersion": "cluster.open-cluster-management.io/v1beta2",
            "kind": "ManagedClusterSetBinding",
            "metadata": {"name": "global", "namespace": ns},
            "spec": {"clusterSet": "global"},
        }
        hub.run("apply", "--server-side", "-f", "-", stdin=json.dumps(binding))
        hub.run(
            "patch", "placements.cluster.open-cluster-management.io", placements, "-n", ns, "--type=merge",
            "-p", json.dumps({"spec": {"clusterSets": ["default", "global"]}}),
        )  # fmt: skip
        wait_until(
            lambda: satisfied()[0] == "True" and satisfied()[2] == 1,
            timeout=60,
            what="the Placement selecting again through the global binding",
        )
    finally:
        for cluster in ("cluster1", "cluster2"):
            hub.run("label", "managedcluster", cluster, f"{set_label}=default", "--overwrite")
        hub.run("delete", "managedclustersetbindings.cluster.open-cluster-management.io", "global", "-n", ns,
                "--ignore-not-found")  # fmt: skip
        hub.run(
            "delete",
            "managedclustersets.cluster.open-cluster-management.io",
            "e2e-sorted",
            "--ignore-not-found",
        )
