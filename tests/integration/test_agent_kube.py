"""The agent's Kubernetes side against the real apiservers of the local control plane."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from dynamic_scoring.addon.registry.reports import cluster_reports
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.agent.errors import PublishError, ScoreNameTaken, SecretNotFound
from dynamic_scoring.agent.kube.lease import LeaseRenewer
from dynamic_scoring.agent.kube.scores import KubeScorePublisher
from dynamic_scoring.agent.kube.secrets import KubeSecretReader
from dynamic_scoring.agent.kube.summaries import SummaryWatcher
from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.ports import CycleCondition, PublishRequest, ScoreItem
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.contract.score_size import MAX_SCORE_BYTES, item_bytes, scores_bytes
from dynamic_scoring.contract.wire import ScoreResult, ScorerSummary
from dynamic_scoring.kube.api import Forbidden, KubeAPI, NotFound
from dynamic_scoring.kube.timestamps import format_time
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.ocm.score_labels import score_labels, score_selector
from dynamic_scoring.outbound.addresses import AddressPolicy
from dynamic_scoring.scorer.app import ScorerApp
from dynamic_scoring.scorer.matrix import ScoringRequest
from dynamic_scoring.scorer.serve import ScorerServer
from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.ocm import manual_addon
from e2e.pki import write_kubeconfig
from e2e.procs import wait_until, wait_until_async, wait_value_async

LOOPBACK = AddressPolicy.parse("127.0.0.0/8")
"""The address policy opt-in: every test Prometheus and scorer listens on 127.0.0.1."""

REPO = Path(__file__).resolve().parents[2]
APS = "/apis/cluster.open-cluster-management.io/v1alpha1/namespaces/{ns}/addonplacementscores/{name}"


def hub_api(cp: ControlPlane) -> KubeAPI:
    assert cp.hub is not None
    return KubeAPI(cp.hub.admin_kubeconfig)


def ok(status: str = "True", reason: str = "ScoresUpdated", message: str = "ok") -> CycleCondition:
    return CycleCondition("ScoresUpToDate", status, reason, message)  # type: ignore[arg-type]


def request(items: list[ScoreItem] | None, valid_for: float = 90, **cond: str) -> PublishRequest:
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=valid_for) if items is not None else None
    return PublishRequest("my_score", "my-score", items, until, ok(**cond), 30)


def _create_mca(api: KubeAPI, ns: str, name: str) -> dict[str, Any]:
    """A ManagedClusterAddOn in `ns` (scores name one as owner; the garbage collector needs it real)."""
    return api.request(
        "POST",
        f"/apis/addon.open-cluster-management.io/v1alpha1/namespaces/{ns}/managedclusteraddons",
        body={
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "ManagedClusterAddOn",
            "metadata": {"name": name, "namespace": ns},
            "spec": {},
        },
    )


def test_aps_created_with_scores_and_valid_until_on_first_cycle(control_plane: ControlPlane) -> None:
    api = hub_api(control_plane)
    pub = KubeScorePublisher(api, "cluster1", addon_name="dynamic-scoring")
    items = [ScoreItem("a", 100), ScoreItem("b", -100), ScoreItem("c", 7)]
    first = request(items)  # valid for 90 s from now
    asyncio.run(pub.publish(first))
    obj = api.request("GET", APS.format(ns="cluster1", name="my-score"))
    status = obj["status"]
    # the first cycle's scores are there (upstream dropped them on create)
    assert status["scores"] == [
        {"name": "a", "value": 100},
        {"name": "b", "value": -100},
        {"name": "c", "value": 7},
    ]
    # exactly the expiry the cycle vouched for (metav1.Time: whole seconds), not one the publisher
    # computed from its own clock: compared with the request, not with this test's clock, so no
    # delay between the publish and this read can matter
    assert first.valid_until is not None
    assert status["validUntil"] == format_time(first.valid_until)
    cond = status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("ScoresUpToDate", "True", "ScoresUpdated")
    assert (
        obj["metadata"]["annotations"]["dynamic-scoring.open-cluster-management.io/score-name"] == "my_score"
    )
    version = obj["metadata"]["resourceVersion"]

    # the same result again while validUntil is far off: no write
    asyncio.run(pub.publish(request(items)))
    assert (
        api.request("GET", APS.format(ns="cluster1", name="my-score"))["metadata"]["resourceVersion"]
        == version
    )

    # a failed cycle keeps the scores and their expiry, and says why
    asyncio.run(
        pub.publish(request(None, status="False", reason="ScorerTimeout", message="scorer x timed out"))
    )
    after = api.request("GET", APS.format(ns="cluster1", name="my-score"))["status"]
    assert after["scores"] == status["scores"] and after["validUntil"] == status["validUntil"]
    assert after["conditions"][0]["status"] == "False"
    assert after["conditions"][0]["reason"] == "ScorerTimeout"

    # a restarted agent (new publisher) keeps writing the same object
    fresh = KubeScorePublisher(hub_api(control_plane), "cluster1", addon_name="dynamic-scoring")
    asyncio.run(fresh.publish(request([ScoreItem("a", 1)])))
    stored = api.request("GET", APS.format(ns="cluster1", name="my-score"))["status"]
    assert stored["scores"] == [{"name": "a", "value": 1}]
    # what a restarted agent's stabilization starts from: the items and expiry the hub holds
    again = KubeScorePublisher(hub_api(control_plane), "cluster1", addon_name="dynamic-scoring")
    current = asyncio.run(again.current("my-score"))
    assert current is not None and current.items == [ScoreItem("a", 1)]
    assert current.valid_until == dt.datetime.fromisoformat(stored["validUntil"].replace("Z", "+00:00"))
    assert asyncio.run(again.current("no-such-score")) is None
    asyncio.run(fresh.remove("my-score"))
    with pytest.raises(NotFound):
        api.request("GET", APS.format(ns="cluster1", name="my-score"))
    asyncio.run(fresh.remove("my-score"))  # already gone: fine


def test_a_stabilized_condition_alone_does_not_cost_a_write(control_plane: ControlPlane) -> None:
    """Under noise a stabilized scorer says something new every cycle while publishing nothing new.

    Switching between ``Scored`` and ``Stabilized``, or a new held-back message, with the same scores
    and far from expiry, is not written; new scores, a failure or another reason are, at once, and
    carry the newest wording.
    """
    api = hub_api(control_plane)
    pub = KubeScorePublisher(api, "cluster1", addon_name="dynamic-scoring")
    items = [ScoreItem("a", 50)]

    def cycle(items: list[ScoreItem] | None, reason: str, message: str, status: str = "True") -> str:
        until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=90) if items is not None else None
        cond = CycleCondition("ScoresUpToDate", status, reason, message)  # type: ignore[arg-type]
        asyncio.run(pub.publish(PublishRequest("quiet_score", "quiet-score", items, until, cond, 30)))
        obj = api.request("GET", APS.format(ns="cluster1", name="quiet-score"))
        return str(obj["metadata"]["resourceVersion"])

    try:
        first = cycle(items, "Scored", "scorer q produced 1 score(s)")
        held = "scorer q produced 1 score(s); 1 of 1 score(s) held by stabilization, e.g. a: "
        assert cycle(items, "Stabilized", held + "within tolerance (raw 52, published 50)") == first
        assert cycle(items, "Stabilized", held + "rising, held 5 of 50 s") == first
        assert cycle(items, "Scored", "scorer q produced 1 score(s)") == first
        # new scores are written with the newest wording
        moved = cycle([ScoreItem("a", 44)], "Stabilized", held + "rising, held 10 of 50 s")
        assert moved != first
        cond = api.request("GET", APS.format(ns="cluster1", name="quiet-score"))["status"]["conditions"][0]
        assert (cond["reason"], cond["message"]) == ("Stabilized", held + "rising, held 10 of 50 s")
        # another reason, or a failure, is news
        partial = cycle([ScoreItem("a", 44)], "ScoredWithSourceErrors", "without source(s) b")
        assert partial != moved
        assert cycle(None, "ScorerTimeout", "scorer q timed out", status="False") != partial
    finally:
        asyncio.run(pub.remove("quiet-score"))


def test_apiserver_rejects_out_of_range_values(control_plane: ControlPlane) -> None:
    """Why the agent clamps: one value outside [-100, 100] fails the whole status write."""
    pub = KubeScorePublisher(hub_api(control_plane), "cluster1", addon_name="dynamic-scoring")
    with pytest.raises(PublishError, match="could not be written"):
        asyncio.run(pub.publish(PublishRequest("x", "x-range", [ScoreItem("a", 101)], None, ok(), 30)))
    asyncio.run(pub.remove("x-range"))


def _agent_identity(cp: ControlPlane, cluster: str, tmp: Path) -> Path:
    """A hub kubeconfig for an addon agent identity of `cluster`, as the addon CSR would give."""
    assert cp.hub is not None
    group = f"system:open-cluster-management:cluster:{cluster}:addon:dynamic-scoring"
    user = f"{group}:agent:it-{uuid.uuid4().hex[:4]}"
    cert = cp.hub.ca.issue(
        f"agent-{uuid.uuid4().hex[:6]}",
        common_name=user,
        organizations=(group, "system:open-cluster-management:addon:dynamic-scoring"),
        client=True,
    )
    return write_kubeconfig(
        tmp / "agent.kubeconfig", server=cp.hub.server, ca_pem=cp.hub.ca.cert_pem, user=user, client=cert
    )


def test_agent_hub_rbac_allows_own_cluster_only(control_plane: ControlPlane, tmp_path: Path) -> None:
    assert control_plane.tools is not None and control_plane.hub is not None
    admin = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    template = jinja2.Template((REPO / "templates/hub/agent-rbac.yaml.j2").read_text())
    admin.apply(
        template.render(cluster_name="cluster1", addon_name="dynamic-scoring", score_names=["rbac-probe"])
    )
    agent_api = KubeAPI(_agent_identity(control_plane, "cluster1", tmp_path))
    own = KubeScorePublisher(agent_api, "cluster1", addon_name="dynamic-scoring")
    asyncio.run(own.publish(PublishRequest("s", "rbac-probe", [ScoreItem("a", 5)], None, ok(), 30)))
    assert hub_api(control_plane).request("GET", APS.format(ns="cluster1", name="rbac-probe"))["status"][
        "scores"
    ]
    other = KubeScorePublisher(agent_api, "cluster2", addon_name="dynamic-scoring")
    with pytest.raises(PublishError) as denied:
        asyncio.run(other.publish(PublishRequest("s", "rbac-probe", [ScoreItem("a", 5)], None, ok(), 30)))
    assert "403" in str(denied.value)
    # nothing beyond scores: the identity cannot read the cluster's secrets
    with pytest.raises(Forbidden) as no_secrets:
        agent_api.request("GET", "/api/v1/namespaces/cluster1/secrets")
    assert no_secrets.value.status == 403
    # another addon's score in the agent's own namespace: not among the names it is sent
    admin.apply(
        json.dumps(
            {
                "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                "kind": "AddOnPlacementScore",
                "metadata": {"name": "other-addon-score", "namespace": "cluster1"},
            }
        )
    )
    with pytest.raises(PublishError) as not_ours:
        asyncio.run(
            own.publish(PublishRequest("s", "other-addon-score", [ScoreItem("a", 5)], None, ok(), 30))
        )
    assert "403" in str(not_ours.value)
    asyncio.run(own.remove("other-addon-score"))  # not the agent's to read: nothing of its own to delete
    untouched = hub_api(control_plane).request("GET", APS.format(ns="cluster1", name="other-addon-score"))
    assert not (untouched.get("status") or {}).get("scores")
    hub_api(control_plane).request("DELETE", APS.format(ns="cluster1", name="other-addon-score"))
    asyncio.run(own.remove("rbac-probe"))


def test_lease_format_marks_addon_available(control_plane: ControlPlane) -> None:
    """The Lease we renew is the one OCM's registration agent reads to set Available."""
    assert (
        control_plane.tools is not None and control_plane.hub is not None and control_plane.spoke2 is not None
    )
    hub = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    addon = f"lease-{uuid.uuid4().hex[:5]}"
    with manual_addon(control_plane.tools, control_plane.hub.admin_kubeconfig, addon, "cluster2"):
        _lease_makes_available(hub, KubeAPI(control_plane.spoke2.admin_kubeconfig), addon)


