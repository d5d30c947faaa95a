"""The labels our agent puts on every AddOnPlacementScore it creates, and the selector that finds them.

One definition for both sides: the agent writes them; the hub's shared AddOnPlacementScore
informer lists and watches by them, so the apiserver filters and the manager caches only our
agents' scores, not every score of every addon on the hub; ``dynamic-scoring status`` reads by
them too.  A score another writer created (another addon, or an agent that does not set these
labels) is therefore invisible to the hub's controllers: they never expire, count or grant it.
"""

from __future__ import annotations

from typing import Any

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
AGENT_MANAGED_BY = "dynamic-scoring-agent"
"""The ``app.kubernetes.io/managed-by`` value on every score our agent creates."""
ADDON_LABEL = "dynamic-scoring.open-cluster-management.io/addon"
"""Names the addon (``dynamic-scoring`` unless installed under another name) whose agent wrote it."""


def score_labels(addon_name: str) -> dict[str, str]:
    """The labels of a score created by the agent of `addon_name`."""
    return {MANAGED_BY_LABEL: AGENT_MANAGED_BY, ADDON_LABEL: addon_name}


def score_selector(addon_name: str) -> str:
    """The label selector for exactly the scores `score_labels(addon_name)` marks."""
    return ",".join(f"{k}={v}" for k, v in score_labels(addon_name).items())


def written_by_agent(obj: dict[str, Any], addon_name: str) -> bool:
    """Whether `obj` carries `score_labels(addon_name)` (what `score_selector` selects)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in score_labels(addon_name).items())


def foreign_selector(addon_name: str) -> str:
    """The label selector for scores `addon_name`'s agents did not write (wider than strictly needed).

    ``key!=value`` also matches objects without the key, so this selects every score without our
    addon label or with another addon's; an object with our addon label but not the managed-by one
    is in neither selection (nobody but a hand-made object looks like that).
    """
    return f"{ADDON_LABEL}!={addon_name}"


def adoptable(obj: dict[str, Any]) -> bool:
    """Whether a score another writer created may be taken over, with the admin's migration opt-in.

    Only what the upstream Go agent leaves: no owner and no addon label of any install.  An object
    with an owner (another addon's score, owned by its ManagedClusterAddOn) or another install's
    label is never taken, opt-in or not.
    """
    meta = obj.get("metadata") or {}
    return not meta.get("ownerReferences") and ADDON_LABEL not in (meta.get("labels") or {})


__all__ = [
    "ADDON_LABEL",
    "AGENT_MANAGED_BY",
    "MANAGED_BY_LABEL",
    "adoptable",
    "foreign_selector",
    "score_labels",
    "score_selector",
    "written_by_agent",
]
