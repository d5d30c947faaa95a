"""What makes the deploy controller render a cluster's agent again, and what does not.

During a cold start each MCA changes half a dozen times (conditions written by us, OCM and the
klusterlet).  The controller renders again only when the fingerprint of what the works are built
from changes (or the works themselves do, by their resourceVersions).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dynamic_scoring.addon.controllers.lifecycle.deploy import render_fingerprint

MCA: dict[str, Any] = {
    "metadata": {"name": "dynamic-scoring", "namespace": "c1", "uid": "u1"},
    "spec": {"installNamespace": "open-cluster-management-agent-addon"},
    "status": {
        "conditions": [{"type": "RegistrationApplied", "status": "True"}],
        "configReferences": [{"name": "default", "desiredConfig": {"specHash": "h1"}}],
    },
}
ADC: dict[str, Any] = {"metadata": {"uid": "a1", "resourceVersion": "7"}, "spec": {}}
CLUSTER: dict[str, Any] = {"metadata": {"name": "c1", "annotations": {}}, "status": {}}
IMAGE = "ghcr.io/dynamic-scoring/dynamic-scoring:0.1.0"


def edited(obj: dict[str, Any], path: list[str], value: object) -> dict[str, Any]:
    copied = copy.deepcopy(obj)
    node = copied
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return copied


def fingerprint(
    mca: dict[str, Any] = MCA, adc: Any = ADC, cluster: Any = CLUSTER, image: str = IMAGE
) -> bytes:
    return render_fingerprint(mca, adc, cluster, image)


def test_condition_writes_and_cluster_heartbeats_leave_it_alone() -> None:
    conditions = [{"type": "Available", "status": "True"}, {"type": "ManifestApplied", "status": "True"}]
    assert fingerprint(mca=edited(MCA, ["status", "conditions"], conditions)) == fingerprint()
    assert fingerprint(mca=edited(MCA, ["metadata", "resourceVersion"], "99")) == fingerprint()
    heartbeat = edited(CLUSTER, ["status", "conditions"], [{"type": "ManagedClusterConditionAvailable"}])
    assert fingerprint(cluster=heartbeat) == fingerprint()


@pytest.mark.parametrize(
    "other",
    [
        {"mca": edited(MCA, ["spec", "installNamespace"], "elsewhere")},
        {"mca": edited(MCA, ["metadata", "annotations"], {"addon.open-cluster-management.io/x": "y"})},
        {"mca": edited(MCA, ["status", "configReferences"], [{"desiredConfig": {"specHash": "h2"}}])},
        {"mca": edited(MCA, ["metadata", "uid"], "u2")},
        {"adc": edited(ADC, ["metadata", "resourceVersion"], "8")},
        {"adc": None},
        {"cluster": edited(CLUSTER, ["metadata", "annotations"], {"mirror": "registry.local"})},
        {"image": "ghcr.io/dynamic-scoring/dynamic-scoring:0.2.0"},
    ],
    ids=[
        "install-namespace",
        "annotations",
        "config-hash",
        "uid",
        "adc-edit",
        "adc-gone",
        "mirrors",
        "image",
    ],
)
def test_an_input_of_the_render_changes_it(other: dict[str, Any]) -> None:
    assert fingerprint(**other) != fingerprint()
