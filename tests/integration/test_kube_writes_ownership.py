"""Writer against the hub's real kube-apiserver: an object that replaced ours is never patched or deleted.

Between our read and our write, another writer deletes our object and creates its own under the
same name (`RacingAPI.before`).  The preconditions the writer sends (the uid and resourceVersion
of the object it checked, in the merge patch's metadata and in `DeleteOptions.preconditions`) make
the real apiserver refuse the write with 409; the writer then reads the replacement, finds that
the caller's `owns` refuses it, and leaves it exactly as the other writer made it.  Run with
ConfigMaps and with OCM's AddOnPlacementScores (which both the hub manager and the agents write).
The unit tests in tests/unit/shared/test_writes_ownership.py cover the same logic on a fake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dynamic_scoring.kube.api import Conflict, KubeAPI, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES, CONFIGMAPS, Resource
from dynamic_scoring.kube.writes import NotOurs, Writer, labelled
from e2e.controlplane import ControlPlane

MANAGED_BY = "app.kubernetes.io/managed-by"
MARK = "dynamic-scoring.open-cluster-management.io/test-mark"
OURS = labelled({MANAGED_BY: "us"})
NAME = "taken"
KINDS = pytest.mark.parametrize("resource", [CONFIGMAPS, ADDON_PLACEMENT_SCORES], ids=lambda r: r.kind)


class RacingAPI(KubeAPI):
    """The real client, letting another writer act just before one of our requests is sent."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.hooks: list[tuple[str, Callable[[], None]]] = []
        self.sent: list[tuple[str, str]] = []

    def before(self, method: str, action: Callable[[], None]) -> None:
        """Run `action` once, just before the next `method` request is sent."""
        self.hooks.append((method, action))

    def request(self, method: str, path: str, **kw: Any) -> JSON:
        self.sent.append((method, path))
        for i, (hooked, action) in enumerate(self.hooks):
            if hooked == method:
                del self.hooks[i]
                action()
                break
        return super().request(method, path, **kw)


@pytest.fixture
def api(control_plane: ControlPlane) -> RacingAPI:
    assert control_plane.hub is not None
    return RacingAPI(control_plane.hub.admin_kubeconfig)


@pytest.fixture
def namespace(namespace: str, api: RacingAPI) -> str:
    """The shared fresh namespace (created through `api`), with that creation forgotten."""
    api.sent.clear()
    return namespace


@pytest.fixture
def other(control_plane: ControlPlane) -> KubeAPI:
    """The other writer's own client: its requests do not pass through our hooks."""
    assert control_plane.hub is not None
    return KubeAPI(control_plane.hub.admin_kubeconfig)


def body(resource: Resource, namespace: str, owner: str) -> JSON:
    """An object named `NAME`, labelled as `owner`'s."""
    obj: JSON = {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": NAME, "namespace": namespace, "labels": {MANAGED_BY: owner}},
    }
    if resource is CONFIGMAPS:
        obj["data"] = {"written-by": owner}
    return obj


def desired(resource: Resource, namespace: str) -> JSON:
    """What we want of our object: our label, and a mark the other writer's object does not have."""
    want = body(resource, namespace, "us")
    want["metadata"]["annotations"] = {MARK: "ours"}
    return want


def replace(other: KubeAPI, resource: Resource, namespace: str) -> Callable[[], None]:
    """Delete whatever holds the name and create the other writer's object under it."""

    def act() -> None:
        other.request("DELETE", resource.path(namespace, NAME))
        other.request("POST", resource.path(namespace), body=body(resource, namespace, "them"))

    return act


