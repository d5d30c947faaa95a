"""The scorer registry end to end: the manager from `manifests/`, the agents it delivered, a real scorer.

The installation is the addon lifecycle story's own fixture (`kubectl apply -k manifests/`, two
manager replicas run by the process runner, `clusteradm addon enable` on cluster1 and cluster2, the
delivered agents running).  On top of it: a scoring API process on loopback and two DynamicScorers
on the hub, one good and one with bad PromQL masked on cluster1.  What must follow, with nothing
but the manager and the agents doing the work: the config works reach both clusters, each agent
publishes AddOnPlacementScores, the bad query's failure on cluster2 is named on the DynamicScorer's
status, and OCM's Progressing still completes with the extra labelled work present.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import secrets
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.config.spec_hash import spec_hash
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.timestamps import parse_time
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION
from e2e import containers
from e2e.controlplane import ControlPlane
from e2e.image import build, default_tag, image_exists, podman, ulimits
from e2e.kube import Kubectl
from e2e.procs import Proc, StartupError, free_port, wait_until, wait_value
from e2e.tests.test_addon_lifecycle import (  # the lifecycle story's installation, reused as is
    ADDON,
    ADDON_V1A1,
    CLUSTERS,
    HUB_RBAC,
    INSTALL_NS,
    MANAGER_NS,
    WORK_V1,
    Env,
    adc_ref,
    conditions,
    env,
    metrics_of,
)

REPO = Path(__file__).resolve().parents[2]
DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
CONFIG_WORK = f"addon-{ADDON}-config"
GOOD, BAD = "e2e_registry_cpu", "e2e_registry_badql"
TAKEN = "resource_usage_score"  # the name another addon's score already has on cluster1

__all__ = ["env"]  # the fixture, imported so this module gets its own installation

pytestmark = pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning")


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def scorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`tests/component/scorer_app.py` as a process on loopback: /healthz and /mean/scoring."""
    port = free_port()
    workdir = tmp_path_factory.mktemp("registry-scorer")
    app = REPO / "tests" / "component" / "scorer_app.py"
    proc = Proc("registry-scorer", [sys.executable, str(app), "--port", str(port)], workdir / "scorer.log")
    proc.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(base), timeout=30, what="the scorer's /healthz", proc=proc)
        yield base
    finally:
        proc.stop()


def _scorer(name: str, score: str, base: str, prometheus: str, query: str) -> dict[str, Any]:
    return {
        "apiVersion": DS_V1A1,
        "kind": "DynamicScorer",
        "metadata": {"name": name, "namespace": MANAGER_NS},
        "spec": {
            "configURL": f"{base}/config",
            "configSyncMode": "None",
            # one series per pod: one item per pod (the default format would collide)
            "scoreDimensionFormat": "${scoreName}-${namespace}-${pod}",
            "source": {"host": prometheus, "params": {"query": query, "range": 300, "step": 30}},
            "scoring": {"host": base, "path": "/mean/scoring", "params": {"name": score, "interval": 10}},
        },
    }


@pytest.fixture(scope="module")
def registry(env: Env, control_plane: ControlPlane, scorer: str) -> Iterator[Env]:
    prometheus = control_plane.clusters["cluster1"].prometheus_url
    if not prometheus:
        pytest.skip("needs the per-cluster Prometheus servers (DS_E2E_PROMETHEUS=1)")
    hub = env.hub
    hub.apply(_scorer("e2e-cpu", GOOD, scorer, prometheus, "container_cpu_usage_seconds_total"))
    hub.apply(_scorer("e2e-badql", BAD, scorer, prometheus, "sum(rate(container_cpu_usage_seconds_total[5m]"))
    hub.apply(
        {
            "apiVersion": DS_V1A1,
            "kind": "DynamicScoringConfig",
            "metadata": {"name": "dynamic-scoring-config", "namespace": MANAGER_NS},
            "spec": {"masks": [{"clusterName": "cluster1", "scoreName": BAD}]},
        }
    )
    try:
        yield env
    finally:
        hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", MANAGER_NS)
        wait_until(
            lambda: all(hub.find(WORK_V1, "ManifestWork", CONFIG_WORK, c) is None for c in CLUSTERS),
            timeout=60,
            what="config works withdrawn",
        )
        for name in ("e2e-cpu", "e2e-badql"):
            hub.delete(DS_V1A1, "DynamicScorer", name, MANAGER_NS)