def _lease_makes_available(hub: Kubectl, spoke_api: KubeAPI, addon: str) -> None:
    ns = "open-cluster-management-agent-addon"
    renewer = LeaseRenewer(spoke_api, ns, addon, holder="it-agent")
    asyncio.run(renewer.renew_once())
    lease = spoke_api.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{addon}")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lease["spec"]["renewTime"])
    assert lease["spec"]["leaseDurationSeconds"] == 60
    first = lease["spec"]["renewTime"]
    asyncio.run(renewer.renew_once())
    lease = spoke_api.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{addon}")
    assert lease["spec"]["renewTime"] > first

    def available() -> dict[str, Any] | None:
        mca = hub.get_json("managedclusteraddon", addon, "-n", "cluster2")
        conds = {c["type"]: c for c in mca.get("status", {}).get("conditions", [])}
        cond = conds.get("Available")
        return cond if cond and cond["status"] == "True" else None

    # the registration agent checks addon leases every 30 s
    cond = wait_until(available, timeout=75, what="ManagedClusterAddOn Available from our Lease")
    assert cond["reason"] == "ManagedClusterAddOnLeaseUpdated"


def delivered_identity(cp: ControlPlane, ns: str, tmp: Path) -> KubeAPI:
    """The agent's managed-cluster identity exactly as the hub delivers it, in `ns` on cluster2.

    The ServiceAccount, Role and RoleBinding come from the same render as the deploy ManifestWork
    (the Deployment is left out: the runner would try to start it without a hub kubeconfig), and
    the API speaks with that ServiceAccount's token, so these tests prove the agent's reads work
    under its least-privilege Role, not as cluster-admin.
    """
    assert cp.tools is not None and cp.spoke2 is not None
    kubectl = Kubectl(cp.tools.kubectl, cp.spoke2.admin_kubeconfig)
    mca = {
        "metadata": {"name": "dynamic-scoring", "namespace": "cluster2", "uid": "u"},
        "spec": {"installNamespace": ns},
    }
    identity = [
        m
        for m in render_agent(mca=mca, adc=None).manifests
        if m["kind"] in ("ServiceAccount", "Role", "RoleBinding")
    ]
    kubectl.run("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": identity}))
    token = kubectl.run("create", "token", "dynamic-scoring-agent", "-n", ns, "--duration=600s").strip()
    path = write_kubeconfig(
        tmp / f"agent-{ns}.kubeconfig",
        server=cp.spoke2.server,
        ca_pem=cp.spoke2.ca.cert_pem,
        user="agent",
        token=token,
    )
    return KubeAPI(path)


