"""The agent's hub identity, as addon-framework's defaults define it (contract §4.1).

The subject is a pure function of the cluster and addon names and a fixed agent name, so it is the
same across manager restarts: a restart never makes the klusterlet re-register the agent (the Go
dynamic-scoring addon picked a random agent name per start, which did).
"""

from __future__ import annotations

from typing import Any

from addon.constants import ADDON_NAME, AGENT_NAME, KUBE_APISERVER_CLIENT_SIGNER

JSON = dict[str, Any]

AUTHENTICATED_GROUP = "system:authenticated"


def default_user(cluster: str, addon: str = ADDON_NAME, agent: str = AGENT_NAME) -> str:
    """`system:open-cluster-management:cluster:<c>:addon:<a>:agent:<agent>`."""
    return f"system:open-cluster-management:cluster:{cluster}:addon:{addon}:agent:{agent}"


def default_groups(cluster: str, addon: str = ADDON_NAME) -> list[str]:
    """The two groups of af v1.3 (v1.2 and older added `system:authenticated`, removed as a security fix)."""
    return [
        f"system:open-cluster-management:cluster:{cluster}:addon:{addon}",
        f"system:open-cluster-management:addon:{addon}",
    ]


def default_registration(cluster: str) -> JSON:
    """The single v1alpha1 registration: a hub API client certificate with the default subject."""
    return {
        "signerName": KUBE_APISERVER_CLIENT_SIGNER,
        "subject": {"user": default_user(cluster), "groups": default_groups(cluster)},
    }


def rbac_subjects(subject: JSON, cluster: str) -> list[JSON]:
    """RoleBinding subjects for a registration subject: its user, and its groups scoped to `cluster`.

    Binding the registration subject rather than a fixed group covers both drivers: under token
    auth the klusterlet sets the subject to the agent's ServiceAccount on the hub.  Unlike the
    framework's helper, groups that every cluster's agent carries are left out, not only
    `system:authenticated`: `system:open-cluster-management:addon:<addon>` bound in cluster1's
    namespace would let cluster2's agent write cluster1's scores.
    """
    cluster_scope = f"system:open-cluster-management:cluster:{cluster}:"
    subjects: list[JSON] = []
    if subject.get("user"):
        subjects.append({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": subject["user"]})
    for group in subject.get("groups") or []:
        if group != AUTHENTICATED_GROUP and (group + ":").startswith(cluster_scope):
            subjects.append({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group})
    return subjects
