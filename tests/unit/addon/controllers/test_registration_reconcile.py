"""The registration reconcile on in-memory caches, its requests recorded instead of sent.

The integration tier runs it against a real apiserver with OCM's controllers; here are the
decisions it makes between reads and writes: what waits, what is written once and then left
alone while nothing changed, what an edit or a new score name costs, and what a refused write or
subject reports.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dynamic_scoring.addon.constants import SUMMARY_CONFIGMAP
from dynamic_scoring.addon.controllers.lifecycle import registration as registration_module
from dynamic_scoring.addon.controllers.lifecycle.registration import (
    SUBJECT_REFUSED,
    Registration,
    woken_by_foreign,
    woken_by_score,
    woken_by_work,
)
from dynamic_scoring.addon.render.hub_rbac import render_hub_rbac
from dynamic_scoring.kube.api import Forbidden
from dynamic_scoring.kube.informer import EventType, WatchEvent
from dynamic_scoring.kube.jsontypes import JSON
from tests.unit.addon.controllers.fakes import Cache, Recorder, lifecycle_caches
from tests.unit.addon.helpers import mca

KEY = "cluster1/dynamic-scoring"
ROLES = "/apis/rbac.authorization.k8s.io/v1/namespaces/cluster1/roles"
BINDINGS = "/apis/rbac.authorization.k8s.io/v1/namespaces/cluster1/rolebindings"
STATUS = "/apis/addon.open-cluster-management.io/v1alpha1/namespaces/cluster1/managedclusteraddons"


def owned(obj: JSON) -> JSON:
    obj["metadata"]["ownerReferences"] = [
        {"kind": "ClusterManagementAddOn", "name": "dynamic-scoring", "uid": "cma", "apiVersion": "x"}
    ]
    return obj


def cluster(name: str = "cluster1") -> JSON:
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name},
    }


def config_work(version: str, *scores: str) -> JSON:
    summaries = [{"name": s, "scoreName": s} for s in scores]
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SUMMARY_CONFIGMAP},
        "data": {"summaries": json.dumps(summaries)},
    }
    return {
        "metadata": {
            "name": "addon-dynamic-scoring-config",
            "namespace": "cluster1",
            "resourceVersion": version,
        },
        "spec": {"workload": {"manifests": [configmap]}},
    }


def setup(api: Recorder, addon: JSON | None = None, **caches: Cache) -> tuple[Registration, Any]:
    all_caches = {"addons": Cache(addon or owned(mca())), "clusters": Cache(cluster()), **caches}
    built = lifecycle_caches(**all_caches)
    return Registration(built, api.writer("registration")), built


def role_names(api: Recorder, method: str = "POST") -> list[str]:
    [(_, role)] = [(m, b) for m, b in api.writes(ROLES) if m == method]
    scores = [r for r in role["rules"] if r["resources"] == ["addonplacementscores"]]
    return sorted({n for rule in scores for n in rule.get("resourceNames") or []})


def deliver(api: Recorder, caches: Any) -> None:
    """The watch delivers what was written: the Role, the RoleBinding and the MCA's new status."""
    for method, body in api.answered(ROLES) + api.answered(BINDINGS):
        if method == "POST":
            (caches.roles if body["kind"] == "Role" else caches.role_bindings).put(body)
    current = caches.addons.get(KEY)
    for method, body in api.writes(STATUS):
        if method == "PATCH":
            current = {**current, "status": {**current["status"], **body["status"]}}
    caches.addons.put(current)


def test_a_missing_cluster_is_warned_once_and_nothing_is_registered() -> None:
    api = Recorder()
    registration, _ = setup(api, clusters=Cache())
    registration.reconcile(KEY)
    registration.reconcile(KEY)
    [event] = api.events()
    assert event["reason"] == "ManagedClusterNotFound"
    assert [m for m, p, _ in api.requests if not p.endswith("/events")] == []


def test_it_waits_for_ocm_to_own_the_addon_and_to_resolve_its_config() -> None:
    api = Recorder()
    setup(api, mca())[0].reconcile(KEY)  # no ownerReference to the CMA yet
    pending = owned(mca(configReferences=[adc_ref(spec_hash="")]))
    setup(api, pending)[0].reconcile(KEY)  # the ADC's spec hash is not filled in yet
    assert api.requests == []


def adc_ref(*, spec_hash: str) -> JSON:
    return {
        "group": "addon.open-cluster-management.io",
        "resource": "addondeploymentconfigs",
        "namespace": "dynamic-scoring",
        "name": "cfg",
        "desiredConfig": {"namespace": "dynamic-scoring", "name": "cfg", "specHash": spec_hash},
    }


