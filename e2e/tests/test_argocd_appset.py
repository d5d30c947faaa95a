"""The sample ApplicationSet under Argo CD's real ApplicationSet controller, on the session's hub.

The controller (v3.1.8, built from the module proxy) runs as its own ServiceAccount with Argo CD's
Role plus the sample's RBAC; the user's steps are `kubectl apply` of the files in `samples/argocd/`.
The test is about the generator, not the scoring, so it shapes the AddOnPlacementScores the sample
Placement reads directly instead of running the addon; OCM's real placement controller decides.

`requeueAfterSeconds` is the only thing changed from the sample (30 -> 2, applied as an overlay):
the controller does not watch PlacementDecisions, it re-runs the generator on that period, so the
sample's value would make the flip step wait up to 30 s for nothing but the clock.
"""

from __future__ import annotations

import copy
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.kube.api import MERGE_PATCH
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm.naming import aps_name
from e2e.argocd import (
    ARGO_V1A1,
    NAMESPACE,
    AppSetController,
    ManagedClusterRef,
    argocd_build,
    listening_addresses,
)
from e2e.controlplane import ControlPlane
from e2e.kube import Client, Kubectl
from e2e.mission import SCORE
from e2e.ocm import set_addon_score
from e2e.procs import wait_until, wait_value

pytestmark = pytest.mark.late_tools

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "argocd"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
PLACEMENT_LABEL = "cluster.open-cluster-management.io/placement"
REQUEUE_SECONDS = 2
# The generator runs every REQUEUE_SECONDS; the rest is one reconcile (a list of Secrets, of
# PlacementDecisions, the Application writes).  A liveness deadline, not the claim (the latency is
# printed): a few seconds on a quiet machine, the rest margin for one whose cores are busy.
FOLLOW_BOUND = REQUEUE_SECONDS + 60
RESOURCES_FINALIZER = "resources-finalizer.argocd.argoproj.io"


def sample(name: str, kind: str) -> JSON:
    [doc] = [d for d in yaml.safe_load_all((SAMPLE / name).read_text()) if d and d["kind"] == kind]
    return dict(doc)


@dataclass
class Env:
    hub: Client
    kubectl: Kubectl
    controller: AppSetController
    servers: dict[str, str]


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    cp = control_plane
    assert cp.hub is not None and cp.spoke2 is not None and cp.tools is not None
    hub = Client(cp.hub.admin_kubeconfig)
    controller = AppSetController(
        hub, cp.hub.server, cp.hub.ca.cert_pem, tmp_path_factory.mktemp("argocd"), argocd_build()
    )
    # cluster1 is the hub itself (self-managed), cluster2 has its own API server and CA
    clusters = [
        ManagedClusterRef("cluster1", cp.hub.server, cp.hub.ca.cert_pem),
        ManagedClusterRef("cluster2", cp.spoke2.server, cp.spoke2.ca.cert_pem),
    ]
    try:
        started = time.monotonic()
        controller.install(clusters)
        installed = time.monotonic()
        controller.start()
        ready = time.monotonic()
        print(f"\nargocd: install {installed - started:.1f} s, controller start {ready - installed:.1f} s")
        yield Env(
            hub,
            Kubectl(cp.tools.kubectl, cp.hub.admin_kubeconfig),
            controller,
            {c.name: c.server for c in clusters},
        )
    finally:
        stopping = time.monotonic()
        controller.stop()
        controller.uninstall()
        print(f"\nargocd: stop and uninstall {time.monotonic() - stopping:.1f} s")
        for cluster in ("cluster1", "cluster2"):
            hub.delete(APS_V1A1, "AddOnPlacementScore", aps_name(SCORE), cluster)


def set_score(hub: Client, cluster: str, value: int) -> None:
    """The AddOnPlacementScore the sample Placement weighs (the four-hour forecast), valid for an hour."""
    set_addon_score(hub, cluster, aps_name(SCORE), SCORE, value)


def decided(hub: Client, placement: str) -> list[str]:
    decisions = hub.items(
        CLUSTER_V1B1, "PlacementDecision", NAMESPACE, label_selector=f"{PLACEMENT_LABEL}={placement}"
    )
    return sorted(d["clusterName"] for pd in decisions for d in pd.get("status", {}).get("decisions") or [])


def deleting(obj: JSON) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def app_name(template: JSON, cluster: str, server: str) -> str:
    return str(render(template["metadata"]["name"], cluster, server))


def count_reconciles(env: Env) -> int:
    """How many times the controller has reconciled the ApplicationSet (its own metric)."""
    url = f"http://127.0.0.1:{env.controller.ports['metrics']}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith('controller_runtime_reconcile_total{controller="applicationset"')
    )


def render(template: Any, name: str, server: str) -> Any:
    """The sample template with the generator's two cluster parameters filled in, as Argo CD does."""
    if isinstance(template, dict):
        return {k: render(v, name, server) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, name, server) for v in template]
    if isinstance(template, str):
        return template.replace("{{name}}", name).replace("{{server}}", server)
    return template


