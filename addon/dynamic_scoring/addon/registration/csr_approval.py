"""Which CertificateSigningRequests the manager approves: the agent's, for a real cluster, only.

The rules of addon-framework's default approver, plus explicit checks the
framework leaves to other components, all of which a legitimate klusterlet request passes:

* the signer is `kubernetes.io/kube-apiserver-client` (the only one our registration declares);
* the usages are client-certificate usages only (the klusterlet asks for digital signature, key
  encipherment and client auth);
* `spec.request` is one canonical PEM block, read the way Kubernetes reads it, with a valid
  signature (see `csr_request`: a lenient reader and Go's can take different blocks of one text);
* its attributes are none, or one extensionRequest of one value, as the klusterlet writes them: Go
  merges the extensions of every extensionRequest attribute into what the signer copies, while
  `cryptography` reads only the first (see `csr_request`);
* it asks for no extension but a subjectAlternativeName holding at most the DNS name
  `<addon>.addon.open-cluster-management.io`, which is all the klusterlet asks for;
* the subject carries only CN, O and OU attributes (the apiserver maps other attributes too, such as
  the user UID since Kubernetes 1.34), and exactly one CN, the agent's user;
* the subject's Organizations are exactly the agent's groups (optionally plus
  `system:authenticated`), as addon-framework v1.3's approver requires: every Organization becomes
  a group of the certificate, so an extra one is an extra identity (see `organizations_problem`);
* the requester is the cluster's own agent, `system:open-cluster-management:<cluster>:<agent>`:
  the framework tests a bare prefix, which would let cluster `c10`'s klusterlet obtain an identity
  for cluster `c1`; we require the `:` after the cluster name, and a single segment after it, so
  that for a cluster named `cluster` an addon agent's own user
  (`system:open-cluster-management:cluster:<c>:addon:...`) is not taken for its klusterlet.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from dynamic_scoring.addon.constants import (
    ADDON_NAME,
    ADDON_NAME_LABEL,
    CLUSTER_NAME_LABEL,
    CSR_USER_ANNOTATION,
    KUBE_APISERVER_CLIENT_SIGNER,
)
from dynamic_scoring.addon.registration.csr_request import RequestError, read_subject
from dynamic_scoring.addon.registration.identity import AUTHENTICATED_GROUP, default_groups, default_user
from dynamic_scoring.kube.jsontypes import JSON


def agent_dns_name(addon_name: str = ADDON_NAME) -> str:
    """The one subject alternative name the klusterlet puts in an addon's request."""
    return f"{addon_name}.addon.open-cluster-management.io"


GRPC_SERVER_USER = "system:serviceaccount:open-cluster-management-hub:grpc-server-sa"
ALLOWED_USAGES = frozenset({"digital signature", "key encipherment", "client auth"})
APPROVED_REASON = "AutoApprovedByHubCSRApprovingController"
APPROVED_MESSAGE = "Auto approving addon agent certificate."


@dataclass(frozen=True)
class Decision:
    """Whether to approve, and why not (for the log line and the Event on the MCA)."""

    approve: bool
    reason: str


def _no(reason: str) -> Decision:
    return Decision(False, reason)


def is_decided(csr: JSON) -> bool:
    """Already Approved or Denied (or Failed): terminal, never touched again."""
    return any(
        c.get("type") in ("Approved", "Denied", "Failed")
        for c in (csr.get("status") or {}).get("conditions") or []
    )


def is_ours(csr: JSON, addon_name: str = ADDON_NAME) -> bool:
    """A CSR the approver considers at all: named `addon*` and labelled for our addon."""
    labels = csr.get("metadata", {}).get("labels") or {}
    return (
        csr.get("metadata", {}).get("name", "").startswith("addon")
        and labels.get(ADDON_NAME_LABEL) == addon_name
    )


def organizations_problem(organizations: list[str], expected: list[str]) -> str:
    """Why a subject's Organizations are not exactly `expected` (optionally plus `system:authenticated`).

    Every Organization becomes a group of the certificate's user, so one extra Organization is
    an extra identity: `system:open-cluster-management:<other cluster>` would make the holder
    that cluster's klusterlet, `system:masters` or `system:cluster-admins` a hub admin.  A
    subset check ("both expected groups are present") lets any such third group through, so the
    set must match exactly.  `system:authenticated` is tolerated because addon-framework v1.2 and
    older put it in the default subject and every authenticated user carries it anyway.
    Duplicates are refused too: the klusterlet never sends them, so a request that has them was
    not built by it.
    """
    if len(organizations) != len(set(organizations)):
        return "subject organizations repeat a value"
    extra = sorted(set(organizations) - set(expected) - {AUTHENTICATED_GROUP})
    if extra:
        return f"subject organizations include {extra[0]!r}, which is not a group of this agent"
    missing = [g for g in expected if g not in organizations]
    if missing:
        return f"subject organizations lack {missing[0]}"
    return ""