def assert_untouched(other: KubeAPI, resource: Resource, namespace: str, theirs: JSON) -> None:
    """The other writer's object is there, exactly as it made it: same uid and resourceVersion."""
    now = other.request("GET", resource.path(namespace, NAME))
    assert now["metadata"]["uid"] == theirs["metadata"]["uid"]
    assert now["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    assert now["metadata"]["labels"] == {MANAGED_BY: "them"}
    assert MARK not in (now["metadata"].get("annotations") or {})


@KINDS
def test_ensure_does_not_take_over_an_object_that_replaced_ours_between_read_and_patch(
    api: RacingAPI, other: KubeAPI, namespace: str, resource: Resource
) -> None:
    writer = Writer(api, "test")
    current = api.request("POST", resource.path(namespace), body=body(resource, namespace, "us"))
    api.before("PATCH", replace(other, resource, namespace))
    with pytest.raises(NotOurs):
        writer.ensure(resource, desired(resource, namespace), current, owns=OURS)
    theirs = other.request("GET", resource.path(namespace, NAME))
    assert theirs["metadata"]["uid"] != current["metadata"]["uid"]  # it really was replaced
    assert_untouched(other, resource, namespace, theirs)
    assert [m for m, _ in api.sent] == ["POST", "PATCH", "GET"]  # the PATCH was refused: 409, no second


@KINDS
def test_ensure_does_not_patch_another_writers_object_its_create_meets(
    api: RacingAPI, other: KubeAPI, namespace: str, resource: Resource
) -> None:
    theirs = other.request("POST", resource.path(namespace), body=body(resource, namespace, "them"))
    with pytest.raises(NotOurs):
        Writer(api, "test").ensure(resource, desired(resource, namespace), None, owns=OURS)
    assert_untouched(other, resource, namespace, theirs)


@KINDS
def test_delete_does_not_delete_an_object_that_replaced_ours(
    api: RacingAPI, other: KubeAPI, namespace: str, resource: Resource
) -> None:
    writer = Writer(api, "test")
    current = api.request("POST", resource.path(namespace), body=body(resource, namespace, "us"))
    api.before("DELETE", replace(other, resource, namespace))
    assert writer.delete(resource, namespace, NAME, current=current, owns=OURS) is False
    theirs = other.request("GET", resource.path(namespace, NAME))
    assert_untouched(other, resource, namespace, theirs)
    assert [m for m, _ in api.sent] == ["POST", "DELETE", "GET"]  # refused by its preconditions


@KINDS
def test_delete_without_the_object_reads_it_and_spares_another_writers(
    api: RacingAPI, other: KubeAPI, namespace: str, resource: Resource
) -> None:
    theirs = other.request("POST", resource.path(namespace), body=body(resource, namespace, "them"))
    assert Writer(api, "test").delete(resource, namespace, NAME, owns=OURS) is False
    assert_untouched(other, resource, namespace, theirs)
    assert ("DELETE", resource.path(namespace, NAME)) not in api.sent


@KINDS
def test_our_own_object_changed_between_read_and_write_is_still_patched_then_deleted(
    api: RacingAPI, other: KubeAPI, namespace: str, resource: Resource
) -> None:
    """The control: the preconditions cost an owner a read and a retry, never the write itself."""
    writer = Writer(api, "test")
    path = resource.path(namespace, NAME)
    current = api.request("POST", resource.path(namespace), body=body(resource, namespace, "us"))

    changes = iter(("label", "label-again"))

    def relabel() -> None:
        # each call a different value: a patch that changes nothing keeps the resourceVersion
        other.request(
            "PATCH",
            path,
            body={"metadata": {"labels": {"another": next(changes)}}},
            content_type="application/merge-patch+json",
        )

    api.before("PATCH", relabel)
    result = writer.ensure(resource, desired(resource, namespace), current, owns=OURS)
    assert result["metadata"]["uid"] == current["metadata"]["uid"]
    assert result["metadata"]["annotations"][MARK] == "ours"
    assert result["metadata"]["labels"] == {MANAGED_BY: "us", "another": "label"}
    api.before("DELETE", relabel)  # `result` is one version behind when the delete is sent
    assert writer.delete(resource, namespace, NAME, current=result, owns=OURS) is True
    with pytest.raises(NotFound):
        other.request("GET", path)
    deletes = [m for m, _ in api.sent if m == "DELETE"]
    assert deletes == ["DELETE", "DELETE"]  # the first refused (stale resourceVersion), then ours again


def test_the_apiserver_itself_refuses_a_delete_whose_uid_precondition_names_another_object(
    api: RacingAPI, other: KubeAPI, namespace: str
) -> None:
    """What the writer relies on: DeleteOptions.preconditions through `KubeAPI.request`'s body."""
    current = api.request("POST", CONFIGMAPS.path(namespace), body=body(CONFIGMAPS, namespace, "us"))
    replace(other, CONFIGMAPS, namespace)()
    options = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": current["metadata"]["uid"]},
    }
    with pytest.raises(Conflict):
        api.request("DELETE", CONFIGMAPS.path(namespace, NAME), body=options)
    assert other.request("GET", CONFIGMAPS.path(namespace, NAME))["metadata"]["labels"] == {
        MANAGED_BY: "them"
    }
