from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamic_scoring.addon.errors import WorkTooLargeError
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.work.builder import (
    build_deploy_works,
    config_spec_hash_annotation,
    guess_plural,
    manifest_applied,
    manifest_size,
    pack,
)
from dynamic_scoring.kube.jsontypes import JSON
from tests.unit.addon.helpers import mca

ADC_REF = {
    "group": "addon.open-cluster-management.io",
    "resource": "addondeploymentconfigs",
    "desiredConfig": {"namespace": "dynamic-scoring", "name": "dynamic-scoring-default", "specHash": "abc"},
}


def cm(name: str, size: int) -> JSON:
    obj: JSON = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": {},
    }
    obj["data"]["x"] = "a" * (size - manifest_size(obj) - 6)
    assert manifest_size(obj) == size
    return obj


def test_single_work_metadata() -> None:
    addon = mca(configReferences=[ADC_REF])
    manifests = render_agent(mca=addon, adc=None).manifests
    plan = build_deploy_works(addon, manifests)
    (work,) = plan.works
    meta = work["metadata"]
    assert meta["name"] == "addon-dynamic-scoring-deploy-0"
    assert meta["namespace"] == "cluster1"
    assert meta["labels"] == {"open-cluster-management.io/addon-name": "dynamic-scoring"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "ManagedClusterAddOn",
            "name": "dynamic-scoring",
            "uid": "uid-cluster1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["annotations"] == {
        "open-cluster-management.io/config-spec-hash": (
            '{"addondeploymentconfigs.addon.open-cluster-management.io/dynamic-scoring/dynamic-scoring-default":"abc"}'
        )
    }
    assert work["spec"]["workload"]["manifests"] == manifests
    assert work["spec"]["manifestConfigs"] == [
        {
            "resourceIdentifier": {
                "group": "apps",
                "resource": "deployments",
                "namespace": "open-cluster-management-agent-addon",
                "name": "dynamic-scoring-agent",
            },
            "feedbackRules": [{"type": "WellKnownStatus"}],
            "feedbackScrapeType": "Poll",
        }
    ]
    assert plan.obsolete == []


def test_no_annotation_without_config_references() -> None:
    addon = mca()
    (work,) = build_deploy_works(addon, render_agent(mca=addon, adc=None).manifests).works
    assert "annotations" not in work["metadata"]


def test_a_hash_the_mca_no_longer_has_is_removed_from_the_work_and_only_then() -> None:
    """Losing every config reference (the CMA's default config removed) must clear the work's hash.

    `Writer.ensure` merge-patches only the keys it names, so leaving the annotation out would keep
    the stale hash and OCM would report Progressing until the config came back.
    """
    with_refs = mca(configReferences=[ADC_REF])
    manifests = render_agent(mca=with_refs, adc=None).manifests
    (old,) = build_deploy_works(with_refs, manifests).works
    without = mca()
    (work,) = build_deploy_works(without, manifests, [old]).works
    assert work["metadata"]["annotations"] == {"open-cluster-management.io/config-spec-hash": None}
    unannotated = {**old, "metadata": {k: v for k, v in old["metadata"].items() if k != "annotations"}}
    (again,) = build_deploy_works(without, manifests, [unannotated]).works
    assert "annotations" not in again["metadata"], "a create must never carry a null annotation"


