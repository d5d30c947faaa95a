"""Fixtures shared by the integration tier: the hub's admin API and a fresh namespace per test.

Every test here runs against the session's real hub kube-apiserver (the root conftest's
`control_plane`).  Most tests need an admin client on it and a namespace of their own, so that
tests never see each other's objects; the modules that run the registry controllers in-process
need the scorer CRDs served first.  These used to be defined again in each file.  A module that
needs something different (a recording client, a namespace shared by a module-scoped controller)
overrides the fixture by name in that module.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.resources import NAMESPACES
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.procs import wait_until

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
SCORER_CRDS = MANIFESTS / "crds"
MANAGER_NS = "dynamic-scoring"
DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"


@pytest.fixture
def api(control_plane: ControlPlane) -> KubeAPI:
    """A `KubeAPI` on the hub's admin kubeconfig: the client with which tests set up and inspect."""
    assert control_plane.hub is not None
    return KubeAPI(control_plane.hub.admin_kubeconfig)


@pytest.fixture
def namespace(api: KubeAPI) -> Iterator[str]:
    """A namespace of this test's own on the hub, deleted afterwards (without waiting for it to go).

    The name is random, so tests and reruns never collide; it is created with `api`, so a module
    that overrides `api` (e.g. with a recording client) sees the creation through its own client.
    """
    name = f"it-{uuid.uuid4().hex[:8]}"
    api.request("POST", NAMESPACES.path(), body={"metadata": {"name": name}})
    yield name
    api.request("DELETE", NAMESPACES.path(None, name))


def _scorer_crds_served(hub: Client) -> bool:
    """True once both scorer kinds can be listed (a CRD is created before it is served)."""
    try:
        hub.items(DS_V1A1, "DynamicScorer", "default")
        hub.items(DS_V1A1, "DynamicScoringConfig", "default")
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def scorer_crds_hub(control_plane: ControlPlane) -> Client:
    """An admin `Client` on the hub once the DynamicScorer and DynamicScoringConfig CRDs are served.

    The registry controllers that a module runs in-process watch both kinds, so the CRDs must be
    served before they start.  Applying is idempotent; module scope re-applies them per module, so
    a module never depends on another having run first.  The 30 s request timeout leaves room for
    the large objects some modules write.
    """
    assert control_plane.hub is not None
    client = Client(control_plane.hub.admin_kubeconfig, timeout=30)
    for name in ("dynamicscorers.yaml", "dynamicscoringconfigs.yaml"):
        client.apply_yaml((SCORER_CRDS / name).read_text())
    wait_until(lambda: _scorer_crds_served(client), timeout=30, what="the scorer CRDs served", interval=0.1)
    return client


@pytest.fixture(scope="module")
def manager_rbac(control_plane: ControlPlane) -> Iterator[Client]:
    """The manager's namespace, ServiceAccount and RBAC as `manifests/` installs them; an admin `Client`.

    For a module that runs a controller as the manager's own ServiceAccount, on exactly the rules
    the installs grant.  When the namespace did not exist before, everything applied here is deleted
    afterwards and the namespace waited for: left behind, those objects make a later `helm install`
    in the same session fail on objects Helm does not own.  A shared install found in place is left
    as it is.
    """
    assert control_plane.hub is not None
    hub = Client(control_plane.hub.admin_kubeconfig, timeout=10)
    base = [
        d
        for name in ("namespace.yaml", "rbac.yaml")
        for d in yaml.safe_load_all((MANIFESTS / name).read_text())
        if d
    ]
    installed = hub.find("v1", "Namespace", MANAGER_NS) is not None
    for obj in base:
        hub.apply(obj)
    yield hub
    if installed:
        return
    for obj in reversed(base):
        hub.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
    wait_until(
        lambda: hub.find("v1", "Namespace", MANAGER_NS) is None,
        timeout=90,
        what=f"namespace {MANAGER_NS} gone",
    )
