"""The agent's hub credentials through the klusterlet's token driver instead of a CSR.

A klusterlet whose registration agent runs with `--addon-kubeclient-registration-auth=token`
declares `kubeClientDriver: token` on the ManagedClusterAddOn and sets the registration subject to
`system:serviceaccount:<cluster>:<addon>-agent`.  OCM's addon manager then creates that
ServiceAccount and a Role letting the klusterlet request its tokens, and the klusterlet writes the
agent's hub kubeconfig Secret with a token instead of a client certificate.  The manager must keep
the klusterlet's subject, bind its hub Role to it, and the agent must work with what it gets.

Here cluster2's registration agent is restarted with the flag for this module only; the addon is
installed from manifests/ and enabled on cluster2 alone.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.registration.identity import token_user
from dynamic_scoring.kube.api import Forbidden, KubeAPI
from e2e.controlplane import ControlPlane
from e2e.procs import wait_until, wait_value
from e2e.tests.test_addon_lifecycle import (
    ADDON,
    CLUSTER_V1A1,
    HUB_RBAC,
    INSTALL_NS,
    MERGE,
    Env,
    conditions,
    status_of,
)

CLUSTER = "cluster2"
REGISTRATION_AGENT = f"{CLUSTER}-registration-agent"
TOKEN_FLAG = "--addon-kubeclient-registration-auth=token"

pytestmark = [
    pytest.mark.ocm_contract,
    pytest.mark.filterwarnings("ignore:Attribute's length must be:UserWarning"),
]


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane) -> Iterator[Env]:
    """cluster2's klusterlet on the token driver; the addon installed and enabled on cluster2."""
    e = Env(control_plane)
    control_plane.stop_component(REGISTRATION_AGENT)
    control_plane.start_component(REGISTRATION_AGENT, extra_args=(TOKEN_FLAG,))
    try:
        e.install_manager()
        e.clusteradm("addon", "enable", "--names", ADDON, "--clusters", CLUSTER)
        yield e
    finally:
        e.uninstall((CLUSTER,))
        control_plane.stop_component(REGISTRATION_AGENT)
        control_plane.start_component(REGISTRATION_AGENT)


def test_the_klusterlet_declares_the_token_driver_and_the_manager_keeps_its_subject(env: Env) -> None:
    user = token_user(CLUSTER)
    assert user == f"system:serviceaccount:{CLUSTER}:{ADDON}-agent"

    def registered() -> bool:
        status = (env.mca(CLUSTER) or {}).get("status") or {}
        regs = status.get("registrations") or []
        return (
            status.get("kubeClientDriver") == "token"
            and len(regs) == 1
            and (regs[0].get("subject") or {}).get("user") == user
            and status_of(env.mca(CLUSTER), "RegistrationApplied") == "True"
        )

    wait_until(registered, timeout=90, what="kubeClientDriver token, the token subject, RegistrationApplied")
    # OCM's addon manager made the ServiceAccount the klusterlet requests tokens for
    wait_until(
        lambda: (
            env.hub.find("v1", "ServiceAccount", f"{ADDON}-agent", CLUSTER) is not None
            and status_of(env.mca(CLUSTER), "TokenInfrastructureReady") == "True"
        ),
        timeout=60,
        what="OCM's token infrastructure ready",
    )
    # our manager binds the hub Role to the subject the klusterlet reported, in a write of its own
    wanted = {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
    wait_value(
        lambda: env.hub.get("rbac.authorization.k8s.io/v1", "RoleBinding", HUB_RBAC, CLUSTER).get("subjects"),
        lambda subjects: wanted in (subjects or []),
        timeout=60,
        what=f"the hub RoleBinding {CLUSTER}/{HUB_RBAC} binding {user}",
    )


def test_the_agent_gets_token_credentials_that_reach_only_its_own_scores(env: Env, tmp_path: Path) -> None:
    def secret() -> dict[str, Any] | None:
        found = env.spokes[CLUSTER].find("v1", "Secret", f"{ADDON}-hub-kubeconfig", INSTALL_NS)
        return found if found and "kubeconfig" in (found.get("data") or {}) else None

    found = wait_until(secret, timeout=90, what="the agent's hub kubeconfig Secret on cluster2")
    for name, value in found["data"].items():
        (tmp_path / name).write_bytes(base64.b64decode(value))
    kubeconfig = yaml.safe_load((tmp_path / "kubeconfig").read_text())
    user = kubeconfig["users"][0]["user"]
    assert "client-certificate" not in user and "client-certificate-data" not in user, user.keys()
    assert user.get("token") or user.get("tokenFile"), user.keys()

    hub_as_agent = KubeAPI(tmp_path / "kubeconfig")
    aps = f"/apis/cluster.open-cluster-management.io/v1alpha1/namespaces/{CLUSTER}/addonplacementscores"
    name = f"e2e-token-{uuid.uuid4().hex[:6]}"
    labels = {
        "app.kubernetes.io/managed-by": "dynamic-scoring-agent",
        "dynamic-scoring.open-cluster-management.io/addon": ADDON,
    }
    body = {
        "apiVersion": CLUSTER_V1A1,
        "kind": "AddOnPlacementScore",
        "metadata": {"name": name, "namespace": CLUSTER, "labels": labels},
    }
    hub_as_agent.request("POST", aps, body=body)

    def written() -> bool:
        try:
            hub_as_agent.request(
                "PATCH", f"{aps}/{name}/status", body={"status": {"scores": []}}, content_type=MERGE
            )
        except Forbidden:
            return False
        return True

    wait_until(written, timeout=30, what="the agent's hub Role names its new score")
    hub_as_agent.request("DELETE", f"{aps}/{name}")
    with pytest.raises(Forbidden):
        hub_as_agent.request("POST", aps.replace(f"/{CLUSTER}/", "/cluster1/"), body=body)
    with pytest.raises(Forbidden):
        hub_as_agent.request("GET", f"/api/v1/namespaces/{CLUSTER}/secrets")


def test_the_agent_runs_on_token_credentials_and_the_addon_turns_available(env: Env) -> None:
    wait_until(
        lambda: status_of(env.mca(CLUSTER), "Available") == "True",
        timeout=120,  # the klusterlet looks at addon Leases every 30 s
        what="Available=True on cluster2 under the token driver",
    )
    # ManifestApplied is the manager's to write, the pod row the runner's: neither follows from Available
    wait_value(
        lambda: conditions(env.mca(CLUSTER)).get("ManifestApplied", {}).get("status"),
        lambda status: status == "True",
        timeout=60,
        what="ManifestApplied=True on cluster2",
    )
    wait_value(
        lambda: env.agent_pod(CLUSTER),
        lambda pod: pod is not None and bool(pod["pid"]),
        timeout=60,
        what="cluster2's agent running and ready (pods.json)",
    )