def test_secret_reader_reads_rotated_values(control_plane: ControlPlane, tmp_path: Path) -> None:
    assert control_plane.spoke2 is not None and control_plane.tools is not None
    spoke = Kubectl(control_plane.tools.kubectl, control_plane.spoke2.admin_kubeconfig)
    ns = f"it-secrets-{uuid.uuid4().hex[:5]}"
    spoke.run("create", "namespace", ns)
    spoke.run("create", "secret", "generic", "tok", "-n", ns, "--from-literal=token=one")
    reader = KubeSecretReader(delivered_identity(control_plane, ns, tmp_path), ns)

    def read(name: str, key: str) -> bytes:
        return asyncio.run(reader.get(name)).value(key)

    assert read("tok", "token") == b"one"
    spoke.apply(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "tok", "namespace": ns},
                "stringData": {"token": "two"},
            }
        )
    )
    assert read("tok", "token") == b"two"
    with pytest.raises(SecretNotFound, match=f'secret {ns}/tok has no key "nope"'):
        read("tok", "nope")
    with pytest.raises(SecretNotFound, match=f"secret {ns}/missing not found"):
        read("missing", "token")
    spoke.run("delete", "namespace", ns, "--wait=false")


def _summary(score: str) -> dict[str, Any]:
    return {
        "name": f"scorer-{score}",
        "scoreName": score,
        "sourceType": "None",
        "scoringEndpoint": "http://127.0.0.1:9/scoring",
        "scoringInterval": 30,
        "location": "Internal",
        "scoreDestination": "AddOnPlacementScore",
        "scoreDimensionFormat": "${scoreName}",
    }