def _aps(env: Env, cluster: str, score: str) -> dict[str, Any] | None:
    return env.hub.find(APS_V1A1, "AddOnPlacementScore", aps_name(score), cluster)


def test_a_scorer_registered_on_the_hub_produces_scores_on_both_clusters(registry: Env) -> None:
    env = registry

    def scored(cluster: str) -> bool:
        aps = _aps(env, cluster, GOOD)
        return bool(aps and (aps.get("status") or {}).get("scores"))

    wait_until(lambda: all(scored(c) for c in CLUSTERS), timeout=120, what="scores on both clusters")
    # the manager's probe verdict, its config works and the work agent's ConfigMaps are each written
    # on their own, not by the agents that scored: wait for each instead of reading it once
    wait_value(
        lambda: (env.hub.get(DS_V1A1, "DynamicScorer", "e2e-cpu", MANAGER_NS).get("status") or {}).get(
            "healthStatus"
        ),
        lambda health: health == "Active",
        timeout=60,
        what="DynamicScorer e2e-cpu healthStatus Active",
    )
    for cluster in CLUSTERS:
        want = {GOOD} if cluster == "cluster1" else {GOOD, BAD}  # the mask

        def delivered(cluster: str = cluster) -> tuple[set[str], str, str | None]:
            work = env.hub.get(WORK_V1, "ManifestWork", CONFIG_WORK, cluster)
            (cm,) = work["spec"]["workload"]["manifests"]
            names = {s["scoreName"] for s in json.loads(cm["data"]["summaries"])}
            on_spoke = env.spokes[cluster].find(
                "v1", "ConfigMap", "dynamic-scoring-config", cm["metadata"]["namespace"]
            )
            return names, cm["data"]["summaries"], ((on_spoke or {}).get("data") or {}).get("summaries")

        def matches(seen: tuple[set[str], str, str | None], want: set[str] = want) -> bool:
            return seen[0] == want and seen[2] == seen[1]

        wait_value(
            delivered,
            matches,
            timeout=60,
            what=f"the config work for {cluster} naming {sorted(want)}, its ConfigMap on {cluster} the same",
        )


def test_bad_promql_on_one_cluster_shows_on_the_dynamicscorer_status(registry: Env) -> None:
    env = registry

    def failing() -> dict[str, Any] | None:
        obj = env.hub.get(DS_V1A1, "DynamicScorer", "e2e-badql", MANAGER_NS)
        entries = {e["clusterName"]: e for e in (obj.get("status") or {}).get("clusters") or []}
        entry = entries.get("cluster2")
        return obj if entry and entry["status"] == "False" else None

    obj = wait_until(failing, timeout=120, what="cluster2's failure on the scorer status")
    (entry,) = obj["status"]["clusters"]  # masked on cluster1: only cluster2 is reported
    assert entry["clusterName"] == "cluster2"
    assert "Prometheus" in entry["reason"] or "Query" in entry["reason"], entry
    distributed = conditions(obj)["Distributed"]
    assert distributed["reason"] == "AgentsReportFailures" and "cluster2" in distributed["message"]
    print(f"\ncluster2: {entry['reason']}: {entry['message'][:160]}")