def test_sample_applicationset_generates_one_application_per_decided_cluster_and_follows_a_flip(
    env: Env,
) -> None:
    hub = env.hub
    placement = sample("placement.yaml", "Placement")["metadata"]["name"]
    # 10 x score: cluster1 10 x 60 = 600 against cluster2 10 x -40 = -400.
    set_score(hub, "cluster1", 60)
    set_score(hub, "cluster2", -40)
    # As the user does it: the generator's ConfigMap, the RBAC and the Placement first, so that a
    # decision exists when the ApplicationSet is created (otherwise the first generation fails and
    # the controller retries only after its 3-minute error requeue).
    env.kubectl.run(
        "apply", *(f"--filename={SAMPLE / f}" for f in ("configmap.yaml", "rbac.yaml", "placement.yaml"))
    )
    wait_until(
        lambda: decided(hub, placement) == ["cluster1"], timeout=60, what="the Placement to decide cluster1"
    )

    appset = sample("applicationset.yaml", "ApplicationSet")
    overlay = copy.deepcopy(appset)
    [generator] = overlay["spec"]["generators"]
    assert generator["clusterDecisionResource"]["requeueAfterSeconds"] == 30  # the sample's value
    generator["clusterDecisionResource"]["requeueAfterSeconds"] = REQUEUE_SECONDS
    env.kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(overlay))
    template = appset["spec"]["template"]

    def live_for(cluster: str) -> dict[str, JSON] | None:
        """Every Application not being deleted, if that is exactly the one rendered for `cluster`."""
        live = {a["metadata"]["name"]: a for a in env.controller.applications() if not deleting(a)}
        return live if set(live) == {app_name(template, cluster, env.servers[cluster])} else None

    first = wait_until(
        lambda: live_for("cluster1"),
        timeout=60,
        what="one Application, for cluster1",
        proc=env.controller.proc,
    )
    [app1] = first.values()
    expected = render(template["spec"], "cluster1", env.servers["cluster1"])
    assert app1["spec"]["destination"] == expected["destination"]
    assert expected["destination"] == {"server": env.servers["cluster1"], "namespace": "guestbook"}
    assert app1["spec"]["source"] == expected["source"]
    assert app1["spec"]["project"] == "default"
    [owner] = app1["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("ApplicationSet", appset["metadata"]["name"])
    # Added by the controller, not the template: deleting the Application prunes what it deployed.
    assert app1["metadata"]["finalizers"] == [RESOURCES_FINALIZER]
    # the controller writes the ApplicationSet's status after the Applications, in a write of its own
    wait_value(
        lambda: hub.get(ARGO_V1A1, "ApplicationSet", appset["metadata"]["name"], NAMESPACE).get("status"),
        lambda status: (
            {c["type"]: c["status"] for c in (status or {}).get("conditions") or []}.get("ResourcesUpToDate")
            == "True"
        ),
        timeout=30,
        what="the ApplicationSet's ResourcesUpToDate=True",
    )

    # The forecast turns: cluster1 10 x -20 + 100 (Steady, the incumbent) = -200 + 100 = -100 against
    # cluster2 10 x 50 = 500: a lead of 70 points, past the recipe's 10-point margin.
    set_score(hub, "cluster1", -20)
    set_score(hub, "cluster2", 50)
    wait_until(
        lambda: decided(hub, placement) == ["cluster2"],
        timeout=60,
        what="the Placement to follow to cluster2",
    )
    flipped = time.monotonic()
    second = wait_until(
        lambda: live_for("cluster2"),
        timeout=FOLLOW_BOUND,
        what="the Applications to follow the decision to cluster2",
        proc=env.controller.proc,
    )
    latency = time.monotonic() - flipped
    [app2] = second.values()
    assert app2["spec"]["destination"]["server"] == env.servers["cluster2"]
    name1 = app1["metadata"]["name"]
    old = hub.get(ARGO_V1A1, "Application", name1, NAMESPACE)
    # The controller deleted it; Argo CD's application-controller (not run here) would now prune the
    # guestbook from cluster1 and then drop the finalizer.  Do its part, and the Application is gone
    # for good: the generator does not bring it back.
    assert old["metadata"]["uid"] == app1["metadata"]["uid"] and deleting(old), old["metadata"]
    assert old["metadata"]["finalizers"] == [RESOURCES_FINALIZER]
    hub.api.request(
        "PATCH",
        hub.resource(ARGO_V1A1, "Application").path(NAMESPACE, name1),
        body={"metadata": {"finalizers": None}},
        content_type=MERGE_PATCH,
    )
    wait_until(
        lambda: hub.find(ARGO_V1A1, "Application", name1, NAMESPACE) is None,
        timeout=30,
        what=f"Application {name1} gone",
    )
    requeued = count_reconciles(env)
    wait_until(lambda: count_reconciles(env) >= requeued + 2, timeout=30, what="two more generator runs")
    assert live_for("cluster2") is not None and hub.find(ARGO_V1A1, "Application", name1, NAMESPACE) is None
    print(f"\ndecision flip -> Applications follow: {latency:.1f} s (requeueAfterSeconds={REQUEUE_SECONDS})")


def test_controller_listens_on_loopback_only(env: Env) -> None:
    assert env.controller.proc is not None and env.controller.proc.pid is not None
    opened = listening_addresses(env.controller.proc.pid)
    ours = {env.controller.ports[n] for n in ("metrics", "probe", "webhook")}
    assert {port for _, port in opened} == ours, opened
    assert {address for address, _ in opened} == {"127.0.0.1"}, opened
