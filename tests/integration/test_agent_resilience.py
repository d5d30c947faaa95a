"""The agent process rides out what a long-running cluster does to it.

Each test runs `dynamic-scoring-agent` as a real process against cluster2 of the local control
plane, with the least-privilege hub identity and a real scorer process (`/static/scoring`, no
Prometheus needed), in a namespace of its own, and then does one unkind thing: SIGKILLs cluster2's
kube-apiserver and starts it again, cuts the watch stream mid-body through a TCP proxy, rotates
the hub client certificate in place, or sends SIGHUP.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import signal
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from dynamic_scoring.kube.api import MERGE_PATCH, Conflict, KubeAPI, NotFound
from e2e.controlplane import ControlPlane
from e2e.pki import Issued
from e2e.procs import Proc, free_port, tail, wait_until
from tests.component.harness import ScorerProcess
from tests.integration.tcp_proxy import TcpProxy

REPO = Path(__file__).resolve().parents[2]
APS = "/apis/cluster.open-cluster-management.io/v1alpha1/namespaces/cluster2/addonplacementscores"
RBAC = "/apis/rbac.authorization.k8s.io/v1/namespaces/cluster2"
GROUP = "system:open-cluster-management:cluster:cluster2:addon:dynamic-scoring"


def kubeconfig_with_files(path: Path, server: str, ca_pem: bytes, client: Issued) -> Path:
    """A kubeconfig that names its client certificate files (`tls.crt`/`tls.key` beside it), as
    the klusterlet's mounted hub-kubeconfig Secret does; rotating them rewrites those files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "tls.crt").write_bytes(client.cert_pem)
    (path.parent / "tls.key").write_bytes(client.key_pem)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "hub",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [
            {
                "name": "agent",
                "user": {
                    "client-certificate": str(path.parent / "tls.crt"),
                    "client-key": str(path.parent / "tls.key"),
                },
            }
        ],
        "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "agent"}}],
        "current-context": "hub",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def configmap(ns: str, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "dynamic-scoring-config", "namespace": ns},
        "data": {"summaries": json.dumps(summaries)},
    }


def summary(score: str, endpoint: str) -> dict[str, Any]:
    return {
        "name": f"scorer-{score}",
        "scoreName": score,
        "sourceType": "None",
        "scoringEndpoint": endpoint,
        "scoringInterval": 2,
        "scoreDimensionFormat": "${app}-${device}",  # /static answers four {app, device} rows
        "validForSeconds": 10,  # short: every cycle writes, so a failed write shows at once
        "scoreDestination": "AddOnPlacementScore",
    }


