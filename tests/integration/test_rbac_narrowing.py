"""The narrowed RBAC, enforced by the real hub authorizer: what the manager and the agent may no longer do.

The manager's rules are the ones `manifests/rbac.yaml` installs, bound to its real ServiceAccount;
the lifecycle controllers run here with that ServiceAccount's token, so the same run shows that the
narrowed rules are still enough for them.  The agent's hub Role is the one those controllers write.
Denials are shown three ways: a SubjectAccessReview, `kubectl auth can-i --as`, and the real request
(with the manager's token, or impersonating the agent), which the apiserver refuses with 403.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.registration.identity import default_groups, default_user, token_user
from dynamic_scoring.kube.api import Forbidden, KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.kube import Client, Kubectl
from e2e.pki import write_kubeconfig
from e2e.procs import wait_until
from tests.integration.manager_identity import MANAGER_SA, token_kubeconfig
from tests.integration.test_addon_controllers import (
    ADDON,
    ADDON_V1A1,
    HUB_RBAC,
    RBAC_V1,
    Running,
    add_cluster,
    conditions,
    hub_install,
)

MANAGER_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:dynamic-scoring", "system:authenticated"]
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
WORK_V1 = "work.open-cluster-management.io/v1"
MERGE = "application/merge-patch+json"
OTHER = "resource-usage-score"  # another addon's score, in the same cluster namespace
OURS = {
    "app.kubernetes.io/managed-by": "dynamic-scoring-agent",
    "dynamic-scoring.open-cluster-management.io/addon": ADDON,
}
WHOAMI = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


@pytest.fixture(scope="module")
def hub(manager_rbac: Client) -> Client:
    """The hub with our CRDs, CMA and the manager's ServiceAccount and RBAC from manifests/.

    `manager_rbac` removes the namespace and RBAC afterwards when it created them.
    """
    hub_install(manager_rbac)
    return manager_rbac


@pytest.fixture(scope="module")
def kubectl(control_plane: ControlPlane) -> Kubectl:
    assert control_plane.tools is not None and control_plane.hub is not None
    return Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)


@pytest.fixture(scope="module")
def manager_api(control_plane: ControlPlane, hub: Client, kubectl: Kubectl, tmp_path_factory: Any) -> KubeAPI:
    """The hub as the manager's ServiceAccount sees it: a real token, no impersonation."""
    api = KubeAPI(token_kubeconfig(control_plane, kubectl, tmp_path_factory.mktemp("manager")))
    assert (
        api.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=WHOAMI)["status"][
            "userInfo"
        ]["username"]
        == MANAGER_SA
    )
    return api


@pytest.fixture(scope="module")
def clusters(hub: Client) -> Iterator[list[str]]:
    names = [f"rbac-{uuid.uuid4().hex[:6]}-{i}" for i in range(2)]
    for name in names:
        add_cluster(hub, name)
        # another addon enabled on the same cluster, and its score
        hub.apply(
            {
                "apiVersion": ADDON_V1A1,
                "kind": "ManagedClusterAddOn",
                "metadata": {"name": "other-addon", "namespace": name},
                "spec": {},
            }
        )
        hub.apply(
            {
                "apiVersion": APS_V1A1,
                "kind": "AddOnPlacementScore",
                "metadata": {"name": OTHER, "namespace": name},
            }
        )
    yield names
    for name in names:
        for addon in (ADDON, "other-addon"):
            hub.delete(ADDON_V1A1, "ManagedClusterAddOn", addon, name)
        hub.delete("cluster.open-cluster-management.io/v1", "ManagedCluster", name)


@pytest.fixture(scope="module")
def manager(manager_api: KubeAPI, clusters: list[str]) -> Iterator[Running]:
    """The lifecycle controllers, running with the manager ServiceAccount's own token."""
    running = Running(manager_api, CollectorRegistry(), resync=2.0)
    running.start()
    yield running
    running.close()


def review(hub: Client, user: str, groups: list[str], **attributes: str) -> bool:
    """A SubjectAccessReview: would the hub's authorizer allow `user` this request?"""
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
    }
    result = hub.api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body)
    return bool(result["status"].get("allowed"))


