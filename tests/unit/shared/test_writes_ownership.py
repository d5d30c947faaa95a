"""`Writer` never writes or deletes an object its caller's `owns` refuses, even one it meets after a 409.

A name is not an object: between a controller's read and its write, the object it checked can be
deleted and another writer's created under the same name.  Each test puts such a writer between
our read and our request (`FakeApiserver.before`) and shows what reaches the apiserver.  The
integration test `test_kube_writes_ownership` does the same against a real apiserver.
"""

from __future__ import annotations

import copy
import functools
from typing import cast

import pytest

from dynamic_scoring.kube.api import Conflict, KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import CONFIGMAPS, MULTIKUEUE_CONFIGS
from dynamic_scoring.kube.writes import NotOurs, Writer, labelled
from tests.unit.shared.fake_apiserver import FakeApiserver

NS = "team-a"
MANAGED_BY = "app.kubernetes.io/managed-by"
OURS = labelled({MANAGED_BY: "us"})
PATH = CONFIGMAPS.path(NS, "c")


def ours(**data: str) -> JSON:
    return {"metadata": {"name": "c", "namespace": NS, "labels": {MANAGED_BY: "us"}}, "data": data}


def theirs(**data: str) -> JSON:
    return {"metadata": {"name": "c", "namespace": NS, "labels": {MANAGED_BY: "them"}}, "data": data}


def setup() -> tuple[FakeApiserver, Writer]:
    api = FakeApiserver()
    return api, Writer(cast(KubeAPI, api), "test")


def test_labelled_wants_every_label_it_names() -> None:
    owns = labelled({"a": "1", "b": "2"})
    assert owns({"metadata": {"labels": {"a": "1", "b": "2", "c": "3"}}})
    assert not owns({"metadata": {"labels": {"a": "1"}}})
    assert not owns({"metadata": {"labels": {"a": "1", "b": "x"}}})
    assert not owns({"metadata": {}})


# -- ensure -------------------------------------------------------------------------------------


def test_a_patch_refused_because_the_object_was_replaced_does_not_patch_the_replacement() -> None:
    api, writer = setup()
    current = api.put(PATH, ours(a="1"))
    foreign = theirs(a="theirs")
    api.before("PATCH", lambda: api.replace(PATH, foreign))
    with pytest.raises(NotOurs) as refused:
        writer.ensure(CONFIGMAPS, ours(a="2"), current, owns=OURS)
    assert isinstance(refused.value, Conflict)  # what the callers already retry on
    assert "ConfigMap team-a/c" in str(refused.value) and "not ours" in str(refused.value)
    stored = api.objects[PATH]
    assert stored["metadata"]["labels"] == {MANAGED_BY: "them"}  # not relabelled as ours
    assert stored["data"] == {"a": "theirs"}
    assert api.sent("PATCH") == [PATH]  # the one refused by its preconditions; no second one
    assert api.refused == [("PATCH", PATH)]


def test_a_create_that_meets_another_writers_object_leaves_it_as_it_is() -> None:
    api, writer = setup()
    api.put(PATH, theirs(a="theirs"))
    before = copy.deepcopy(api.objects[PATH])
    with pytest.raises(NotOurs):
        writer.ensure(CONFIGMAPS, ours(a="1"), None, owns=OURS)
    assert api.objects[PATH] == before
    assert api.sent("PATCH") == []


def test_a_cluster_scoped_config_replaced_by_a_foreign_one_is_not_relabelled() -> None:
    """The MultiKueueConfig case: another writer's config of the same name took ours' place."""
    api, writer = setup()
    path = MULTIKUEUE_CONFIGS.path(None, "gpu")
    owns = labelled({MANAGED_BY: "dynamic-scoring-addon-manager"})
    mine: JSON = {
        "metadata": {"name": "gpu", "labels": {MANAGED_BY: "dynamic-scoring-addon-manager"}},
        "spec": {"clusters": ["a", "b"]},
    }
    current = api.put(path, mine)
    kueue_addon: JSON = {
        "metadata": {"name": "gpu", "labels": {MANAGED_BY: "kueue-addon"}},
        "spec": {"clusters": ["x"]},
    }
    api.before("PATCH", lambda: api.replace(path, kueue_addon))
    with pytest.raises(NotOurs):
        writer.ensure(MULTIKUEUE_CONFIGS, {**mine, "spec": {"clusters": ["b", "a"]}}, current, owns=owns)
    assert api.objects[path]["metadata"]["labels"] == {MANAGED_BY: "kueue-addon"}
    assert api.objects[path]["spec"] == {"clusters": ["x"]}


