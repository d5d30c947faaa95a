"""A Secret goes only where its owner bound it: the agent, the hub's /config precedence and the hub probe.

Issue 22, findings 2-4.  The person who writes a DynamicScorer names both Secrets and the URLs their
values go to; before this, every agent (and the hub probe) sent any Secret it could read to any URL
the author chose, and a scorer's ``/config`` could move a host while the spec's credentials stayed
attached.  Here, on the real apiservers of the local control plane and against real HTTP servers on
loopback that record what they receive:

* the agent reads Secrets with its own delivered identity and RBAC, refuses an unbound one with
  ``SecretNotBound`` on the AddOnPlacementScore on the hub, and no request reaches the scorer; the
  documented ``kubectl annotate`` one-liner makes the next cycle send it;
* the scorer and distribution controllers leave the spec's auth out of the summaries in the config
  ManifestWorks when ``/config`` moves the scoring host, say so on the DynamicScorer, and keep it
  with ``spec.sendCredentialsToSyncedHosts``;
* the hub probe sends ``spec.probe.tokenSecretRef`` only when that hub Secret lists the probe's host.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.agent.kube.scores import KubeScorePublisher
from dynamic_scoring.agent.kube.secrets import KubeSecretReader
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.kube.api import KubeAPI, NotFound
from dynamic_scoring.outbound.addresses import AddressPolicy
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION
from e2e.controlplane import ControlPlane
from e2e.kube import Client, Kubectl
from e2e.procs import wait_until_async, wait_value_async
from tests.component.harness import ScorerProcess, summary
from tests.integration.test_agent_kube import APS, delivered_identity
from tests.integration.test_registry_controllers import (
    DS_V1A1,
    Registry,
    Scorer,
    add_cluster,
    condition,
    create_config,
    health,
    make_scorer,
    remove_cluster,
    scorer_obj,
    summaries,
    wait_for,
)

LOOPBACK = AddressPolicy.parse("127.0.0.0/8")
"""The address policy opt-in: every test Prometheus and scorer listens on 127.0.0.1."""
TOKEN_PREFIX = "never-leaves-"


# ------------------------------------------------------------------------------------------ the agent
@pytest.fixture
def recording_scorer(tmp_path: Path) -> Iterator[ScorerProcess]:
    proc = ScorerProcess("binding-scorer", tmp_path).start()
    yield proc
    proc.stop()


def _aps_condition(api: KubeAPI, name: str) -> dict[str, Any]:
    try:
        obj = api.request("GET", APS.format(ns="cluster1", name=name))
    except NotFound:
        return {}
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "ScoresUpToDate":
            return dict(c)
    return {}


def test_the_agent_never_sends_an_unbound_secret_and_the_annotation_binds_it(
    control_plane: ControlPlane, tmp_path: Path, recording_scorer: ScorerProcess
) -> None:
    assert (
        control_plane.spoke2 is not None and control_plane.tools is not None and control_plane.hub is not None
    )
    spoke = Kubectl(control_plane.tools.kubectl, control_plane.spoke2.admin_kubeconfig)
    hub_api = KubeAPI(control_plane.hub.admin_kubeconfig)
    ns = f"it-bind-{uuid.uuid4().hex[:5]}"
    spoke.run("create", "namespace", ns)
    tag = uuid.uuid4().hex[:6]
    token = f"{TOKEN_PREFIX}{tag}"
    # Another addon's Secret in the shared namespace: what a scorer author could name before.
    spoke.run("create", "secret", "generic", "other-addon-token", "-n", ns, f"--from-literal=token={token}")
    bound_token = f"bound-{tag}"
    spoke.run("create", "secret", "generic", "scorer-token", "-n", ns, f"--from-literal=token={bound_token}")
    host = f"127.0.0.1:{recording_scorer.port}"
    spoke.run("annotate", "secret", "scorer-token", "-n", ns, f"{ALLOWED_HOSTS_ANNOTATION}={host}")
    steal_key, honest_key = uuid.uuid4().hex, uuid.uuid4().hex
    recording_scorer.expect(steal_key, {"Authorization": f"Bearer {token}"})
    recording_scorer.expect(honest_key, {"Authorization": f"Bearer {bound_token}"})
    steal, honest = f"steal_{tag}", f"honest_{tag}"
    steal_aps, honest_aps = f"steal-{tag}", f"honest-{tag}"
    summaries_ = [
        summary(
            steal,
            recording_scorer.url(f"/auth/{steal_key}/scoring"),
            scoringInterval=1,
            scoringAuth={"bearerTokenSecretRef": {"name": "other-addon-token", "key": "token"}},
        ),
        summary(
            honest,
            recording_scorer.url(f"/auth/{honest_key}/scoring"),
            scoringInterval=1,
            scoringEndpointAuthName="scorer-token",
            scoringEndpointAuthKey="token",
        ),
    ]

    async def scenario() -> None:
        reader = KubeSecretReader(delivered_identity(control_plane, ns, tmp_path), ns)
        publisher = KubeScorePublisher(hub_api, "cluster1", addon_name="dynamic-scoring")
        supervisor = Supervisor(
            cluster_name="cluster2",
            secrets=reader,
            publisher=publisher,
            settings=AgentSettings(address_policy=LOOPBACK),
        )
        try:
            await supervisor.apply(summaries_)

            async def until(check: Callable[[], dict[str, Any] | bool], what: str) -> dict[str, Any]:
                found = await wait_until_async(check, timeout=30, what=what, interval=0.2, blocking=True)
                assert isinstance(found, dict)
                return found

            refused = await until(
                lambda: (c := _aps_condition(hub_api, steal_aps)).get("reason") == "SecretNotBound" and c,
                "SecretNotBound on the hub's AddOnPlacementScore",
            )
            ok = await until(
                lambda: (c := _aps_condition(hub_api, honest_aps)).get("status") == "True" and c,
                "the bound Secret's scorer succeeding",
            )
            assert ok["reason"] != "SecretNotBound"
            message = refused["message"]
            assert refused["status"] == "False"
            assert f"secret {ns}/other-addon-token" in message and host in message
            assert f"kubectl -n {ns} annotate secret other-addon-token" in message
            assert ALLOWED_HOSTS_ANNOTATION in message and token not in message
            # Two more cycles of the refused scorer have finished (a cycle counts once its scoring
            # call would have been answered), so had the value been sent, the scorer would have it.
            steal_worker = supervisor.workers[steal]
            before = steal_worker.cycles
            await wait_until_async(
                lambda: steal_worker.cycles >= before + 2,
                timeout=30,
                what="two more cycles of the scorer whose Secret is not bound",
            )
            assert recording_scorer.requests(f"/auth/{steal_key}/") == []
            everything = str(recording_scorer.requests("/"))
            assert token not in everything
            assert f"Bearer {bound_token}" in everything

            # The documented one-liner, run by whoever owns the Secret, binds it from the next cycle.
            await asyncio.to_thread(
                spoke.run,
                "annotate",
                "secret",
                "other-addon-token",
                "-n",
                ns,
                "--overwrite",
                f"{ALLOWED_HOSTS_ANNOTATION}={host}",
            )
            await until(
                lambda: (c := _aps_condition(hub_api, steal_aps)).get("status") == "True" and c,
                "success once the owner bound the Secret",
            )
            sent = {
                r["headers"].get("authorization") for r in recording_scorer.requests(f"/auth/{steal_key}/")
            }
            assert sent == {f"Bearer {token}"}
        finally:
            await supervisor.close()
            for name in (steal_aps, honest_aps):
                with contextlib.suppress(NotFound):
                    await asyncio.to_thread(hub_api.request, "DELETE", APS.format(ns="cluster1", name=name))

    try:
        asyncio.run(scenario())
    finally:
        spoke.run("delete", "namespace", ns, "--wait=false")


# -------------------------------------------------------------------------------------------- the hub
@pytest.fixture(scope="module")
def hub(scorer_crds_hub: Client) -> Client:
    """This module's hub client: the shared one with the scorer CRDs served (see conftest.py)."""
    return scorer_crds_hub


