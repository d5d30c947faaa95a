"""Which platform a managed cluster runs, so that the agent's pod is one its admission accepts.

Why it matters.  On Kubernetes the agent's pod pins the image's non-root user (``runAsUser`` and
``runAsGroup`` 65532), so it never depends on what the image's metadata says.  OpenShift admits pods
through SecurityContextConstraints instead: its default ``restricted-v2`` assigns every pod a UID from
its namespace's allocated range (with GID 0) and refuses a pod that asks for any other UID, so a
pinned 65532 is refused and the agent never starts.  On OpenShift the pod therefore names no user or
group at all, and keeps everything else of the restricted profile (``runAsNonRoot``, the
``RuntimeDefault`` seccomp profile, no privilege escalation, every capability dropped, a read-only
root filesystem).  The image runs as any UID with GID 0: its files are readable by everyone and it
writes only to the ``/tmp`` emptyDir.

How the platform is chosen.  The ADC variable ``Platform``: ``kubernetes`` pins the user,
``openshift`` does not, and ``auto`` (the default) decides per cluster from its ManagedCluster, as
Red Hat ACM describes it: the ``vendor`` label (``OpenShift`` on every OpenShift cluster ACM
imports) or the ``product.open-cluster-management.io`` cluster claim naming an OpenShift product.
A hub user who can label a ManagedCluster can only make its agent's pod leave the user to the
platform; the pod still runs as non-root (the image's user, or the SCC's), so the label gives no
one more than they had.
"""

from __future__ import annotations

from typing import Literal

from dynamic_scoring.addon.config.variables import PLATFORM_SETTINGS
from dynamic_scoring.kube.jsontypes import JSON

Platform = Literal["kubernetes", "openshift"]
VENDOR_LABEL = "vendor"
PRODUCT_CLAIM = "product.open-cluster-management.io"
OPENSHIFT_VENDOR = "OpenShift"
OPENSHIFT_PRODUCTS = frozenset({"OpenShift", "OpenShiftDedicated", "ROSA", "ARO", "ROKS", "MicroShift"})
"""Products of the ``product.open-cluster-management.io`` claim that admit pods through SCCs."""


def detected_platform(cluster: JSON | None) -> Platform:
    """The platform the ManagedCluster's ``vendor`` label or product claim names (default Kubernetes)."""
    if cluster is None:
        return "kubernetes"
    labels = (cluster.get("metadata") or {}).get("labels") or {}
    if labels.get(VENDOR_LABEL) == OPENSHIFT_VENDOR:
        return "openshift"
    claims = (cluster.get("status") or {}).get("clusterClaims") or []
    products = {c.get("value") for c in claims if isinstance(c, dict) and c.get("name") == PRODUCT_CLAIM}
    return "openshift" if products & OPENSHIFT_PRODUCTS else "kubernetes"


def agent_platform(setting: str, cluster: JSON | None) -> Platform:
    """The platform the agent's pod is rendered for: the ADC's ``Platform``, or detected when ``auto``."""
    if setting == "auto":
        return detected_platform(cluster)
    if setting not in ("kubernetes", "openshift"):
        raise ValueError(f"unknown platform setting {setting!r}; expected one of {PLATFORM_SETTINGS}")
    return "openshift" if setting == "openshift" else "kubernetes"
