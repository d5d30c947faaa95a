"""B. Config generations and per-cluster spec hashes in each MCA's status.

For every AddOnDeploymentConfig reference OCM put in `status.configReferences`, the addon's
manager records `lastObservedGeneration`, and, only for references that come from the MCA's own
`spec.configs`, `desiredConfig.specHash`.  Hashes of default and placement configs come from the
CMA status through OCM; writing them here would race OCM's rollout batching.
"""

from __future__ import annotations

import logging

from dynamic_scoring.addon.config.hashes import mca_config_hash_patch
from dynamic_scoring.addon.controllers.lifecycle.inputs import Caches, config_lookup, referencing
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.resources import MANAGED_CLUSTER_ADDONS, split_key
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)

NAME = "addon-config"


def addon_config_controller(
    caches: Caches, writer: Writer, *, resync_seconds: float, workers: int = 1
) -> Controller:
    """The controller: keyed by MCA, woken by MCA changes and by changes of the ADCs they name."""
    lookup = config_lookup(caches.configs)

    def reconcile(key: str) -> Result | None:
        mca = caches.addons.get(key)
        if mca is None or mca_config_hash_patch(mca, lookup) is None:
            return None
        namespace, name = split_key(key)
        if writer.patch_status(
            MANAGED_CLUSTER_ADDONS,
            namespace,
            name,
            lambda fresh: mca_config_hash_patch(fresh, lookup),
            current=mca,
        ):
            log.info("updated config generations and hashes", extra={"key": key})
        return None

    controller = Controller(NAME, reconcile, workers=workers, resync_seconds=resync_seconds)
    controller.watch(caches.addons)
    controller.watch(caches.configs, keys=lambda adc: referencing(caches.addons.list(), adc))
    return controller
