"""Writer against the hub's real kube-apiserver: no write without a difference, 409-safe status."""

from __future__ import annotations

from typing import Any

import pytest

from dynamic_scoring.kube.api import MERGE_PATCH, KubeAPI
from dynamic_scoring.kube.conditions import find_condition, set_condition
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.metrics import ControllerMetrics
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES, CONFIGMAPS, EVENTS
from dynamic_scoring.kube.writes import Writer
from e2e.controlplane import ControlPlane


def ANY(_obj: JSON) -> bool:  # noqa: N802 - reads as a constant at the call sites
    """Every object in the fresh namespace is the test's own (`test_kube_writes_ownership` tests `owns`)."""
    return True


class CountingAPI(KubeAPI):
    """The real client, recording every request it sends."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.sent: list[tuple[str, str]] = []

    def request(self, method: str, path: str, **kw: Any) -> JSON:
        self.sent.append((method, path))
        return super().request(method, path, **kw)

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.sent if m != "GET"]


@pytest.fixture
def api(control_plane: ControlPlane) -> CountingAPI:
    assert control_plane.hub is not None
    return CountingAPI(control_plane.hub.admin_kubeconfig)


@pytest.fixture
def namespace(namespace: str, api: CountingAPI) -> str:
    """The shared fresh namespace (created through this module's `api`), with that creation forgotten.

    The tests count the requests the writer sends; the fixture's own POST is not one of them.
    """
    api.sent.clear()
    return namespace


def value(metrics: ControllerMetrics, verb: str, resource: str, errors: bool = False) -> float:
    family = metrics.write_errors_total if errors else metrics.writes_total
    return float(family.labels("test", verb, resource)._value.get())


def test_ensure_creates_then_writes_nothing_for_the_same_object_then_patches_a_difference(
    api: CountingAPI, namespace: str
) -> None:
    metrics = ControllerMetrics()
    writer = Writer(api, "test", metrics)
    desired = {
        "metadata": {"name": "c", "namespace": namespace, "labels": {"app": "x"}},
        "data": {"a": "1"},
    }
    created = writer.ensure(CONFIGMAPS, desired, None, owns=ANY)
    assert created["metadata"]["uid"]
    assert api.writes() == [("POST", CONFIGMAPS.path(namespace))]
    # someone else labels it; that is not our field
    api.request(
        "PATCH",
        CONFIGMAPS.path(namespace, "c"),
        body={"metadata": {"labels": {"other": "y"}}},
        content_type=MERGE_PATCH,
    )
    current = api.request("GET", CONFIGMAPS.path(namespace, "c"))
    api.sent.clear()
    assert writer.ensure(CONFIGMAPS, desired, current, owns=ANY) is current
    assert api.sent == []  # not even a GET
    changed = {**desired, "data": {"a": "2"}}
    result = writer.ensure(CONFIGMAPS, changed, current, owns=ANY)
    assert api.writes() == [("PATCH", CONFIGMAPS.path(namespace, "c"))]
    assert result["data"] == {"a": "2"}
    assert result["metadata"]["labels"] == {"app": "x", "other": "y"}  # the other writer's label kept
    assert value(metrics, "create", "configmaps") == 1
    assert value(metrics, "patch", "configmaps") == 1


def test_ensure_on_a_stale_cache_that_missed_a_create_compares_instead_of_failing(
    api: CountingAPI, namespace: str
) -> None:
    writer = Writer(api, "test")
    desired = {"metadata": {"name": "c", "namespace": namespace}, "data": {"a": "1"}}
    writer.ensure(CONFIGMAPS, desired, None, owns=ANY)
    api.sent.clear()
    again = writer.ensure(CONFIGMAPS, desired, None, owns=ANY)  # the cache did not see the first create yet
    assert again["data"] == {"a": "1"}
    assert api.sent == [("POST", CONFIGMAPS.path(namespace)), ("GET", CONFIGMAPS.path(namespace, "c"))]


def test_delete_reports_whether_it_deleted(api: CountingAPI, namespace: str) -> None:
    writer = Writer(api, "test")
    writer.ensure(CONFIGMAPS, {"metadata": {"name": "c", "namespace": namespace}}, None, owns=ANY)
    assert writer.delete(CONFIGMAPS, namespace, "c", owns=ANY) is True
    assert writer.delete(CONFIGMAPS, namespace, "c", owns=ANY) is False


def aps(namespace: str) -> JSON:
    return {
        "apiVersion": ADDON_PLACEMENT_SCORES.api_version,
        "kind": "AddOnPlacementScore",
        "metadata": {"name": "s", "namespace": namespace},
    }


def test_patch_status_retries_a_real_409_and_keeps_the_other_writers_condition(
    api: CountingAPI, namespace: str
) -> None:
    api.request("POST", ADDON_PLACEMENT_SCORES.path(namespace), body=aps(namespace))
    status_path = ADDON_PLACEMENT_SCORES.path(namespace, "s", "status")
    metrics = ControllerMetrics()
    writer = Writer(api, "test", metrics)
    seen: list[list[str]] = []

    def compute(obj: JSON) -> JSON | None:
        conditions = (obj.get("status") or {}).get("conditions") or []
        seen.append([c["type"] for c in conditions])
        if len(seen) == 1:
            # another writer gets in between our GET and our PATCH
            theirs = set_condition(conditions, "Theirs", "True", "TheirReason", "m")
            api.request(
                "PATCH", status_path, body={"status": {"conditions": theirs}}, content_type=MERGE_PATCH
            )
        new = set_condition(conditions, "Ours", "True", "OurReason", "m")
        return None if new is conditions else {"conditions": new}

    assert writer.patch_status(ADDON_PLACEMENT_SCORES, namespace, "s", compute) is True
    assert seen == [[], ["Theirs"]]  # recomputed on the fresh object after the 409
    final = api.request("GET", ADDON_PLACEMENT_SCORES.path(namespace, "s"))["status"]["conditions"]
    assert [c["type"] for c in final] == ["Theirs", "Ours"]
    assert value(metrics, "status", ADDON_PLACEMENT_SCORES.name, errors=True) == 1
    assert value(metrics, "status", ADDON_PLACEMENT_SCORES.name) == 1
    # the same again: nothing differs, nothing is written
    api.sent.clear()
    assert writer.patch_status(ADDON_PLACEMENT_SCORES, namespace, "s", compute) is False
    assert api.writes() == []


def test_patch_status_without_resource_version_would_have_clobbered(api: CountingAPI, namespace: str) -> None:
    """The control for the test above: a blind status patch drops the other writer's condition."""
    api.request("POST", ADDON_PLACEMENT_SCORES.path(namespace), body=aps(namespace))
    status_path = ADDON_PLACEMENT_SCORES.path(namespace, "s", "status")
    stale: list[JSON] = []
    theirs = set_condition([], "Theirs", "True", "R", "m")
    api.request("PATCH", status_path, body={"status": {"conditions": theirs}}, content_type=MERGE_PATCH)
    blind = set_condition(stale, "Ours", "True", "R", "m")
    api.request("PATCH", status_path, body={"status": {"conditions": blind}}, content_type=MERGE_PATCH)
    final = api.request("GET", ADDON_PLACEMENT_SCORES.path(namespace, "s"))["status"]["conditions"]
    assert find_condition(final, "Theirs") is None


def test_events_count_repeats_instead_of_piling_up(api: CountingAPI, namespace: str) -> None:
    writer = Writer(api, "test")
    obj = writer.ensure(CONFIGMAPS, {"metadata": {"name": "c", "namespace": namespace}}, None, owns=ANY)
    for _ in range(3):
        writer.event(obj, "Warning", "BadConfig", "the config is bad")
    writer.event(obj, "Normal", "Fixed", "fixed")
    events = api.request("GET", EVENTS.path(namespace))["items"]
    by_reason = {e["reason"]: e for e in events}
    assert set(by_reason) == {"BadConfig", "Fixed"}
    assert by_reason["BadConfig"]["count"] == 3
    assert by_reason["BadConfig"]["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert by_reason["BadConfig"]["type"] == "Warning"
