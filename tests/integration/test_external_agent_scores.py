"""A cluster scored by another agent (`AgentReplicas: "0"`): the hub prepares its scores.

The external-agent-scores controller runs in-process, alone, against the real hub apiserver.
The state it reads is shaped directly: a ManagedClusterAddOn, the deploy work (agent Deployment
with 0 replicas) and the config work (the summaries), as the lifecycle and distribution
controllers write them, plus AddOnPlacementScores as the upstream Go agent and this addon's
agent leave them.  The e2e interop test covers the same with the real upstream agent.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.controllers.placement_scores.decision import (
    EXPIRED_ANNOTATION,
    SCORE_NAME_ANNOTATION,
)
from dynamic_scoring.addon.controllers.placement_scores.external import NAME, external_agent_scores_controller
from dynamic_scoring.addon.manager import Manager, ManagerOptions
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.ocm.score_labels import score_labels
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.procs import wait_until

ADDON = "dynamic-scoring"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
WORK_V1 = "work.open-cluster-management.io/v1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
OURS = score_labels(ADDON)


def summary(score: str) -> dict[str, Any]:
    return {
        "name": score,
        "scoreName": score,
        "sourceType": "None",
        "scoringEndpoint": "http://scorer.example:8000/score",
        "scoringInterval": 30,
        "location": "External",
        "scoreDestination": "AddOnPlacementScore",
        "scoreDimensionFormat": "${cluster}",
    }


def work(cluster: str, name: str, manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": WORK_V1,
        "kind": "ManifestWork",
        "metadata": {
            "name": name,
            "namespace": cluster,
            "labels": {"open-cluster-management.io/addon-name": ADDON},
        },
        "spec": {"workload": {"manifests": [manifest]}},
    }


def deploy_work(cluster: str, replicas: int) -> dict[str, Any]:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "dynamic-scoring-agent", "namespace": "dynamic-scoring"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "agent", "image": "example/agent:1"}]},
            },
        },
    }
    return work(cluster, f"addon-{ADDON}-deploy-0", deployment)


def config_work(cluster: str, scores: list[str]) -> dict[str, Any]:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "dynamic-scoring-config", "namespace": "dynamic-scoring"},
        "data": {"summaries": json.dumps([summary(s) for s in scores])},
    }
    return work(cluster, f"addon-{ADDON}-config", configmap)


def aps(hub: Client, cluster: str, name: str, labels: dict[str, str] | None, status: dict[str, Any]) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": cluster}
    if labels:
        meta["labels"] = labels
        meta["annotations"] = {EXPIRED_ANNOTATION: "2020-01-01T00:00:00Z"}
    obj = hub.apply({"apiVersion": APS_V1A1, "kind": "AddOnPlacementScore", "metadata": meta})
    hub.patch_status(obj, status)


class Running:
    def __init__(self, api: KubeAPI, *, adopt: bool = False) -> None:
        self.registry = CollectorRegistry()
        self.manager = Manager(
            api,
            ManagerOptions(
                leader_elect=False,
                bind_address="127.0.0.1:0",
                resync_seconds=1.0,
                adopt_unlabelled_scores=adopt,
            ),
            factories=[external_agent_scores_controller],
            registry=self.registry,
        )
        self.stop = threading.Event()
        self.exit_code: int | None = None
        self.thread = threading.Thread(target=self._run, name="manager under test", daemon=True)

    def _run(self) -> None:
        self.exit_code = self.manager.run(self.stop)

    def reconciles(self) -> float:
        return sum(
            s.value
            for m in self.registry.collect()
            for s in m.samples
            if s.name == "dynamic_scoring_controller_reconcile_total" and s.labels.get("controller") == NAME
        )


@pytest.fixture
def cluster(control_plane: ControlPlane) -> Iterator[tuple[Client, str]]:
    assert control_plane.hub is not None
    hub = Client(control_plane.hub.admin_kubeconfig, timeout=10)
    name = f"ext-{uuid.uuid4().hex[:6]}"
    hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield hub, name
    finally:
        hub.delete("v1", "Namespace", name)


def another_addons_score(hub: Client, ns: str, name: str) -> dict[str, Any]:
    """A score owned by another addon's ManagedClusterAddOn, as such addons write theirs."""
    other = hub.apply(
        {
            "apiVersion": ADDON_V1A1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": "resource-usage-collect", "namespace": ns},
            "spec": {},
        }
    )
    owner = {"apiVersion": ADDON_V1A1, "kind": "ManagedClusterAddOn", "name": "resource-usage-collect"}
    obj = hub.apply(
        {
            "apiVersion": APS_V1A1,
            "kind": "AddOnPlacementScore",
            "metadata": {
                "name": name,
                "namespace": ns,
                "ownerReferences": [{**owner, "uid": other["metadata"]["uid"]}],
            },
        }
    )
    return hub.patch_status(obj, {"scores": [{"name": "cpu", "value": 42}]})


