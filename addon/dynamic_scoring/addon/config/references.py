"""Which AddOnDeploymentConfig applies to a ManagedClusterAddOn, read from what OCM wrote.

OCM's addon-manager resolves MCA `spec.configs` > placement configs > CMA defaults into
`status.configReferences`, with `desiredConfig` naming the winner; the framework then takes the
first entry for addondeploymentconfigs.  Reading the resolved list, rather than
re-deriving precedence here, keeps us in step with OCM's rollout batching: a cluster not yet in
the current batch keeps rendering from its old config.
"""

from __future__ import annotations

from dynamic_scoring.addon.constants import RESERVED_NO_DEFAULT
from dynamic_scoring.kube.jsontypes import JSON


def config_references(mca: JSON) -> list[JSON]:
    """`status.configReferences` without the reserved placeholder OCM v1.3.0 could leak."""
    refs = (mca.get("status") or {}).get("configReferences") or []
    return [
        r
        for r in refs
        if ((r.get("desiredConfig") or {}).get("name") or r.get("name")) != RESERVED_NO_DEFAULT
    ]