def test_progressing_completes_with_the_config_work_present(registry: Env) -> None:
    env = registry
    cluster = "cluster2"
    adc = {
        "apiVersion": ADDON_V1A1,
        "kind": "AddOnDeploymentConfig",
        "metadata": {"name": "e2e-registry", "namespace": cluster},
        "spec": {
            "agentInstallNamespace": "",
            "customizedVariables": [{"name": "LogLevel", "value": "debug"}],
        },
    }
    env.hub.apply(adc)
    env.patch_mca_configs(cluster, [adc_ref(cluster, "e2e-registry")])
    try:
        want = spec_hash(env.hub.get(ADDON_V1A1, "AddOnDeploymentConfig", "e2e-registry", cluster))

        def completed() -> bool:
            mca = env.mca(cluster)
            progressing = conditions(mca).get("Progressing", {})
            refs = (mca or {}).get("status", {}).get("configReferences") or []
            return (
                progressing.get("reason") == "Completed"
                and bool(refs)
                and (refs[0].get("lastAppliedConfig") or {}).get("specHash") == want
            )

        wait_until(completed, timeout=120, what="Progressing=Completed with the config work present")
        works = {w["metadata"]["name"]: w for w in env.hub.items(WORK_V1, "ManifestWork", cluster)}
        assert set(works) == {f"addon-{ADDON}-deploy-0", CONFIG_WORK}
        key = "open-cluster-management.io/config-spec-hash"

        def hashes() -> tuple[str | None, str | None]:
            found = {w["metadata"]["name"]: w for w in env.hub.items(WORK_V1, "ManifestWork", cluster)}

            def of(name: str) -> str | None:
                return ((found.get(name) or {}).get("metadata", {}).get("annotations") or {}).get(key)

            return of(CONFIG_WORK), of(f"addon-{ADDON}-deploy-0")

        # the manager stamps each work with the new hash in a write of its own: wait for both
        wait_value(
            hashes,
            lambda pair: pair[0] is not None and pair[0] == pair[1],
            timeout=60,
            what=f"the same {key} on both works of {cluster}",
        )
    finally:
        env.patch_mca_configs(cluster, None)
        env.hub.delete(ADDON_V1A1, "AddOnDeploymentConfig", "e2e-registry", cluster)


