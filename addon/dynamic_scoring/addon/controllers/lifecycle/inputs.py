"""What every lifecycle controller reads: the shared watch caches and the config lookups on them.

The watches are the framework's: the ManagedClusterAddOns named after the addon,
the ClusterManagementAddOn, the addon's ManifestWorks and CSRs (by label), every ManagedCluster
and every AddOnDeploymentConfig, plus the agent's hub Role/RoleBinding (by our managed-by label,
so an edit or a deletion is seen and reverted), and every AddOnPlacementScore (the agent's hub Role
names the scores its agent wrote; the same watch as the distribution's and the score expiry's).
`ControllerManager.informer` shares one watch per argument set, so five controllers asking for the
MCAs open one watch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dynamic_scoring.addon.config.references import config_references
from dynamic_scoring.addon.constants import (
    ADC_RESOURCE,
    ADDON_GROUP,
    ADDON_NAME,
    ADDON_NAME_LABEL,
    MANAGED_BY_LABEL,
    RESERVED_NO_DEFAULT,
)
from dynamic_scoring.addon.controllers import agent_scores, foreign_scores
from dynamic_scoring.kube.controller import ControllerManager
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import (
    ADDON_DEPLOYMENT_CONFIGS,
    CLUSTER_MANAGEMENT_ADDONS,
    CSRS,
    MANAGED_CLUSTER_ADDONS,
    MANAGED_CLUSTERS,
    MANIFEST_WORKS,
    ROLE_BINDINGS,
    ROLES,
    object_key,
)


@dataclass(frozen=True)
class Caches:
    """The shared informers the lifecycle controllers watch."""

    addons: Informer
    cma: Informer
    works: Informer
    csrs: Informer
    clusters: Informer
    configs: Informer
    roles: Informer
    role_bindings: Informer
    scores: Informer
    foreign: Informer
    """Scores our agents did not write: names the agent's hub Role must not grant."""

    @classmethod
    def of(cls, manager: ControllerManager, addon_name: str = ADDON_NAME) -> Caches:
        """Ask `manager` for the (shared) informers."""
        by_name = f"metadata.name={addon_name}"
        by_label = f"{ADDON_NAME_LABEL}={addon_name}"
        managed = f"{MANAGED_BY_LABEL}={addon_name}"
        return cls(
            addons=manager.informer(MANAGED_CLUSTER_ADDONS, field_selector=by_name),
            cma=manager.informer(CLUSTER_MANAGEMENT_ADDONS, field_selector=by_name),
            works=manager.informer(MANIFEST_WORKS, label_selector=by_label),
            csrs=manager.informer(CSRS, label_selector=by_label),
            clusters=manager.informer(MANAGED_CLUSTERS),
            configs=manager.informer(ADDON_DEPLOYMENT_CONFIGS),
            roles=manager.informer(ROLES, label_selector=managed),
            role_bindings=manager.informer(ROLE_BINDINGS, label_selector=managed),
            scores=agent_scores(manager, addon_name),
            foreign=foreign_scores(manager, addon_name),
        )


def addon_key(cluster: str, addon_name: str = ADDON_NAME) -> str:
    """The MCA key of `cluster`: `<cluster>/<addon>`."""
    return f"{cluster}/{addon_name}"


def in_cluster_namespace(obj: JSON) -> list[str]:
    """Map an object in a cluster namespace (work, Role, ...) to that cluster's MCA key."""
    namespace = obj.get("metadata", {}).get("namespace")
    return [addon_key(namespace)] if namespace else []


def of_cluster(obj: JSON) -> list[str]:
    """Map a ManagedCluster to its MCA key."""
    return [addon_key(obj["metadata"]["name"])]


def every_addon(addons: Informer) -> Callable[[JSON], list[str]]:
    """Map any object to every cached MCA's key: a CMA change (its default config) concerns them all."""

    def keys(_obj: JSON) -> list[str]:
        return [object_key(m) for m in addons.list()]

    return keys


def is_adc_ref(ref: JSON) -> bool:
    """A config reference to an AddOnDeploymentConfig."""
    return ref.get("group") == ADDON_GROUP and ref.get("resource") == ADC_RESOURCE


