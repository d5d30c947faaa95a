"""`dynamic-scoring why` against OCM v1.2.1's real placement controller on the session control plane.

The test shapes what the scheduler reads directly (AddOnPlacementScores, a taint on cluster1,
labels on both, and a ManagedClusterSet of its own selecting them by label) instead of running
agents: it is about `why`, not about how scores get there.  Nine Placements are created at once,
so the controller schedules them in parallel; for each, the test waits until the real
PlacementDecision names the clusters worked out by hand, then runs `why` and checks it agrees
(exit 0) and gives the right reason for every cluster.  Everything is created in namespaces of its
own and removed afterwards; the taint and the labels on the shared ManagedClusters are taken off
again, leaving other writers' taints and labels as they were.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dynamic_scoring.ctl.main import main
from dynamic_scoring.kube.api import Conflict, KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import MANAGED_CLUSTERS
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.ocm import decided_clusters, label_selected_cluster_set
from e2e.pki import write_kubeconfig
from e2e.procs import wait_until, wait_value

NS = "why-test"
CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
CLUSTER_V1B2 = "cluster.open-cluster-management.io/v1beta2"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"
REPO = Path(__file__).resolve().parents[2]
RBAC_V1 = "rbac.authorization.k8s.io/v1"
READER = "why-reader"  # a user who may read what the placement controller reads, and not DynamicScorers
TAINT_KEY = "why.test/maintenance"
LABEL_KEY = "why.test/tier"
MEMBER_KEY = "why.test/member"  # selects cluster1 and cluster2 into the test's own cluster set
SET = "why-test"
TOLERATE = [{"key": TAINT_KEY, "operator": "Exists"}]


def stamp(delta: dt.timedelta) -> str:
    return (dt.datetime.now(dt.UTC) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def addon(resource: str, score: str, weight: int) -> JSON:
    return {
        "scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": resource, "scoreName": score}},
        "weight": weight,
    }


def exact(*configs: JSON, **spec: Any) -> JSON:
    return {
        "clusterSets": [SET],
        "prioritizerPolicy": {"mode": "Exact", "configurations": list(configs)},
        **spec,
    }


# name -> (spec, the clusters the real controller must choose)
PLACEMENTS: dict[str, tuple[JSON, list[str]]] = {
    # cluster1 scores 80, cluster2 20; the weight -1 makes the lower score win
    "negative-weight": (
        exact(addon("why-neg", "s", -1), numberOfClusters=1, tolerations=TOLERATE),
        ["cluster2"],
    ),
    # cluster1's 90 has expired and counts 0; cluster2's 10 wins
    "expired": (exact(addon("why-exp", "s", 1), numberOfClusters=1, tolerations=TOLERATE), ["cluster2"]),
    # cluster1 has no such AddOnPlacementScore (0 + 0); cluster2 has s1 = -40 and no item s2 (0)
    "missing": (
        exact(
            addon("why-miss", "s1", 1), addon("why-miss", "s2", 2), numberOfClusters=1, tolerations=TOLERATE
        ),
        ["cluster1"],
    ),
    # cluster1 carries a NoSelect taint this Placement does not tolerate
    "taint": (exact(), ["cluster2"]),
    # the toleration's 1 s ran out: the taint was added before the Placements were created
    "toleration-ran-out": (
        exact(tolerations=[{"key": TAINT_KEY, "operator": "Exists", "tolerationSeconds": 1}]),
        ["cluster2"],
    ),
    # only cluster2 carries the label the predicate asks for
    "label": (
        exact(
            predicates=[{"requiredClusterSelector": {"labelSelector": {"matchLabels": {LABEL_KEY: "gold"}}}}],
            tolerations=TOLERATE,
        ),
        ["cluster2"],
    ),
    # no cut; one cluster per decision group: two groups, two PlacementDecision pages
    "groups": (
        exact(
            tolerations=TOLERATE,
            decisionStrategy={"groupStrategy": {"clustersPerDecisionGroup": 1}},
        ),
        ["cluster1", "cluster2"],
    ),
    # Additive: Balance 1 and Steady 1 join the AddOn score (80 vs 20), which decides by a wide margin
    "additive": (
        {
            "clusterSets": [SET],
            "numberOfClusters": 1,
            "tolerations": TOLERATE,
            "prioritizerPolicy": {"mode": "Additive", "configurations": [addon("why-neg", "s", 1)]},
        },
        ["cluster1"],
    ),
    # the README's recipe: AddOn 10 + Steady 1, a 10-point margin, 3 load points through the scorer's band
    "margin": (
        exact(
            addon("why-neg", "s", 10),
            {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 1},
            numberOfClusters=1,
            tolerations=TOLERATE,
        ),
        ["cluster1"],
    ),
    # a built-in prioritizer OCM does not have: the controller decides nothing
    "misconfigured": (
        exact(
            {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Fastest"}, "weight": 1},
            tolerations=TOLERATE,
        ),
        [],
    ),
}


def patch_cluster(api: KubeAPI, name: str, change: Callable[[JSON], JSON]) -> None:
    """Merge-patch a ManagedCluster with its resourceVersion, retrying when another writer got there first."""
    for _ in range(10):
        current = api.request("GET", MANAGED_CLUSTERS.path(None, name))
        patch = change(current)
        patch.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        try:
            api.request(
                "PATCH",
                MANAGED_CLUSTERS.path(None, name),
                body=patch,
                content_type="application/merge-patch+json",
            )
            return
        except Conflict:
            continue
    raise AssertionError(f"could not patch ManagedCluster {name}: conflicts every time")


def without_ours(cluster: JSON) -> list[JSON]:
    return [t for t in (cluster.get("spec") or {}).get("taints") or [] if t.get("key") != TAINT_KEY]


def put_score(hub: Client, cluster: str, name: str, valid_until: str, **items: int) -> None:
    obj = {
        "apiVersion": APS_V1A1,
        "kind": "AddOnPlacementScore",
        "metadata": {"name": name, "namespace": cluster},
    }
    hub.apply(obj)
    hub.patch_status(
        obj, {"validUntil": valid_until, "scores": [{"name": k, "value": v} for k, v in items.items()]}
    )


@pytest.fixture(scope="module")
def world(control_plane: ControlPlane) -> Iterator[Client]:
    """The scores, taint, label, namespace, binding and Placements; all removed afterwards."""
    assert control_plane.hub is not None
    hub = Client(control_plane.hub.admin_kubeconfig, timeout=15)
    hour = dt.timedelta(hours=1)
    try:
        put_score(hub, "cluster1", "why-neg", stamp(hour), s=80)
        put_score(hub, "cluster2", "why-neg", stamp(hour), s=20)
        put_score(hub, "cluster1", "why-exp", stamp(-hour), s=90)
        put_score(hub, "cluster2", "why-exp", stamp(hour), s=10)
        put_score(hub, "cluster2", "why-miss", stamp(hour), s1=-40, other=50)
        taint: JSON = {"key": TAINT_KEY, "value": "yes", "effect": "NoSelect"}
        assert control_plane.tools is not None
        if not control_plane.tools.ocm.webhooks:
            # OCM's ManagedCluster webhook stamps timeAdded itself and refuses one a client sets
            # ("It is not allowed to set TimeAdded"); a hub without it needs the stamp from us
            taint["timeAdded"] = stamp(-hour)
        patch_cluster(hub.api, "cluster1", lambda c: {"spec": {"taints": [*without_ours(c), taint]}})
        patch_cluster(hub.api, "cluster1", lambda c: {"metadata": {"labels": {MEMBER_KEY: "yes"}}})
        patch_cluster(
            hub.api, "cluster2", lambda c: {"metadata": {"labels": {LABEL_KEY: "gold", MEMBER_KEY: "yes"}}}
        )
        # A set of its own, so a ManagedCluster another test left behind cannot join the candidates.
        hub.apply(label_selected_cluster_set(SET, MEMBER_KEY))
        hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for bound in (SET, "global"):  # global is bound too: spec.clusterSets must narrow to SET
            hub.apply(
                {
                    "apiVersion": CLUSTER_V1B2,
                    "kind": "ManagedClusterSetBinding",
                    "metadata": {"name": bound, "namespace": NS},
                    "spec": {"clusterSet": bound},
                }
            )
        # The scorer publishing why-neg, as the hub resolved it (status shaped directly: no manager here)
        hub.apply_yaml((REPO / "manifests" / "crds" / "dynamicscorers.yaml").read_text())
        wait_until(lambda: _served(hub), timeout=30, what="the DynamicScorer CRD served")
        scorer = hub.apply(
            {
                "apiVersion": DS_V1A1,
                "kind": "DynamicScorer",
                "metadata": {"name": "neg", "namespace": NS},
                "spec": {
                    "configSyncMode": "None",
                    "scoring": {
                        "host": "http://127.0.0.1:9",
                        "path": "/scoring",
                        "params": {"name": "why_neg"},
                    },
                    "scoreNormalization": {"min": 20, "max": 80, "targetMin": -100, "targetMax": 100},
                },
            }
        )
        hub.patch_status(scorer, {"scoreName": "why_neg"})
        for name, (spec, _) in PLACEMENTS.items():
            hub.apply(
                {
                    "apiVersion": CLUSTER_V1B1,
                    "kind": "Placement",
                    "metadata": {"name": name, "namespace": NS},
                    "spec": spec,
                }
            )
        yield hub
    finally:
        hub.delete("v1", "Namespace", NS)
        for cluster, name in [("cluster1", "why-neg"), ("cluster2", "why-neg"), ("cluster1", "why-exp")]:
            hub.delete(APS_V1A1, "AddOnPlacementScore", name, cluster)
        hub.delete(APS_V1A1, "AddOnPlacementScore", "why-exp", "cluster2")
        hub.delete(APS_V1A1, "AddOnPlacementScore", "why-miss", "cluster2")
        hub.delete(CLUSTER_V1B2, "ManagedClusterSet", SET)
        patch_cluster(hub.api, "cluster1", lambda c: {"spec": {"taints": without_ours(c)}})
        patch_cluster(hub.api, "cluster1", lambda c: {"metadata": {"labels": {MEMBER_KEY: None}}})
        patch_cluster(
            hub.api, "cluster2", lambda c: {"metadata": {"labels": {LABEL_KEY: None, MEMBER_KEY: None}}}
        )


def _served(hub: Client) -> bool:
    try:
        hub.items(DS_V1A1, "DynamicScorer", "default")
    except Exception:
        return False
    return True


def decided(hub: Client, placement: str) -> list[str]:
    return decided_clusters(hub, NS, placement)


def why(control_plane: ControlPlane, placement: str, *extra: str) -> tuple[int, str]:
    assert control_plane.hub is not None
    kubeconfig = str(control_plane.hub.admin_kubeconfig)
    result = CliRunner().invoke(main, ["why", placement, "-n", NS, "--kubeconfig", kubeconfig, *extra])
    return result.exit_code, result.output


def explained(control_plane: ControlPlane, hub: Client, placement: str) -> dict[str, JSON]:
    """Wait for the real decision, then `why -o json`: it must agree (exit 0); its clusters by name."""
    want = PLACEMENTS[placement][1]
    wait_until(lambda: decided(hub, placement) == want, timeout=60, what=f"{placement} decides {want}")
    code, out = why(control_plane, placement, "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["agrees"], out
    return {c["name"]: c for c in doc["clusters"]}


def scores_of(entry: JSON) -> list[tuple[str, int, int, str]]:
    return [(s["name"], s["score"], s["weight"], s["note"]) for s in entry["scores"]]


def test_a_negative_weight_picks_the_lower_score(control_plane: ControlPlane, world: Client) -> None:
    c = explained(control_plane, world, "negative-weight")
    assert (c["cluster1"]["total"], c["cluster1"]["rank"], c["cluster1"]["expected"]) == (-80, 2, False)
    assert (c["cluster2"]["total"], c["cluster2"]["rank"], c["cluster2"]["expected"]) == (-20, 1, True)
    assert "below the numberOfClusters cut" in c["cluster1"]["verdict"]


def test_an_expired_score_counts_zero(control_plane: ControlPlane, world: Client) -> None:
    c = explained(control_plane, world, "expired")
    [(name, score, weight, note)] = scores_of(c["cluster1"])
    assert (name, score, weight) == ("AddOn/why-exp/s", 0, 1) and note.startswith("expired at")
    assert c["cluster2"]["total"] == 10 and c["cluster2"]["expected"]


def test_missing_scores_and_missing_items_count_zero(control_plane: ControlPlane, world: Client) -> None:
    c = explained(control_plane, world, "missing")
    assert [(s, n) for _, s, _, n in scores_of(c["cluster1"])] == [
        (0, "no AddOnPlacementScore why-miss: counts 0"),
        (0, "no AddOnPlacementScore why-miss: counts 0"),
    ]
    assert [(s, w) for _, s, w, _ in scores_of(c["cluster2"])] == [(-40, 1), (0, 2)]
    assert scores_of(c["cluster2"])[1][3] == "no score item s2 in why-miss: counts 0"
    assert c["cluster1"]["expected"] and c["cluster1"]["total"] == 0 and c["cluster2"]["total"] == -40


def test_a_taint_without_toleration_filters_the_cluster(control_plane: ControlPlane, world: Client) -> None:
    c = explained(control_plane, world, "taint")
    assert c["cluster1"]["filtered"] == f"taint {TAINT_KEY}=yes:NoSelect not tolerated"
    assert c["cluster2"]["filtered"] is None and c["cluster2"]["expected"]
    code, out = why(control_plane, "taint", "--cluster", "cluster1")
    assert code == 0 and "filtered out: taint why.test/maintenance=yes:NoSelect not tolerated" in out, out
    assert "controller: PlacementSatisfied=True (AllDecisionsScheduled)" in out


def test_a_toleration_whose_seconds_ran_out_no_longer_tolerates(
    control_plane: ControlPlane, world: Client
) -> None:
    c = explained(control_plane, world, "toleration-ran-out")
    assert "not tolerated (toleration 0 ran out at" in c["cluster1"]["filtered"]


def test_a_label_predicate_filters_and_names_the_label(control_plane: ControlPlane, world: Client) -> None:
    c = explained(control_plane, world, "label")
    assert (
        c["cluster1"]["filtered"]
        == f"no predicate matches (predicate 0: label {LABEL_KEY} absent, want gold)"
    )
    assert c["cluster2"]["expected"] and c["cluster2"]["decided"]
    assert (
        any("tolerated by toleration 0" in n for n in c["cluster1"]["notes"]) is False
    )  # filtered before taints
    code, out = why(control_plane, "label")
    assert code == 0 and "verdict: agrees with the PlacementDecisions (1 cluster(s) decided)" in out, out
    assert "cluster1: filtered: no predicate matches" in out


def test_why_exits_1_naming_the_clusters_when_the_decision_disagrees(
    control_plane: ControlPlane, world: Client
) -> None:
    """A frozen Placement (scheduling disabled) whose decision names the cluster it would not choose.

    The controller leaves such a Placement's PlacementDecisions alone, so a decision written here
    stays, as one left over from before the scores changed would.
    """
    world.apply(
        {
            "apiVersion": CLUSTER_V1B1,
            "kind": "Placement",
            "metadata": {
                "name": "frozen",
                "namespace": NS,
                "annotations": {"cluster.open-cluster-management.io/experimental-scheduling-disable": "true"},
            },
            "spec": exact(addon("why-neg", "s", 1), numberOfClusters=1, tolerations=TOLERATE),
        }
    )
    pd = {
        "apiVersion": CLUSTER_V1B1,
        "kind": "PlacementDecision",
        "metadata": {
            "name": "frozen-decision-1",
            "namespace": NS,
            "labels": {
                "cluster.open-cluster-management.io/placement": "frozen",
                "cluster.open-cluster-management.io/decision-group-index": "0",
                "cluster.open-cluster-management.io/decision-group-name": "",
            },
        },
    }
    world.apply(pd)
    world.patch_status(pd, {"decisions": [{"clusterName": "cluster2", "reason": ""}]})
    code, out = why(control_plane, "frozen")
    assert code == 1, out
    assert "verdict: DISAGREES with the PlacementDecisions on cluster1, cluster2" in out
    assert "cluster2: DISAGREES: not selected: rank 2, total 20" in out
    assert "scheduling is disabled by annotation" in out


def test_decision_groups_and_pages_match_the_controllers(control_plane: ControlPlane, world: Client) -> None:
    c = explained(control_plane, world, "groups")
    assert (c["cluster1"]["expectedGroup"], c["cluster1"]["decidedGroup"]) == ([0, ""], [0, ""])
    assert (c["cluster2"]["expectedGroup"], c["cluster2"]["decidedGroup"]) == ([1, ""], [1, ""])
    code, out = why(control_plane, "groups", "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["decisionPages"] == ["groups-decision-1", "groups-decision-2"], out
    assert doc["clusterSets"] == [SET]  # global is bound too, but the Placement names only SET


def test_additive_mode_adds_balance_and_steady_as_the_controller_does(
    control_plane: ControlPlane, world: Client
) -> None:
    c = explained(control_plane, world, "additive")
    by_name = {s[0]: s for s in scores_of(c["cluster1"])}
    assert sorted(by_name) == ["AddOn/why-neg/s", "Balance", "Steady"]
    assert by_name["Steady"][1:3] == (100, 1) and by_name["Balance"][2] == 1
    assert [s[1:3] for s in scores_of(c["cluster2"]) if s[0] == "Steady"] == [(0, 1)]
    assert -100 <= by_name["Balance"][1] <= 100


def test_a_misconfigured_placement_is_named_as_the_controller_names_it(
    control_plane: ControlPlane, world: Client
) -> None:
    def controller_says_misconfigured() -> bool:
        placement = world.get(CLUSTER_V1B1, "Placement", "misconfigured", NS)
        conditions = (placement.get("status") or {}).get("conditions") or []
        return any(c["type"] == "PlacementMisconfigured" and c["status"] == "True" for c in conditions)

    wait_until(
        controller_says_misconfigured, timeout=60, what="the controller marks the Placement misconfigured"
    )
    assert decided(world, "misconfigured") == []
    code, out = why(control_plane, "misconfigured")
    assert code == 1, out
    assert "MISCONFIGURED: incorrect builtin prioritizer: Fastest" in out
    assert "controller: PlacementMisconfigured=True (Misconfigured)" in out and "Fastest" in out
    assert "verdict: agrees with the PlacementDecisions (0 cluster(s) decided)" in out


def test_the_margin_is_named_in_points_and_in_the_scorers_units(
    control_plane: ControlPlane, world: Client
) -> None:
    explained(control_plane, world, "margin")
    code, out = why(control_plane, "margin")
    assert code == 0, out
    assert (
        "incumbent margin: a challenger must lead by more than 10 points of why-neg/s (Steady 1, AddOn 10)"
        in out
    )
    assert f"= 3 in the units of {NS}/neg (scoreNormalization 20..80 onto -100..100)" in out
    doc = json.loads(why(control_plane, "margin", "-o", "json")[1])
    assert doc["margins"] == [
        {
            "resourceName": "why-neg",
            "scoreName": "s",
            "points": 10.0,
            "balanceSwing": None,  # no Balance in this Placement
            "scorers": [{"scorer": f"{NS}/neg", "units": pytest.approx(3.0), "normalized": True}],
            "unreadable": None,
        }
    ]
    # Exact without Steady has no margin to name
    assert "incumbent margin" not in why(control_plane, "expired")[1]


def test_a_user_who_may_not_read_dynamic_scorers_still_gets_the_decision(
    control_plane: ControlPlane, world: Client, tmp_path: Path
) -> None:
    assert control_plane.hub is not None
    rules = [
        {"apiGroups": ["cluster.open-cluster-management.io"], "verbs": ["get", "list"], "resources": [r]}
        for r in (
            "placements",
            "placementdecisions",
            "managedclusters",
            "managedclustersets",
            "managedclustersetbindings",
            "addonplacementscores",
        )
    ]
    role = {"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": {"name": READER}, "rules": rules}
    binding = {
        "apiVersion": RBAC_V1,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": READER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER}],
    }
    try:
        world.apply(role)
        world.apply(binding)
        cert = control_plane.hub.ca.issue(READER, common_name=READER, client=True)
        path = write_kubeconfig(
            tmp_path / "reader.kubeconfig",
            server=control_plane.hub.server,
            ca_pem=control_plane.hub.ca.cert_pem,
            user=READER,
            client=cert,
        )
        explained(control_plane, world, "margin")

        def answer() -> tuple[int, str]:
            result = CliRunner().invoke(main, ["why", "margin", "-n", NS, "--kubeconfig", str(path)])
            return result.exit_code, result.output

        # RBAC takes effect through the apiserver's informer: wait until the reader may read the hub
        _, out = wait_value(answer, lambda r: r[0] == 0, timeout=30, what="the reader's binding in effect")
        assert "more than 10 points of why-neg/s" in out
        assert "its scorer's units unknown: could not list DynamicScorers (403" in out, out
        assert "verdict: agrees with the PlacementDecisions (1 cluster(s) decided)" in out
    finally:
        world.delete(RBAC_V1, "ClusterRoleBinding", READER)
        world.delete(RBAC_V1, "ClusterRole", READER)