def decide(csr: JSON, *, cluster: JSON | None, addon: JSON | None, addon_name: str = ADDON_NAME) -> Decision:
    """Decide one CSR.

    Args:
        csr: the certificates.k8s.io/v1 CertificateSigningRequest.
        cluster: the ManagedCluster its cluster-name label names (None when it does not exist).
        addon: the ManagedClusterAddOn of our addon in that cluster's namespace (None when absent).
        addon_name: our addon.
    """
    meta = csr.get("metadata", {})
    spec = csr.get("spec", {})
    labels = meta.get("labels") or {}
    if not is_ours(csr, addon_name):
        return _no("not an addon CSR of this addon")
    if is_decided(csr):
        return _no("already approved or denied")
    cluster_name = labels.get(CLUSTER_NAME_LABEL)
    if not cluster_name:
        return _no(f"no {CLUSTER_NAME_LABEL} label")
    if cluster is None or cluster.get("metadata", {}).get("name") != cluster_name:
        return _no(f"ManagedCluster {cluster_name} does not exist")
    if addon is None or addon.get("metadata", {}).get("namespace") != cluster_name:
        return _no(f"addon {addon_name} is not enabled on cluster {cluster_name}")
    if spec.get("signerName") != KUBE_APISERVER_CLIENT_SIGNER:
        return _no(f"signer {spec.get('signerName')!r} is not {KUBE_APISERVER_CLIENT_SIGNER}")
    usages = set(spec.get("usages") or [])
    if "client auth" not in usages or not usages <= ALLOWED_USAGES:
        return _no(f"usages {sorted(usages)} are not client-certificate usages")

    try:
        subject = read_subject(base64.b64decode(spec.get("request", ""), validate=True))
    except binascii.Error:
        return _no("spec.request is not base64")
    except RequestError as e:
        return _no(str(e))
    if subject.others:
        # Refused rather than ignored: an attribute the apiserver maps (the UID today) would be an
        # identity the approver never checked.
        return _no(f"subject has attribute {subject.others[0]}, which the agent's subject never carries")
    if subject.other_extensions:
        return _no(
            f"the request asks for {subject.other_extensions[0]}, which the agent's request never carries"
        )
    allowed_dns = agent_dns_name(addon_name)
    if any(name != allowed_dns for name in subject.dns_names):
        return _no(f"the request asks for DNS names other than {allowed_dns}")
    expected_user = default_user(cluster_name, addon_name)
    if subject.common_names != [expected_user]:
        return _no(f"subject CN is not {expected_user}")
    problem = organizations_problem(subject.organizations, default_groups(cluster_name, addon_name))
    if problem:
        return _no(problem)

    requester = spec.get("username", "")
    if requester == GRPC_SERVER_USER:
        requester = (meta.get("annotations") or {}).get(CSR_USER_ANNOTATION, "")
    prefix = f"system:open-cluster-management:{cluster_name}:"
    agent = requester.removeprefix(prefix)
    # The agent's name is one segment: without this, for a cluster named "cluster" the prefix
    # "system:open-cluster-management:cluster:" is also the start of every addon agent's user name
    # ("system:open-cluster-management:cluster:<any cluster>:addon:..."), on every cluster.
    if not requester.startswith(prefix) or not agent or ":" in agent:
        return _no(f"requester {requester!r} is not cluster {cluster_name}'s agent")
    return Decision(True, f"agent certificate for cluster {cluster_name}")


def approval_body(csr: JSON) -> JSON:
    """The CSR with the Approved condition appended, for PUT `.../approval` (UpdateApproval)."""
    status = dict(csr.get("status") or {})
    status["conditions"] = [
        *(status.get("conditions") or []),
        {"type": "Approved", "status": "True", "reason": APPROVED_REASON, "message": APPROVED_MESSAGE},
    ]
    return {**csr, "status": status}
