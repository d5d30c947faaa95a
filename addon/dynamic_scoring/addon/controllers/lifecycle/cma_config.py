"""A. The spec hashes in the ClusterManagementAddOn's status.

OCM's addon-manager writes the skeleton of `status.defaultconfigReferences` and
`status.installProgressions[].configReferences` (which configs, with which names) but leaves
`desiredConfig.specHash` to the addon's own manager, and copies those hashes into every MCA that
uses a default or placement config.  So an ADC edit reaches the clusters only once this
controller has re-hashed it.  Entries naming a config that does not exist keep their hash; the
deploy controller reports the missing config on each MCA that needs it.
"""

from __future__ import annotations

import logging

from dynamic_scoring.addon.config.hashes import cma_hash_patch
from dynamic_scoring.addon.constants import ADDON_NAME
from dynamic_scoring.addon.controllers.lifecycle.inputs import Caches, config_lookup
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.resources import CLUSTER_MANAGEMENT_ADDONS
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)

NAME = "cma-config"


def cma_config_controller(
    caches: Caches, writer: Writer, *, resync_seconds: float, addon_name: str = ADDON_NAME
) -> Controller:
    """The controller: keyed by the CMA's name, woken by the CMA and by every ADC change."""
    lookup = config_lookup(caches.configs)

    def reconcile(key: str) -> Result | None:
        cma = caches.cma.get(key)
        if cma is None:
            return None
        if cma_hash_patch(cma, lookup) is None:
            return None  # the cache says all is right: no request at all on a resync
        if writer.patch_status(
            CLUSTER_MANAGEMENT_ADDONS, None, key, lambda fresh: cma_hash_patch(fresh, lookup)
        ):
            log.info("filled config spec hashes in ClusterManagementAddOn status", extra={"key": key})
        return None

    controller = Controller(NAME, reconcile, resync_seconds=resync_seconds)
    controller.watch(caches.cma)
    controller.watch(caches.configs, keys=lambda _adc: [addon_name])
    return controller
