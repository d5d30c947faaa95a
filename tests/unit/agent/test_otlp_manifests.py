"""The agent's manifests expose the OTLP receiver only when the ADC asks for it, and guard it as asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.runtime.bind_address import parse_bind_address
from tests.unit.addon.helpers import adc, by_kind, mca, variables


def test_otlp_receiver_port_adds_the_flag_the_container_port_and_a_service() -> None:
    r = render_agent(
        mca=mca(install_namespace="ds-agent"),
        adc=adc(customizedVariables=variables(OtlpReceiverPort="14318")),
    )
    deployment = by_kind(r.manifests, "Deployment")
    [c] = deployment["spec"]["template"]["spec"]["containers"]
    # Bound to the pod's own IP (expanded by the kubelet from the downward API), not 0.0.0.0.
    assert "--otlp-bind-address=$(POD_IP):14318" in c["args"]
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in c["env"]
    assert {"name": "otlp-http", "containerPort": 14318, "protocol": "TCP"} in c["ports"]
    service = by_kind(r.manifests, "Service")
    assert service["metadata"] == {
        "name": "dynamic-scoring-agent-otlp",
        "namespace": "ds-agent",
        "labels": {
            "app.kubernetes.io/name": "dynamic-scoring-agent",
            "app.kubernetes.io/part-of": "dynamic-scoring",
        },
    }
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [
        {"name": "otlp-http", "port": 4318, "targetPort": "otlp-http", "protocol": "TCP"}
    ]


def test_without_the_variable_there_is_no_receiver_port_or_service() -> None:
    r = render_agent(mca=mca(), adc=None)
    assert not [m for m in r.manifests if m["kind"] == "Service"]
    [c] = by_kind(r.manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in c["args"] if a.startswith("--otlp")]
    assert [p["name"] for p in c["ports"]] == ["metrics"]
    assert [e["name"] for e in c["env"]] == ["POD_NAMESPACE"]
    assert not [m for m in r.manifests if m["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize("value", ["0", "65536", "4318x", ""])
def test_a_bad_port_names_the_variable(value: str) -> None:
    with pytest.raises(AddonConfigError) as err:
        render_agent(mca=mca(), adc=adc(customizedVariables=variables(OtlpReceiverPort=value)))
    assert err.value.field == "spec.customizedVariables[OtlpReceiverPort]"


def _agent(**values: str) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    r = render_agent(mca=mca(install_namespace="ds-agent"), adc=adc(customizedVariables=variables(**values)))
    pod = by_kind(r.manifests, "Deployment")["spec"]["template"]["spec"]
    [c] = pod["containers"]
    return pod, c, r.manifests


def test_token_and_tls_secrets_are_mounted_optionally_and_passed_as_files() -> None:
    pod, c, _ = _agent(
        OtlpReceiverPort="4318",
        OtlpBearerTokenSecret="otlp-token",
        OtlpTlsSecret="otlp-serving",
        OtlpClientCaSecret="otlp-clients",
    )
    assert [a for a in c["args"] if a.startswith("--otlp")] == [
        "--otlp-bind-address=$(POD_IP):4318",
        "--otlp-bearer-token-file=/etc/dynamic-scoring/otlp-token/token",
        "--otlp-tls-cert-file=/etc/dynamic-scoring/otlp-tls/tls.crt",
        "--otlp-tls-key-file=/etc/dynamic-scoring/otlp-tls/tls.key",
        "--otlp-client-ca-file=/etc/dynamic-scoring/otlp-client-ca/ca.crt",
    ]
    volumes = {v["name"]: v for v in pod["volumes"]}
    # Only the named keys, and optional: a missing Secret leaves the receiver refusing, the agent running.
    assert volumes["otlp-token"]["secret"] == {
        "secretName": "otlp-token",
        "optional": True,
        "items": [{"key": "token", "path": "token"}],
    }
    assert volumes["otlp-tls"]["secret"]["items"] == [
        {"key": "tls.crt", "path": "tls.crt"},
        {"key": "tls.key", "path": "tls.key"},
    ]
    assert volumes["otlp-client-ca"]["secret"]["secretName"] == "otlp-clients"
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["otlp-token"] == {
        "name": "otlp-token",
        "mountPath": "/etc/dynamic-scoring/otlp-token",
        "readOnly": True,
    }
    assert mounts["otlp-tls"]["mountPath"] == "/etc/dynamic-scoring/otlp-tls"


def test_the_network_policy_admits_the_collector_namespace_by_default_and_keeps_metrics_open() -> None:
    _, _, manifests = _agent(OtlpReceiverPort="14318", OtlpNetworkPolicy="true")
    policy = by_kind(manifests, "NetworkPolicy")
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    assert policy["metadata"]["name"] == "dynamic-scoring-agent-otlp"
    assert policy["metadata"]["namespace"] == "ds-agent"
    deployment = by_kind(manifests, "Deployment")
    assert policy["spec"]["podSelector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {
            "ports": [{"port": 14318, "protocol": "TCP"}],
            "from": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}
            ],
        },
        {"ports": [{"port": 8080, "protocol": "TCP"}]},
    ]


def test_the_network_policy_selectors_come_from_the_variables() -> None:
    _, _, manifests = _agent(
        OtlpReceiverPort="4318",
        OtlpNetworkPolicy="true",
        OtlpNetworkPolicyNamespaceSelector='{"team": "obs", "example.com/tier": "collectors"}',
        OtlpNetworkPolicyPodSelector='{"app.kubernetes.io/name": "otel-collector"}',
        MetricsBindAddress=":9090",
    )
    policy = by_kind(manifests, "NetworkPolicy")
    assert policy["spec"]["ingress"] == [
        {
            "ports": [{"port": 4318, "protocol": "TCP"}],
            "from": [
                {
                    "namespaceSelector": {"matchLabels": {"example.com/tier": "collectors", "team": "obs"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "otel-collector"}},
                }
            ],
        },
        {"ports": [{"port": 9090, "protocol": "TCP"}]},
    ]


def test_the_network_policy_is_off_unless_asked_for() -> None:
    _, _, manifests = _agent(OtlpReceiverPort="4318", OtlpNetworkPolicy="false")
    assert not [m for m in manifests if m["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize(
    ("values", "variable", "message"),
    [
        ({"OtlpBearerTokenSecret": "t"}, "OtlpBearerTokenSecret", "needs OtlpReceiverPort"),
        (
            {"OtlpReceiverPort": "4318", "OtlpClientCaSecret": "ca"},
            "OtlpClientCaSecret",
            "needs OtlpTlsSecret",
        ),
        ({"OtlpNetworkPolicy": "true"}, "OtlpNetworkPolicy", "needs OtlpReceiverPort"),
        (
            {"OtlpReceiverPort": "4318", "OtlpNetworkPolicyPodSelector": '{"a": "b"}'},
            "OtlpNetworkPolicyPodSelector",
            "needs OtlpNetworkPolicy",
        ),
        ({"OtlpReceiverPort": "4318", "OtlpTlsSecret": "Not_A_Name"}, "OtlpTlsSecret", "name of a Secret"),
        ({"OtlpReceiverPort": "4318", "OtlpNetworkPolicy": "yes"}, "OtlpNetworkPolicy", '"true" or "false"'),
        (
            {
                "OtlpReceiverPort": "4318",
                "OtlpNetworkPolicy": "true",
                "OtlpNetworkPolicyNamespaceSelector": "x=y",
            },
            "OtlpNetworkPolicyNamespaceSelector",
            "must be a JSON object of labels",
        ),
        (
            {
                "OtlpReceiverPort": "4318",
                "OtlpNetworkPolicy": "true",
                "OtlpNetworkPolicyNamespaceSelector": '{"bad key!": "x"}',
            },
            "OtlpNetworkPolicyNamespaceSelector",
            "'bad key!' is not a label key",
        ),
        (
            {
                "OtlpReceiverPort": "4318",
                "OtlpNetworkPolicy": "true",
                "OtlpNetworkPolicyPodSelector": '{"app": "-x"}',
            },
            "OtlpNetworkPolicyPodSelector",
            "'-x' is not a label value",
        ),
        (
            {
                "OtlpReceiverPort": "4318",
                "OtlpNetworkPolicy": "true",
                "OtlpNetworkPolicyPodSelector": '["a"]',
            },
            "OtlpNetworkPolicyPodSelector",
            "must be a JSON object of labels",
        ),
    ],
)
def test_bad_or_incomplete_otlp_variables_name_the_variable(
    values: dict[str, str], variable: str, message: str
) -> None:
    with pytest.raises(AddonConfigError) as err:
        render_agent(mca=mca(), adc=adc(customizedVariables=variables(**values)))
    assert err.value.field == f"spec.customizedVariables[{variable}]"
    assert message in str(err.value)


def test_the_secured_sample_adc_renders_a_token_and_a_network_policy() -> None:
    path = Path(__file__).resolve().parents[3] / "samples" / "opentelemetry" / "adc-otlp-secured.yaml"
    [sample] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    r = render_agent(mca=mca(), adc=sample)
    [c] = by_kind(r.manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--otlp-bearer-token-file=/etc/dynamic-scoring/otlp-token/token" in c["args"]
    policy = by_kind(r.manifests, "NetworkPolicy")
    assert policy["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}
    ]


@pytest.mark.parametrize(
    ("pod_ip", "host"), [("10.244.1.7", "10.244.1.7"), ("fd00:10:244::7", "fd00:10:244::7")]
)
def test_the_rendered_bind_address_parses_for_ipv4_and_ipv6_pod_ips(pod_ip: str, host: str) -> None:
    _, c, _ = _agent(OtlpReceiverPort="4318")
    [arg] = [a for a in c["args"] if a.startswith("--otlp-bind-address=")]
    # The kubelet expands $(POD_IP) from the env var; the agent then parses what it got.
    expanded = arg.removeprefix("--otlp-bind-address=").replace("$(POD_IP)", pod_ip)
    assert parse_bind_address(expanded) == (host, 4318)
