"""The agent reads a Thanos-querier-like Prometheus with its own ServiceAccount token, safely.

OpenShift's monitoring answers queries through kube-rbac-proxy: the caller's bearer token must pass
a TokenReview, and its identity a SubjectAccessReview (the ``cluster-monitoring-view`` role, which
lets it ``get namespaces``).  This story puts the real kube-rbac-proxy (component
``kube-rbac-proxy``, ``e2e.rbacproxy``) on loopback in front of cluster2's real Prometheus,
checking tokens against cluster2's kube-apiserver and asking for an audience of its own.  The
installation is the OpenShift story's (chart with ``manager.platform=openshift``, the agent in the
built image as the SCC's UID, the sample scorer), reused as is.

* An AddOnDeploymentConfig names the proxy in ``AgentTokenDestinations`` with its audience.  The
  manager refuses it while the hub admin allows no destination (the default): ``ManifestApplied``
  says so and names ``--agent-token-destination-allow``.  The hub admin then allows the proxy, its
  audience and the monitoring role (``helm upgrade`` with the ``agentToken.*`` values: the proxy's
  port is known only here).  An ADC that adds its writer's own server is still refused, naming
  that server; the ADC naming the proxy alone is rendered.  The runner, playing the kubelet,
  writes the projected token with that audience and expiry.
* A DynamicScorer whose source asks for ``agentServiceAccountToken`` is refused by the proxy (403)
  while the agent lacks the role: its AddOnPlacementScore says ``PrometheusAccessDenied`` and names
  the identity and ``get namespaces``.
* A second DynamicScorer pointing the same request at a server of its author's is refused by the
  agent (``SecretNotBound`` naming ``AgentTokenDestinations``), and that server receives nothing.
* ``AgentMonitoringClusterRole=cluster-monitoring-view`` binds the role; once the proxy's 30-second
  cache of the denial has passed, the agent scores through it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm.naming import aps_name
from e2e.loopback import LoopbackServer, QuietHandler
from e2e.mission import APS_V1A1, CHART, DS_V1A1, INSTALL_NS, NAMESPACE, RELEASE, SCORER, Mission
from e2e.procs import wait_until, wait_value
from e2e.rbacproxy import RbacProxy, start_rbac_proxy
from e2e.tests.test_addon_lifecycle import adc_ref
from e2e.tests.test_openshift_pods import ADDON_V1A1, CLUSTER, openshift

pytestmark = pytest.mark.late_tools
__all__ = ["openshift"]  # the fixture, imported so this module gets its own installation

AUDIENCE = "dynamic-scoring-e2e-thanos"
ADC = "e2e-agent-token"
CA_SECRET = "e2e-thanos-ca"
ROLE = "cluster-monitoring-view"
AGENT_USER = f"system:serviceaccount:{INSTALL_NS}:dynamic-scoring-agent"
BINDING = (
    "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding",
    f"dynamic-scoring-agent-{INSTALL_NS}-monitoring",
)
GOOD, EXFIL = ("thanos-cpu", "thanos_cpu"), ("thanos-exfil", "thanos_exfil")


class Recorder:
    """A server of a DynamicScorer author's own, counting what reaches it."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                outer.requests.append(f"{self.path} {self.headers.get('Authorization')}")
                self.reply(200, {"status": "success", "data": {"resultType": "matrix", "result": []}})

        self.server = LoopbackServer(Handler, name="token-recorder")


def scorer(m: Mission, name: str, score: str, host: str) -> JSON:
    """The sample DynamicScorer, renamed, reading ``host`` with the agent's token."""
    base = m.hub.get(DS_V1A1, "DynamicScorer", SCORER, NAMESPACE)["spec"]["scoring"]["host"]
    doc = m.dynamic_scorer(base)
    doc["metadata"] = {"name": name, "namespace": NAMESPACE}
    doc["spec"]["source"]["host"] = host
    doc["spec"]["source"]["auth"] = {
        "agentServiceAccountToken": True,
        "caSecretRef": {"name": CA_SECRET, "key": "ca.crt"},
    }
    doc["spec"]["scoring"]["params"]["name"] = score
    return doc


def aps_status(m: Mission, score: str) -> dict[str, Any]:
    aps = m.hub.find(APS_V1A1, "AddOnPlacementScore", aps_name(score), CLUSTER) or {}
    return dict(aps.get("status") or {})