def test_the_manager_cannot_read_or_write_another_addons_mca_or_cma(
    hub: Client, kubectl: Kubectl, manager_api: KubeAPI, clusters: list[str]
) -> None:
    cluster = clusters[0]

    def manager_may(
        verb: str, resource: str, name: str = "", subresource: str = "", ns: str = cluster
    ) -> bool:
        attrs = {"verb": verb, "group": "addon.open-cluster-management.io", "resource": resource}
        attrs |= {"name": name} if name else {}
        attrs |= {"subresource": subresource} if subresource else {}
        attrs |= {"namespace": ns} if ns else {}
        return review(hub, MANAGER_SA, MANAGER_GROUPS, **attrs)

    mcas = "managedclusteraddons"
    # what it needs, on its own addon, in every cluster namespace
    for verb in ("get", "list", "watch"):  # list/watch: the informer's metadata.name field selector
        assert manager_may(verb, mcas, ADDON), verb
    for verb in ("patch", "update"):
        assert manager_may(verb, mcas, ADDON, "status"), verb
    assert manager_may("update", mcas, ADDON, "finalizers")
    assert manager_may("patch", "clustermanagementaddons", ADDON, "status", ns="")
    # nothing of another addon's, and no write to an MCA itself
    for verb in ("get", "update", "patch", "delete"):
        assert not manager_may(verb, mcas, "other-addon"), verb
    for verb in ("patch", "update"):
        assert not manager_may(verb, mcas, "other-addon", "status"), verb
        assert not manager_may(verb, "clustermanagementaddons", "other-addon", "status", ns=""), verb
    assert not manager_may("update", mcas, "other-addon", "finalizers")
    assert not manager_may("list", mcas)  # every MCA of the namespace: no
    assert not manager_may("update", mcas, ADDON)
    # the same through kubectl, impersonating the ServiceAccount
    can_i = ["auth", "can-i", "--as", MANAGER_SA, "-n", cluster]
    assert (
        kubectl.run(
            *can_i, "patch", f"{mcas}.addon.open-cluster-management.io/{ADDON}", "--subresource=status"
        ).strip()
        == "yes"
    )
    assert (
        kubectl.run(
            *can_i,
            "patch",
            f"{mcas}.addon.open-cluster-management.io/other-addon",
            "--subresource=status",
            check=False,
        ).strip()
        == "no"
    )
    # and the real request with the manager's own token
    path = f"/apis/addon.open-cluster-management.io/v1alpha1/namespaces/{cluster}/managedclusteraddons"
    with pytest.raises(Forbidden):
        manager_api.request(
            "PATCH", f"{path}/other-addon/status", body={"status": {"namespace": "x"}}, content_type=MERGE
        )
    with pytest.raises(Forbidden):
        manager_api.request("GET", f"{path}/other-addon")
    with pytest.raises(Forbidden):
        manager_api.request("GET", path)
    assert [
        i["metadata"]["name"]
        for i in manager_api.request("GET", path, query={"fieldSelector": f"metadata.name={ADDON}"})["items"]
    ] == [ADDON]


def test_the_manager_may_change_only_the_agents_roles_and_grant_only_what_it_holds(
    hub: Client, manager_api: KubeAPI, clusters: list[str]
) -> None:
    cluster = clusters[1]
    roles = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{cluster}/roles"
    other = f"ds-rbac-probe-{uuid.uuid4().hex[:6]}"
    hub.apply(
        {
            "apiVersion": RBAC_V1,
            "kind": "Role",
            "metadata": {"name": other, "namespace": cluster},
            "rules": [],
        }
    )
    patch = {"metadata": {"labels": {"touched": "yes"}}}
    with pytest.raises(Forbidden):
        manager_api.request("PATCH", f"{roles}/{other}", body=patch, content_type=MERGE)
    with pytest.raises(Forbidden):
        manager_api.request("DELETE", f"{roles}/{other}")
    # create cannot be limited by name, but escalation prevention bounds what a new Role may hold
    grab = {
        "apiVersion": RBAC_V1,
        "kind": "Role",
        "metadata": {"name": f"{other}-secrets", "namespace": cluster},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
    }
    with pytest.raises(Forbidden):
        manager_api.request("POST", roles, body=grab)
    for verb in ("update", "patch", "delete"):
        attrs = {
            "verb": verb,
            "group": "rbac.authorization.k8s.io",
            "resource": "roles",
            "namespace": cluster,
        }
        assert review(hub, MANAGER_SA, MANAGER_GROUPS, **attrs, name=HUB_RBAC), verb
        assert not review(hub, MANAGER_SA, MANAGER_GROUPS, **attrs, name=other), verb
    hub.delete(RBAC_V1, "Role", other, cluster)


