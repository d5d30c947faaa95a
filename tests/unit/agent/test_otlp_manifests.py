"""The agent's manifests expose the OTLP receiver only when the ADC asks for it."""

from __future__ import annotations

import pytest

from addon.errors import AddonConfigError
from addon.render.agent import render_agent
from tests.unit.addon.helpers import adc, by_kind, mca, variables

pytestmark = pytest.mark.unit


def test_otlp_receiver_port_adds_the_flag_the_container_port_and_a_service() -> None:
    r = render_agent(
        mca=mca(install_namespace="ds-agent"),
        adc=adc(customizedVariables=variables(OtlpReceiverPort="14318")),
    )
    deployment = by_kind(r.manifests, "Deployment")
    [c] = deployment["spec"]["template"]["spec"]["containers"]
    assert "--otlp-bind-address=:14318" in c["args"]
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


@pytest.mark.parametrize("value", ["0", "65536", "4318x", ""])
def test_a_bad_port_names_the_variable(value: str) -> None:
    with pytest.raises(AddonConfigError) as err:
        render_agent(mca=mca(), adc=adc(customizedVariables=variables(OtlpReceiverPort=value)))
    assert err.value.field == "spec.customizedVariables[OtlpReceiverPort]"