def test_summary_watcher_follows_configmap(control_plane: ControlPlane, tmp_path: Path) -> None:
    assert control_plane.spoke2 is not None and control_plane.tools is not None
    spoke = Kubectl(control_plane.tools.kubectl, control_plane.spoke2.admin_kubeconfig)
    ns = f"it-watch-{uuid.uuid4().hex[:5]}"
    spoke.run("create", "namespace", ns)
    agent_api = delivered_identity(control_plane, ns, tmp_path)

    def configmap(payload: str) -> str:
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dynamic-scoring-config", "namespace": ns},
            "data": {"summaries": payload},
        }
        return yaml.safe_dump(cm)

    async def scenario() -> None:
        supervisor = Supervisor(
            cluster_name="cluster2",
            secrets=MemorySecrets(),
            publisher=MemoryPublisher(),
            settings=AgentSettings(address_policy=LOOPBACK),
        )
        seen: list[str | None] = []

        async def apply(payload: str | None) -> object:
            seen.append(payload)
            return await supervisor.apply_payload(payload)

        async def running(*names: str) -> None:
            await wait_until_async(
                lambda: sorted(supervisor.workers) == sorted(names) and supervisor.ready,
                timeout=30,
                what=f"the supervisor ready, running exactly {sorted(names)}",
            )

        watcher = SummaryWatcher(agent_api, ns, apply, watch_timeout=5, resync_seconds=3)
        task = asyncio.create_task(watcher.run())
        try:
            await running()  # no ConfigMap yet: applied, nothing to run
            await asyncio.to_thread(spoke.apply, configmap(json.dumps([_summary("a"), _summary("b")])))
            await running("a", "b")
            # one malformed entry is skipped, the others still apply
            bad = {**_summary("c"), "scoringInterval": "thirty"}
            await asyncio.to_thread(spoke.apply, configmap(json.dumps([_summary("a"), bad])))
            await running("a")
            # an unusable payload keeps what runs, across a watch timeout and re-list
            await asyncio.to_thread(spoke.apply, configmap("{not json"))

            await wait_until_async(
                lambda: "{not json" in seen, timeout=30, what="the unusable payload delivered"
            )
            relists = watcher.relists
            await wait_until_async(
                lambda: watcher.relists >= relists + 1, timeout=30, what="a re-list after the payload"
            )
            assert sorted(supervisor.workers) == ["a"]
            await asyncio.to_thread(spoke.apply, configmap(json.dumps([_summary("d")])))
            await running("d")
            await asyncio.to_thread(spoke.run, "delete", "configmap", "dynamic-scoring-config", "-n", ns)
            await running()
        finally:
            task.cancel()
            await supervisor.close()

    asyncio.run(scenario())
    spoke.run("delete", "namespace", ns, "--wait=false")