@pytest.fixture(scope="module")
def namespace(hub: Client) -> Iterator[str]:
    name = f"binding-{uuid.uuid4().hex[:6]}"
    hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    hub.delete("v1", "Namespace", name)


@pytest.fixture(scope="module")
def cluster(hub: Client) -> Iterator[str]:
    name = f"binding-{uuid.uuid4().hex[:4]}"
    add_cluster(hub, name)
    yield name
    remove_cluster(hub, name)


@pytest.fixture(scope="module")
def running(control_plane: ControlPlane, hub: Client, namespace: str, cluster: str) -> Iterator[Registry]:
    assert control_plane.hub is not None
    create_config(hub, namespace)
    registry = Registry(KubeAPI(control_plane.hub.admin_kubeconfig), namespace)
    yield registry
    hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", namespace)
    registry.close()


@pytest.fixture
def scorer() -> Iterator[Scorer]:
    s = Scorer()
    yield s
    s.stop()


def _summary(hub: Client, cluster: str, score: str) -> dict[str, Any] | None:
    found = [s for s in summaries(hub, cluster) or [] if s["scoreName"] == score]
    return found[0] if found else None


def test_a_scoring_host_moved_by_config_reaches_the_agents_without_the_spec_credentials(
    hub: Client, namespace: str, cluster: str, running: Registry, scorer: Scorer
) -> None:
    score = f"moved_{uuid.uuid4().hex[:4]}"
    elsewhere = "http://collector.other.example:8443"
    scorer.config = {"scoring": {"host": elsewhere, "params": {"name": score, "interval": 20}}}
    auth = {
        "tokenSecretRef": {"name": "scorer-token", "key": "token"},
        "headers": [{"name": "X-Api-Key", "secretKeyRef": {"name": "api-key", "key": "key"}}],
    }
    spec: dict[str, Any] = {
        "configURL": f"{scorer.url}/config",
        "configSyncMode": "Full",
        "scoring": {"host": scorer.url, "auth": auth},
    }
    make_scorer(hub, namespace, "moved", spec)
    moved = wait_for(lambda: _summary(hub, cluster, score), "the moved scorer in the config work")
    assert moved["scoringEndpoint"] == f"{elsewhere}/scoring"
    assert (moved["scoringEndpointAuthName"], moved["scoringEndpointAuthKey"]) == ("", "")
    assert "scoringAuth" not in moved
    # the scorer controller writes Valid in a round of its own, apart from the distribution's work
    valid = wait_for(
        lambda: (
            (c := condition(scorer_obj(hub, namespace, "moved"), "Valid")).get("reason")
            == "CredentialsWithheld"
            and c
        ),
        "Valid reason CredentialsWithheld",
    )
    assert (valid["status"], valid["reason"]) == ("True", "CredentialsWithheld"), valid
    assert "status.lastSyncedConfig.scoring.host" in valid["message"]
    assert f"from http://127.0.0.1:{scorer.port}" in valid["message"]
    assert "to http://collector.other.example:8443" in valid["message"]
    assert "spec.sendCredentialsToSyncedHosts" in valid["message"]

    # The spec's author opts in: the credentials follow the synced host.
    make_scorer(hub, namespace, "moved", {**spec, "sendCredentialsToSyncedHosts": True})
    kept = wait_for(
        lambda: (s := _summary(hub, cluster, score)) and s["scoringEndpointAuthName"] == "scorer-token" and s,
        "the opted-in credentials in the config work",
    )
    assert kept["scoringAuth"]["headers"][0]["secretKeyRef"] == {"name": "api-key", "key": "key"}
    # The scorer controller writes Valid at its next round (the distribution controller resolves alone).
    wait_for(
        lambda: condition(scorer_obj(hub, namespace, "moved"), "Valid").get("reason") == "Resolved",
        "Valid=True/Resolved once opted in",
    )
    hub.delete(DS_V1A1, "DynamicScorer", "moved", namespace)