def condition(m: Mission, score: str) -> dict[str, Any]:
    found = [c for c in aps_status(m, score).get("conditions") or [] if c.get("type") == "ScoresUpToDate"]
    return dict(found[0]) if found else {}


def scores(m: Mission, score: str) -> list[dict[str, Any]]:
    return list(aps_status(m, score).get("scores") or [])


def manifest_applied(m: Mission) -> dict[str, Any]:
    """cluster2's ManagedClusterAddOn `ManifestApplied` condition, where ADC refusals are reported."""
    mca = m.hub.find(ADDON_V1A1, "ManagedClusterAddOn", "dynamic-scoring", CLUSTER) or {}
    found = [
        c for c in (mca.get("status") or {}).get("conditions") or [] if c.get("type") == "ManifestApplied"
    ]
    return dict(found[0]) if found else {}


def allow_agent_token(m: Mission, destination: str) -> None:
    """The hub admin's step (docs/openshift.md): the manager may render the token for `destination`."""
    bound = {"destinationAllow": [destination], "audienceAllow": [AUDIENCE], "monitoringRoleAllow": [ROLE]}
    m.run_helm(
        "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
        "--set-json", f"agentToken={json.dumps(bound)}",
    )  # fmt: skip
    m.wait_manager()


def use_configs(m: Mission, configs: list[dict[str, str]] | None) -> None:
    """Point cluster2's ManagedClusterAddOn at these configs (None: back to the default)."""
    m.hub.api.request(
        "PATCH",
        f"/apis/{ADDON_V1A1}/namespaces/{CLUSTER}/managedclusteraddons/dynamic-scoring",
        body={"spec": {"configs": configs}},
        content_type="application/merge-patch+json",
    )


def adc(variables: dict[str, str]) -> JSON:
    return {
        "apiVersion": ADDON_V1A1,
        "kind": "AddOnDeploymentConfig",
        "metadata": {"name": ADC, "namespace": CLUSTER},
        "spec": {
            "agentInstallNamespace": "",
            "customizedVariables": [{"name": k, "value": v} for k, v in variables.items()],
        },
    }


@pytest.fixture
def thanos(openshift: Mission, tmp_path: Path) -> Iterator[tuple[RbacProxy, Recorder]]:
    """kube-rbac-proxy before cluster2's Prometheus, the platform's role, and a recording server."""
    m = openshift
    spoke = m.spokes[CLUSTER]
    cluster = m.cp.clusters[CLUSTER]
    assert cluster.prometheus_url and cluster.kubeconfig
    # The rule of OpenShift's cluster-monitoring-view that the Thanos querier's proxy checks.
    spoke.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": ROLE},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}],
        }
    )
    proxy = start_rbac_proxy(
        upstream=cluster.prometheus_url,
        kubeconfig=Path(cluster.kubeconfig),
        workdir=tmp_path / "kube-rbac-proxy",
        resource_attributes={"apiVersion": "v1", "resource": "namespaces"},
        audiences=[AUDIENCE],
    )
    recorder = Recorder()
    spoke.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": CA_SECRET, "namespace": INSTALL_NS},
            "stringData": {"ca.crt": proxy.ca_pem.decode()},
        }
    )
    try:
        yield proxy, recorder
    finally:
        for name, _ in (GOOD, EXFIL):
            m.hub.delete(DS_V1A1, "DynamicScorer", name, NAMESPACE)
        use_configs(m, None)
        m.hub.delete(ADDON_V1A1, "AddOnDeploymentConfig", ADC, CLUSTER)
        spoke.delete("v1", "Secret", CA_SECRET, INSTALL_NS)
        wait_until(lambda: spoke.find(*BINDING) is None, timeout=120, what="the monitoring binding removed")
        spoke.delete("rbac.authorization.k8s.io/v1", "ClusterRole", ROLE)
        recorder.server.stop()
        proxy.stop()


