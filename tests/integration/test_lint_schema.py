"""`scorer lint`'s schema check agrees with the real kube-apiserver on a strict apply.

The offline check (`dynamic_scoring.kube.structural` over the CRD file) claims to refuse what
`kubectl apply --validate=strict` refuses.  Here each case goes to both: the hub's kube-apiserver with
the project's CRDs (server-side dry run, so nothing is stored) and the offline check.  An object the
check passes must apply; an object it refuses must be refused, and the apiserver's message must name
every field the check named.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.registry.crds import open_api_schema
from dynamic_scoring.kube.structural import check
from e2e.controlplane import ControlPlane
from e2e.kube import Client, Kubectl

GOOD: dict[str, Any] = {
    "apiVersion": "dynamic-scoring.open-cluster-management.io/v1alpha1",
    "kind": "DynamicScorer",
    "metadata": {"name": "lint-schema", "namespace": "default"},
    "spec": {
        "scoring": {"host": "http://scorer:8000", "params": {"name": "cpu"}},
        "source": {
            "type": "Prometheus",
            "host": "http://prom:9090",
            "params": {"query": "up", "range": 300, "step": 30},
        },
        "timeoutSeconds": 5,
        "location": "Internal",
    },
}


def _with(path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node = obj
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return obj


CASES = {
    "valid": GOOD,
    "unknown spec field": _with("spec.sourse", {"type": "Prometheus"}),
    "unknown nested field": _with("spec.source.params.querry", "up"),
    "below the minimum": _with("spec.source.params.range", 0),
    "not greater than 0": _with("spec.timeoutSeconds", -1),
    "outside the enum": _with("spec.location", "Somewhere"),
    "wrong type": _with("spec.source.params.step", "30"),
}


@pytest.fixture(scope="module")
def kubectl(scorer_crds_hub: Client, control_plane: ControlPlane) -> Kubectl:
    assert control_plane.hub is not None and control_plane.tools is not None
    return Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)


@pytest.mark.parametrize("case", list(CASES))
def test_the_offline_check_refuses_what_the_apiserver_refuses(kubectl: Kubectl, case: str) -> None:
    obj = CASES[case]
    offline = check(open_api_schema("dynamicscorers"), obj)
    apply = ("apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-")
    if not offline:
        kubectl.run(*apply, stdin=yaml.safe_dump(obj))  # raises with kubectl's stderr when refused
        assert case == "valid"
        return
    with pytest.raises(RuntimeError) as refused:
        kubectl.run(*apply, stdin=yaml.safe_dump(obj))
    for issue in offline:
        assert issue.field in str(refused.value), (issue, str(refused.value))