@dataclass
class Setup:
    cp: ControlPlane
    ns: str
    hub: KubeAPI
    spoke: KubeAPI
    scorer: ScorerProcess
    tmp: Path
    agent: Proc | None = None
    port: int = 0

    def set_summaries(self, *scores: str) -> None:
        body = configmap(self.ns, [summary(s, self.scorer.url("/static/scoring")) for s in scores])
        path = f"/api/v1/namespaces/{self.ns}/configmaps"
        try:
            self.spoke.request("PUT", f"{path}/dynamic-scoring-config", body=body)
        except NotFound:
            self.spoke.request("POST", path, body=body)

    def start_agent(self, hub_kubeconfig: Path, managed_kubeconfig: Path | None = None) -> Proc:
        assert self.cp.spoke2 is not None
        self.port = free_port()
        self.agent = Proc(
            "agent",
            [
                str(Path(sys.executable).parent / "dynamic-scoring-agent"),
                f"--hub-kubeconfig={hub_kubeconfig}",
                f"--managed-kubeconfig={managed_kubeconfig or self.cp.spoke2.admin_kubeconfig}",
                "--cluster-name=cluster2",
                f"--addon-namespace={self.ns}",
                f"--metrics-bind-address=127.0.0.1:{self.port}",
                "--lease-renew-seconds=2",
                "--allow-cidr=127.0.0.0/8",  # the test Prometheus and scorers listen on 127.0.0.1
            ],
            self.tmp / "agent.log",
        ).start()
        return self.agent

    def aps(self, name: str) -> dict[str, Any] | None:
        try:
            return self.hub.request("GET", f"{APS}/{name}")
        except NotFound:
            return None

    def written_after(self, name: str, version: str | None) -> str:
        """Wait until APS `name` is written with fresh scores (a new resourceVersion); return it."""

        def fresh() -> str | None:
            obj = self.aps(name)
            if obj is None:
                return None
            status = obj.get("status") or {}
            cond = (status.get("conditions") or [{}])[0]
            new = str(obj["metadata"]["resourceVersion"])
            return new if new != version and status.get("scores") and cond.get("status") == "True" else None

        return wait_until(fresh, timeout=60, what=f"APS {name} written", proc=self.agent)

    def healthz(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    def log(self) -> str:
        return (self.tmp / "agent.log").read_text(errors="replace")


@pytest.fixture
def setup(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Setup]:
    cp = control_plane
    assert cp.hub is not None and cp.spoke2 is not None
    ns = f"it-agent-{uuid.uuid4().hex[:5]}"
    spoke = KubeAPI(cp.spoke2.admin_kubeconfig)
    spoke.request(
        "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    hub = KubeAPI(cp.hub.admin_kubeconfig)
    scorer = ScorerProcess("res-scorer", tmp_path).start()
    s = Setup(cp, ns, hub, spoke, scorer, tmp_path)
    try:
        yield s
    finally:
        if s.agent is not None:
            s.agent.stop()
        scorer.stop()
        with contextlib.suppress(NotFound):
            spoke.request("DELETE", f"/api/v1/namespaces/{ns}")
        for item in hub.request("GET", APS).get("items") or []:
            if item["metadata"]["name"].startswith("res-"):
                with contextlib.suppress(NotFound):
                    hub.request("DELETE", f"{APS}/{item['metadata']['name']}")


SCORE_NAMES = [
    f"res-{n}" for n in ("one", "two", "cut", "after", "rotate", "hup", "left-behind", "still-wanted")
]


def agent_identity(cp: ControlPlane, tmp: Path, extra_group: str = "") -> tuple[Issued, Path]:
    """The least-privilege hub identity from the addon's RBAC template (plus `extra_group`)."""
    assert cp.hub is not None
    template = jinja2.Template((REPO / "templates/hub/agent-rbac.yaml.j2").read_text())
    hub = KubeAPI(cp.hub.admin_kubeconfig)
    # the hub Role names the scores the agent may write: every score these tests use
    rendered = template.render(cluster_name="cluster2", addon_name="dynamic-scoring", score_names=SCORE_NAMES)
    for doc in yaml.safe_load_all(rendered):
        kind = "roles" if doc["kind"] == "Role" else "rolebindings"
        try:
            hub.request("POST", f"{RBAC}/{kind}", body=doc)
        except Conflict:  # exists from an earlier test: replace it with the template's version
            hub.request("PUT", f"{RBAC}/{kind}/{doc['metadata']['name']}", body=doc)
    groups = (extra_group,) if extra_group else (GROUP,)
    cert = cp.hub.ca.issue(
        f"res-agent-{uuid.uuid4().hex[:6]}",
        common_name=f"{groups[0]}:agent:res",
        organizations=groups,
        client=True,
    )
    kubeconfig = kubeconfig_with_files(tmp / "hub" / "kubeconfig", cp.hub.server, cp.hub.ca.cert_pem, cert)
    return cert, kubeconfig


def summaries_watch_failed(log: str) -> bool:
    """The informer's line for a failed watch of the summary ConfigMap (`Informer._failed`)."""
    return (
        re.search(r"watch of configmaps ns=\S+ fields=metadata\.name=dynamic-scoring-config failed", log)
        is not None
    )


def test_agent_survives_a_crash_of_the_managed_apiserver(setup: Setup) -> None:
    s = setup
    _, hub_kubeconfig = agent_identity(s.cp, s.tmp)
    s.set_summaries("res_one")
    s.start_agent(hub_kubeconfig)
    version = s.written_after("res-one", None)

    s.cp.stop_component("cluster2-apiserver", kill=True)  # SIGKILL: no graceful goodbye on the stream
    wait_until(lambda: summaries_watch_failed(s.log()), timeout=60, what="the agent to notice", proc=s.agent)
    s.cp.start_component("cluster2-apiserver")
    back = time.monotonic()

    # a changed ConfigMap still takes effect, and the existing APS keeps being written
    s.set_summaries("res_one", "res_two")
    s.written_after("res-two", None)
    print(f"measured: new scorer's APS written {time.monotonic() - back:.1f}s after the apiserver was back")
    s.written_after("res-one", version)
    wait_until(lambda: s.healthz() == 200, timeout=30, what="/healthz 200", proc=s.agent)
    assert "Exception in thread" not in s.log(), tail(s.tmp / "agent.log")


def test_watch_stream_cut_mid_body_reconnects(setup: Setup) -> None:
    s = setup
    cp = s.cp
    assert cp.spoke2 is not None
    proxy = TcpProxy(("127.0.0.1", cp.spoke2.port)).start()
    try:
        managed = s.tmp / "managed.kubeconfig"
        doc = yaml.safe_load(cp.spoke2.admin_kubeconfig.read_text())
        doc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
        managed.write_text(yaml.safe_dump(doc))
        _, hub_kubeconfig = agent_identity(cp, s.tmp)
        s.set_summaries("res_cut")
        s.start_agent(hub_kubeconfig, managed)
        s.written_after("res-cut", None)
        before = proxy.connections
        # the watch stream is open (a chunked body the apiserver never ends): reset it mid-body
        cut = time.monotonic()
        assert proxy.cut() >= 1
        wait_until(lambda: proxy.connections > before, timeout=30, what="a reconnect", proc=s.agent)
        print(f"measured: reconnected {time.monotonic() - cut:.1f}s after the cut")
        s.set_summaries("res_cut", "res_after")
        s.written_after("res-after", None)
        print(f"measured: change applied and written {time.monotonic() - cut:.1f}s after the cut")
        wait_until(
            lambda: summaries_watch_failed(s.log()),
            timeout=30,
            what="the agent's log line for the failed watch of the summaries ConfigMap",
            proc=s.agent,
        )
    finally:
        proxy.close()


def test_hub_certificate_rotated_in_place_is_used_for_the_next_write(setup: Setup) -> None:
    s = setup
    cp = s.cp
    assert cp.hub is not None
    tag = uuid.uuid4().hex[:5]
    old_group, new_group = f"res-old-{tag}", f"res-new-{tag}"
    role = "open-cluster-management:dynamic-scoring:agent"
    _, hub_kubeconfig = agent_identity(cp, s.tmp, extra_group=old_group)

    def bind(group: str) -> None:
        s.hub.request(
            "POST",
            f"{RBAC}/rolebindings",
            body={
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": group},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
            },
        )

    bind(old_group)
    bind(new_group)
    try:
        s.set_summaries("res_rotate")
        s.start_agent(hub_kubeconfig)
        s.written_after("res-rotate", None)

        # the klusterlet renews the certificate: new files in place, same kubeconfig
        new = cp.hub.ca.issue(
            f"res-new-{tag}", common_name=f"{new_group}:agent", organizations=(new_group,), client=True
        )
        directory = hub_kubeconfig.parent
        (directory / "tls.key").write_bytes(new.key_pem)
        (directory / "tls.crt").write_bytes(new.cert_pem)
        # the old identity loses its access: only the new certificate can write from now on
        s.hub.request("DELETE", f"{RBAC}/rolebindings/{old_group}")
        version = str(s.hub.request("GET", f"{APS}/res-rotate")["metadata"]["resourceVersion"])
        s.written_after("res-rotate", version)
        wait_until(
            lambda: "reloading credentials" in s.log(),
            timeout=30,
            what="'reloading credentials' in the agent's log",
            proc=s.agent,
        )
    finally:
        for group in (old_group, new_group):
            with contextlib.suppress(NotFound):
                s.hub.request("DELETE", f"{RBAC}/rolebindings/{group}")


def test_sighup_reapplies_and_keeps_running(setup: Setup) -> None:
    s = setup
    _, hub_kubeconfig = agent_identity(s.cp, s.tmp)
    s.set_summaries("res_hup")
    agent = s.start_agent(hub_kubeconfig)
    s.written_after("res-hup", None)
    agent.send_signal(signal.SIGHUP)
    wait_until(lambda: "SIGHUP: re-applying" in s.log(), timeout=10, what="SIGHUP handled", proc=agent)
    wait_until(lambda: s.healthz() == 200, timeout=30, what="/healthz 200 after SIGHUP", proc=agent)
    assert agent.alive
    # and a forged score is put right by the next cycle, while it keeps running
    forged = {"status": {"scores": [{"name": "forged", "value": 100}]}}
    s.hub.request("PATCH", f"{APS}/res-hup/status", body=forged, content_type=MERGE_PATCH)

    def repaired() -> bool:
        obj = s.aps("res-hup") or {}
        names = [i["name"] for i in (obj.get("status") or {}).get("scores") or []]
        return bool(names) and "forged" not in names

    wait_until(repaired, timeout=30, what="forged APS repaired", proc=agent)
    agent.send_signal(signal.SIGTERM)
    # exit code 0 on its own; the agent's shutdown budget is 4 s, the 30 s wait is 26 s of margin
    # for a loaded machine and still fails an agent that does not exit
    assert agent.wait(timeout=30) == 0


def test_scores_of_scorers_removed_while_down_are_removed_at_start(setup: Setup) -> None:
    s = setup
    _, hub_kubeconfig = agent_identity(s.cp, s.tmp)
    ours = {
        "app.kubernetes.io/managed-by": "dynamic-scoring-agent",
        "dynamic-scoring.open-cluster-management.io/addon": "dynamic-scoring",
    }
    for name in ("res-left-behind", "res-still-wanted"):
        s.hub.request(
            "POST",
            APS,
            body={
                "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                "kind": "AddOnPlacementScore",
                "metadata": {"name": name, "labels": ours},
            },
        )
    s.set_summaries("res_still_wanted")
    agent = s.start_agent(hub_kubeconfig)
    wait_until(lambda: s.aps("res-left-behind") is None, timeout=30, what="the orphan removed", proc=agent)
    s.written_after("res-still-wanted", None)
    wait_until(
        lambda: "1 orphaned" in s.log(), timeout=30, what="'1 orphaned' in the agent's log", proc=agent
    )