def test_the_first_pass_writes_the_rbac_and_one_status_then_a_repeat_writes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    renders: list[JSON] = []

    def counted(*args: Any, **kwargs: Any) -> list[JSON]:
        renders.append(args[0])
        return render_hub_rbac(*args, **kwargs)

    monkeypatch.setattr(registration_module, "render_hub_rbac", counted)
    api = Recorder()
    registration, caches = setup(api, works=Cache(config_work("1", "cpu")))
    registration.reconcile(KEY)
    assert [m for m, _ in api.writes(ROLES)] == ["POST"] and [m for m, _ in api.writes(BINDINGS)] == ["POST"]
    assert role_names(api) == ["cpu"]
    [(_, patch)] = api.writes(STATUS)
    status = patch["status"]
    assert status["namespace"] == "open-cluster-management-agent-addon"
    assert status["healthCheck"] == {"mode": "Lease"} and status["supportedConfigs"]
    assert [r["subject"]["user"] for r in status["registrations"]] == [
        "system:open-cluster-management:cluster:cluster1:addon:dynamic-scoring:agent:dynamic-scoring"
    ]
    [applied] = [c for c in status["conditions"] if c["type"] == "RegistrationApplied"]
    assert applied["status"] == "True"
    deliver(api, caches)
    api.requests.clear()
    registration.reconcile(KEY)
    assert api.requests == []
    assert len(renders) == 1  # the memo holds: no second render, no comparison


def test_an_edited_role_is_put_back_and_a_new_score_name_granted() -> None:
    api = Recorder()
    registration, caches = setup(api, works=Cache(config_work("1", "cpu")))
    registration.reconcile(KEY)
    deliver(api, caches)
    [role] = caches.roles.list("cluster1")
    caches.roles.put({**role, "metadata": {**role["metadata"], "resourceVersion": "edited"}, "rules": []})
    api.requests.clear()
    registration.reconcile(KEY)
    [(method, patch)] = api.writes(ROLES)
    assert method == "PATCH" and patch["rules"] == role["rules"]
    assert api.writes(BINDINGS) == []  # the binding's version did not change: not even compared
    caches.works.put(config_work("2", "cpu", "gpu"))
    api.requests.clear()
    registration.reconcile(KEY)
    assert role_names(api, "PATCH") == ["cpu", "gpu"]


def test_a_refused_rbac_write_is_the_condition_and_an_error_for_the_retry() -> None:
    api = Recorder({("POST", ROLES): Forbidden(403, "Forbidden", 'roles.rbac "x" is forbidden')})
    registration, _ = setup(api)
    with pytest.raises(RuntimeError, match="hub RBAC for the agent not applied"):
        registration.reconcile(KEY)
    [(_, patch)] = api.writes(STATUS)
    [applied] = [c for c in patch["status"]["conditions"] if c["type"] == "RegistrationApplied"]
    assert applied["status"] == "False" and "forbidden" in applied["message"]


def test_a_token_subject_of_another_form_is_refused_once_and_not_bound() -> None:
    api = Recorder()
    foreign = {"user": "system:serviceaccount:kube-system:admin"}
    token: dict[str, Any] = {
        "kubeClientDriver": "token",
        "registrations": [{"signerName": "kubernetes.io/kube-apiserver-client", "subject": foreign}],
    }
    registration, _ = setup(api, owned(mca(**token)))
    registration.reconcile(KEY)
    registration.reconcile(KEY)
    assert [e["reason"] for e in api.events()] == [SUBJECT_REFUSED]
    bindings = [b for m, b in api.writes(BINDINGS) if m == "POST"]
    assert bindings and all(s.get("name") != "admin" for b in bindings for s in b.get("subjects") or [])
    [applied] = [
        c
        for _, p in api.writes(STATUS)[:1]
        for c in p["status"]["conditions"]
        if c["type"] == "RegistrationApplied"
    ]
    assert applied["status"] == "False"


def test_a_disabled_addon_is_forgotten() -> None:
    api = Recorder()
    registration, caches = setup(api, works=Cache(config_work("1", "cpu")))
    registration.reconcile(KEY)
    assert len(registration.verified) == 1
    caches.addons.objects.clear()
    assert registration.reconcile(KEY) is None
    assert len(registration.verified) == 0


def event(type_: EventType, obj: JSON, old: JSON | None = None) -> WatchEvent:
    return WatchEvent(type_, obj, old)


def test_only_what_changes_the_granted_names_wakes_the_cluster() -> None:
    work = config_work("1", "cpu")
    work["metadata"]["generation"] = 1
    status_only = {**work, "status": {"conditions": []}}
    assert woken_by_work(event("MODIFIED", status_only, work)) == ()
    assert woken_by_work(
        event("MODIFIED", {**work, "metadata": {**work["metadata"], "generation": 2}}, work)
    ) == (KEY,)
    assert woken_by_work(event("ADDED", {**work, "metadata": {**work["metadata"], "name": "other"}})) == ()
    score = {"metadata": {"name": "cpu", "namespace": "cluster1"}}
    assert woken_by_score(event("MODIFIED", score, score)) == ()
    assert woken_by_score(event("DELETED", score)) == (KEY,)
    assert woken_by_foreign(event("MODIFIED", score, score)) == ()
    assert woken_by_foreign(event("ADDED", score)) == (KEY,)
