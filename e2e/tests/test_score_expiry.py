"""An expired score stops winning: the manager makes OCM's real placement controller re-schedule.

On the session control plane (OCM v1.2.1), two AddOnPlacementScores are shaped directly, labelled
as our agents' (cluster1: 90, expiring in a few seconds; cluster2: 10, valid for an hour), and a
Placement with one AddOn prioritizer and ``numberOfClusters: 1`` picks cluster1.  No agent renews
cluster1's score.  With ``dynamic-scoring-addon manager`` running, the decision moves to cluster2
once ``validUntil`` + the controller's margin has passed (never before); without it, OCM would keep
cluster1 until some unrelated event (measured in docs/scorer-registry.md).  Then a fresh write of
cluster1's status, as the agent makes it, wins back the decision and leaves the mark in place.

The test has its own namespace, ManagedClusterSet (selecting cluster1 and cluster2 by a label of
its own) and APS names, and removes them, and its label, afterwards.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dynamic_scoring.addon.controllers.placement_scores.decision import EXPIRED_ANNOTATION, MARGIN_SECONDS
from dynamic_scoring.kube.api import Conflict, KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import MANAGED_CLUSTERS
from dynamic_scoring.kube.timestamps import parse_time
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.ocm import label_selected_cluster_set
from e2e.procs import Proc, free_port, wait_until, wait_value

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "dynamic-scoring-addon"
NS = "score-expiry-e2e"
SET = "score-expiry-e2e"
MEMBER_KEY = "score-expiry.test/member"
APS = "expiry-e2e"
SCORE = "headroom"
PLACEMENT = "expiry"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
CLUSTER_V1B2 = "cluster.open-cluster-management.io/v1beta2"
OURS = {
    "app.kubernetes.io/managed-by": "dynamic-scoring-agent",
    "dynamic-scoring.open-cluster-management.io/addon": "dynamic-scoring",
}
LIFETIME = 5.0
"""Seconds cluster1's score lives once it has been decided."""
LIVENESS = 60.0
"""How long past ``validUntil`` + margin the move may take before the test gives up: the watch
event to the manager, its patch, the placement controller's watch event, scheduling and the
PlacementDecision write take 0.11-0.21 s on a quiet machine; the rest is room for a loaded one.
A deadline, not the claim: the claim is the mark's time (see the test)."""


