from __future__ import annotations

import base64
from typing import Any

from dynamic_scoring.kube.jsontypes import JSON


def mca(cluster: str = "cluster1", install_namespace: str | None = None, **status: Any) -> JSON:
    obj: JSON = {
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ManagedClusterAddOn",
        "metadata": {
            "name": "dynamic-scoring",
            "namespace": cluster,
            "uid": f"uid-{cluster}",
            "generation": 1,
        },
        "spec": {},
        "status": dict(status),
    }
    if install_namespace is not None:
        obj["spec"]["installNamespace"] = install_namespace
    return obj


def adc(**spec: Any) -> JSON:
    return {
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "AddOnDeploymentConfig",
        "metadata": {"name": "cfg", "namespace": "dynamic-scoring"},
        "spec": {"agentInstallNamespace": "", **spec},
    }


def variables(**values: str) -> list[JSON]:
    return [{"name": k, "value": v} for k, v in values.items()]


def by_kind(manifests: list[JSON], kind: str) -> JSON:
    found = [m for m in manifests if m["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