def ref_target(ref: JSON) -> tuple[str, str]:
    """(namespace, name) of the config a reference points at (desiredConfig, else the old top level)."""
    desired = ref.get("desiredConfig") or {}
    return (
        desired.get("namespace") or ref.get("namespace") or "",
        desired.get("name") or ref.get("name") or "",
    )


def referencing(addons: Iterable[JSON], config: JSON) -> list[str]:
    """Keys of the MCAs whose status or spec names the AddOnDeploymentConfig `config`."""
    meta = config.get("metadata", {})
    target = (meta.get("namespace", ""), meta.get("name", ""))
    keys = []
    for mca in addons:
        refs = [r for r in config_references(mca) if is_adc_ref(r)]
        named = [ref_target(r) for r in refs]
        named += [
            (c.get("namespace") or "", c.get("name") or "")
            for c in (mca.get("spec") or {}).get("configs") or []
            if c.get("group") == ADDON_GROUP and c.get("resource") == ADC_RESOURCE
        ]
        if target in named:
            keys.append(f"{mca['metadata']['namespace']}/{mca['metadata']['name']}")
    return keys


def config_lookup(configs: Informer) -> Callable[[str, str], JSON | None]:
    """(namespace, name) -> the cached AddOnDeploymentConfig or None, for `addon.config.hashes`."""

    def lookup(namespace: str, name: str) -> JSON | None:
        return configs.get(f"{namespace}/{name}")

    return lookup


@dataclass(frozen=True)
class ConfigLookup:
    """The AddOnDeploymentConfig an MCA's status says to use, as found in the cache.

    Attributes:
        ref: "namespace/name" of the referenced ADC, or "" when the MCA references none.
        adc: the ADC object; None when none is referenced or it does not exist.
        pending: referenced, but OCM has not copied its spec hash into the MCA yet (wait).
    """

    ref: str
    adc: JSON | None
    pending: bool

    @property
    def missing(self) -> bool:
        """An ADC is referenced and does not exist."""
        return bool(self.ref) and self.adc is None


def expects_deployment_config(mca: JSON, cma: JSON | None) -> bool:
    """Whether OCM will resolve an AddOnDeploymentConfig into this MCA's `status.configReferences`.

    It will when the MCA's `spec.configs` names one or the CMA declares a default for the type.
    Until that reference appears, rendering would deploy the agent without the config (in an
    air-gapped fleet: without its registry mirror) and then deploy it again once OCM catches up;
    addon-framework waits for resolution too.  Placement-scoped configs are left out: they apply
    only to the clusters a Placement selects, and a cluster outside it must not wait forever.
    """
    if any(is_adc_ref(c) for c in (mca.get("spec") or {}).get("configs") or []):
        return True
    for supported in ((cma or {}).get("spec") or {}).get("supportedConfigs") or []:
        default = supported.get("defaultConfig") or {}
        if is_adc_ref(supported) and default.get("name") and default["name"] != RESERVED_NO_DEFAULT:
            return True
    return False


def desired_config(mca: JSON, configs: Informer, cma: JSON | None = None) -> ConfigLookup:
    """The first ADC reference of `status.configReferences` (the framework's choice).

    With no ADC reference yet while one is expected (`expects_deployment_config`), the lookup is
    pending: OCM has not resolved the configs.
    """
    for ref in config_references(mca):
        if not is_adc_ref(ref):
            continue
        namespace, name = ref_target(ref)
        if not name:
            continue
        key = f"{namespace}/{name}"
        pending = not (ref.get("desiredConfig") or {}).get("specHash")
        return ConfigLookup(ref=key, adc=configs.get(key), pending=pending)
    return ConfigLookup(ref="", adc=None, pending=expects_deployment_config(mca, cma))


def digest(inputs: object) -> bytes:
    """A 16-byte digest of JSON-able `inputs`: what a controller remembers instead of a render.

    Deploy and registration keep one per cluster, beside the resourceVersions of what they wrote
    from those inputs, and skip the render while both are the same.
    """
    return hashlib.blake2b(json.dumps(inputs, sort_keys=True).encode(), digest_size=16).digest()