def test_annotation_keys_sorted_and_cluster_scoped_configs_have_empty_namespace() -> None:
    refs = [
        {**ADC_REF, "desiredConfig": {"namespace": "b", "name": "n", "specHash": "h2"}},
        {"group": "", "resource": "things", "desiredConfig": {"name": "c", "specHash": "h3"}},
        {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs"},
        {**ADC_REF, "desiredConfig": {"namespace": "x", "name": "__reserved_no_default__", "specHash": ""}},
    ]
    value = config_spec_hash_annotation(mca(configReferences=refs))
    assert value == '{"addondeploymentconfigs.addon.open-cluster-management.io/b/n":"h2","things//c":"h3"}'


def test_replicas_zero_deployments_are_not_probed() -> None:
    addon = mca()
    manifests = render_agent(mca=addon, adc=None).manifests
    for m in manifests:
        if m["kind"] == "Deployment":
            m["spec"]["replicas"] = 0
    (work,) = build_deploy_works(addon, manifests).works
    assert "manifestConfigs" not in work["spec"]


def test_stays_one_work_up_to_the_limit() -> None:
    manifests = [cm("a", 200_000), cm("b", 209_600)]
    assert [w["metadata"]["name"] for w in build_deploy_works(mca(), manifests).works] == [
        "addon-dynamic-scoring-deploy-0"
    ]


def test_splits_one_byte_over_the_limit() -> None:
    manifests = [cm("a", 200_000), cm("b", 209_601)]
    works = build_deploy_works(mca(), manifests).works
    assert [w["metadata"]["name"] for w in works] == [
        "addon-dynamic-scoring-deploy-0",
        "addon-dynamic-scoring-deploy-1",
    ]
    for work in works:
        assert sum(manifest_size(m) for m in work["spec"]["workload"]["manifests"]) <= 409_600
        assert work["metadata"]["labels"] == {"open-cluster-management.io/addon-name": "dynamic-scoring"}


def test_manifests_stay_in_their_existing_work_and_emptied_works_become_obsolete() -> None:
    big = [cm("a", 300_000), cm("b", 300_000), cm("c", 300_000)]
    first = build_deploy_works(mca(), big).works
    where = {
        m["metadata"]["name"]: w["metadata"]["name"]
        for w in first
        for m in w["spec"]["workload"]["manifests"]
    }
    changed = [cm("a", 300_000), cm("b", 250_000), cm("c", 300_000)]
    second = build_deploy_works(mca(), changed, existing=first).works
    where2 = {
        m["metadata"]["name"]: w["metadata"]["name"]
        for w in second
        for m in w["spec"]["workload"]["manifests"]
    }
    assert where2 == where
    shrunk = build_deploy_works(mca(), [cm("a", 1000)], existing=first)
    assert [w["metadata"]["name"] for w in shrunk.works] == [where["a"]]
    assert sorted(shrunk.obsolete) == sorted({where["b"], where["c"]} - {where["a"]})


def test_a_single_oversized_manifest_is_an_error() -> None:
    with pytest.raises(WorkTooLargeError):
        build_deploy_works(mca(), [cm("huge", 409_601)])


def test_deterministic_for_the_same_inputs() -> None:
    addon = mca(configReferences=[ADC_REF])
    manifests = render_agent(mca=addon, adc=None).manifests
    assert build_deploy_works(addon, manifests).works == build_deploy_works(addon, manifests).works


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=200, max_value=400_000), min_size=1, max_size=12))
def test_packing_never_exceeds_the_limit_and_keeps_every_manifest(sizes: list[int]) -> None:
    manifests = [cm(f"m{i}", size) for i, size in enumerate(sizes)]
    bins = pack(manifests)
    placed = [m["metadata"]["name"] for objs in bins.values() for m in objs]
    assert sorted(placed) == sorted(m["metadata"]["name"] for m in manifests)
    assert all(sum(manifest_size(m) for m in objs) <= 409_600 for objs in bins.values())
    if sum(sizes) <= 409_600:
        assert list(bins) == [0]


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Namespace", "namespaces"),
        ("NetworkPolicy", "networkpolicies"),
        ("Ingress", "ingresses"),
        ("Gateway", "gateways"),
        ("Endpoints", "endpoints"),
    ],
)
def test_guess_plural(kind: str, plural: str) -> None:
    assert guess_plural(kind) == plural


def work(name: str, *conditions: dict[str, Any]) -> JSON:
    return {"metadata": {"name": name}, "status": {"conditions": list(conditions)}}


def test_manifest_applied_from_work_conditions() -> None:
    assert manifest_applied([work("w0")]) is None
    assert manifest_applied([work("w0", {"type": "Applied", "status": "True"})]) == (
        "True",
        "AddonManifestApplied",
        "manifests of addon are applied successfully",
    )
    failed = manifest_applied(
        [
            work("w0", {"type": "Applied", "status": "True"}),
            work("w1", {"type": "Applied", "status": "False", "message": "quota"}),
        ]
    )
    assert failed is not None and failed[:2] == ("False", "AddonManifestAppliedFailed")
    assert "quota" in failed[2]


def test_work_json_is_what_the_api_accepts() -> None:
    addon = mca(configReferences=[ADC_REF])
    (w,) = build_deploy_works(addon, render_agent(mca=addon, adc=None).manifests).works
    json.dumps(w)  # plain JSON all the way down
    assert w["apiVersion"] == "work.open-cluster-management.io/v1" and w["kind"] == "ManifestWork"