def test_the_hub_probe_sends_its_token_only_where_the_secret_allows(
    hub: Client, namespace: str, running: Registry, scorer: Scorer
) -> None:
    scorer.token = f"probe-{uuid.uuid4().hex[:8]}"
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "probe-token",
            "namespace": namespace,
            "annotations": {ALLOWED_HOSTS_ANNOTATION: "scorer.example.com"},
        },
        "stringData": {"token": scorer.token},
    }
    hub.apply(secret)
    spec = {
        "configURL": f"{scorer.url}/config",
        "configSyncMode": "None",
        "scoring": {"host": scorer.url, "params": {"name": f"probed_{uuid.uuid4().hex[:4]}"}},
        "probe": {"tokenSecretRef": {"name": "probe-token", "key": "token"}},
    }
    make_scorer(hub, namespace, "probed", spec)
    healthy = wait_for(
        lambda: (
            (c := condition(scorer_obj(hub, namespace, "probed"), "Healthy")).get("reason")
            == "SecretNotBound"
            and c
        ),
        "Healthy reason SecretNotBound",
    )
    assert healthy["status"] in ("False", "Unknown")
    assert (
        f"spec.probe.tokenSecretRef: secret {namespace}/probe-token is not bound to 127.0.0.1:"
        in (healthy["message"])
    )
    assert f"kubectl -n {namespace} annotate secret probe-token" in healthy["message"]
    assert scorer.seen_auth == []  # not asked at all: neither with nor without the token
    assert scorer.token not in str(scorer_obj(hub, namespace, "probed"))

    secret["metadata"]["annotations"] = {
        ALLOWED_HOSTS_ANNOTATION: f"scorer.example.com, 127.0.0.1:{scorer.port}"
    }
    hub.apply(secret)
    wait_for(lambda: health(hub, namespace, "probed") == "Active", "Active once the Secret is bound")
    assert set(scorer.seen_auth) == {f"Bearer {scorer.token}"}
    hub.delete(DS_V1A1, "DynamicScorer", "probed", namespace)


