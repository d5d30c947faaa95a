"""A burst of Placements reading one score, with OCM's `Balance` beside it, on the real placement controller.

The placement-quality benchmark's closed loop found that Placements deciding on the same scores pile
their work onto one cluster, and that OCM's `Balance` prioritizer at weight 3 beside the score at 10
spreads them when each workload has its own Placement (docs/placement-quality.md, "Against the herd";
the recipe is samples/placement/per-workload.yaml, which this test copies).
The benchmark's model lets each Placement see the decisions made before it.  Whether OCM's controller
does when the Placements arrive together, a burst, is what this checks: the controller reads other
Placements' decisions from its informer cache, so a Placement scheduled before the previous one's
PlacementDecision is written cannot count it.
"""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.ocm import decided_clusters, scheduling_stage, set_addon_score
from e2e.procs import wait_until

SUFFIX = uuid.uuid4().hex[:5]
NS = SET = f"burst-{SUFFIX}"
MEMBER = "burst.test/member"
CLUSTERS = tuple(f"burst-{SUFFIX}-{x}" for x in "ab")
BURST = 6
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "placement" / "per-workload.yaml"
RECIPE: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
[_ADDON] = [
    c["scoreCoordinate"]["addOn"]
    for c in RECIPE["spec"]["prioritizerPolicy"]["configurations"]
    if c["scoreCoordinate"]["type"] == "AddOn"
]
APS, SCORE = _ADDON["resourceName"], _ADDON["scoreName"]  # the sample's score
# the stage's clusters have no klusterlet: tolerate their availability taints
TOLERATE = [
    {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
    {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"},
]


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Iterator[Client]:
    """Two clusters of the test's own, in a set only its Placements see, each with an equal score."""
    assert control_plane.hub is not None
    client = Client(control_plane.hub.admin_kubeconfig, timeout=15)
    with scheduling_stage(client, NS, SET, MEMBER, CLUSTERS):
        for cluster in CLUSTERS:
            set_addon_score(client, cluster, APS, SCORE, 0)
        yield client


def placement(name: str, balance: bool) -> dict[str, Any]:
    """One workload's Placement: the sample recipe on the stage's set, or with ``balance`` False the
    score alone."""
    obj = copy.deepcopy(RECIPE)
    obj["metadata"] = {"name": name, "namespace": NS}
    obj["spec"] |= {"clusterSets": [SET], "tolerations": TOLERATE}
    if not balance:
        policy = obj["spec"]["prioritizerPolicy"]
        policy["configurations"] = [
            c for c in policy["configurations"] if c["scoreCoordinate"]["type"] == "AddOn"
        ]
    return obj


def burst(hub: Client, prefix: str, balance: bool) -> Counter[str]:
    """Create ``BURST`` Placements in one go; once all decided, how many chose each cluster."""
    names = [f"{prefix}-{i}" for i in range(BURST)]
    hub.apply_yaml(yaml.safe_dump_all([placement(n, balance) for n in names]))

    def decided() -> list[list[str]] | None:
        found = [decided_clusters(hub, NS, n) for n in names]
        return found if all(found) else None

    chosen = wait_until(decided, timeout=90, what=f"all {BURST} Placements {prefix}-* decided")
    return Counter(cluster for clusters in chosen for cluster in clusters)


def test_a_burst_of_placements_with_balance_spreads_where_the_score_alone_herds(hub: Client) -> None:
    # Balance counts every other Placement's decisions on the hub: the balanced burst goes first
    spread = burst(hub, "balanced", balance=True)
    print(f"\nthe recipe (score + Balance + Steady): {dict(spread)}")
    alone = burst(hub, "alone", balance=False)
    print(f"score alone: {dict(alone)}")
    assert len(alone) == 1, alone  # equal scores: every Placement takes the same cluster (by name)
    # One worker schedules the Placements in turn, and each counts the decisions its siblings wrote
    # before it.  A sibling's decision not yet in the controller's cache when the next one is
    # scheduled would put two on one cluster: the bound allows one such lag, not a herd.
    assert set(spread) == set(CLUSTERS), spread
    assert max(spread.values()) <= BURST // 2 + 1, spread