def test_our_object_changed_by_another_writer_is_compared_again_and_patched() -> None:
    """Unchanged for an owner: a 409 on our own object costs a read and a second patch."""
    api, writer = setup()
    current = api.put(PATH, ours(a="1"))
    api.before("PATCH", lambda: api.edit(PATH, {"metadata": {"labels": {"other": "y"}}}))
    result = writer.ensure(CONFIGMAPS, ours(a="2"), current, owns=OURS)
    assert result["data"] == {"a": "2"}
    assert result["metadata"]["labels"] == {MANAGED_BY: "us", "other": "y"}
    assert result["metadata"]["uid"] == current["metadata"]["uid"]
    assert [m for m, _, _ in api.requests] == ["PATCH", "GET", "PATCH"]


def test_the_patch_names_the_object_it_was_computed_from() -> None:
    api, writer = setup()
    current = api.put(PATH, ours(a="1"))
    writer.ensure(CONFIGMAPS, ours(a="2"), current, owns=OURS)
    [(_, _, body)] = api.requests
    assert body["metadata"]["uid"] == current["metadata"]["uid"]
    assert body["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]


def test_a_cache_behind_our_own_create_still_compares_instead_of_failing() -> None:
    api, writer = setup()
    api.put(PATH, ours(a="1"))
    assert writer.ensure(CONFIGMAPS, ours(a="1"), None, owns=OURS)["data"] == {"a": "1"}
    assert [m for m, _, _ in api.requests] == ["POST", "GET"]


def test_an_object_replaced_by_another_of_ours_is_patched() -> None:
    """`owns` decides, not the uid: a replacement that passes the caller's test is the caller's."""
    api, writer = setup()
    current = api.put(PATH, ours(a="1"))
    api.before("PATCH", lambda: api.replace(PATH, ours(a="0")))
    assert writer.ensure(CONFIGMAPS, ours(a="2"), current, owns=OURS)["data"] == {"a": "2"}


# -- delete -------------------------------------------------------------------------------------


def test_a_delete_names_the_object_it_checked_and_spares_a_replacement() -> None:
    api, writer = setup()
    current = api.put(PATH, ours(a="1"))
    api.before("DELETE", lambda: api.replace(PATH, theirs(a="theirs")))
    assert writer.delete(CONFIGMAPS, NS, "c", current=current, owns=OURS) is False
    assert api.objects[PATH]["data"] == {"a": "theirs"}  # still there
    [(_, _, body)] = [r for r in api.requests if r[0] == "DELETE"]
    assert body["preconditions"] == {
        "uid": current["metadata"]["uid"],
        "resourceVersion": current["metadata"]["resourceVersion"],
    }
    assert body["propagationPolicy"] == "Background"
    assert [m for m, _, _ in api.requests] == ["DELETE", "GET"]  # read again, found foreign, stopped


def test_a_delete_without_the_object_reads_it_and_deletes_only_ours() -> None:
    api, writer = setup()
    api.put(PATH, theirs())
    assert writer.delete(CONFIGMAPS, NS, "c", owns=OURS) is False
    assert PATH in api.objects
    assert api.sent("DELETE") == []
    api.replace(PATH, ours())
    assert writer.delete(CONFIGMAPS, NS, "c", owns=OURS) is True
    assert PATH not in api.objects
    assert writer.delete(CONFIGMAPS, NS, "c", owns=OURS) is False  # already gone


def test_our_object_changed_before_the_delete_is_read_again_and_deleted() -> None:
    """Unchanged for an owner: a status write in between costs a read and a second delete."""
    api, writer = setup()
    current = api.put(PATH, ours(a="1"))
    api.before("DELETE", lambda: api.edit(PATH, {"status": {"x": "1"}}))
    assert writer.delete(CONFIGMAPS, NS, "c", current=current, owns=OURS) is True
    assert PATH not in api.objects
    assert [m for m, _, _ in api.requests] == ["DELETE", "GET", "DELETE"]


def test_a_delete_of_an_object_that_keeps_changing_gives_up_with_the_conflict() -> None:
    api, writer = setup()
    current = api.put(PATH, ours(a="1"))
    for i in range(3):
        api.before("DELETE", functools.partial(api.edit, PATH, {"data": {"n": str(i)}}))
    with pytest.raises(Conflict):
        writer.delete(CONFIGMAPS, NS, "c", current=current, owns=OURS)
    assert PATH in api.objects
    assert len(api.sent("DELETE")) == 3


# -- status -------------------------------------------------------------------------------------


def test_status_with_owns_is_not_written_on_a_replacement() -> None:
    api, writer = setup()
    current = api.put(PATH, ours())
    api.before("PATCH", lambda: api.replace(PATH, {**theirs(), "status": {"validUntil": "t"}}))

    def compute(obj: JSON) -> JSON | None:
        return {"validUntil": None} if (obj.get("status") or {}).get("validUntil") else {"mark": "1"}

    with pytest.raises(NotOurs):
        writer.patch_status(CONFIGMAPS, NS, "c", compute, current=current, owns=OURS)
    assert api.objects[PATH]["status"] == {"validUntil": "t"}
