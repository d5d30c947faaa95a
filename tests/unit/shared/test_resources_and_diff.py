"""Resource paths, keys, and the write-on-difference logic of Writer.ensure."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.kube.resources import (
    CONFIGMAPS,
    CSRS,
    MANAGED_CLUSTER_ADDONS,
    NAMESPACES,
    object_key,
    split_key,
)
from dynamic_scoring.kube.writes import merge_patch, owned_fields


def test_paths_of_core_and_group_resources() -> None:
    assert CONFIGMAPS.path() == "/api/v1/configmaps"
    assert CONFIGMAPS.path("ns") == "/api/v1/namespaces/ns/configmaps"
    assert CONFIGMAPS.path("ns", "c") == "/api/v1/namespaces/ns/configmaps/c"
    assert (
        CSRS.path(None, "x", "approval")
        == "/apis/certificates.k8s.io/v1/certificatesigningrequests/x/approval"
    )
    assert (
        MANAGED_CLUSTER_ADDONS.path("cluster1", "dynamic-scoring", "status")
        == "/apis/addon.open-cluster-management.io/v1alpha1/namespaces/cluster1/managedclusteraddons/"
        "dynamic-scoring/status"
    )
    assert MANAGED_CLUSTER_ADDONS.api_version == "addon.open-cluster-management.io/v1alpha1"
    assert NAMESPACES.api_version == "v1"


def test_path_quotes_every_segment() -> None:
    assert CONFIGMAPS.path("a/b", "../x?y=1%") == "/api/v1/namespaces/a%2Fb/configmaps/..%2Fx%3Fy%3D1%25"


@given(st.text(min_size=1), st.text(min_size=1))
def test_property_a_name_cannot_add_or_remove_path_segments(namespace: str, name: str) -> None:
    path = CONFIGMAPS.path(namespace, name, "status")
    assert path.count("/") == 7
    assert path.split("/")[-1] == "status"


@pytest.mark.parametrize(
    ("resource", "args"),
    [
        (NAMESPACES, ("ns", "x")),
        (CONFIGMAPS, (None, "x")),
        (CONFIGMAPS, ("ns", None, "status")),
        (CONFIGMAPS, ("", "x")),
    ],
)
def test_path_rejects_scope_mistakes(resource: Any, args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        resource.path(*args)


def test_keys_round_trip() -> None:
    assert object_key({"metadata": {"namespace": "ns", "name": "a"}}) == "ns/a"
    assert object_key({"metadata": {"name": "c1"}}) == "c1"
    assert split_key("ns/a") == ("ns", "a")
    assert split_key("c1") == (None, "c1")
    with pytest.raises(ValueError):
        split_key("a/b/c")
    with pytest.raises(ValueError):
        object_key({"metadata": {}})


CURRENT = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "c",
        "namespace": "ns",
        "resourceVersion": "7",
        "uid": "u",
        "labels": {"mine": "1", "theirs": "2"},
        "managedFields": [{"manager": "kubectl"}],
    },
    "data": {"a": "1", "b": "2"},
}


def test_no_difference_gives_no_patch_even_with_server_fields() -> None:
    desired = {
        "metadata": {"name": "c", "namespace": "ns", "labels": {"mine": "1"}},
        "data": {"a": "1", "b": "2"},
    }
    assert merge_patch(CURRENT, owned_fields(desired)) is None


def test_patch_carries_only_what_differs() -> None:
    desired = {
        "metadata": {"name": "c", "namespace": "ns", "labels": {"mine": "9"}},
        "data": {"a": "1", "b": "3"},
    }
    assert merge_patch(CURRENT, owned_fields(desired)) == {
        "metadata": {"labels": {"mine": "9"}},
        "data": {"b": "3"},
    }


def test_lists_compare_whole_none_deletes_and_empty_maps_are_not_differences() -> None:
    current = {"spec": {"items": [1, 2], "gone": "x"}}
    assert merge_patch(current, {"spec": {"items": [1, 2]}}) is None
    assert merge_patch(current, {"spec": {"items": [2, 1]}}) == {"spec": {"items": [2, 1]}}
    assert merge_patch(current, {"spec": {"gone": None}}) == {"spec": {"gone": None}}
    assert merge_patch(current, {"spec": {"never": None}}) is None
    assert merge_patch(current, {"data": {}}) is None
    assert merge_patch({"spec": "scalar"}, {"spec": {"a": 1}}) == {"spec": {"a": 1}}


def test_owned_fields_drop_identity_status_and_server_metadata() -> None:
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "annotations": {"a": "b"}},
        "status": {"x": 1},
        "data": {},
    }
    assert owned_fields(desired) == {"metadata": {"annotations": {"a": "b"}}, "data": {}}


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, to check the patch does what it claims."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = apply_merge_patch(out.get(k), v)
    return out


def contains(have: Any, want: Any) -> bool:
    """`have` agrees with `want`: None means absent, an object may be absent when it asks nothing."""
    if isinstance(want, dict):
        if have is not None and not isinstance(have, dict):
            return False
        present = have or {}
        return all(
            present.get(k) is None if v is None else contains(present.get(k), v) for k, v in want.items()
        )
    return bool(have == want)


leaves = st.one_of(
    st.none(), st.integers(-3, 3), st.text(max_size=2), st.lists(st.integers(0, 2), max_size=2)
)
docs = st.recursive(leaves, lambda c: st.dictionaries(st.sampled_from("abc"), c, max_size=3), max_leaves=8)
objs = st.dictionaries(st.sampled_from("abcd"), docs, max_size=4)


@given(objs, objs)
def test_property_applying_the_patch_converges_and_a_second_diff_is_empty(current: Any, desired: Any) -> None:
    patch = merge_patch(current, desired)
    after = apply_merge_patch(current, patch) if patch is not None else current
    assert merge_patch(after, desired) is None
    assert contains(after, desired)