def test_the_agent_scores_through_kube_rbac_proxy_with_its_own_token_only_where_bound(
    openshift: Mission, thanos: tuple[RbacProxy, Recorder]
) -> None:
    m = openshift
    proxy, recorder = thanos
    spoke = m.spokes[CLUSTER]
    port = proxy.url.rsplit(":", 1)[1]
    steps: list[tuple[str, float]] = []
    t0 = time.monotonic()

    def step(what: str) -> None:
        steps.append((what, round(time.monotonic() - t0, 1)))
        print(f"[agent token] {what}: {steps[-1][1]} s")

    token = {"AgentTokenDestinations": f"https://127.0.0.1:{port}", "AgentTokenAudience": AUDIENCE}
    m.hub.apply(adc(token))
    use_configs(m, [adc_ref(CLUSTER, ADC)])

    # The hub admin has allowed no destination yet: the manager renders no token (and no agent
    # change), and says which manager flag or chart value the hub admin sets.
    by_default = wait_value(
        lambda: manifest_applied(m),
        lambda c: "--agent-token-destination-allow" in c.get("message", ""),
        timeout=120,
        what="ManifestApplied refusing the ADC's token destination",
    )
    step("the ADC's destination refused by default")
    assert by_default["status"] == "False" and "agentToken.destinationAllow" in by_default["message"]
    assert f"127.0.0.1:{port}" in by_default["message"]

    # The hub admin allows the proxy only.  The ADC's writer adding a server of their own is refused,
    # naming it; the ADC naming the proxy alone is rendered.
    allow_agent_token(m, f"https://127.0.0.1:{port}")
    step("the hub admin allowed the proxy (helm upgrade)")
    m.hub.apply(
        adc(
            {
                **token,
                "AgentTokenDestinations": f"https://127.0.0.1:{port} https://127.0.0.1:{recorder.server.port}",
            }
        )
    )
    own = wait_value(
        lambda: manifest_applied(m),
        lambda c: f"127.0.0.1:{recorder.server.port}" in c.get("message", ""),
        timeout=120,
        what="ManifestApplied refusing the ADC writer's own server",
    )
    step("the ADC writer's own server refused")
    assert own["status"] == "False" and "--agent-token-destination-allow" in own["message"]
    m.hub.apply(adc(token))
    wait_until(
        lambda: manifest_applied(m).get("status") == "True", timeout=120, what="the allowed ADC rendered"
    )
    step("the ADC naming the proxy rendered")
    m.hub.apply(scorer(m, *GOOD, proxy.url))
    m.hub.apply(scorer(m, *EXFIL, recorder.server.url))

    # Without the role the proxy refuses the agent, and the condition says whom and what it lacks.
    denied = wait_value(
        lambda: condition(m, GOOD[1]),
        lambda c: c.get("reason") == "PrometheusAccessDenied",
        timeout=180,
        what="PrometheusAccessDenied on the thanos scorer's AddOnPlacementScore",
    )
    step("403 from kube-rbac-proxy reported")
    assert denied["status"] == "False"
    assert f"refused {AGENT_USER}" in denied["message"] and "'get namespaces'" in denied["message"]
    assert "cluster-monitoring-view" in denied["message"]

    # The author's own server: the agent refuses to send the token there, and nothing arrives.
    refused = wait_value(
        lambda: condition(m, EXFIL[1]),
        lambda c: c.get("reason") == "SecretNotBound",
        timeout=60,
        what="SecretNotBound on the exfiltrating scorer's AddOnPlacementScore",
    )
    step("the token refused for an unbound host")
    assert (
        "AgentTokenDestinations" in refused["message"]
        and f"127.0.0.1:{recorder.server.port}" in refused["message"]
    )
    assert recorder.requests == []

    # The admin binds the platform's monitoring role: the work agent applies the binding, and the
    # agent scores through the proxy once its 30 s cache of the denial has passed.
    m.hub.apply(adc({**token, "AgentMonitoringClusterRole": ROLE}))
    binding = wait_value(
        lambda: spoke.find(*BINDING), lambda b: b is not None, timeout=120, what="the binding"
    )
    step("ClusterRoleBinding applied on cluster2")
    assert binding is not None and binding["roleRef"]["name"] == ROLE
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dynamic-scoring-agent", "namespace": INSTALL_NS}
    ]
    wait_until(lambda: scores(m, GOOD[1]), timeout=150, what="a score read through kube-rbac-proxy")
    step("scored through kube-rbac-proxy")
    assert condition(m, GOOD[1])["status"] == "True"
    assert recorder.requests == []
    print(f"[agent token] steps: {steps}")
