"""The OTLP receiver guarded end to end: ADC variables -> work -> agent, pushes refused without the token.

The installation is the addon lifecycle story's own fixture (`kubectl apply -k manifests/`,
`clusteradm addon enable` on cluster1 and cluster2, the delivered agents running).  An
AddOnDeploymentConfig for cluster2 turns on the receiver with `OtlpBearerTokenSecret` and
`OtlpNetworkPolicy`; the token Secret is created on cluster2 as its admin would.  The real work
agent applies the NetworkPolicy, the agent restarts with the token file mounted, and an
unauthenticated push to it is answered 401 while the token's push is accepted.  Removing the ADC
reference takes the receiver, its Service and the NetworkPolicy away again.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from e2e.procs import wait_until
from e2e.tests.test_addon_lifecycle import (  # the lifecycle story's installation, reused as is
    ADDON_V1A1,
    AGENT,
    CLUSTERS,
    INSTALL_NS,
    RUNNER_CLUSTER,
    Env,
    adc_ref,
    env,
    status_of,
)

__all__ = ["env"]  # the fixture, imported so this module gets its own installation

NETPOL = ("networking.k8s.io/v1", "NetworkPolicy", "dynamic-scoring-agent-otlp")


def push(port: int, token: str | None) -> int:
    """POST one OTLP JSON gauge point to the agent's receiver; the HTTP status."""
    point = {"timeUnixNano": str(time.time_ns()), "asDouble": 1.0}
    body = {
        "resourceMetrics": [
            {"scopeMetrics": [{"metrics": [{"name": "e2e", "gauge": {"dataPoints": [point]}}]}]}
        ]
    }
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/metrics", data=json.dumps(body).encode(), headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def receiver_port(env: Env, cluster: str) -> int | None:
    """The loopback port the process runner gave the agent's OTLP container port, once it runs."""
    rows = [r for r in env.pods(AGENT, RUNNER_CLUSTER[cluster]) if r["pid"] and r["ready"]]
    for row in rows:
        port = (row.get("ports") or {}).get("4318")
        if port:
            return int(port)
    return None


def test_a_guarded_receiver_refuses_unauthenticated_pushes_and_ships_its_network_policy(env: Env) -> None:
    cluster = "cluster2"
    spoke = env.spokes[cluster]
    wait_until(
        lambda: (
            all(status_of(env.mca(c), "ManifestApplied") == "True" for c in CLUSTERS)
            and env.agent_pod(cluster) is not None
        ),
        timeout=120,
        what="the addon applied on both clusters and cluster2's agent running",
    )
    token = uuid.uuid4().hex
    spoke.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "e2e-otlp-token", "namespace": INSTALL_NS},
            "stringData": {"token": token},
        }
    )
    adc: dict[str, Any] = {
        "apiVersion": ADDON_V1A1,
        "kind": "AddOnDeploymentConfig",
        "metadata": {"name": "e2e-otlp-guarded", "namespace": cluster},
        "spec": {
            "agentInstallNamespace": "",
            "customizedVariables": [
                {"name": "OtlpReceiverPort", "value": "4318"},
                {"name": "OtlpBearerTokenSecret", "value": "e2e-otlp-token"},
                {"name": "OtlpNetworkPolicy", "value": "true"},
            ],
        },
    }
    env.hub.apply(adc)
    env.patch_mca_configs(cluster, [adc_ref(cluster, "e2e-otlp-guarded")])
    try:
        port = wait_until(
            lambda: receiver_port(env, cluster), timeout=120, what="cluster2's agent with the OTLP port"
        )
        # The agent may still be starting its receiver when the runner marks it ready.
        wait_until(lambda: push(port, None) == 401, timeout=30, what="an unauthenticated push refused (401)")
        assert push(port, "not-the-token") == 401
        assert push(port, token) == 200
        policy = wait_until(
            lambda: spoke.find(*NETPOL, INSTALL_NS), timeout=60, what="the NetworkPolicy on cluster2"
        )
        ingress = policy["spec"]["ingress"]
        assert ingress[0]["ports"] == [{"port": 4318, "protocol": "TCP"}]
        assert ingress[0]["from"] == [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}
        ]
    finally:
        env.patch_mca_configs(cluster, None)
        env.hub.delete(ADDON_V1A1, "AddOnDeploymentConfig", "e2e-otlp-guarded", cluster)
        spoke.delete("v1", "Secret", "e2e-otlp-token", INSTALL_NS)
    wait_until(
        lambda: spoke.find(*NETPOL, INSTALL_NS) is None and receiver_port(env, cluster) is None,
        timeout=120,
        what="the NetworkPolicy and the receiver gone with the ADC reference",
    )
