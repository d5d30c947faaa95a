"""The agent's hub objects stay true to its scorers, whatever happens to them on the hub.

Against the real hub apiserver of the local control plane: an APS deleted or forged by hand is
restored at the next cycle; a delete the agent's identity may not do is retried until it may; a
delete whose answer is lost is confirmed, not reported as a failure; scores of scorers removed
while the agent was down are found by label and removed; a Secret name cannot leave the namespace.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.agent.errors import AuthError, SecretNotFound
from dynamic_scoring.agent.kube.scores import KubeScorePublisher
from dynamic_scoring.agent.kube.secrets import KubeSecretReader
from dynamic_scoring.agent.memory import MemorySecrets
from dynamic_scoring.agent.ports import CycleCondition, PublishRequest, ScoreItem
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.kube.api import MERGE_PATCH, KubeAPI, NotFound
from dynamic_scoring.kube.timestamps import format_time
from dynamic_scoring.ocm.score_labels import ADDON_LABEL, MANAGED_BY_LABEL
from dynamic_scoring.outbound.addresses import AddressPolicy
from e2e.controlplane import ControlPlane
from e2e.pki import write_kubeconfig
from e2e.procs import wait_until
from tests.component.harness import summary
from tests.integration.tcp_proxy import TcpProxy

LOOPBACK = AddressPolicy.parse("127.0.0.0/8")
"""The address policy opt-in: every test Prometheus and scorer listens on 127.0.0.1."""

GROUP = "/apis/cluster.open-cluster-management.io/v1alpha1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def aps_path(ns: str, name: str = "") -> str:
    return f"{GROUP}/namespaces/{ns}/addonplacementscores" + (f"/{name}" if name else "")


def admin(cp: ControlPlane) -> KubeAPI:
    assert cp.hub is not None
    return KubeAPI(cp.hub.admin_kubeconfig)


def scores_of(api: KubeAPI, ns: str, name: str) -> list[dict[str, Any]] | None:
    try:
        return list((api.request("GET", aps_path(ns, name)).get("status") or {}).get("scores") or [])
    except NotFound:
        return None


def gone(api: KubeAPI, ns: str, name: str) -> bool:
    try:
        api.request("GET", aps_path(ns, name))
    except NotFound:
        return True
    return False


def ok_request(aps: str, items: list[ScoreItem], valid_for: float = 3600) -> PublishRequest:
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=valid_for)
    cond = CycleCondition("ScoresUpToDate", "True", "ScoresUpdated", "ok")
    return PublishRequest("s", aps, items, until, cond, 30)


def test_deleted_or_forged_aps_is_restored_at_the_next_cycle(control_plane: ControlPlane) -> None:
    hub = admin(control_plane)
    name = f"repair-{uuid.uuid4().hex[:6]}"
    pub = KubeScorePublisher(admin(control_plane), "cluster1", addon_name="dynamic-scoring")
    items = [ScoreItem("a", 10), ScoreItem("b", 20)]
    want = [{"name": "a", "value": 10}, {"name": "b", "value": 20}]
    try:
        asyncio.run(pub.publish(ok_request(name, items)))
        assert scores_of(hub, "cluster1", name) == want
        version = hub.request("GET", aps_path("cluster1", name))["metadata"]["resourceVersion"]
        asyncio.run(pub.publish(ok_request(name, items)))  # same scores, far from expiry: no write
        assert hub.request("GET", aps_path("cluster1", name))["metadata"]["resourceVersion"] == version

        # deleted by hand: the next cycle with the same scores writes it again
        hub.request("DELETE", aps_path("cluster1", name))
        asyncio.run(pub.publish(ok_request(name, items)))
        assert scores_of(hub, "cluster1", name) == want

        # a forged item: replaced by the agent's own at the next cycle
        forged = {"status": {"scores": [*want, {"name": "forged", "value": 100}]}}
        hub.request("PATCH", aps_path("cluster1", name) + "/status", body=forged, content_type=MERGE_PATCH)
        asyncio.run(pub.publish(ok_request(name, items)))
        assert scores_of(hub, "cluster1", name) == want

        # a validUntil pushed into the future by hand: put back to what the agent vouches for
        far = {"status": {"validUntil": "2999-01-01T00:00:00Z"}}
        hub.request("PATCH", aps_path("cluster1", name) + "/status", body=far, content_type=MERGE_PATCH)
        repair = ok_request(name, items)
        asyncio.run(pub.publish(repair))
        status = hub.request("GET", aps_path("cluster1", name))["status"]
        # exactly what this cycle vouches for (whole seconds), compared with the request rather
        # than with this test's clock
        assert repair.valid_until is not None
        assert status["validUntil"] == format_time(repair.valid_until)
    finally:
        asyncio.run(pub.remove(name))


@contextlib.contextmanager
def identity_without_delete(cp: ControlPlane, tmp: Path, ns: str) -> Iterator[tuple[Path, str]]:
    """A hub identity that may read, list, create and patch APSs in `ns` but not delete them."""
    assert cp.hub is not None
    hub = admin(cp)
    tag = uuid.uuid4().hex[:6]
    group, role = f"it-no-delete-{tag}", f"it-no-delete-{tag}"
    rules = [
        {
            "apiGroups": ["cluster.open-cluster-management.io"],
            "resources": ["addonplacementscores"],
            "verbs": ["get", "list", "create", "patch"],
        },
        {
            "apiGroups": ["cluster.open-cluster-management.io"],
            "resources": ["addonplacementscores/status"],
            "verbs": ["patch", "update"],
        },
    ]
    hub.request(
        "POST",
        f"{RBAC}/namespaces/{ns}/roles",
        body={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role},
            "rules": rules,
        },
    )
    hub.request(
        "POST",
        f"{RBAC}/namespaces/{ns}/rolebindings",
        body={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        },
    )
    cert = cp.hub.ca.issue(
        f"it-nodelete-{tag}", common_name=f"it-agent-{tag}", organizations=(group,), client=True
    )
    kubeconfig = write_kubeconfig(
        tmp / "nodelete.kubeconfig", server=cp.hub.server, ca_pem=cp.hub.ca.cert_pem, user="it", client=cert
    )
    try:
        yield kubeconfig, role
    finally:
        for kind in ("rolebindings", "roles"):
            with contextlib.suppress(NotFound):
                hub.request("DELETE", f"{RBAC}/namespaces/{ns}/{kind}/{role}")


def test_failed_aps_delete_is_retried_until_it_succeeds(
    control_plane: ControlPlane, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hub = admin(control_plane)
    score = f"retry_{uuid.uuid4().hex[:6]}"
    aps = score.replace("_", "-")
    caplog.set_level(logging.INFO, logger="dynamic_scoring.agent.supervisor")
    with identity_without_delete(control_plane, tmp_path, "cluster1") as (kubeconfig, role):

        async def scenario() -> None:
            pub = KubeScorePublisher(KubeAPI(kubeconfig), "cluster1", addon_name="dynamic-scoring")
            sup = Supervisor(
                cluster_name="cluster1",
                secrets=MemorySecrets(),
                publisher=pub,
                settings=AgentSettings(address_policy=LOOPBACK),
            )
            try:
                # the scorer is unreachable: the cycle fails, and its condition creates the APS
                await sup.apply([summary(score, "http://127.0.0.1:9/scoring")])
                await asyncio.to_thread(
                    wait_until, lambda: not gone(hub, "cluster1", aps), timeout=30, what="APS created"
                )
                await sup.apply([])  # removed scorer: the delete is forbidden
                assert sup.pending_removals == [aps]
                assert not gone(hub, "cluster1", aps)
                # grant delete; the backoff retry removes it without another apply
                role_path = f"{RBAC}/namespaces/cluster1/roles/{role}"
                rules = hub.request("GET", role_path)["rules"]
                rules[0]["verbs"].append("delete")
                await asyncio.to_thread(
                    hub.request, "PATCH", role_path, body={"rules": rules}, content_type=MERGE_PATCH
                )
                await asyncio.to_thread(
                    wait_until, lambda: gone(hub, "cluster1", aps), timeout=60, what="APS deleted by a retry"
                )
                await asyncio.to_thread(
                    wait_until, lambda: not sup.pending_removals, timeout=10, what="no removal pending"
                )
            finally:
                await sup.close()

        asyncio.run(scenario())
    failures = [r.getMessage() for r in caplog.records if "removing AddOnPlacementScore" in r.getMessage()]
    assert failures and "403" in failures[0]
    assert any(f"AddOnPlacementScore {aps} removed" in r.getMessage() for r in caplog.records)


def test_delete_that_timed_out_but_went_through_is_not_a_failure(
    control_plane: ControlPlane, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The answer to the DELETE is lost on the way back; the retry's 404 confirms it."""
    cp = control_plane
    assert cp.hub is not None
    hub = admin(cp)
    proxy = TcpProxy(("127.0.0.1", cp.hub.port)).start()
    admin_cert = cp.hub.ca.issue(
        "admin", common_name="e2e-admin", organizations=("system:masters",), client=True
    )
    kubeconfig = write_kubeconfig(
        tmp_path / "proxied.kubeconfig",
        server=f"https://127.0.0.1:{proxy.port}",
        ca_pem=cp.hub.ca.cert_pem,
        user="e2e-admin",
        client=admin_cert,
    )
    score = f"lost_{uuid.uuid4().hex[:6]}"
    aps = score.replace("_", "-")
    caplog.set_level(logging.INFO, logger="dynamic_scoring.agent.supervisor")

    async def scenario() -> None:
        pub = KubeScorePublisher(KubeAPI(kubeconfig), "cluster1", addon_name="dynamic-scoring")
        sup = Supervisor(
            cluster_name="cluster1",
            secrets=MemorySecrets(),
            publisher=pub,
            settings=AgentSettings(publish_timeout_seconds=2.0, address_policy=LOOPBACK),
        )
        try:
            await sup.apply([summary(score, "http://127.0.0.1:9/scoring")])
            await asyncio.to_thread(
                wait_until, lambda: not gone(hub, "cluster1", aps), timeout=30, what="APS"
            )
            proxy.mute()
            await sup.apply([])
            assert sup.pending_removals == [aps]  # no answer within 2 s
            assert gone(hub, "cluster1", aps)  # yet the apiserver did it
            proxy.mute(False)
            await asyncio.to_thread(
                wait_until, lambda: not sup.pending_removals, timeout=30, what="removal confirmed"
            )
        finally:
            await sup.close()
            proxy.close()  # resets the muted connection, so its thread ends now

    asyncio.run(scenario())
    # (urllib3's own retries of the abandoned request, when the proxy closes, are not the agent's)
    messages = [
        r for r in caplog.records if aps in r.getMessage() and r.name.startswith("dynamic_scoring.agent")
    ]
    assert any("got no answer" in r.getMessage() for r in messages)
    assert not [r.getMessage() for r in messages if r.levelno >= logging.WARNING]


