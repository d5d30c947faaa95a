"""B. Config generations and per-cluster spec hashes in each MCA's status (contract §6.5 step 2).

For every AddOnDeploymentConfig reference OCM put in `status.configReferences`, the addon's
manager records `lastObservedGeneration`, and, only for references that come from the MCA's own
`spec.configs`, `desiredConfig.specHash`.  Hashes of default and placement configs come from the
CMA status through OCM; writing them here would race OCM's rollout batching.
"""

from __future__ import annotations

import copy
import logging

from addon.constants import ADC_RESOURCE, ADDON_GROUP, RESERVED_NO_DEFAULT
from addon.controllers.lifecycle.inputs import Caches, config_hash, is_adc_ref, ref_target, referencing
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.resources import JSON, MANAGED_CLUSTER_ADDONS, split_key
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)

NAME = "addon-config"


def _spec_configs(mca: JSON) -> set[tuple[str, str]]:
    """(namespace, name) of the ADCs the MCA's own spec names."""
    return {
        (c.get("namespace") or "", c.get("name") or "")
        for c in (mca.get("spec") or {}).get("configs") or []
        if c.get("group") == ADDON_GROUP and c.get("resource") == ADC_RESOURCE
    }


def mca_config_patch(mca: JSON, configs: Informer) -> JSON | None:
    """The MCA status merge patch for `configReferences`, or None when nothing differs."""
    refs = copy.deepcopy((mca.get("status") or {}).get("configReferences") or [])
    own = _spec_configs(mca)
    changed = False
    for ref in refs:
        if not is_adc_ref(ref):
            continue
        namespace, name = ref_target(ref)
        if not name or name == RESERVED_NO_DEFAULT:
            continue
        found = config_hash(configs, namespace, name)
        if found is None:
            continue
        digest, generation = found
        if ref.get("lastObservedGeneration") != generation:
            ref["lastObservedGeneration"] = generation
            changed = True
        desired = ref.get("desiredConfig")
        if desired is not None and (namespace, name) in own and desired.get("specHash") != digest:
            desired["specHash"] = digest
            changed = True
    return {"configReferences": refs} if changed else None


def addon_config_controller(caches: Caches, writer: Writer, *, resync_seconds: float) -> Controller:
    """The controller: keyed by MCA, woken by MCA changes and by changes of the ADCs they name."""

    def reconcile(key: str) -> Result | None:
        mca = caches.addons.get(key)
        if mca is None or mca_config_patch(mca, caches.configs) is None:
            return None
        namespace, name = split_key(key)
        if writer.patch_status(
            MANAGED_CLUSTER_ADDONS, namespace, name, lambda fresh: mca_config_patch(fresh, caches.configs)
        ):
            log.info("updated config generations and hashes", extra={"key": key})
        return None

    controller = Controller(NAME, reconcile, resync_seconds=resync_seconds)
    controller.watch(caches.addons)
    controller.watch(caches.configs, keys=lambda adc: referencing(caches.addons.list(), adc))
    return controller
