from __future__ import annotations

from dynamic_scoring.addon.config.hashes import cma_hash_patch, mca_config_hash_patch
from dynamic_scoring.addon.config.spec_hash import spec_hash
from dynamic_scoring.kube.jsontypes import JSON
from tests.unit.addon.helpers import adc, mca

GROUP = "addon.open-cluster-management.io"
DEFAULT = adc(customizedVariables=[{"name": "LogLevel", "value": "info"}])
DEFAULT["metadata"] = {"name": "dynamic-scoring-default", "namespace": "dynamic-scoring", "generation": 4}
CUSTOM = adc(customizedVariables=[{"name": "LogLevel", "value": "debug"}])
CUSTOM["metadata"] = {"name": "custom", "namespace": "team", "generation": 2}
CONFIGS = {("dynamic-scoring", "dynamic-scoring-default"): DEFAULT, ("team", "custom"): CUSTOM}


def lookup(namespace: str, name: str) -> JSON | None:
    return CONFIGS.get((namespace, name))


def ref(namespace: str, name: str, spec_hash_value: str = "", **extra: object) -> JSON:
    return {
        "group": GROUP,
        "resource": "addondeploymentconfigs",
        "desiredConfig": {"namespace": namespace, "name": name, "specHash": spec_hash_value},
        **extra,
    }


def test_cma_hashes_filled_then_stable() -> None:
    cma: JSON = {
        "metadata": {"name": "dynamic-scoring"},
        "status": {
            "defaultconfigReferences": [
                ref("dynamic-scoring", "dynamic-scoring-default"),
                {"group": "other.io", "resource": "things", "desiredConfig": {"name": "x", "specHash": ""}},
            ],
            "installProgressions": [
                {"name": "p", "namespace": "ns", "configReferences": [ref("team", "custom")]},
                {"name": "q", "namespace": "ns", "configReferences": [ref("x", "__reserved_no_default__")]},
            ],
        },
    }
    patch = cma_hash_patch(cma, lookup)
    assert patch is not None
    assert patch["defaultconfigReferences"][0]["desiredConfig"]["specHash"] == spec_hash(DEFAULT)
    assert patch["defaultconfigReferences"][1]["desiredConfig"]["specHash"] == ""  # not ours
    assert patch["installProgressions"][0]["configReferences"][0]["desiredConfig"]["specHash"] == spec_hash(
        CUSTOM
    )
    assert patch["installProgressions"][1]["configReferences"][0]["desiredConfig"]["specHash"] == ""
    assert cma["status"]["defaultconfigReferences"][0]["desiredConfig"]["specHash"] == ""  # input untouched
    assert cma_hash_patch({**cma, "status": {**cma["status"], **patch}}, lookup) is None


def test_missing_config_leaves_the_hash_alone() -> None:
    cma: JSON = {"status": {"defaultconfigReferences": [ref("gone", "gone", "old")]}}
    assert cma_hash_patch(cma, lookup) is None


def test_mca_hashes_only_for_spec_configs_and_generation_for_all() -> None:
    addon = mca(
        configReferences=[ref("dynamic-scoring", "dynamic-scoring-default"), ref("team", "custom")],
    )
    addon["spec"]["configs"] = [
        {"group": GROUP, "resource": "addondeploymentconfigs", "namespace": "team", "name": "custom"}
    ]
    patch = mca_config_hash_patch(addon, lookup)
    assert patch is not None
    default_ref, custom_ref = patch["configReferences"]
    assert default_ref["lastObservedGeneration"] == 4
    assert default_ref["desiredConfig"]["specHash"] == ""  # OCM copies default hashes from the CMA
    assert custom_ref["lastObservedGeneration"] == 2
    assert custom_ref["desiredConfig"]["specHash"] == spec_hash(CUSTOM)
    converged = mca(**patch)
    converged["spec"] = addon["spec"]
    assert mca_config_hash_patch(converged, lookup) is None
