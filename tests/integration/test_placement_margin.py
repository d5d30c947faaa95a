"""The incumbent margin on OCM's real placement controller: `Steady` beside the AddOn score.

With the AddOn score at weight 10 and the built-in `Steady` prioritizer at weight 1, the clusters a
Placement has chosen get 100 extra points, a margin of 10 points of the AddOn score.  A challenger
better by less than that does not take over; one better by more does.  A Placement choosing 3 of 4
clusters is guarded the same way at the boundary between the third and the fourth.

The test shapes what the scheduler reads: four ManagedClusters of its own (no klusterlet behind
them, so their NoSelect taints for an unknown availability are tolerated), a cluster set selecting
them by label, and an AddOnPlacementScore in each cluster's namespace.  Twin Placements without
`Steady` are the witnesses: when a score change moves a witness, the scheduler has seen that change,
and the margin Placement, queued by the same change, must not have moved.  OCM records every decision
change with a `ScoreUpdate` Event listing the scores it decided on, so the history of each Placement's
moves is read from those Events, not from a wait that could miss a flap.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.ocm import (
    decided_clusters,
    scheduling_stage,
    set_addon_score,
)
from e2e.procs import wait_until, wait_value

CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
SUFFIX = uuid.uuid4().hex[:5]
NS = f"margin-{SUFFIX}"
SET = f"margin-{SUFFIX}"
MEMBER = "margin.test/member"
PAIR = "margin.test/pair"
A, B, C, D = (f"margin-{SUFFIX}-{x}" for x in "abcd")
SCORE = "margin-score"
ADDON_WEIGHT, STEADY_WEIGHT = 10, 1
MARGIN = 100 * STEADY_WEIGHT // ADDON_WEIGHT  # 10 points of the AddOn score
TOLERATE = [
    {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
    {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"},
]


def placement(number: int, *, steady: bool, pair_only: bool) -> JSON:
    configurations: list[JSON] = [
        {
            "scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": SCORE, "scoreName": "s"}},
            "weight": ADDON_WEIGHT,
        }
    ]
    if steady:
        configurations.append(
            {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": STEADY_WEIGHT}
        )
    spec: JSON = {
        "clusterSets": [SET],
        "numberOfClusters": number,
        "tolerations": TOLERATE,
        "prioritizerPolicy": {"mode": "Exact", "configurations": configurations},
    }
    if pair_only:
        spec["predicates"] = [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {PAIR: "yes"}}}}]
    return spec


PLACEMENTS = {
    "one": placement(1, steady=True, pair_only=True),
    "one-witness": placement(1, steady=False, pair_only=True),
    "three": placement(3, steady=True, pair_only=False),
    "three-witness": placement(3, steady=False, pair_only=False),
}


def set_score(hub: Client, cluster: str, value: int) -> None:
    set_addon_score(hub, cluster, SCORE, "s", value)


def decided(hub: Client, name: str) -> list[str]:
    return decided_clusters(hub, NS, name)


def wait_decided(hub: Client, name: str, want: list[str]) -> None:
    wait_until(lambda: decided(hub, name) == sorted(want), timeout=60, what=f"{name} decides {sorted(want)}")


def score_updates(hub: Client, name: str) -> list[str]:
    """The messages of the `ScoreUpdate` Events of one Placement: the scores of each decision change."""
    events = [
        e
        for e in hub.items("v1", "Event", NS)
        if e.get("reason") == "ScoreUpdate"
        and (e.get("involvedObject") or e.get("regarding") or {}).get("name") == name
    ]
    return [str(e.get("message") or e.get("note") or "") for e in events]


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Iterator[Client]:
    assert control_plane.hub is not None
    client = Client(control_plane.hub.admin_kubeconfig, timeout=15)
    clusters = (A, B, C, D)
    with scheduling_stage(client, NS, SET, MEMBER, clusters, {A: {PAIR: "yes"}, B: {PAIR: "yes"}}):
        for cluster, value in zip(clusters, (60, 50, 40, 30), strict=True):
            set_score(client, cluster, value)
        for name, spec in PLACEMENTS.items():
            client.apply(
                {
                    "apiVersion": CLUSTER_V1B1,
                    "kind": "Placement",
                    "metadata": {"name": name, "namespace": NS},
                    "spec": spec,
                }
            )
        yield client


def test_a_challenger_within_the_margin_does_not_take_over_and_one_beyond_it_does(hub: Client) -> None:
    wait_decided(hub, "one", [A])
    wait_decided(hub, "one-witness", [A])
    # b is now 5 points better than the incumbent a: the witness moves, the margin Placement stays
    set_score(hub, B, 60 + MARGIN // 2)
    wait_decided(hub, "one-witness", [B])
    assert decided(hub, "one") == [A]
    # 15 points better: beyond the margin, b takes over
    set_score(hub, B, 60 + MARGIN + MARGIN // 2)
    wait_decided(hub, "one", [B])
    # every decision change of "one" is recorded with the scores it was made on: the only move was
    # made on b's 75 (750) against a's 60 plus Steady (700), never on b's 65 (650). The Events are
    # written asynchronously (the first one, of the initial decision, may be all there is yet), so
    # wait for the move's own Event rather than for any.
    moves = wait_value(
        lambda: score_updates(hub, "one"),
        lambda seen: any(f"{B}:750" in m and f"{A}:700" in m for m in seen),
        timeout=30,
        what=f"the ScoreUpdate Event of the move ({B}:750 against {A}:700)",
    )
    assert not any(f"{B}:650" in m for m in moves), moves


def test_three_of_four_keep_the_third_until_the_fourth_is_better_by_the_margin(hub: Client) -> None:
    wait_decided(hub, "three", [A, B, C])
    wait_decided(hub, "three-witness", [A, B, C])
    # d (30) climbs 5 points above the third, c (40): only the witness swaps c for d
    set_score(hub, D, 40 + MARGIN // 2)
    wait_decided(hub, "three-witness", [A, B, D])
    assert decided(hub, "three") == [A, B, C]
    set_score(hub, D, 40 + MARGIN + MARGIN // 2)
    wait_decided(hub, "three", [A, B, D])
    wait_until(
        lambda: any(f"{D}:550" in m for m in score_updates(hub, "three")),
        timeout=30,
        what="the ScoreUpdate Event of the swap",
    )
    moves = score_updates(hub, "three")
    assert any(f"{D}:550" in m and f"{C}:500" in m for m in moves), moves
    assert not any(f"{D}:450" in m for m in moves), moves
