"""Which DynamicScoringConfig the hub acts on.

Upstream acted on any namespace's ``dynamic-scoring-config`` (several namespaces then wrote the same
ManifestWork per cluster in turn) and ignored every other name silently.  Here exactly one object
counts: the one named ``dynamic-scoring-config`` in the manager's namespace.  Any other gets a
condition saying why it is ignored, so a typo in the name is visible rather than a silent no-op.
"""

from __future__ import annotations

from typing import Final

CONFIG_NAME: Final = "dynamic-scoring-config"


def config_target_problem(name: str, namespace: str, manager_namespace: str) -> str | None:
    """Why a DynamicScoringConfig ``namespace/name`` is ignored, or None when it is the one in effect."""
    if name != CONFIG_NAME:
        return (
            f"metadata.name: only a DynamicScoringConfig named {CONFIG_NAME!r} is acted on; "
            f"{name!r} is ignored"
        )
    if namespace != manager_namespace:
        return (
            f"metadata.namespace: only the manager's namespace {manager_namespace!r} is acted on; "
            f"this object in {namespace!r} is ignored (DynamicScorers must be there too)"
        )
    return None


__all__ = ["CONFIG_NAME", "config_target_problem"]
