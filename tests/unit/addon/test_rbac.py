"""Least privilege, checked on what is actually rendered: the agent's managed-cluster Role, its hub
Role, and the manager's ClusterRole from manifests/."""

from __future__ import annotations

from pathlib import Path

import yaml

from dynamic_scoring.addon.registration.identity import rbac_subjects, subject_problem
from dynamic_scoring.addon.registration.status import registration_subject
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.render.hub_rbac import granted_score_names, render_hub_rbac, sent_score_names
from dynamic_scoring.kube.jsontypes import JSON
from tests.unit.addon.helpers import by_kind, mca

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
    role, binding = render_hub_rbac(addon, registration_subject(addon), score_names=["mem", "cpu", "cpu"])
    assert role["kind"] == "Role" and binding["kind"] == "RoleBinding"
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "cluster3"
    assert_no_wildcards(role["rules"])
    aps, status = "addonplacementscores", "addonplacementscores/status"
    group = "cluster.open-cluster-management.io"
    assert rules_as_set(role["rules"]) == {
        # list finds its leftovers by label; create cannot be limited by name
        (group, aps, "list", ""),
        (group, aps, "create", ""),
        # everything that names a score: only the scores it is sent
        *((group, aps, verb, "cpu,mem") for verb in ("get", "patch", "delete")),
        *((group, status, verb, "cpu,mem") for verb in ("patch", "update")),
        ("", "events", "create", ""),
        ("", "events", "patch", ""),
        ("events.k8s.io", "events", "create", ""),
        ("events.k8s.io", "events", "patch", ""),
        # the scores' owner is read by name, and nothing else of the addon API
        ("addon.open-cluster-management.io", "managedclusteraddons", "get", "dynamic-scoring"),
    }
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
    hub_role, _ = render_hub_rbac(mca(), score_names=["cpu", "mem"])
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


def test_hub_rbac_without_score_names_grants_no_score_by_name() -> None:
    """An empty resourceNames would mean every name: with no scores the named rules are left out."""
    role, _ = render_hub_rbac(mca("cluster3"), score_names=[])
    assert not [r for r in role["rules"] if "resourceNames" in r and not r["resourceNames"]]
    named = {(r, v) for _, r, v, n in rules_as_set(role["rules"]) if r.startswith("addonplacementscores")}
    assert named == {("addonplacementscores", "list"), ("addonplacementscores", "create")}


def test_hub_rbac_values_stay_literal_strings() -> None:
    """Every value goes through tojson: a hostile name is one string, never YAML structure."""
    hostile = 'x"]\n- apiGroups: ["*"]\n  resources: ["*"]\n  verbs: ["*"]'
    role, _ = render_hub_rbac(mca("cluster3"), score_names=[hostile])
    assert_no_wildcards(role["rules"])
    assert [r["resourceNames"] for r in role["rules"] if "resourceNames" in r][:1] == [[hostile]]


def _work(*score_names: object, payload: str | None = None) -> JSON:
    import json

    summaries = payload if payload is not None else json.dumps([{"scoreName": n} for n in score_names])
    return {
        "metadata": {"name": "addon-dynamic-scoring-config", "namespace": "cluster3"},
        "spec": {
            "workload": {
                "manifests": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "dynamic-scoring-config", "namespace": "agent-ns"},
                        "data": {"summaries": summaries},
                    }
                ]
            }
        },
    }


def _score(name: str, **labels: str) -> JSON:
    return {"metadata": {"name": name, "namespace": "cluster3", "labels": labels}}


OUR_LABELS = {
    "app.kubernetes.io/managed-by": "dynamic-scoring-agent",
    "dynamic-scoring.open-cluster-management.io/addon": "dynamic-scoring",
}


def test_a_sent_name_another_owners_score_holds_is_not_granted() -> None:
    """The Role then keeps the agent off that object whatever the agent does (no get, patch or delete)."""
    sent = sent_score_names(_work("cpu_load", "resource_usage_score"))
    scores = [_score("gone", **OUR_LABELS)]
    assert granted_score_names(sent, scores, taken=["resource-usage-score"]) == ["cpu-load", "gone"]
    # our own leftover of a name is granted whatever else is said of it
    assert granted_score_names([], scores, taken=["gone"]) == ["gone"]


