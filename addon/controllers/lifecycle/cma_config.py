"""A. The spec hashes in the ClusterManagementAddOn's status (contract §1.3, §6.5 step 2).

OCM's addon-manager writes the skeleton of `status.defaultconfigReferences` and
`status.installProgressions[].configReferences` (which configs, with which names) but leaves
`desiredConfig.specHash` to the addon's own manager, and copies those hashes into every MCA that
uses a default or placement config.  So an ADC edit reaches the clusters only once this
controller has re-hashed it.  Entries naming a config that does not exist keep their hash; the
deploy controller reports the missing config on each MCA that needs it.
"""

from __future__ import annotations

import copy
import logging

from addon.constants import ADDON_NAME, RESERVED_NO_DEFAULT
from addon.controllers.lifecycle.inputs import Caches, config_hash, is_adc_ref
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.resources import CLUSTER_MANAGEMENT_ADDONS, JSON
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)

NAME = "cma-config"


def _rehash(refs: list[JSON], configs: Informer) -> bool:
    """Set `desiredConfig.specHash` of each ADC entry whose config exists, in place; True if any changed."""
    changed = False
    for ref in refs:
        desired = ref.get("desiredConfig")
        if not is_adc_ref(ref) or not desired:
            continue
        name = desired.get("name") or ""
        if not name or name == RESERVED_NO_DEFAULT:
            continue
        found = config_hash(configs, desired.get("namespace") or "", name)
        if found is not None and desired.get("specHash") != found[0]:
            desired["specHash"] = found[0]
            changed = True
    return changed


def cma_hash_patch(cma: JSON, configs: Informer) -> JSON | None:
    """The CMA status merge patch that fills the ADC spec hashes, or None when all are right."""
    status = copy.deepcopy(cma.get("status") or {})
    patch: JSON = {}
    defaults = status.get("defaultconfigReferences") or []
    if _rehash(defaults, configs):
        patch["defaultconfigReferences"] = defaults
    progressions = status.get("installProgressions") or []
    if any([_rehash(p.get("configReferences") or [], configs) for p in progressions]):
        patch["installProgressions"] = progressions
    return patch or None


def cma_config_controller(
    caches: Caches, writer: Writer, *, resync_seconds: float, addon_name: str = ADDON_NAME
) -> Controller:
    """The controller: keyed by the CMA's name, woken by the CMA and by every ADC change."""

    def reconcile(key: str) -> Result | None:
        cma = caches.cma.get(key)
        if cma is None:
            return None
        if cma_hash_patch(cma, caches.configs) is None:
            return None  # the cache says all is right: no request at all on a resync
        if writer.patch_status(
            CLUSTER_MANAGEMENT_ADDONS, None, key, lambda fresh: cma_hash_patch(fresh, caches.configs)
        ):
            log.info("filled config spec hashes in ClusterManagementAddOn status", extra={"key": key})
        return None

    controller = Controller(NAME, reconcile, resync_seconds=resync_seconds)
    controller.watch(caches.cma)
    controller.watch(caches.configs, keys=lambda _adc: [addon_name])
    return controller
