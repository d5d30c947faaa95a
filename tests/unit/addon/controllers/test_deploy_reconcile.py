"""The deploy reconcile on in-memory caches, its requests recorded instead of sent.

The integration and e2e tiers deliver a real agent through OCM's work agent; here are the
decisions between the reads and the writes: what waits, what a user's mistake reports while the
last good work stays, what is rendered again and what is not, and what a refused write reports.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamic_scoring.addon.controllers.lifecycle import deploy as deploy_module
from dynamic_scoring.addon.controllers.lifecycle.deploy import (
    APPLY_FAILED,
    INSTALL_NAMESPACE_REFUSED,
    AgentRenderOptions,
    Deploy,
)
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.kube.api import Forbidden
from dynamic_scoring.kube.jsontypes import JSON
from tests.unit.addon.controllers.fakes import Cache, Recorder, lifecycle_caches
from tests.unit.addon.helpers import mca

KEY = "cluster1/dynamic-scoring"
WORKS = "/apis/work.open-cluster-management.io/v1/namespaces/cluster1/manifestworks"
STATUS = "/apis/addon.open-cluster-management.io/v1alpha1/namespaces/cluster1/managedclusteraddons"
REGISTERED = {
    "type": "RegistrationApplied",
    "status": "True",
    "reason": "SetPermissionApplied",
    "message": "",
}


def registered(**spec: Any) -> JSON:
    obj = mca(conditions=[REGISTERED])
    obj["spec"].update(spec)
    return obj


def cluster() -> JSON:
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": "cluster1"},
    }


def setup(api: Recorder, addon: JSON, **caches: Cache) -> tuple[Deploy, Any]:
    built = lifecycle_caches(**{"addons": Cache(addon), "clusters": Cache(cluster()), **caches})
    return Deploy(built, api.writer("deploy"), AgentRenderOptions(agent_image="example.com/agent:1")), built


def manifest_applied(patch: JSON) -> JSON:
    [condition] = [c for c in patch["status"]["conditions"] if c["type"] == "ManifestApplied"]
    return dict(condition)


def test_it_waits_for_registration_and_leaves_a_deleting_addon_alone() -> None:
    api = Recorder()
    setup(api, mca())[0].reconcile(KEY)  # no RegistrationApplied yet
    deleting = registered()
    deleting["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    setup(api, deleting)[0].reconcile(KEY)
    setup(api, registered(), clusters=Cache())[0].reconcile(KEY)  # no ManagedCluster
    assert api.requests == []


def test_the_first_pass_creates_the_work_and_a_repeat_renders_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    renders: list[JSON] = []

    def counted(**kwargs: Any) -> Any:
        renders.append(kwargs["mca"])
        return render_agent(**kwargs)

    monkeypatch.setattr(deploy_module, "render_agent", counted)
    api = Recorder()
    deploy, caches = setup(api, registered())
    deploy.reconcile(KEY)
    [(method, work)] = api.writes(WORKS)
    assert method == "POST" and work["metadata"]["name"] == "addon-dynamic-scoring-deploy-0"
    images = [
        c["image"]
        for m in work["spec"]["workload"]["manifests"]
        if m["kind"] == "Deployment"
        for c in m["spec"]["template"]["spec"]["containers"]
    ]
    assert images and set(images) == {"example.com/agent:1"}
    caches.works.put(*(answer for _, answer in api.answered(WORKS)))
    api.requests.clear()
    deploy.reconcile(KEY)
    assert api.requests == [] and len(renders) == 1
    # the work agent reports Applied: a new version, so compared again, and mirrored
    [answer] = [a for _, a in api.answered(WORKS)]
    applied = {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete", "message": "ok"}
    caches.works.put(
        {
            **answer,
            "metadata": {**answer["metadata"], "resourceVersion": "99"},
            "status": {"conditions": [applied]},
        }
    )
    deploy.reconcile(KEY)
    assert api.writes(WORKS) == []  # nothing differs in the spec
    [(_, patch)] = api.writes(STATUS)
    assert manifest_applied(patch)["status"] == "True"


def test_a_missing_deployment_config_is_reported_once_and_no_work_is_written() -> None:
    api = Recorder()
    ref = {
        "group": "addon.open-cluster-management.io",
        "resource": "addondeploymentconfigs",
        "namespace": "dynamic-scoring",
        "name": "gone",
        "desiredConfig": {"namespace": "dynamic-scoring", "name": "gone", "specHash": "abc"},
    }
    addon = registered()
    addon["status"]["configReferences"] = [ref]
    deploy, _ = setup(api, addon)
    deploy.reconcile(KEY)
    deploy.reconcile(KEY)
    assert api.writes(WORKS) == []
    assert [e["reason"] for e in api.events()] == ["AddOnDeploymentConfigNotFound"]
    condition = manifest_applied(api.writes(STATUS)[0][1])
    assert condition["status"] == "False" and condition["reason"] == APPLY_FAILED
    assert "AddOnDeploymentConfig dynamic-scoring/gone not found" in condition["message"]


def test_a_refused_install_namespace_keeps_the_last_good_work() -> None:
    api = Recorder()
    good, _ = setup(api, registered())
    good.reconcile(KEY)
    [(_, last_good)] = api.answered(WORKS)
    api.requests.clear()
    deploy, _ = setup(api, registered(installNamespace="kube-system"), works=Cache(last_good))
    deploy.reconcile(KEY)
    assert api.writes(WORKS) == []  # neither patched nor deleted
    assert [e["reason"] for e in api.events()] == [INSTALL_NAMESPACE_REFUSED]
    condition = manifest_applied(api.writes(STATUS)[0][1])
    assert condition["status"] == "False" and "kube-system" in condition["message"]


def test_an_obsolete_numbered_work_is_deleted() -> None:
    api = Recorder()
    extra = {
        "metadata": {
            "name": "addon-dynamic-scoring-deploy-1",
            "namespace": "cluster1",
            "resourceVersion": "3",
        }
    }
    deploy, _ = setup(api, registered(), works=Cache(extra))
    deploy.reconcile(KEY)
    assert [(m, (b or {}).get("metadata", {}).get("name")) for m, b in api.writes(WORKS)] == [
        ("POST", "addon-dynamic-scoring-deploy-0"),
        ("DELETE", None),
    ]
    assert api.requests[1][1] == f"{WORKS}/addon-dynamic-scoring-deploy-1"


def test_a_refused_work_write_is_reported_and_raised_for_the_retry() -> None:
    api = Recorder({("POST", WORKS): Forbidden(403, "Forbidden", 'manifestworks "x" is forbidden')})
    deploy, _ = setup(api, registered())
    with pytest.raises(Forbidden):
        deploy.reconcile(KEY)
    condition = manifest_applied(api.writes(STATUS)[0][1])
    assert condition["status"] == "False" and condition["message"].startswith(
        "failed to apply the deploy work"
    )
    assert len(deploy.verified) == 0  # nothing remembered: the retry renders again