def test_a_score_name_another_owner_holds_is_left_untouched_and_reported(
    registry: Env, control_plane: ControlPlane, scorer: str
) -> None:
    """Another addon's AddOnPlacementScore on cluster1 has the name a DynamicScorer asks for.

    The object keeps its labels, owner, scores and very resourceVersion while the scorer runs and
    after it is withdrawn; the scorer's status names cluster1 with ScoreNameTaken; cluster2, where
    the name is free, is scored as usual; the agent's hub Role on cluster1 does not name it.
    """
    hub = registry.hub
    path_of = f"/apis/{APS_V1A1}/namespaces/{{}}/addonplacementscores/{aps_name(TAKEN)}"
    owner = hub.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "resource-usage", "namespace": "cluster1"},
        }
    )
    foreign = hub.apply(
        {
            "apiVersion": APS_V1A1,
            "kind": "AddOnPlacementScore",
            "metadata": {
                "name": aps_name(TAKEN),
                "namespace": "cluster1",
                "labels": {"app.kubernetes.io/managed-by": "resource-usage-collect"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "resource-usage",
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            },
        }
    )
    foreign = hub.patch_status(foreign, {"scores": [{"name": "cpu", "value": 42}]})
    prometheus = control_plane.clusters["cluster1"].prometheus_url
    hub.apply(_scorer("e2e-taken", TAKEN, scorer, prometheus, "container_cpu_usage_seconds_total"))

    def untouched() -> None:
        now = hub.api.request("GET", path_of.format("cluster1"))
        assert now["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"], now["metadata"]
        assert now["metadata"]["labels"] == foreign["metadata"]["labels"]
        assert now["metadata"]["ownerReferences"] == foreign["metadata"]["ownerReferences"]
        assert now["status"] == foreign["status"]

    try:

        def reported() -> dict[str, Any] | None:
            obj = hub.get(DS_V1A1, "DynamicScorer", "e2e-taken", MANAGER_NS)
            entries = {e["clusterName"]: e for e in (obj.get("status") or {}).get("clusters") or []}
            mine, free = entries.get("cluster1") or {}, entries.get("cluster2") or {}
            if mine.get("reason") == "ScoreNameTaken" and free.get("status") == "True":
                return obj
            return None

        obj = wait_until(reported, timeout=120, what="cluster1 ScoreNameTaken and cluster2 scoring")
        entry = next(e for e in obj["status"]["clusters"] if e["clusterName"] == "cluster1")
        assert (
            f"cluster1/{aps_name(TAKEN)}" in entry["message"]
            and "ConfigMap/resource-usage" in entry["message"]
        )
        assert conditions(obj)["Distributed"]["reason"] == "ScoreNameTaken"
        theirs = _aps(registry, "cluster2", TAKEN)
        assert theirs is not None and theirs["metadata"]["labels"]["app.kubernetes.io/managed-by"] == (
            "dynamic-scoring-agent"
        )
        untouched()

        def granted(cluster: str) -> set[str]:
            role = hub.get("rbac.authorization.k8s.io/v1", "Role", HUB_RBAC, cluster)
            return {
                n
                for r in role["rules"]
                for n in r.get("resourceNames") or []
                if "addonplacementscores" in r["resources"]
            }

        assert aps_name(TAKEN) not in granted("cluster1") and aps_name(TAKEN) in granted("cluster2")
    finally:
        hub.delete(DS_V1A1, "DynamicScorer", "e2e-taken", MANAGER_NS)
    wait_until(
        lambda: _aps(registry, "cluster2", TAKEN) is None, timeout=120, what="cluster2's score withdrawn"
    )
    try:
        untouched()  # still there, still as it was
    finally:
        hub.delete("v1", "ConfigMap", "resource-usage", "cluster1")  # its owner: the score goes with it


STABLE = "e2e_stable"
RISE_WINDOW = 8
INTERVAL = 2
VALID_FOR = 600  # long: no refresh rewrites validUntil while the test reads it


def _respond(base: str, key: str, score: float) -> None:
    body = json.dumps({"results": [{"metric": {}, "score": score}]}).encode()
    request = urllib.request.Request(f"{base}/_respond/{key}", data=body, method="PUT")
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.status == 200


def _stabilization(env: Env, cluster: str, score_name: str) -> tuple[float | None, dict[str, float]]:
    """One scrape of the agent's view of ``score_name``: the unstabilized value and the items held, by trend.

    Both come from one exposition, which the agent builds from one cycle's states, so they agree:
    a value the agent has seen and the trend it holds that value under.
    """
    pod = env.agent_pod(cluster)
    if pod is None:
        return None, {}
    raw: float | None = None
    held: dict[str, float] = {}
    for line in metrics_of(pod).splitlines():
        if f'score_name="{score_name}"' not in line:
            continue
        if line.startswith("dynamic_scoring_unstabilized_score{"):
            raw = float(line.rsplit(" ", 1)[1])
        elif line.startswith("dynamic_scoring_stabilized_items{"):
            trend = line.split('trend="', 1)[1].split('"', 1)[0]
            held[trend] = float(line.rsplit(" ", 1)[1])
    return raw, held


def test_a_stabilized_rise_waits_for_its_window_on_the_hub_and_a_fall_does_not(
    registry: Env, scorer: str
) -> None:
    """The real agents, the real AddOnPlacementScore: a rise held for `riseWindowSeconds`, a fall at once.

    No assertion here races the clock: how late this test, the agent or the apiserver runs can only
    make the checks easier to pass, never fail a correct product.

    * The rise: the write that put 80 on the hub happened at least the window after the answer
      changed.  The write's time is the product's own: ``validUntil`` minus ``validForSeconds``
      (set here, so the subtraction is exact up to the second ``validUntil`` is rounded down to).
      A late agent only moves that write later.  Without the hold, 80 would be written at the first
      cycle that saw it, one interval (2 s) after the change on a quiet machine, which fails the
      check.
    * The fall: in the scrape where the agent first shows 20, nothing is held as ``falling``: the
      cycle that saw the fall published it.  Then the hub shows 20 (the wait's deadline is a
      generous liveness bound, not the claim).
    """
    env = registry
    key = uuid.uuid4().hex
    _respond(scorer, key, 50)
    env.hub.apply(
        {
            "apiVersion": DS_V1A1,
            "kind": "DynamicScorer",
            "metadata": {"name": "e2e-stable", "namespace": MANAGER_NS},
            "spec": {
                "configSyncMode": "None",
                "scoring": {
                    "host": scorer,
                    "path": f"/fixed/{key}/scoring",
                    "params": {"name": STABLE, "interval": INTERVAL},
                },
                "stabilization": {"tolerance": 3, "riseWindowSeconds": RISE_WINDOW},
                "validForSeconds": VALID_FOR,
            },
        }
    )

    def published(cluster: str = "cluster2") -> tuple[int | None, dt.datetime | None]:
        """The hub's value and when the agent's write of it happened (validUntil - validForSeconds)."""
        status = (_aps(env, cluster, STABLE) or {}).get("status") or {}
        scores = status.get("scores") or []
        until = status.get("validUntil")
        at = parse_time(until)
        written = at - dt.timedelta(seconds=VALID_FOR) if at else None
        return (scores[0]["value"] if scores else None), written

    def agent_view() -> tuple[float | None, dict[str, float]]:
        return _stabilization(env, "cluster2", STABLE)

    try:
        try:
            wait_value(published, lambda seen: seen[0] == 50, timeout=120, what=f"{STABLE} 50 on cluster2")
        except StartupError as exc:  # name what the hub says about the scorer
            status = env.hub.get(DS_V1A1, "DynamicScorer", "e2e-stable", MANAGER_NS).get("status")
            raise StartupError(f"{exc}; DynamicScorer status: {json.dumps(status)}") from None
        changed = dt.datetime.now(dt.UTC)
        _respond(scorer, key, 80)
        rise = wait_value(published, lambda seen: seen[0] == 80, timeout=RISE_WINDOW + 60, what="the rise")
        assert rise[1] is not None
        # The slack: validUntil is rounded down to the second, and the cycle takes the time it counts
        # from just before the stabilizer takes the time it holds by (1 s covers that on a loaded
        # machine).  Without the hold the write would come about one interval after the change.
        assert rise[1] + dt.timedelta(seconds=2) >= changed + dt.timedelta(seconds=RISE_WINDOW), (
            f"80 was written on the hub at {rise[1]:%H:%M:%S}, less than the {RISE_WINDOW} s window "
            f"after the answer changed at {changed:%H:%M:%S.%f}"
        )
        _respond(scorer, key, 20)
        fall_seen = wait_value(
            agent_view, lambda seen: seen[0] == 20, timeout=60, what="cluster2's agent seeing the fall to 20"
        )
        assert not fall_seen[1].get("falling"), f"the agent held the fall back: {fall_seen}"
        wait_value(published, lambda seen: seen[0] == 20, timeout=60, what="the fall published")
    finally:
        env.hub.delete(DS_V1A1, "DynamicScorer", "e2e-stable", MANAGER_NS)


MY_SCORER = REPO / "samples" / "my_scorer"


def _load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MY_SCORER / name).read_text()) if d]


