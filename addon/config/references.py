"""Which AddOnDeploymentConfig applies to a ManagedClusterAddOn, read from what OCM wrote.

OCM's addon-manager resolves MCA `spec.configs` > placement configs > CMA defaults into
`status.configReferences`, with `desiredConfig` naming the winner; the framework then takes the
first entry for addondeploymentconfigs.  Reading the resolved list, rather than
re-deriving precedence here, keeps us in step with OCM's rollout batching: a cluster not yet in
the current batch keeps rendering from its old config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from addon.constants import ADC_RESOURCE, ADDON_GROUP, RESERVED_NO_DEFAULT
from addon.errors import ConfigPendingError

JSON = dict[str, Any]


@dataclass(frozen=True)
class ConfigRef:
    """The desired ADC for one MCA: where to read it and the hash OCM expects to see applied."""

    namespace: str
    name: str
    spec_hash: str


def _is_adc(ref: JSON) -> bool:
    return ref.get("group") == ADDON_GROUP and ref.get("resource") == ADC_RESOURCE


def desired_deployment_config(mca: JSON) -> ConfigRef | None:
    """The ADC the MCA's status says to render from, or None when no ADC is referenced.

    Raises:
        ConfigPendingError: an ADC is referenced but its `desiredConfig.specHash` is still empty.
    """
    for ref in (mca.get("status") or {}).get("configReferences") or []:
        if not _is_adc(ref):
            continue
        desired = ref.get("desiredConfig") or {}
        name = desired.get("name") or ""
        if not name or name == RESERVED_NO_DEFAULT:
            continue
        if not desired.get("specHash"):
            raise ConfigPendingError(
                f"addondeploymentconfig {desired.get('namespace', '')}/{name} has no spec hash yet"
            )
        return ConfigRef(namespace=desired.get("namespace") or "", name=name, spec_hash=desired["specHash"])
    return None


def config_references(mca: JSON) -> list[JSON]:
    """`status.configReferences` without the reserved placeholder OCM v1.3.0 could leak."""
    refs = (mca.get("status") or {}).get("configReferences") or []
    return [
        r
        for r in refs
        if ((r.get("desiredConfig") or {}).get("name") or r.get("name")) != RESERVED_NO_DEFAULT
    ]
