"""`dynamic-scoring status` against the session hub, with the addon's objects shaped directly.

Three ManagedClusters of the test's own (as the registry tests make them): one whose addon is
available with a fresh score, one whose agent stopped renewing its Lease and whose score expired
after failing, one without the addon.  The conditions and scores are written the way the
klusterlet and our agent write them (status subresource, the agent's labels and annotation), so
the command reads exactly what it reads in a fleet.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from dynamic_scoring.ctl.main import main
from e2e.controlplane import ControlPlane
from e2e.kube import Client

CLUSTER_V1 = "cluster.open-cluster-management.io/v1"
ADDON_V1A1 = "addon.open-cluster-management.io/v1alpha1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
ADDON = "dynamic-scoring"


def stamp(seconds: float) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp(0),
    }


@pytest.fixture(scope="module")
def fleet(control_plane: ControlPlane) -> Iterator[dict[str, str]]:
    """{"ok": name, "bad": name, "off": name}, created on the hub and removed afterwards."""
    assert control_plane.hub is not None
    hub = Client(control_plane.hub.admin_kubeconfig, timeout=15)
    tag = uuid.uuid4().hex[:5]
    names = {role: f"st-{tag}-{role}" for role in ("ok", "bad", "off")}
    try:
        for name in names.values():
            hub.apply(
                {
                    "apiVersion": CLUSTER_V1,
                    "kind": "ManagedCluster",
                    "metadata": {"name": name},
                    "spec": {"hubAcceptsClient": True},
                }
            )
            hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        addon_state = {
            "ok": condition(
                "Available", "True", "ManagedClusterAddOnLeaseUpdated", "dynamic-scoring add-on is available."
            ),
            "bad": condition(
                "Available",
                "False",
                "ManagedClusterAddOnLeaseUpdateStopped",
                "dynamic-scoring add-on is not available.",
            ),
        }
        for role, cond in addon_state.items():
            mca = hub.apply(
                {
                    "apiVersion": ADDON_V1A1,
                    "kind": "ManagedClusterAddOn",
                    "metadata": {"name": ADDON, "namespace": names[role]},
                    "spec": {},
                }
            )
            hub.patch_status(mca, {"conditions": [cond]})
        scores = {
            "ok": (120, 42, condition("ScoresUpToDate", "True", "Scored", "1 score(s) written")),
            "bad": (
                -30,
                77,
                condition(
                    "ScoresUpToDate",
                    "False",
                    "PrometheusQueryError",
                    "fetch failed for scorer cpu: query #1 bad_data",
                ),
            ),
        }
        for role, (valid_for, value, cond) in scores.items():
            aps = hub.apply(
                {
                    "apiVersion": APS_V1A1,
                    "kind": "AddOnPlacementScore",
                    "metadata": {
                        "name": "cpu-headroom",
                        "namespace": names[role],
                        "labels": {
                            "app.kubernetes.io/managed-by": "dynamic-scoring-agent",
                            "dynamic-scoring.open-cluster-management.io/addon": ADDON,
                        },
                        "annotations": {
                            "dynamic-scoring.open-cluster-management.io/score-name": "cpu_headroom"
                        },
                    },
                }
            )
            hub.patch_status(
                aps,
                {
                    "validUntil": stamp(valid_for),
                    "scores": [{"name": "cpu_headroom", "value": value}],
                    "conditions": [cond],
                },
            )
        yield names
    finally:
        for name in names.values():
            hub.delete(APS_V1A1, "AddOnPlacementScore", "cpu-headroom", name)
            hub.delete(ADDON_V1A1, "ManagedClusterAddOn", ADDON, name)
            hub.delete(CLUSTER_V1, "ManagedCluster", name)
            hub.delete("v1", "Namespace", name)


def status(control_plane: ControlPlane, *args: str) -> tuple[int, str]:
    assert control_plane.hub is not None
    result = CliRunner().invoke(
        main, ["status", "--kubeconfig", str(control_plane.hub.admin_kubeconfig), *args]
    )
    return result.exit_code, result.output


def test_a_healthy_cluster_shows_its_score_age_and_expiry_and_exits_0(
    control_plane: ControlPlane, fleet: dict[str, str]
) -> None:
    code, out = status(control_plane, "--cluster", fleet["ok"], "-o", "json")
    assert code == 0, out
    [cluster] = json.loads(out)["clusters"]
    [score] = cluster["scores"]
    assert cluster["health"] == "Available" and cluster["lastError"] is None
    assert score["scoreName"] == "cpu_headroom" and score["items"] == [{"name": "cpu_headroom", "value": 42}]
    assert 0 <= score["ageSeconds"] < 60, score  # written moments ago (the status write's managedFields time)
    assert 60 < score["expiresInSeconds"] <= 121, score


def test_an_unavailable_addon_and_an_expired_failing_score_exit_1_with_the_last_error(
    control_plane: ControlPlane, fleet: dict[str, str]
) -> None:
    code, out = status(control_plane, *(a for n in fleet.values() for a in ("--cluster", n)))
    assert code == 1, out
    bad = fleet["bad"]
    assert f"{bad}: addon Available=False (ManagedClusterAddOnLeaseUpdateStopped)" in out
    assert f"{bad}: score cpu-headroom expired" in out
    assert f"{bad}: score cpu-headroom ScoresUpToDate=False (PrometheusQueryError): fetch failed" in out
    assert "1 cluster(s) with problems:" in out  # the cluster without the addon is listed, not a problem
    off_row = next(line for line in out.splitlines() if line.startswith(fleet["off"]))
    assert "not enabled" in off_row