def test_summaries_that_failed_to_apply_are_retried_without_a_change(control_plane: ControlPlane) -> None:
    assert control_plane.spoke2 is not None
    api = KubeAPI(control_plane.spoke2.admin_kubeconfig)
    ns = f"it-retry-{uuid.uuid4().hex[:5]}"
    api.request(
        "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    api.request(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        body={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dynamic-scoring-config"},
            "data": {"summaries": "[]"},
        },
    )
    calls: list[tuple[float, str | None]] = []

    async def apply(payload: str | None) -> None:
        calls.append((asyncio.get_running_loop().time(), payload))
        if len(calls) < 3:
            raise RuntimeError("apply failed (injected)")

    async def scenario() -> None:
        watcher = SummaryWatcher(api, ns, apply, watch_timeout=60, resync_seconds=600)
        task = asyncio.create_task(watcher.run())
        try:
            await asyncio.wait_for(watcher.applied_once.wait(), 30)
        finally:
            task.cancel()

    try:
        asyncio.run(scenario())
        # the same payload three times, with a growing pause between attempts, and no ConfigMap change
        assert [p for _, p in calls] == ["[]", "[]", "[]"]
        pauses = [b[0] - a[0] for a, b in itertools.pairwise(calls)]
        assert 0.9 < pauses[0] < pauses[1] < 5, pauses
    finally:
        api.request("DELETE", f"/api/v1/namespaces/{ns}")


def _named(name: str, value: int) -> PublishRequest:
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=90)
    return PublishRequest(name, name, [ScoreItem("a", value)], until, ok(), 30)


def test_scores_are_owned_by_the_addon_and_collected_with_it(control_plane: ControlPlane) -> None:
    # The agent is gone by the time its addon is disabled, so it cannot delete its scores; the
    # hub's garbage collector does, because each score names the ManagedClusterAddOn as its owner.
    api = hub_api(control_plane)
    ns = f"owned-{uuid.uuid4().hex[:6]}"
    api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    mcas = f"/apis/addon.open-cluster-management.io/v1alpha1/namespaces/{ns}/managedclusteraddons"
    aps = f"/apis/cluster.open-cluster-management.io/v1alpha1/namespaces/{ns}/addonplacementscores"
    try:
        early = KubeScorePublisher(api, ns, addon_name="dynamic-scoring")
        asyncio.run(early.publish(_named("early", 1)))
        assert "ownerReferences" not in api.request("GET", f"{aps}/early")["metadata"]  # no MCA yet

        mca = _create_mca(api, ns, "dynamic-scoring")
        pub = KubeScorePublisher(api, ns, addon_name="dynamic-scoring")
        asyncio.run(pub.publish(_named("late", 2)))
        asyncio.run(pub.publish(_named("early", 1)))  # adopted
        for name in ("late", "early"):
            (owner,) = api.request("GET", f"{aps}/{name}")["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"]) == (
                "ManagedClusterAddOn",
                "dynamic-scoring",
                mca["metadata"]["uid"],
            )

        api.request("DELETE", f"{mcas}/dynamic-scoring")
        wait_until(
            lambda: not api.request("GET", aps)["items"],
            timeout=60,
            what="scores garbage-collected with their addon",
        )
    finally:
        api.request("DELETE", f"/api/v1/namespaces/{ns}")


