"""Least privilege, checked on what is actually rendered: the agent's managed-cluster Role, its hub
Role, and the manager's ClusterRole from manifests/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from addon.registration.status import registration_subject
from addon.render.agent import render_agent
from addon.render.hub_rbac import render_hub_rbac
from tests.unit.addon.helpers import by_kind, mca

JSON = dict[str, Any]
REPO = Path(__file__).resolve().parents[3]


def rules_as_set(rules: list[JSON]) -> set[tuple[str, str, str, str]]:
    return {
        (group, resource, verb, ",".join(rule.get("resourceNames", [])))
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def assert_no_wildcards(rules: list[JSON]) -> None:
    for rule in rules:
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(key, []), rule


def test_agent_managed_cluster_role_is_exactly_what_the_agent_uses() -> None:
    manifests = render_agent(mca=mca(install_namespace="scoring"), adc=None).manifests
    assert not [m for m in manifests if m["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    role = by_kind(manifests, "Role")
    assert role["metadata"]["namespace"] == "scoring"
    assert_no_wildcards(role["rules"])
    assert rules_as_set(role["rules"]) == {
        ("", "configmaps", "get", "dynamic-scoring-config"),
        ("", "configmaps", "list", "dynamic-scoring-config"),
        ("", "configmaps", "watch", "dynamic-scoring-config"),
        ("", "secrets", "get", ""),
        ("coordination.k8s.io", "leases", "create", ""),
        ("coordination.k8s.io", "leases", "get", "dynamic-scoring"),
        ("coordination.k8s.io", "leases", "update", "dynamic-scoring"),
        ("coordination.k8s.io", "leases", "patch", "dynamic-scoring"),
        ("", "events", "create", ""),
        ("", "events", "patch", ""),
        ("events.k8s.io", "events", "create", ""),
        ("events.k8s.io", "events", "patch", ""),
        ("apps", "deployments", "get", "dynamic-scoring-agent"),  # the health Lease's owner
    }
    binding = by_kind(manifests, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dynamic-scoring-agent", "namespace": "scoring"}
    ]
    deployment = by_kind(manifests, "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "dynamic-scoring-agent"


def test_hub_rbac_is_scores_events_and_reading_its_addon_in_the_cluster_namespace_only() -> None:
    addon = mca("cluster3")
    role, binding = render_hub_rbac(addon, registration_subject(addon))
    assert role["kind"] == "Role" and binding["kind"] == "RoleBinding"
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "cluster3"
    assert_no_wildcards(role["rules"])
    assert {(g, r) for g, r, _, _ in rules_as_set(role["rules"])} == {
        ("cluster.open-cluster-management.io", "addonplacementscores"),
        ("cluster.open-cluster-management.io", "addonplacementscores/status"),
        ("", "events"),
        ("events.k8s.io", "events"),
        ("addon.open-cluster-management.io", "managedclusteraddons"),
    }
    # the scores' owner is read by name, and nothing else of the addon API
    assert ("addon.open-cluster-management.io", "managedclusteraddons", "get", "dynamic-scoring") in (
        rules_as_set(role["rules"])
    )
    assert [r for r in rules_as_set(role["rules"]) if r[1] == "managedclusteraddons"] == [
        ("addon.open-cluster-management.io", "managedclusteraddons", "get", "dynamic-scoring")
    ]
    for obj in (role, binding):
        assert obj["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ManagedClusterAddOn",
                "name": "dynamic-scoring",
                "uid": "uid-cluster3",
                "controller": False,
                "blockOwnerDeletion": True,
            }
        ]


def test_hub_binding_never_grants_to_every_clusters_agent() -> None:
    addon = mca("cluster3")
    _, binding = render_hub_rbac(addon, registration_subject(addon))
    names = {s["name"] for s in binding["subjects"]}
    assert names == {
        "system:open-cluster-management:cluster:cluster3:addon:dynamic-scoring:agent:dynamic-scoring",
        "system:open-cluster-management:cluster:cluster3:addon:dynamic-scoring",
    }
    assert "system:open-cluster-management:addon:dynamic-scoring" not in names
    assert "system:authenticated" not in names


def test_manager_cluster_role_has_no_wildcards_and_only_contract_resources() -> None:
    docs = list(yaml.safe_load_all((REPO / "manifests/rbac.yaml").read_text()))
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole")
    assert_no_wildcards(cluster_role["rules"])
    resources = {(g, r) for g, r, _, _ in rules_as_set(cluster_role["rules"])}
    assert resources == {
        ("cluster.open-cluster-management.io", "managedclusters"),
        ("work.open-cluster-management.io", "manifestworks"),
        ("addon.open-cluster-management.io", "managedclusteraddons"),
        ("addon.open-cluster-management.io", "managedclusteraddons/status"),
        ("addon.open-cluster-management.io", "managedclusteraddons/finalizers"),
        ("addon.open-cluster-management.io", "clustermanagementaddons"),
        ("addon.open-cluster-management.io", "clustermanagementaddons/status"),
        ("addon.open-cluster-management.io", "addondeploymentconfigs"),
        ("certificates.k8s.io", "certificatesigningrequests"),
        ("certificates.k8s.io", "certificatesigningrequests/approval"),
        ("certificates.k8s.io", "signers"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "rolebindings"),
        ("cluster.open-cluster-management.io", "addonplacementscores"),
        ("cluster.open-cluster-management.io", "addonplacementscores/status"),
        ("dynamic-scoring.open-cluster-management.io", "dynamicscoringconfigs"),
        ("dynamic-scoring.open-cluster-management.io", "dynamicscoringconfigs/status"),
        ("", "events"),
        ("events.k8s.io", "events"),
    }
    # No secrets, no clusterroles, no escalate/bind/impersonate anywhere.
    verbs = {v for _, _, v, _ in rules_as_set(cluster_role["rules"])}
    assert not verbs & {"escalate", "bind", "impersonate", "deletecollection"}
    # The manager holds every rule it grants the agent (RBAC escalation prevention).
    hub_role, _ = render_hub_rbac(mca())
    held = rules_as_set(cluster_role["rules"])
    # a rule held for every name covers the same rule limited to one name
    uncovered = {r for r in rules_as_set(hub_role["rules"]) if r not in held and (*r[:3], "") not in held}
    assert not uncovered
    lease_role = next(d for d in docs if d["kind"] == "Role")
    assert lease_role["metadata"]["namespace"] == "dynamic-scoring"
    assert {r for _, r, _, _ in rules_as_set(lease_role["rules"])} == {
        "leases",
        "dynamicscorers",
        "dynamicscorers/status",
        "secrets",
    }
    # Secrets: get one by name in this namespace only, never list (the registry reads spec.probe's)
    assert {v for _, r, v, _ in rules_as_set(lease_role["rules"]) if r == "secrets"} == {"get"}
