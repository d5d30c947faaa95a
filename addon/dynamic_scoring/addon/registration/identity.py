"""The agent's hub identity, as addon-framework's defaults define it.

The subject is a pure function of the cluster and addon names and a fixed agent name, so it is the
same across manager restarts: a restart never makes the klusterlet re-register the agent (the Go
dynamic-scoring addon picked a random agent name per start, which did).
"""

from __future__ import annotations

from dynamic_scoring.addon.constants import ADDON_NAME, AGENT_NAME, KUBE_APISERVER_CLIENT_SIGNER
from dynamic_scoring.kube.jsontypes import JSON

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


def token_user(cluster: str, addon: str = ADDON_NAME) -> str:
    """`system:serviceaccount:<c>:<addon>-agent`, the user the klusterlet's token driver reports.

    OCM's addon-manager creates that ServiceAccount in the cluster namespace, and the klusterlet asks
    for its tokens; under token auth it writes this user, and only a user, into the MCA status.
    """
    return f"system:serviceaccount:{cluster}:{addon}-agent"


def expected_users(cluster: str) -> frozenset[str]:
    """The only users the agent's hub RoleBinding in `cluster`'s namespace may name."""
    return frozenset({default_user(cluster), token_user(cluster)})


def _shown(value: object) -> str:
    """A subject value for a message: quoted, and short (it comes from a status others write)."""
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def subject_problem(subject: JSON, cluster: str) -> str | None:
    """Why the registration subject may not be bound in `cluster`'s namespace; None when it may.

    Under token auth the subject comes from the MCA status, which the klusterlet writes, that is,
    whoever administers the managed cluster.  Binding any user found there would let that admin
    hand the agent's score rights to an identity of their choosing (another cluster's agent, a hub
    user).  So the user must be one of the two forms this cluster's agent can have.
    """
    user = subject.get("user")
    if user in expected_users(cluster):
        return None
    return (
        f"the registration subject user {_shown(user)} is not this cluster's agent identity "
        f"({default_user(cluster)} or, under token auth, {token_user(cluster)}); it is not bound"
    )


def rbac_subjects(subject: JSON, cluster: str) -> list[JSON]:
    """RoleBinding subjects for a registration subject: its user and its cluster group, if expected.

    Binding the registration subject rather than a fixed group covers both drivers: under token
    auth the klusterlet sets the subject to the agent's ServiceAccount on the hub.  Only the forms
    this cluster's agent can have are kept (`subject_problem` says why the user is dropped): the
    user `expected_users`, and of the groups only this cluster's group for this addon.  Unlike the
    framework's helper, the group every cluster's agent carries is left out, not only
    `system:authenticated`: `system:open-cluster-management:addon:<addon>` bound in cluster1's
    namespace would let cluster2's agent write cluster1's scores, and another addon's group of the
    same cluster would let that addon's agent write ours.
    """
    subjects: list[JSON] = []
    if subject.get("user") in expected_users(cluster):
        subjects.append({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": subject["user"]})
    cluster_group = default_groups(cluster)[0]
    if cluster_group in (subject.get("groups") or []):
        subjects.append({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": cluster_group})
    return subjects