def test_scores_carry_no_managed_fields_so_large_writes_stay_cheap(control_plane: ControlPlane) -> None:
    # status.scores is a list keyed by name: tracked, every item would add an entry to managedFields
    # (about 400 KB at 4,096 items), so the agent keeps its objects untracked.
    api = hub_api(control_plane)
    path = APS.format(ns="cluster1", name="wide")
    pub = KubeScorePublisher(api, "cluster1", addon_name="dynamic-scoring")
    items = [ScoreItem(f"series-{i:05d}", i % 201 - 100) for i in range(4096)]
    try:
        asyncio.run(pub.publish(PublishRequest("wide", "wide", items, None, ok(), 30)))
        obj = api.request("GET", path)
        assert len(obj["status"]["scores"]) == 4096
        assert "managedFields" not in obj["metadata"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "dynamic-scoring-agent"
        again = [ScoreItem(i.name, -i.value) for i in items]
        asyncio.run(pub.publish(PublishRequest("wide", "wide", again, None, ok(), 30)))
        obj = api.request("GET", path)
        assert obj["status"]["scores"][1] == {"name": "series-00001", "value": 99}
        assert "managedFields" not in obj["metadata"]

        # an object an older agent left tracked is reset by the next write
        api.request("DELETE", path)
        api.request(
            "POST",
            path.rsplit("/", 1)[0],
            body={
                "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                "kind": "AddOnPlacementScore",
                "metadata": {"name": "wide", "labels": {"team": "a", **score_labels("dynamic-scoring")}},
            },
        )
        api.request(
            "PATCH",
            path + "/status",
            body={"status": {"scores": [{"name": "a", "value": 1}]}},
            content_type="application/merge-patch+json",
        )
        assert api.request("GET", path)["metadata"].get("managedFields")
        asyncio.run(pub.publish(PublishRequest("wide", "wide", items[:10], None, ok(), 30)))
        obj = api.request("GET", path)
        assert "managedFields" not in obj["metadata"]
        assert len(obj["status"]["scores"]) == 10
        assert obj["metadata"]["labels"] == {"team": "a", **score_labels("dynamic-scoring")}
    finally:
        with contextlib.suppress(NotFound):
            api.request("DELETE", path)


def test_a_score_the_upstream_agent_created_is_adopted_only_with_the_opt_in(
    control_plane: ControlPlane,
) -> None:
    # The upstream Go agent creates its AddOnPlacementScore with nothing but a name and writes only
    # `status.scores`.  Without the admin's opt-in it is someone else's and stays as it is.  Taken
    # over with it (a migration), the object must come into the hub's labelled watch and carry the
    # score-name annotation, or the hub reports the cluster as silent.
    api = hub_api(control_plane)
    path = APS.format(ns="cluster1", name="taken-over")
    api.request(
        "POST",
        path.rsplit("/", 1)[0],
        body={
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
            "kind": "AddOnPlacementScore",
            "metadata": {"name": "taken-over"},
        },
    )
    try:
        api.request(
            "PATCH",
            path + "/status",
            body={"status": {"scores": [{"name": "taken_over", "value": 30}]}},
            content_type="application/merge-patch+json",
        )
        selector = score_selector("dynamic-scoring")
        listed = api.request("GET", path.rsplit("/", 1)[0], query={"labelSelector": selector})["items"]
        assert "taken-over" not in [i["metadata"]["name"] for i in listed]
        before = api.request("GET", path)
        plain = KubeScorePublisher(api, "cluster1", addon_name="dynamic-scoring")
        request = PublishRequest("taken_over", "taken-over", [ScoreItem("taken_over", 70)], None, ok(), 30)
        with pytest.raises(ScoreNameTaken, match="choose another scoreName"):
            asyncio.run(plain.publish(request))
        asyncio.run(plain.remove("taken-over"))
        assert api.request("GET", path) == before  # not even its resourceVersion moved

        pub = KubeScorePublisher(api, "cluster1", addon_name="dynamic-scoring", adopt_unlabelled=True)
        asyncio.run(
            pub.publish(
                PublishRequest("taken_over", "taken-over", [ScoreItem("taken_over", 70)], None, ok(), 30)
            )
        )
        obj = api.request("GET", path)
        assert obj["metadata"]["labels"] == score_labels("dynamic-scoring")
        assert (
            obj["metadata"]["annotations"]["dynamic-scoring.open-cluster-management.io/score-name"]
            == "taken_over"
        )
        assert obj["status"]["scores"] == [{"name": "taken_over", "value": 70}]
        listed = api.request("GET", path.rsplit("/", 1)[0], query={"labelSelector": selector})["items"]
        assert "taken-over" in [i["metadata"]["name"] for i in listed]
    finally:
        with contextlib.suppress(NotFound):
            api.request("DELETE", path)


def test_another_owners_score_of_the_same_name_is_never_written_relabelled_reowned_or_deleted(
    control_plane: ControlPlane,
) -> None:
    """A scoreName that another addon's AddOnPlacementScore already uses leaves that object exactly as it is.

    Not by a write, a relabel, a new owner or a delete (when the scorer goes), and not even with the
    migration opt-in, which adopts only objects with no owner and no addon label.
    """
    api = hub_api(control_plane)
    ns = f"foreign-{uuid.uuid4().hex[:6]}"
    api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    try:
        other = _create_mca(api, ns, "resource-usage-collect")
        _create_mca(api, ns, "dynamic-scoring")
        foreign: dict[str, dict[str, Any]] = {
            "resource-usage-score": {
                "ownerReferences": [
                    {
                        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                        "kind": "ManagedClusterAddOn",
                        "name": "resource-usage-collect",
                        "uid": other["metadata"]["uid"],
                    }
                ]
            },
            "other-instance": {"labels": score_labels("dynamic-scoring-2")},  # another install of ours
        }
        for name, meta in foreign.items():
            path = APS.format(ns=ns, name=name)
            api.request(
                "POST",
                path.rsplit("/", 1)[0],
                body={
                    "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                    "kind": "AddOnPlacementScore",
                    "metadata": {"name": name, **meta},
                },
            )
            api.request(
                "PATCH",
                path + "/status",
                body={"status": {"scores": [{"name": "cpu", "value": 42}]}},
                content_type="application/merge-patch+json",
            )
        before = {name: api.request("GET", APS.format(ns=ns, name=name)) for name in foreign}
        for adopt in (False, True):
            pub = KubeScorePublisher(api, ns, addon_name="dynamic-scoring", adopt_unlabelled=adopt)
            for name in foreign:
                request = PublishRequest(name.replace("-", "_"), name, [ScoreItem("cpu", 99)], None, ok(), 30)
                with pytest.raises(ScoreNameTaken) as taken:
                    asyncio.run(pub.publish(request))
                assert f"{ns}/{name}" in str(taken.value) and taken.value.reason == "ScoreNameTaken"
                assert asyncio.run(pub.current(name)) is None  # never a starting point for stabilization
                asyncio.run(pub.remove(name))
        after = {name: api.request("GET", APS.format(ns=ns, name=name)) for name in foreign}
        assert after == before

        # Ours, the delete is conditional on the object read: one replaced in between survives.
        pub = KubeScorePublisher(api, ns, addon_name="dynamic-scoring")
        asyncio.run(pub.publish(PublishRequest("mine", "mine", [ScoreItem("cpu", 5)], None, ok(), 30)))
        asyncio.run(pub.remove("mine"))
        with pytest.raises(NotFound):
            api.request("GET", APS.format(ns=ns, name="mine"))
    finally:
        api.request("DELETE", f"/api/v1/namespaces/{ns}")


def test_scores_at_the_default_size_limit_are_stored_by_a_default_etcd(control_plane: ControlPlane) -> None:
    # The limit is the stored size, not a count: 10,000 per-series items publish, and items that
    # fill the default limit fit in etcd's default 1.5 MiB request limit with the rest of the object.
    api = hub_api(control_plane)
    pub = KubeScorePublisher(api, "cluster1", addon_name="dynamic-scoring")
    per_series = [
        ScoreItem(f"cpu-node-{i % 50:02d}-pod-{i:05d}-0123456789abcdef", -100) for i in range(10_000)
    ]
    # items of 253-character names, as many as fit (each is 277 bytes and a comma)
    count = (MAX_SCORE_BYTES - 1) // (item_bytes("n" * 253, -100) + 1)
    full = [ScoreItem(f"{n:05d}-" + "n" * 247, -100) for n in range(count)]
    assert MAX_SCORE_BYTES - 300 <= scores_bytes((i.name, i.value) for i in full) <= MAX_SCORE_BYTES
    long_message = ok(message="m" * 1024)
    try:
        for name, items in (("per-series", per_series), ("at-the-limit", full)):
            until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=90)
            asyncio.run(pub.publish(PublishRequest(name, name, items, until, long_message, 30)))
            stored = api.request("GET", APS.format(ns="cluster1", name=name))
            assert len(stored["status"]["scores"]) == len(items), name
    finally:
        for name in ("per-series", "at-the-limit"):
            asyncio.run(pub.remove(name))


