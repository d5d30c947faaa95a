"""The agent rendered with every OTLP access variable, accepted by a real kube-apiserver.

Strict server-side validation of what a managed cluster's work agent would apply: the Deployment
with the pod-IP bind (``$(POD_IP)`` from ``status.podIP``) and the optional Secret volumes, the
Service, and the NetworkPolicy with both selectors.  The hub's apiserver of the local control
plane serves the same built-in APIs as a managed cluster's.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from dynamic_scoring.addon.render.agent import render_agent
from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from tests.unit.addon.helpers import adc, mca, variables


def _objects(text: str) -> list[dict[str, Any]]:
    """kubectl prints one JSON document per created object, one after the other."""
    decoder, out, pos = json.JSONDecoder(), [], 0
    while pos < len(text.rstrip()):
        obj, end = decoder.raw_decode(text, pos)
        out.append(obj)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def test_the_guarded_receiver_passes_strict_server_side_validation(control_plane: ControlPlane) -> None:
    assert control_plane.tools is not None and control_plane.hub is not None
    kubectl = Kubectl(control_plane.tools.kubectl, control_plane.hub.admin_kubeconfig)
    ns = f"ds-otlp-{uuid.uuid4().hex[:6]}"
    rendered = render_agent(
        mca=mca(install_namespace=ns),
        adc=adc(
            customizedVariables=variables(
                OtlpReceiverPort="4318",
                OtlpBearerTokenSecret="otlp-token",
                OtlpTlsSecret="otlp-serving",
                OtlpClientCaSecret="otlp-clients",
                OtlpNetworkPolicy="true",
                OtlpNetworkPolicyNamespaceSelector='{"kubernetes.io/metadata.name": "observability"}',
                OtlpNetworkPolicyPodSelector='{"app.kubernetes.io/name": "otel-collector"}',
            )
        ),
    )
    objects = [m for m in rendered.manifests if m["kind"] in ("Deployment", "Service", "NetworkPolicy")]
    assert sorted(o["kind"] for o in objects) == ["Deployment", "NetworkPolicy", "Service"]
    kubectl.run("create", "namespace", ns)
    try:
        out = kubectl.run(
            "create",
            "--dry-run=server",
            "--validate=strict",
            "-o",
            "json",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        )
        accepted = {item["kind"]: item for item in _objects(out)}
        policy = accepted["NetworkPolicy"]["spec"]
        assert policy["ingress"][0]["from"][0]["podSelector"] == {
            "matchLabels": {"app.kubernetes.io/name": "otel-collector"}
        }
        pod = accepted["Deployment"]["spec"]["template"]["spec"]
        assert {v["name"] for v in pod["volumes"]} >= {"otlp-token", "otlp-tls", "otlp-client-ca"}
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false")
