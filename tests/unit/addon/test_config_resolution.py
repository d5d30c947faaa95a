"""When the lifecycle controllers wait for OCM to resolve an MCA's AddOnDeploymentConfig."""

from __future__ import annotations

from typing import Any

import pytest

from dynamic_scoring.addon.constants import RESERVED_NO_DEFAULT
from dynamic_scoring.addon.controllers.lifecycle.inputs import desired_config, expects_deployment_config

ADC = {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs"}


class Configs:
    """The one method of an Informer that `desired_config` calls."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objs}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objs.get(key)


def cma(default: dict[str, str] | None) -> dict[str, Any]:
    supported: dict[str, Any] = dict(ADC)
    if default is not None:
        supported["defaultConfig"] = default
    return {"metadata": {"name": "dynamic-scoring"}, "spec": {"supportedConfigs": [supported]}}


def mca(
    spec_configs: list[dict[str, str]] | None = None, refs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": "dynamic-scoring", "namespace": "cluster1"},
        "spec": {"configs": spec_configs} if spec_configs is not None else {},
        "status": {"configReferences": refs} if refs is not None else {},
    }


DEFAULT = {"name": "dynamic-scoring-default", "namespace": "dynamic-scoring"}


@pytest.mark.parametrize(
    ("the_mca", "the_cma", "expected"),
    [
        (mca(), cma(DEFAULT), True),  # the CMA's default will be resolved
        (mca(), cma(None), False),  # nothing to resolve: deploy with no config
        (mca(), cma({"name": RESERVED_NO_DEFAULT, "namespace": ""}), False),  # v1beta1's placeholder
        (mca(), None, False),  # CMA not cached yet: no known default
        (mca([{**ADC, "name": "tuned", "namespace": "cluster1"}]), cma(None), True),  # the MCA's own
        (mca([{"group": "x.io", "resource": "others", "name": "o"}]), cma(None), False),  # not an ADC
    ],
)
def test_expects_a_deployment_config(
    the_mca: dict[str, Any], the_cma: dict[str, Any] | None, expected: bool
) -> None:
    assert expects_deployment_config(the_mca, the_cma) is expected


def test_an_expected_config_not_yet_in_the_status_is_pending() -> None:
    lookup = desired_config(mca(), Configs(), cma(DEFAULT))  # type: ignore[arg-type]
    assert lookup.pending and lookup.ref == "" and lookup.adc is None and not lookup.missing


def test_nothing_expected_and_nothing_referenced_renders_at_once() -> None:
    lookup = desired_config(mca(), Configs(), cma(None))  # type: ignore[arg-type]
    assert not lookup.pending and lookup.ref == ""


def test_a_resolved_reference_with_its_hash_is_used() -> None:
    adc = {"metadata": DEFAULT, "spec": {}}
    ref = {**ADC, "desiredConfig": {**DEFAULT, "specHash": "abc"}}
    lookup = desired_config(mca(refs=[ref]), Configs(adc), cma(DEFAULT))  # type: ignore[arg-type]
    assert (
        not lookup.pending and lookup.adc is adc and lookup.ref == "dynamic-scoring/dynamic-scoring-default"
    )


def test_a_resolved_reference_without_its_hash_is_still_pending() -> None:
    ref = {**ADC, "desiredConfig": {**DEFAULT, "specHash": ""}}
    lookup = desired_config(mca(refs=[ref]), Configs(), cma(DEFAULT))  # type: ignore[arg-type]
    assert lookup.pending