def _agent_role(hub: Client, cluster: str) -> JSON | None:
    return hub.find(RBAC_V1, "Role", HUB_RBAC, cluster)


def _named(role: JSON | None) -> set[str]:
    return {
        n
        for r in (role or {}).get("rules") or []
        for n in r.get("resourceNames") or []
        if "addonplacementscores" in r["resources"]
    }


def _config_work(cluster: str, *score_names: str) -> JSON:
    """What the distribution sends a cluster: its summaries in a ConfigMap, inside a ManifestWork."""
    return {
        "apiVersion": WORK_V1,
        "kind": "ManifestWork",
        "metadata": {
            "name": f"addon-{ADDON}-config",
            "namespace": cluster,
            "labels": {"open-cluster-management.io/addon-name": ADDON},
        },
        "spec": {
            "workload": {
                "manifests": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {
                            "name": "dynamic-scoring-config",
                            "namespace": "open-cluster-management-agent-addon",
                        },
                        "data": {"summaries": json.dumps([{"name": n, "scoreName": n} for n in score_names])},
                    }
                ]
            }
        },
    }


def agent_api(cp: ControlPlane, cluster: str, tmp: Path) -> KubeAPI:
    """The agent's hub identity as the addon CSR gives it: a client certificate, the default subject."""
    assert cp.hub is not None
    cert = cp.hub.ca.issue(
        f"rbac-agent-{uuid.uuid4().hex[:6]}",
        common_name=default_user(cluster),
        organizations=tuple(default_groups(cluster)),
        client=True,
    )
    path = write_kubeconfig(
        tmp / "agent.kubeconfig", server=cp.hub.server, ca_pem=cp.hub.ca.cert_pem, user="agent", client=cert
    )
    return KubeAPI(path)


def test_the_agent_cannot_touch_another_addons_score_in_its_own_namespace(
    control_plane: ControlPlane,
    hub: Client,
    kubectl: Kubectl,
    clusters: list[str],
    manager: Running,
    tmp_path: Path,
) -> None:
    """The hub Role the manager (running as its ServiceAccount) writes names the agent's scores only."""
    cluster = clusters[0]
    wait_until(lambda: _agent_role(hub, cluster), timeout=60, what="the agent's hub Role")
    started = time.monotonic()
    hub.apply(_config_work(cluster, "cpu_load"))
    wait_until(
        lambda: _named(_agent_role(hub, cluster)) == {"cpu-load"},
        timeout=30,
        interval=0.02,
        what="Role names cpu-load",
    )
    print(
        f"[rbac] config work written -> agent's hub Role names its score: {time.monotonic() - started:.3f} s"
    )
    user, groups = default_user(cluster), default_groups(cluster)
    agent = agent_api(control_plane, cluster, tmp_path)
    aps = f"/apis/{APS_V1A1}/namespaces/{cluster}/addonplacementscores"

    def agent_may(verb: str, name: str = "", subresource: str = "") -> bool:
        attrs = {
            "verb": verb,
            "group": "cluster.open-cluster-management.io",
            "resource": "addonplacementscores",
            "namespace": cluster,
        }
        attrs |= {"name": name} if name else {}
        attrs |= {"subresource": subresource} if subresource else {}
        return review(hub, user, groups, **attrs)

    # its own score: created (create is not limited by name), then written through /status
    own = {
        "apiVersion": APS_V1A1,
        "kind": "AddOnPlacementScore",
        "metadata": {"name": "cpu-load", "labels": OURS},
    }
    agent.request("POST", aps, body=own)
    status = {"status": {"scores": [{"name": "cpu", "value": 7}]}}
    agent.request("PATCH", f"{aps}/cpu-load/status", body=status, content_type=MERGE)
    assert hub.get(APS_V1A1, "AddOnPlacementScore", "cpu-load", cluster)["status"]["scores"][0]["value"] == 7
    assert agent_may("patch", "cpu-load", "status") and agent_may("delete", "cpu-load")
    assert agent_may("list") and agent_may("create")
    # another addon's score in the same namespace: no read, write, status write or delete
    for verb in ("get", "update", "patch", "delete"):
        assert not agent_may(verb, OTHER), verb
    for verb in ("update", "patch"):
        assert not agent_may(verb, OTHER, "status"), verb
    as_agent = ["--as", user, *(f"--as-group={g}" for g in groups), "-n", cluster]
    crd = "addonplacementscores.cluster.open-cluster-management.io"
    assert kubectl.run("auth", "can-i", *as_agent, "delete", f"{crd}/{OTHER}", check=False).strip() == "no"
    assert kubectl.run("auth", "can-i", *as_agent, "delete", f"{crd}/cpu-load", check=False).strip() == "yes"
    for method, path, body in (
        ("PATCH", f"{aps}/{OTHER}/status", status),
        ("PATCH", f"{aps}/{OTHER}", {"metadata": {"labels": OURS}}),  # adopting it: no
        ("DELETE", f"{aps}/{OTHER}", None),
        ("GET", f"{aps}/{OTHER}", None),
    ):
        with pytest.raises(Forbidden):
            agent.request(method, path, body=body, content_type=MERGE)
    untouched = hub.get(APS_V1A1, "AddOnPlacementScore", OTHER, cluster)
    assert not (untouched.get("status") or {}).get("scores") and not untouched["metadata"].get("labels")
    # a withdrawn scorer: the agent must still remove the score it wrote, and then loses it
    hub.apply(_config_work(cluster))
    wait_until(
        lambda: _named(_agent_role(hub, cluster)) == {"cpu-load"}, timeout=30, what="leftover still named"
    )
    agent.request("DELETE", f"{aps}/cpu-load")
    wait_until(lambda: not _named(_agent_role(hub, cluster)), timeout=30, what="Role names no score")
    role = _agent_role(hub, cluster)
    assert role is not None and not [r for r in role["rules"] if r.get("resourceNames") == []]
    # the authorizer follows the Role through its own cache: wait for it to take the grant away
    wait_until(
        lambda: not agent_may("patch", "cpu-load", "status") and not agent_may("get", OTHER),
        timeout=30,
        what="the authorizer refusing patch of cpu-load/status and get of another addon's score",
    )
    hub.delete(WORK_V1, "ManifestWork", f"addon-{ADDON}-config", cluster)


