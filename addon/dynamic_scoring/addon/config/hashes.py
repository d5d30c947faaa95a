"""The config spec hashes the addon's own manager fills in (controllers `cma-config`, `addon-config`).

OCM builds the config references but leaves the hashes to the addon, because only the addon knows
which config kinds it supports.  Until a hash is filled, OCM cannot mark a cluster `Configured`, the
deploy reconcile waits (its config lookup is `pending`), and `Progressing` never reaches `Completed`.  Both
functions take a lookup into the ADC cache and return the merge patch for the status arrays they
touch (sent whole, other fields unchanged), or None when every hash is already right.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from dynamic_scoring.addon.config.spec_hash import spec_hash
from dynamic_scoring.addon.constants import ADC_RESOURCE, ADDON_GROUP, RESERVED_NO_DEFAULT
from dynamic_scoring.kube.jsontypes import JSON

ConfigLookup = Callable[[str, str], JSON | None]  # (namespace, name) -> the ADC or None


def _supported(ref: JSON) -> bool:
    return ref.get("group") == ADDON_GROUP and ref.get("resource") == ADC_RESOURCE


def _fill(desired: JSON | None, lookup: ConfigLookup) -> bool:
    """Set `desired.specHash` from the config it names; True when that changed it."""
    if not desired or not desired.get("name") or desired["name"] == RESERVED_NO_DEFAULT:
        return False
    config = lookup(desired.get("namespace") or "", desired["name"])
    if config is None:
        return False  # not there (yet): leave whatever is there, as the framework does
    value = spec_hash(config)
    if desired.get("specHash") == value:
        return False
    desired["specHash"] = value
    return True


def cma_hash_patch(cma: JSON, lookup: ConfigLookup) -> JSON | None:
    """Hashes in CMA `status.defaultconfigReferences` and `status.installProgressions[].configReferences`."""
    status = copy.deepcopy(cma.get("status") or {})
    patch: JSON = {}
    defaults = status.get("defaultconfigReferences") or []
    if any(_fill(ref.get("desiredConfig"), lookup) for ref in defaults if _supported(ref)):
        patch["defaultconfigReferences"] = defaults
    progressions = status.get("installProgressions") or []
    changed = False
    for progression in progressions:
        for ref in progression.get("configReferences") or []:
            if _supported(ref):
                changed = _fill(ref.get("desiredConfig"), lookup) or changed
    if changed:
        patch["installProgressions"] = progressions
    return patch or None


def mca_config_hash_patch(mca: JSON, lookup: ConfigLookup) -> JSON | None:
    """`lastObservedGeneration` of every supported reference, and hashes of those from MCA `spec.configs`.

    Hashes of default and placement configs are OCM's to copy from the CMA status; writing them
    here would race OCM's rollout batching.
    """
    status = mca.get("status") or {}
    refs = copy.deepcopy(status.get("configReferences") or [])
    spec_configs = {
        (c.get("group", ""), c.get("resource", ""), c.get("namespace") or "", c.get("name", ""))
        for c in (mca.get("spec") or {}).get("configs") or []
    }
    changed = False
    for ref in refs:
        if not _supported(ref):
            continue
        desired = ref.get("desiredConfig") or {}
        name = desired.get("name") or ref.get("name") or ""
        namespace = desired.get("namespace") or ref.get("namespace") or ""
        if not name or name == RESERVED_NO_DEFAULT:
            continue
        config = lookup(namespace, name)
        if config is None:
            continue
        generation = (config.get("metadata") or {}).get("generation")
        if generation is not None and ref.get("lastObservedGeneration") != generation:
            ref["lastObservedGeneration"] = generation
            changed = True
        if (ref["group"], ref["resource"], namespace, name) in spec_configs:
            changed = _fill(ref.get("desiredConfig"), lookup) or changed
    return {"configReferences": refs} if changed else None