def test_granted_score_names_are_the_sent_scores_and_the_agents_leftovers() -> None:
    scores = [
        _score("gone", **OUR_LABELS),  # a withdrawn scorer's score: the agent must remove it
        _score("resource-usage-score"),  # another addon's, in the same namespace
        _score("looks-ours", **{"app.kubernetes.io/managed-by": "dynamic-scoring-agent"}),
    ]
    # score names become AddOnPlacementScore names exactly as the agent derives them
    sent = sent_score_names(_work("cpu_load", "mem", 7, None))
    assert granted_score_names(sent, scores) == ["cpu-load", "gone", "mem"]
    assert granted_score_names(sent_score_names(None), []) == []
    # an unreadable payload grants nothing of its own; the leftovers stay removable
    assert granted_score_names(sent_score_names(_work(payload="{not json")), scores) == ["gone"]
    assert not sent_score_names(_work(payload='{"scoreName": "x"}'))
    other_configmap = _work("cpu")
    other_configmap["spec"]["workload"]["manifests"][0]["metadata"]["name"] = "dynamic-scoring-proxy-ca"
    assert not sent_score_names(other_configmap)


def test_config_work_name_is_the_distributions() -> None:
    from dynamic_scoring.addon.constants import CONFIG_WORK_NAME
    from dynamic_scoring.addon.controllers.distribution.controller import WORK_NAME

    assert CONFIG_WORK_NAME == WORK_NAME


def test_binding_names_only_the_forms_this_clusters_agent_can_have() -> None:
    group = "system:open-cluster-management:cluster:cluster3:addon:dynamic-scoring"
    token_user = "system:serviceaccount:cluster3:dynamic-scoring-agent"
    assert subject_problem({"user": token_user}, "cluster3") is None
    assert rbac_subjects({"user": token_user, "groups": [group]}, "cluster3") == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": token_user},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group},
    ]
    # what a klusterlet could write into the MCA status instead: none of it is bound
    for user in (
        "system:serviceaccount:cluster4:dynamic-scoring-agent",  # another cluster's agent
        "system:open-cluster-management:cluster:cluster4:addon:dynamic-scoring:agent:dynamic-scoring",
        "system:serviceaccount:cluster3:other-addon-agent",
        "system:serviceaccount:open-cluster-management-hub:cluster-manager",
        "kubernetes-admin",
        None,
    ):
        problem = subject_problem({"user": user}, "cluster3")
        assert problem is not None and repr(user) in problem and token_user in problem
        assert rbac_subjects({"user": user}, "cluster3") == []
    other_groups = [
        "system:open-cluster-management:cluster:cluster3:addon:other-addon",  # another addon's agents
        "system:open-cluster-management:cluster:cluster4:addon:dynamic-scoring",
        "system:open-cluster-management:addon:dynamic-scoring",  # every cluster's agent
        "system:authenticated",
        "system:masters",
    ]
    assert rbac_subjects({"user": None, "groups": other_groups}, "cluster3") == []
    assert len(subject_problem({"user": "u" * 10_000}, "cluster3") or "") < 600  # status stays short


def test_manager_may_write_only_its_own_addon_objects_and_the_agents_rbac() -> None:
    """resourceNames wherever the name is fixed: another addon's MCA, CMA or Role is out of reach."""
    docs = list(yaml.safe_load_all((REPO / "manifests/rbac.yaml").read_text()))
    held = rules_as_set(next(d for d in docs if d["kind"] == "ClusterRole")["rules"])
    addon = "addon.open-cluster-management.io"
    for resource in (
        "managedclusteraddons",
        "managedclusteraddons/status",
        "managedclusteraddons/finalizers",
        "clustermanagementaddons",
        "clustermanagementaddons/status",
    ):
        rules = {(v, n) for g, r, v, n in held if (g, r) == (addon, resource)}
        assert rules and all(n == "dynamic-scoring" for _, n in rules), (resource, rules)
    # no write to an MCA itself: the status fields we own go through /status
    assert not {v for g, r, v, _ in held if (g, r) == (addon, "managedclusteraddons")} & {
        "update",
        "patch",
        "delete",
        "create",
    }
    for resource in ("roles", "rolebindings"):
        by_verb = {v: n for g, r, v, n in held if (g, r) == ("rbac.authorization.k8s.io", resource)}
        assert by_verb == {
            "get": "",
            "list": "",
            "watch": "",
            "create": "",  # cannot be limited by name
            "update": "open-cluster-management:dynamic-scoring:agent",
            "patch": "open-cluster-management:dynamic-scoring:agent",
            "delete": "open-cluster-management:dynamic-scoring:agent",
        }