def test_a_scorer_built_and_deployed_as_documented_scores_both_clusters(
    registry: Env, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """samples/my_scorer/, as the README tells a user to take it, scores both clusters end to end.

    The image is built from its Containerfile on top of the project's image (the release it names),
    and run as a real container the way its Deployment says: non-root, read-only root filesystem,
    no capabilities, its token Secret mounted where TOKEN_FILE points, in a network namespace of its
    own with its port published on loopback.  It refuses /scoring without the token.  The
    Deployment, Service and NetworkPolicy are applied to cluster2's apiserver, which validates them
    (no kubelet runs them here).  The agents' copy of the token reaches both clusters as the README
    says: token-for-agents.yaml applied on the hub, OCM's ManifestWorkReplicaSet controller writing
    a ManifestWork per cluster of its Placement and each work agent applying the Secret.  The
    DynamicScorer is the sample's, pointed at the container and at the cluster's Prometheus; the
    agents of both clusters must publish the item the README's Placement names, which they can only
    with that token.  Deleting the ManifestWorkReplicaSet takes the Secret off both clusters.
    """
    env = registry
    prometheus = control_plane.clusters["cluster1"].prometheus_url
    assert prometheus and control_plane.tools is not None
    base = default_tag()
    assert f"ARG BASE={base}\n" in (MY_SCORER / "Containerfile").read_text()
    if not image_exists(base):  # the process runner (DS_E2E_RUNNER=process) does not build it
        build(base, quiet=True)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(MY_SCORER.iterdir()))).hexdigest()
    tag = f"localhost/e2e-my-scorer:{digest[:12]}"
    podman(
        "build",
        *ulimits(),
        "--pull=never",
        "--quiet",
        "--file",
        str(MY_SCORER / "Containerfile"),
        "--tag",
        tag,
        str(MY_SCORER),
        timeout=600,
    )

    kubectl = Kubectl(control_plane.tools.kubectl, env.kubeconfigs["cluster2"])
    kubectl.run("apply", "-f", str(MY_SCORER / "deploy.yaml"))
    deployment = next(d for d in _load("deploy.yaml") if d["kind"] == "Deployment")
    pod_spec = deployment["spec"]["template"]["spec"]
    [container] = pod_spec["containers"]
    # the token Secret as the kubelet mounts it (the volume's items, mode 0644), where the sample says
    token = secrets.token_hex(32)
    [volume] = pod_spec["volumes"]
    [mount] = container["volumeMounts"]
    assert mount["name"] == volume["name"] and volume["secret"]["secretName"] == "cpu-free-token"
    secret_dir = tmp_path / "token-volume"
    secret_dir.mkdir()
    secret_dir.chmod(0o755)  # not mkdir's mode: the umask would narrow it
    for entry in volume["secret"]["items"]:
        (secret_dir / entry["path"]).write_text(token)
        (secret_dir / entry["path"]).chmod(0o644)
    container_env = {e["name"]: e["value"] for e in container["env"]}
    assert container_env["TOKEN_FILE"].startswith(mount["mountPath"] + "/"), container_env
    port = free_port()
    name = f"e2e-my-scorer-{port}"
    argv = containers.run_argv(
        name=name,
        runner_label="e2e-my-scorer",
        image=tag,
        hostname="cpu-free",
        pod_spec=pod_spec,
        container=container,
        who=containers.identity(pod_spec, container, containers.image_user(tag) or ""),
        image_user=containers.image_user(tag) or "",
        mounts=[(str(secret_dir), mount["mountPath"], True)],
        env_names=sorted(container_env),
        env=container_env,
        command=container.get("command") or [],
        args=container.get("args") or [],
        publish=[f"127.0.0.1:{port}:{container['ports'][0]['containerPort']}"],
    )
    proc = Proc("my-scorer", argv, tmp_path / "my-scorer.log", env={**os.environ, **container_env})
    proc.start()
    scorer = _load("dynamicscorer.yaml")[0]
    scorer["spec"]["configURL"] = f"http://127.0.0.1:{port}/config"
    scorer["spec"]["source"]["host"] = prometheus
    secret_ref = scorer["spec"]["scoring"]["auth"]["tokenSecretRef"]
    name_on_hub = scorer["metadata"]["name"]
    # the README's sed: the token in base64, and the annotation naming where this scorer listens
    delivery = (MY_SCORER / "token-for-agents.yaml").read_text()
    for placeholder in ("REPLACE-WITH-THE-TOKEN-IN-BASE64", "cpu-free.scorers.svc:8000"):
        assert placeholder in delivery, placeholder
    encoded = base64.b64encode(token.encode()).decode()
    delivery_file = tmp_path / "token-for-agents.yaml"
    delivery_file.write_text(
        delivery.replace("REPLACE-WITH-THE-TOKEN-IN-BASE64", encoded).replace(
            "cpu-free.scorers.svc:8000", f"127.0.0.1:{port}"
        )
    )
    hub_kubectl = Kubectl(control_plane.tools.kubectl, env.kubeconfigs["cluster1"])

    def delivered(cluster: str) -> JSON | None:
        return env.spokes[cluster].find("v1", "Secret", secret_ref["name"], INSTALL_NS)

    try:
        wait_until(
            lambda: _healthy(f"http://127.0.0.1:{port}"),
            timeout=60,
            what="the scorer container's /healthz",
            proc=proc,
        )
        refused = urllib.request.Request(
            f"http://127.0.0.1:{port}/scoring",
            data=b'{"data": []}',
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(refused, timeout=10)
        assert denied.value.code == 401, denied.value

        hub_kubectl.run("apply", "-f", str(delivery_file))
        for cluster in CLUSTERS:
            secret = wait_value(
                partial(delivered, cluster),
                lambda s: s is not None and (s.get("data") or {}).get(secret_ref["key"]) == encoded,
                timeout=120,
                what=f"Secret {secret_ref['name']} on {cluster}, from the ManifestWorkReplicaSet",
            )
            assert secret is not None
            annotations = secret["metadata"].get("annotations") or {}
            assert annotations[ALLOWED_HOSTS_ANNOTATION] == f"127.0.0.1:{port}", annotations
        env.hub.apply(scorer)

        def item(cluster: str) -> int | None:
            aps = env.hub.find(APS_V1A1, "AddOnPlacementScore", "cpu-free", cluster)
            scores = {s["name"]: s["value"] for s in ((aps or {}).get("status") or {}).get("scores") or []}
            value = scores.get("cpu_free")
            return int(value) if value is not None else None

        for cluster in CLUSTERS:

            def read(cluster: str = cluster) -> int | None:
                return item(cluster)

            value = wait_value(
                read,
                lambda v: v is not None,
                timeout=120,
                what=f"item cpu_free of AddOnPlacementScore cpu-free on {cluster}",
            )
            # scoreNormalization maps 20..80 % free onto -100..100: any published value is in range
            assert value is not None and -100 <= value <= 100, value
        status = wait_value(
            lambda: env.hub.get(DS_V1A1, "DynamicScorer", name_on_hub, MANAGER_NS).get("status") or {},
            lambda st: (
                st.get("healthStatus") == "Active"
                and {c["type"]: c["status"] for c in st.get("conditions") or []}.get("ConfigSynced") == "True"
            ),
            timeout=60,
            what=f"DynamicScorer {name_on_hub}: Active and ConfigSynced",
        )
        assert status["scoreName"] == "cpu_free"

        hub_kubectl.run("delete", "-f", str(delivery_file), "--wait=false")
        wait_until(
            lambda: all(delivered(c) is None for c in CLUSTERS),
            timeout=120,
            what="the token Secret gone from both clusters with its ManifestWorkReplicaSet",
        )
    finally:
        hub_kubectl.run("delete", "-f", str(delivery_file), "--ignore-not-found", "--wait=false", check=False)
        env.hub.delete(DS_V1A1, "DynamicScorer", name_on_hub, MANAGER_NS)
        proc.stop()
        podman("rm", "--force", "--ignore", name, check=False)
        kubectl.run("delete", "-f", str(MY_SCORER / "deploy.yaml"), "--wait=false", check=False)
        wait_until(
            lambda: all(
                env.hub.find(APS_V1A1, "AddOnPlacementScore", "cpu-free", c) is None for c in CLUSTERS
            ),
            timeout=120,
            what="the cpu-free scores removed with their DynamicScorer",
        )


def test_deleting_the_config_stops_the_agents_and_removes_their_scores(registry: Env) -> None:
    env = registry
    env.hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", MANAGER_NS)
    wait_until(
        lambda: all(_aps(env, c, GOOD) is None for c in CLUSTERS),
        timeout=120,
        what="the agents' AddOnPlacementScores removed",
    )
    # The work can outlive the scores by a moment: it goes once the work agent has removed the
    # ConfigMap and dropped its cleanup finalizer, and the agents react to the ConfigMap going first.
    wait_until(
        lambda: all(env.hub.find(WORK_V1, "ManifestWork", CONFIG_WORK, c) is None for c in CLUSTERS),
        timeout=60,
        what="the config ManifestWorks deleted",
    )