def test_another_owners_score_is_left_alone_and_an_upstream_one_too_without_the_opt_in(
    control_plane: ControlPlane, cluster: tuple[Client, str]
) -> None:
    hub, ns = cluster
    hub.apply(
        {
            "apiVersion": ADDON_V1A1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": ADDON, "namespace": ns},
            "spec": {},
        }
    )
    hub.apply(deploy_work(ns, 0))
    hub.apply(config_work(ns, ["go_created", "resource_usage_score", "missing"]))
    aps(hub, ns, "go-created", None, {"scores": [{"name": "go_created", "value": 30}]})
    another_addons_score(hub, ns, "resource-usage-score")
    before = {
        n: hub.get(APS_V1A1, "AddOnPlacementScore", n, ns) for n in ("go-created", "resource-usage-score")
    }
    assert control_plane.hub is not None
    running = Running(KubeAPI(control_plane.hub.admin_kubeconfig))
    running.thread.start()
    try:
        wait_until(
            lambda: hub.find(APS_V1A1, "AddOnPlacementScore", "missing", ns),
            timeout=30,
            what="the score of the free name created",
        )
        seen = running.reconciles()
        wait_until(
            lambda: running.reconciles() >= seen + 3, timeout=30, what="three more reconciles (resync 1 s)"
        )
        for name, obj in before.items():
            assert hub.get(APS_V1A1, "AddOnPlacementScore", name, ns) == obj, name
    finally:
        running.stop.set()
        running.thread.join(60)
    assert running.exit_code == 0


def test_the_hub_prepares_labelled_owned_clean_scores_for_a_cluster_whose_agent_is_not_ours(
    control_plane: ControlPlane, cluster: tuple[Client, str]
) -> None:
    """With the admin's migration opt-in: the upstream agent's object is adopted, another owner's is not."""
    hub, ns = cluster
    mca = hub.apply(
        {
            "apiVersion": ADDON_V1A1,
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": ADDON, "namespace": ns},
            "spec": {},
        }
    )
    hub.apply(deploy_work(ns, 0))
    hub.apply(config_work(ns, ["go_created", "ours_before", "missing", "resource_usage_score"]))
    owned_by_another = another_addons_score(hub, ns, "resource-usage-score")
    # the upstream agent's own object: a name and scores, nothing else
    aps(hub, ns, "go-created", None, {"scores": [{"name": "go_created", "value": 30}]})
    # what this addon's agent left when the cluster switched: validUntil, its condition, the mark
    aps(
        hub,
        ns,
        "ours-before",
        OURS,
        {
            "scores": [{"name": "ours_before", "value": 40}],
            "validUntil": "2020-01-01T00:00:00Z",
            "conditions": [
                {
                    "type": "ScoresUpToDate",
                    "status": "True",
                    "reason": "ScoresUpdated",
                    "message": "1 score",
                    "lastTransitionTime": "2020-01-01T00:00:00Z",
                }
            ],
        },
    )
    aps(hub, ns, "withdrawn", OURS, {"scores": [{"name": "withdrawn", "value": 1}]})
    aps(hub, ns, "other-addon", None, {"scores": [{"name": "x", "value": 5}]})
    assert control_plane.hub is not None
    running = Running(KubeAPI(control_plane.hub.admin_kubeconfig), adopt=True)
    running.thread.start()
    try:

        def get(name: str) -> dict[str, Any] | None:
            return hub.find(APS_V1A1, "AddOnPlacementScore", name, ns)

        def prepared(name: str, score: str) -> bool:
            obj = get(name)
            if obj is None:
                return False
            meta = obj["metadata"]
            status = obj.get("status") or {}
            return (
                all((meta.get("labels") or {}).get(k) == v for k, v in OURS.items())
                and (meta.get("annotations") or {}).get(SCORE_NAME_ANNOTATION) == score
                and EXPIRED_ANNOTATION not in (meta.get("annotations") or {})
                and [o["uid"] for o in meta.get("ownerReferences") or []] == [mca["metadata"]["uid"]]
                and "validUntil" not in status
                and not status.get("conditions")
                and not meta.get("managedFields")
            )

        wait_until(
            lambda: (
                all(
                    prepared(n, s)
                    for n, s in [
                        ("go-created", "go_created"),
                        ("ours-before", "ours_before"),
                        ("missing", "missing"),
                    ]
                )
                and get("withdrawn") is None
            ),
            timeout=30,
            what="scores adopted, created and cleaned, the withdrawn one deleted",
        )
        assert get("go-created")["status"]["scores"] == [{"name": "go_created", "value": 30}]  # type: ignore[index]
        assert get("ours-before")["status"]["scores"] == [{"name": "ours_before", "value": 40}]  # type: ignore[index]
        other = get("other-addon")
        assert other is not None and not other["metadata"].get("labels")  # not in the summaries: not ours
        assert get("resource-usage-score") == owned_by_another  # has an owner: never adopted

        # Back to our agent (replicas 1): what it writes stays, whatever happens to the cluster.
        hub.apply(deploy_work(ns, 1))
        # The controller reads the work from its informer: until the watch delivers replicas 1, a
        # reconcile still prepares (recreates "missing", strips validUntil).  Wait until a deleted
        # "missing" stays deleted over three reconciles: from then on the cache holds our agent.
        mark = running.reconciles()
        hub.delete(APS_V1A1, "AddOnPlacementScore", "missing", ns)

        def sees_our_agent() -> bool:
            nonlocal mark
            if get("missing") is not None:  # a reconcile on the old cache prepared it again
                hub.delete(APS_V1A1, "AddOnPlacementScore", "missing", ns)
                mark = running.reconciles()
                return False
            return running.reconciles() >= mark + 3

        wait_until(sees_our_agent, timeout=30, what="the controller to see our agent (replicas 1) again")
        obj = get("ours-before")
        assert obj is not None
        until = {"validUntil": "2030-01-01T00:00:00Z"}
        hub.patch_status(obj, until)
        seen = running.reconciles()
        wait_until(
            lambda: running.reconciles() >= seen + 3, timeout=30, what="three more reconciles (resync 1 s)"
        )
        assert get("ours-before")["status"]["validUntil"] == until["validUntil"]  # type: ignore[index]
        assert get("missing") is None
    finally:
        running.stop.set()
        running.thread.join(60)
    assert running.exit_code == 0