def test_orphans_of_scorers_removed_while_down_are_removed_at_start(control_plane: ControlPlane) -> None:
    hub = admin(control_plane)
    addon = f"orphan-test-{uuid.uuid4().hex[:5]}"
    tag = uuid.uuid4().hex[:5]
    ours = {MANAGED_BY_LABEL: "dynamic-scoring-agent", ADDON_LABEL: addon}
    names = {"kept": f"kept-{tag}", "orphan": f"orphan-{tag}", "foreign": f"foreign-{tag}"}
    for role, name in names.items():
        labels = ours if role != "foreign" else {MANAGED_BY_LABEL: "someone-else"}
        hub.request(
            "POST",
            aps_path("cluster1"),
            body={
                "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                "kind": "AddOnPlacementScore",
                "metadata": {"name": name, "labels": labels},
            },
        )

    async def scenario() -> list[str]:
        pub = KubeScorePublisher(admin(control_plane), "cluster1", addon_name=addon)
        sup = Supervisor(
            cluster_name="cluster1",
            secrets=MemorySecrets(),
            publisher=pub,
            settings=AgentSettings(address_policy=LOOPBACK),
        )
        try:
            await sup.apply([summary(f"kept_{tag}", "http://127.0.0.1:9/scoring")])
            owned = await pub.list_owned()
            assert sorted(owned) == sorted([names["kept"], names["orphan"]])
            return await sup.remove_orphans(owned)
        finally:
            await sup.close()

    try:
        assert asyncio.run(scenario()) == [names["orphan"]]
        assert gone(hub, "cluster1", names["orphan"])
        assert not gone(hub, "cluster1", names["kept"]) and not gone(hub, "cluster1", names["foreign"])
    finally:
        for name in names.values():
            with contextlib.suppress(NotFound):
                hub.request("DELETE", aps_path("cluster1", name))


def test_secret_name_cannot_leave_the_namespace(control_plane: ControlPlane) -> None:
    assert control_plane.spoke2 is not None
    spoke = KubeAPI(control_plane.spoke2.admin_kubeconfig)
    tag = uuid.uuid4().hex[:5]
    home, other = f"it-home-{tag}", f"it-other-{tag}"
    for ns in (home, other):
        spoke.request(
            "POST",
            "/api/v1/namespaces",
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        )
    try:
        spoke.request(
            "POST",
            f"/api/v1/namespaces/{other}/secrets",
            body={
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "x"},
                "data": {"token": base64.b64encode(b"other-namespace-token").decode()},
            },
        )
        reader = KubeSecretReader(spoke, home)
        for name in (f"../../{other}/secrets/x", f"../{other}", f"{other}/secrets/x"):
            with pytest.raises(SecretNotFound, match="not found"):
                asyncio.run(reader.get(name))
        # a bare dot segment reaches the apiserver as a name, which refuses it (not as "the list")
        with pytest.raises(AuthError, match="400"):
            asyncio.run(reader.get(".."))
    finally:
        for ns in (home, other):
            spoke.request("DELETE", f"/api/v1/namespaces/{ns}")