def test_an_unbound_secret_shows_on_the_dynamic_scorer_per_cluster(
    control_plane: ControlPlane,
    tmp_path: Path,
    hub: Client,
    namespace: str,
    cluster: str,
    running: Registry,
    recording_scorer: ScorerProcess,
) -> None:
    """The whole path: the hub's summary, a real agent reading it, its APS, the scorer's status.clusters[]."""
    assert control_plane.spoke2 is not None and control_plane.tools is not None
    assert control_plane.hub is not None
    spoke = Kubectl(control_plane.tools.kubectl, control_plane.spoke2.admin_kubeconfig)
    agent_ns = f"it-bind-sc-{uuid.uuid4().hex[:5]}"
    spoke.run("create", "namespace", agent_ns)
    token = f"{TOKEN_PREFIX}{uuid.uuid4().hex[:6]}"
    spoke.run("create", "secret", "generic", "scorer-token", "-n", agent_ns, f"--from-literal=token={token}")
    key = uuid.uuid4().hex
    recording_scorer.expect(key, {"Authorization": f"Bearer {token}"})
    score = f"unbound_{key[:4]}"
    spec = {
        "configSyncMode": "None",
        "scoring": {
            "host": recording_scorer.base,
            "path": f"/auth/{key}/scoring",
            "params": {"name": score, "interval": 1},
            "auth": {"tokenSecretRef": {"name": "scorer-token", "key": "token"}},
        },
    }
    make_scorer(hub, namespace, "unbound", spec)
    wait_for(lambda: _summary(hub, cluster, score), "the scorer in the cluster's config work", timeout=60)
    work = hub.get(
        "work.open-cluster-management.io/v1", "ManifestWork", "addon-dynamic-scoring-config", cluster
    )
    payload = work["spec"]["workload"]["manifests"][0]["data"]["summaries"]
    hub_api = KubeAPI(control_plane.hub.admin_kubeconfig)

    def entry() -> dict[str, Any]:
        found = (scorer_obj(hub, namespace, "unbound").get("status") or {}).get("clusters") or []
        return next((dict(e) for e in found if e["clusterName"] == cluster), {})

    async def scenario() -> dict[str, Any]:
        reader = KubeSecretReader(delivered_identity(control_plane, agent_ns, tmp_path), agent_ns)
        publisher = KubeScorePublisher(hub_api, cluster, addon_name="dynamic-scoring")
        supervisor = Supervisor(
            cluster_name=cluster,
            secrets=reader,
            publisher=publisher,
            settings=AgentSettings(address_policy=LOOPBACK),
        )
        try:
            await supervisor.apply_payload(payload)
            return await wait_value_async(
                entry,
                lambda got: got.get("reason") == "SecretNotBound",
                timeout=60,
                what="status.clusters[] to say SecretNotBound",
                interval=0.3,
                blocking=True,
            )
        finally:
            await supervisor.close()

    try:
        got = asyncio.run(scenario())
        assert got["status"] == "False"
        assert (
            f"secret {agent_ns}/scorer-token is not bound to 127.0.0.1:{recording_scorer.port}"
            in got["message"]
        )
        assert token not in str(scorer_obj(hub, namespace, "unbound"))
        assert recording_scorer.requests(f"/auth/{key}/") == []
    finally:
        hub.delete(DS_V1A1, "DynamicScorer", "unbound", namespace)
        spoke.run("delete", "namespace", agent_ns, "--wait=false")