def test_a_token_subject_of_another_form_is_not_bound(
    hub: Client, clusters: list[str], manager: Running
) -> None:
    """Under token auth the klusterlet writes the subject: only this cluster's agent account is bound."""
    cluster = clusters[1]
    wait_until(
        lambda: (
            conditions(hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster))
            .get("RegistrationApplied", {})
            .get("status")
            == "True"
        ),
        timeout=60,
        what="registered",
    )

    def set_subject(user: str) -> None:
        mca = hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)
        reg = {"signerName": "kubernetes.io/kube-apiserver-client", "subject": {"user": user}}
        hub.patch_status(mca, {"kubeClientDriver": "token", "registrations": [reg]})

    def bound() -> set[str]:
        binding = hub.find(RBAC_V1, "RoleBinding", HUB_RBAC, cluster) or {}
        return {s["name"] for s in binding.get("subjects") or []}

    forged = default_user(clusters[0])  # another cluster's agent, named by this cluster's klusterlet
    set_subject(forged)

    def refused() -> JSON | None:
        cond = conditions(hub.get(ADDON_V1A1, "ManagedClusterAddOn", ADDON, cluster)).get(
            "RegistrationApplied"
        )
        return cond if cond and cond["status"] == "False" else None

    cond = wait_until(refused, timeout=30, what="RegistrationApplied=False")
    assert forged in cond["message"] and token_user(cluster) in cond["message"]
    assert forged not in bound()
    events = wait_until(
        lambda: [
            e for e in hub.items("v1", "Event", cluster) if e.get("reason") == "RegistrationSubjectRefused"
        ],
        timeout=30,
        what="a RegistrationSubjectRefused Event",
    )
    assert forged in events[0]["message"]
    assert not review(
        hub,
        forged,
        [],
        verb="patch",
        group="cluster.open-cluster-management.io",
        resource="addonplacementscores",
        subresource="status",
        namespace=cluster,
        name="cpu-load",
    )
    # the form OCM's token driver writes is bound
    set_subject(token_user(cluster))
    wait_until(lambda: token_user(cluster) in bound(), timeout=30, what="token user bound")
    assert forged not in bound()
    wait_until(lambda: refused() is None, timeout=30, what="RegistrationApplied=True again")