class _Interloper:
    """The hub API, with another writer's change slipped in before the next status write."""

    def __init__(self, api: KubeAPI, path: str) -> None:
        self.api, self.path, self.armed, self.puts = api, path, False, 0

    async def arequest(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "PUT":
            self.puts += 1
            if self.armed:
                self.armed = False
                await self.api.arequest(
                    "PATCH",
                    self.path,
                    body={"metadata": {"annotations": {"someone": "else"}}},
                    content_type="application/merge-patch+json",
                )
        return await self.api.arequest(method, path, **kwargs)


def test_a_status_write_that_meets_a_newer_version_reads_again_and_succeeds(
    control_plane: ControlPlane,
) -> None:
    # The status is replaced with the resourceVersion it was decided on; another writer's change in
    # between (here an annotation, as the hub's expiry mark) makes it 409, and the agent reads the
    # object again and writes once more instead of failing the cycle.
    api = hub_api(control_plane)
    path = APS.format(ns="cluster1", name="raced")
    wrapped = _Interloper(api, path)
    pub = KubeScorePublisher(wrapped, "cluster1", addon_name="dynamic-scoring")  # type: ignore[arg-type]
    try:
        asyncio.run(pub.publish(PublishRequest("raced", "raced", [ScoreItem("a", 1)], None, ok(), 30)))
        wrapped.armed = True
        puts = wrapped.puts
        asyncio.run(pub.publish(PublishRequest("raced", "raced", [ScoreItem("a", 2)], None, ok(), 30)))
        assert wrapped.puts == puts + 2  # the refused write and the one after reading again
        obj = api.request("GET", path)
        assert obj["status"]["scores"] == [{"name": "a", "value": 2}]
        assert obj["metadata"]["annotations"]["someone"] == "else"
        # a failed cycle keeps the scores (the whole status is written, from what was read)
        failed = PublishRequest("raced", "raced", None, None, ok("False", "ScorerTimeout", "slow"), 30)
        asyncio.run(pub.publish(failed))
        status = api.request("GET", path)["status"]
        assert status["scores"] == [{"name": "a", "value": 2}]
        assert status["conditions"][0]["reason"] == "ScorerTimeout"
    finally:
        with contextlib.suppress(NotFound):
            api.request("DELETE", path)


def test_results_that_collide_on_one_item_name_fail_on_the_aps_and_in_the_hub_report(
    control_plane: ControlPlane,
) -> None:
    # A scorer built with the library answers one result per node; the summary keeps the default
    # format, so a second node makes both results name the same item.  The agent must keep the last
    # good score, say why on the AddOnPlacementScore, and the hub's report must carry that reason.
    api = hub_api(control_plane)
    nodes: list[tuple[str, float]] = [("n1", 80.0)]

    def per_node(request: ScoringRequest) -> list[ScoreResult]:
        del request
        return [ScoreResult(metric={"node": n}, score=s) for n, s in list(nodes)]

    server = ScorerServer(ScorerApp(score=per_node, name="collide", source_type="None"), "127.0.0.1", 0)
    server.start_in_thread()
    score = f"it_collide_{uuid.uuid4().hex[:6]}"
    path = APS.format(ns="cluster1", name=aps_name(score))
    summary = ScorerSummary.model_validate(
        {**_summary(score), "scoringEndpoint": f"{server.base_url}/scoring", "scoringInterval": 1}
    )

    def status() -> dict[str, Any]:
        with contextlib.suppress(NotFound):
            found: dict[str, Any] = api.request("GET", path).get("status") or {}
            return found
        return {}

    async def until(check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        return await wait_value_async(status, check, timeout=30, what=what, blocking=True)

    def reason(s: dict[str, Any]) -> str:
        return str((s.get("conditions") or [{}])[0].get("reason", ""))

    async def scenario() -> dict[str, Any]:
        supervisor = Supervisor(
            cluster_name="cluster1",
            secrets=MemorySecrets(),
            publisher=KubeScorePublisher(api, "cluster1", addon_name="dynamic-scoring"),
            settings=AgentSettings(address_policy=LOOPBACK),
        )
        try:
            await supervisor.apply([summary])
            good = await until(lambda s: s.get("scores") == [{"name": score, "value": 80}], "the first score")
            nodes.append(("n2", -20.0))
            bad = await until(lambda s: reason(s) == "ItemNameCollision", "the collision on the APS")
            assert bad["scores"] == good["scores"] and bad["validUntil"] == good["validUntil"]
            return bad
        finally:
            await supervisor.close()

    try:
        bad = asyncio.run(scenario())
        (condition,) = bad["conditions"]
        assert condition["status"] == "False"
        assert f'2 results render to item "{score}" under format "${{scoreName}}"' in condition["message"]
        assert "they differ in node=n1, node=n2 (labels the format does not use)" in condition["message"]
        obj = api.request("GET", path)
        (report,) = cluster_reports(score, ["cluster1"], {"cluster1": obj}, dt.datetime.now(dt.UTC))
        assert (report.status, report.reason) == ("False", "ItemNameCollision")
        assert "node=n1, node=n2" in report.message
    finally:
        server.shutdown()
        with contextlib.suppress(NotFound):
            api.request("DELETE", path)


class _Replacer:
    """The hub API, with the score deleted and re-created by another writer just before the agent's
    metadata patch (the adoption of an unlabelled score)."""

    def __init__(self, api: KubeAPI, path: str) -> None:
        self.api, self.path, self.replaced = api, path, False

    async def arequest(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "PATCH" and path == self.path and not self.replaced:
            self.replaced = True
            await self.api.arequest("DELETE", self.path)
            await self.api.arequest(
                "POST",
                self.path.rsplit("/", 1)[0],
                body={
                    "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                    "kind": "AddOnPlacementScore",
                    "metadata": {"name": self.path.rsplit("/", 1)[1], "labels": {"owner": "someone-else"}},
                },
            )
        return await self.api.arequest(method, path, **kwargs)


def test_an_adopted_score_replaced_before_the_agents_patch_is_left_as_the_new_owner_wrote_it(
    control_plane: ControlPlane,
) -> None:
    # The agent read an unlabelled score it may adopt; before its metadata patch, the score was
    # deleted and another writer created one of the same name.  The patch names the object it read
    # (uid, resourceVersion), so the apiserver refuses it and the new object keeps its labels.
    api = hub_api(control_plane)
    path = APS.format(ns="cluster1", name="replaced")
    api.request(
        "POST",
        path.rsplit("/", 1)[0],
        body={
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
            "kind": "AddOnPlacementScore",
            "metadata": {"name": "replaced"},
        },
    )
    wrapped = _Replacer(api, path)
    pub = KubeScorePublisher(
        wrapped,  # type: ignore[arg-type]
        "cluster1",
        addon_name="dynamic-scoring",
        adopt_unlabelled=True,
    )
    try:
        with pytest.raises(PublishError, match="could not be updated"):
            asyncio.run(
                pub.publish(PublishRequest("replaced", "replaced", [ScoreItem("a", 1)], None, ok(), 30))
            )
        assert wrapped.replaced
        obj = api.request("GET", path)
        assert obj["metadata"]["labels"] == {"owner": "someone-else"}
        assert "ownerReferences" not in obj["metadata"] and "status" not in obj
    finally:
        with contextlib.suppress(NotFound):
            api.request("DELETE", path)