def stamp(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def patch_cluster(api: KubeAPI, name: str, change: Callable[[JSON], JSON]) -> None:
    for _ in range(5):
        cluster = api.request("GET", MANAGED_CLUSTERS.path(None, name))
        body = {**change(cluster)}
        body.setdefault("metadata", {})["resourceVersion"] = cluster["metadata"]["resourceVersion"]
        try:
            api.request(
                "PATCH",
                MANAGED_CLUSTERS.path(None, name),
                body=body,
                content_type="application/merge-patch+json",
            )
            return
        except Conflict:
            continue
    raise AssertionError(f"could not patch ManagedCluster {name}")


def put_score(hub: Client, cluster: str, value: int, valid_until: str) -> None:
    obj = {
        "apiVersion": APS_V1A1,
        "kind": "AddOnPlacementScore",
        "metadata": {"name": APS, "namespace": cluster, "labels": OURS},
    }
    hub.apply(obj)
    hub.patch_status(obj, {"validUntil": valid_until, "scores": [{"name": SCORE, "value": value}]})


@pytest.fixture
def hub(control_plane: ControlPlane) -> Iterator[Client]:
    """The namespace, cluster set, binding and Placement; scores and labels removed afterwards."""
    assert control_plane.hub is not None
    hub = Client(control_plane.hub.admin_kubeconfig, timeout=15)
    for crd in ("dynamicscorers.yaml", "dynamicscoringconfigs.yaml"):  # the manager's watches
        hub.apply_yaml((REPO / "manifests" / "crds" / crd).read_text())
    try:
        for cluster in ("cluster1", "cluster2"):
            patch_cluster(hub.api, cluster, lambda c: {"metadata": {"labels": {MEMBER_KEY: "yes"}}})
        hub.apply(label_selected_cluster_set(SET, MEMBER_KEY))
        hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        hub.apply(
            {
                "apiVersion": CLUSTER_V1B2,
                "kind": "ManagedClusterSetBinding",
                "metadata": {"name": SET, "namespace": NS},
                "spec": {"clusterSet": SET},
            }
        )
        yield hub
    finally:
        hub.delete("v1", "Namespace", NS)
        for cluster in ("cluster1", "cluster2"):
            hub.delete(APS_V1A1, "AddOnPlacementScore", APS, cluster)
            patch_cluster(hub.api, cluster, lambda c: {"metadata": {"labels": {MEMBER_KEY: None}}})
        hub.delete(CLUSTER_V1B2, "ManagedClusterSet", SET)


@pytest.fixture
def manager(control_plane: ControlPlane, hub: Client, tmp_path: Path) -> Iterator[int]:
    """`dynamic-scoring-addon manager` as a process, leading; yields its metrics port."""
    assert control_plane.hub is not None
    port = free_port()
    proc = Proc(
        "expiry-manager",
        [
            str(SCRIPT),
            "manager",
            f"--kubeconfig={control_plane.hub.admin_kubeconfig}",
            f"--namespace={NS}",
            f"--metrics-bind-address=127.0.0.1:{port}",
            "--leader-election-lease-duration=4",
            "--leader-election-renew-deadline=3",
            "--leader-election-retry-period=0.5",
        ],
        tmp_path / "manager.log",
    )
    proc.start()
    try:
        wait_until(
            lambda: get(port, "/readyz") == "leading\n", timeout=60, what="the manager leads", proc=proc
        )
        yield port
    finally:
        proc.stop()


def get(port: int, path: str) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return str(resp.read().decode())
    except OSError:
        return None


def decided(hub: Client) -> list[str]:
    pds = hub.items(
        CLUSTER_V1B1,
        "PlacementDecision",
        NS,
        label_selector=f"cluster.open-cluster-management.io/placement={PLACEMENT}",
    )
    return sorted(d["clusterName"] for pd in pds for d in (pd.get("status") or {}).get("decisions") or [])


def expired_total(port: int) -> float:
    for line in (get(port, "/metrics") or "").splitlines():
        if line.startswith("dynamic_scoring_hub_scores_expired_total "):
            return float(line.split()[1])
    return 0.0


def test_an_expired_score_stops_winning_after_its_validity_plus_margin(hub: Client, manager: int) -> None:
    """Timing on the product's clocks: the manager marks the score no sooner than validUntil + margin.

    cluster1 is decided first on a score valid for an hour, and only then given a short
    ``validUntil``, so however slowly the placement controller first decides, the expiry comes after.
    The mark's Event time (the manager's clock, whole seconds) is at least ``validUntil`` + margin,
    a lower bound a late manager only exceeds further.  The decision's move is waited for with a
    liveness deadline, not asserted on: its lag is printed (0.1-0.2 s measured on a quiet machine).
    """
    before = expired_total(manager)
    hour = stamp(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    put_score(hub, "cluster2", 10, hour)
    put_score(hub, "cluster1", 90, hour)
    hub.apply(
        {
            "apiVersion": CLUSTER_V1B1,
            "kind": "Placement",
            "metadata": {"name": PLACEMENT, "namespace": NS},
            "spec": {
                "numberOfClusters": 1,
                "clusterSets": [SET],
                "tolerations": [
                    {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
                    {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"},
                ],
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
    wait_until(lambda: decided(hub) == ["cluster1"], timeout=60, what="cluster1 (90) decided")
    expires = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=LIFETIME)
    put_score(hub, "cluster1", 90, stamp(expires))

    wait_until(
        lambda: decided(hub) == ["cluster2"],
        timeout=LIFETIME + MARGIN_SECONDS + LIVENESS,
        what="the decision to move to cluster2 once cluster1's score expired",
    )
    lag = time.time() - expires.timestamp()
    print(f"decision moved {lag:.2f}s after validUntil (margin {MARGIN_SECONDS}s)")
    assert lag >= MARGIN_SECONDS - 0.5, "moved before the score expired: something else re-scheduled"

    # The manager marks the score, then counts it and records the Event, each a write of its own
    # after the mark: the decision moving proves only the mark, so wait for each.
    aps = wait_value(
        lambda: hub.get(APS_V1A1, "AddOnPlacementScore", APS, "cluster1"),
        lambda a: (a["metadata"].get("annotations") or {}).get(EXPIRED_ANNOTATION) == stamp(expires),
        timeout=LIVENESS,
        what=f"cluster1's score marked {EXPIRED_ANNOTATION}={stamp(expires)}",
    )
    assert aps["metadata"]["labels"] == OURS

    def score_expired_events() -> list[JSON]:
        return [
            e
            for e in hub.items("v1", "Event", "cluster1")
            if e.get("reason") == "ScoreExpired" and e["involvedObject"].get("name") == APS
        ]

    events = wait_value(
        score_expired_events, bool, timeout=30, what=f"a ScoreExpired Event on cluster1/{APS}"
    )
    assert "cluster cluster1" in events[0]["message"], events
    assert f"expired at {stamp(expires)}" in events[0]["message"]
    marked = parse_time(events[0]["firstTimestamp"])
    assert marked is not None, events[0]
    assert marked >= expires + dt.timedelta(seconds=MARGIN_SECONDS), (
        f"marked expired at {stamp(marked)}, before validUntil {stamp(expires)} + {MARGIN_SECONDS}s"
    )
    assert "check the agent on cluster1" in events[0]["message"]
    wait_value(
        lambda: expired_total(manager),
        lambda total: total >= before + 1,
        timeout=30,
        what=f"dynamic_scoring_hub_scores_expired_total to reach {before + 1:g}",
    )

    # The agent comes back: its status write (a merge patch, like dynamic_scoring.agent.kube.scores) wins
    # cluster1 back at once and does not disturb the mark, which names the old validUntil.
    fresh = stamp(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    hub.patch_status(aps, {"validUntil": fresh, "scores": [{"name": SCORE, "value": 90}]})
    wait_until(lambda: decided(hub) == ["cluster1"], timeout=LIVENESS, what="cluster1 decided again")
    again = hub.get(APS_V1A1, "AddOnPlacementScore", APS, "cluster1")
    assert again["metadata"]["annotations"][EXPIRED_ANNOTATION] == stamp(expires)
    assert again["status"]["validUntil"] == fresh
