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
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.procs import wait_until

CLUSTER_API = "cluster.open-cluster-management.io"
PLACEMENT_LABEL = f"{CLUSTER_API}/placement"
CLUSTERS = ("cluster1", "cluster2")
BURST = 6
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "placement" / "per-workload.yaml"
RECIPE: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
[_ADDON] = [
    c["scoreCoordinate"]["addOn"]
    for c in RECIPE["spec"]["prioritizerPolicy"]["configurations"]
    if c["scoreCoordinate"]["type"] == "AddOn"
]
APS, SCORE = _ADDON["resourceName"], _ADDON["scoreName"]  # the sample's score


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Kubectl:
    assert control_plane.hub is not None and control_plane.tools is not None
    return Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)


@pytest.fixture
def namespace(hub: Kubectl) -> Iterator[str]:
    """A namespace bound to the `default` cluster set (both clusters), and one equal score on each."""
    name = f"burst-{uuid.uuid4().hex[:8]}"
    hub.run("create", "namespace", name)
    binding = {
        "apiVersion": f"{CLUSTER_API}/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": "default", "namespace": name},
        "spec": {"clusterSet": "default"},
    }
    hub.apply(yaml.safe_dump(binding))
    for cluster in CLUSTERS:
        set_score(hub, cluster, 0)
    yield name
    hub.run("delete", "namespace", name, "--wait=true", "--timeout=120s")
    for cluster in CLUSTERS:
        hub.run("delete", "addonplacementscore", APS, "-n", cluster, "--ignore-not-found")


def set_score(hub: Kubectl, cluster: str, value: int) -> None:
    obj = {
        "apiVersion": f"{CLUSTER_API}/v1alpha1",
        "kind": "AddOnPlacementScore",
        "metadata": {"name": APS, "namespace": cluster},
    }
    hub.run("apply", "--server-side", "-f", "-", stdin=json.dumps(obj))
    valid_until = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"status": {"scores": [{"name": SCORE, "value": value}], "validUntil": valid_until}}
    hub.run(
        "patch", "addonplacementscore", APS, "-n", cluster, "--subresource=status", "--type=merge",
        "-p", json.dumps(status),
    )  # fmt: skip


def placement(name: str, namespace: str, balance: bool) -> dict[str, Any]:
    """One workload's Placement: the sample recipe, or with ``balance`` False the score alone."""
    obj = copy.deepcopy(RECIPE)
    obj["metadata"] = {"name": name, "namespace": namespace}
    if not balance:
        policy = obj["spec"]["prioritizerPolicy"]
        policy["configurations"] = [
            c for c in policy["configurations"] if c["scoreCoordinate"]["type"] == "AddOn"
        ]
    return obj


def decisions(hub: Kubectl, namespace: str, prefix: str) -> dict[str, str]:
    """Each of the namespace's Placements named ``prefix-*`` and the one cluster it decided, once decided."""
    items = json.loads(hub.run("get", f"placementdecisions.{CLUSTER_API}", "-n", namespace, "-o", "json"))
    out: dict[str, str] = {}
    for item in items["items"]:
        owner = item["metadata"]["labels"].get(PLACEMENT_LABEL, "")
        chosen = [d["clusterName"] for d in (item.get("status") or {}).get("decisions") or []]
        if owner.startswith(f"{prefix}-") and chosen:
            out[owner] = chosen[0]
    return out


def burst(hub: Kubectl, namespace: str, prefix: str, balance: bool) -> Counter[str]:
    """Create ``BURST`` Placements in one apply; once all decided, how many chose each cluster."""
    docs = [placement(f"{prefix}-{i}", namespace, balance) for i in range(BURST)]
    hub.apply(yaml.safe_dump_all(docs))
    decided = wait_until(
        lambda: d if len(d := decisions(hub, namespace, prefix)) == BURST else None,
        timeout=90,
        what=f"all {BURST} Placements {prefix}-* decided",
    )
    return Counter(decided.values())


def test_a_burst_of_placements_with_balance_spreads_where_the_score_alone_herds(
    hub: Kubectl, namespace: str
) -> None:
    # Balance counts every other Placement's decisions on the hub: the balanced burst goes first
    spread = burst(hub, namespace, "balanced", balance=True)
    print(f"\nthe recipe (score + Balance + Steady): {dict(spread)}")
    alone = burst(hub, namespace, "alone", balance=False)
    print(f"score alone: {dict(alone)}")
    assert len(alone) == 1, alone  # equal scores: every Placement takes the same cluster (by name)
    # One worker schedules the Placements in turn, and each counts the decisions its siblings wrote
    # before it.  A sibling's decision not yet in the controller's cache when the next one is
    # scheduled would put two on one cluster: the bound allows one such lag, not a herd.
    assert set(spread) == set(CLUSTERS), spread
    assert max(spread.values()) <= BURST // 2 + 1, spread
