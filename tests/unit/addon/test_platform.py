"""The agent's pod per platform: OpenShift's SCC assigns the user, everywhere else the pod pins it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dynamic_scoring.addon.controllers.lifecycle.deploy import render_fingerprint
from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.render.platform import agent_platform, detected_platform
from dynamic_scoring.kube.jsontypes import JSON
from tests.restricted_v2 import pod_spec, violations
from tests.unit.addon.helpers import adc, b64, by_kind, mca, variables


def cluster(labels: dict[str, str] | None = None, claims: dict[str, str] | None = None) -> JSON:
    obj: JSON = {"metadata": {"name": "cluster1", "labels": labels or {}}}
    if claims:
        obj["status"] = {"clusterClaims": [{"name": k, "value": v} for k, v in claims.items()]}
    return obj


PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
OPENSHIFT = cluster({"vendor": "OpenShift"})
PLAIN = cluster({"vendor": "Kind"})


def pod(platform_variable: str | None = None, managed: JSON | None = None) -> dict[str, Any]:
    config = adc(customizedVariables=variables(Platform=platform_variable)) if platform_variable else None
    rendered = render_agent(mca=mca(), adc=config, cluster=managed)
    return pod_spec(by_kind(rendered.manifests, "Deployment"))


@pytest.mark.parametrize(
    ("managed", "want"),
    [
        (None, "kubernetes"),
        (cluster(), "kubernetes"),
        (PLAIN, "kubernetes"),
        (OPENSHIFT, "openshift"),
        (cluster(claims={"product.open-cluster-management.io": "ROSA"}), "openshift"),
        (cluster(claims={"product.open-cluster-management.io": "OpenShift"}), "openshift"),
        (cluster(claims={"product.open-cluster-management.io": "EKS"}), "kubernetes"),
        (
            cluster({"vendor": "openshift"}),
            "kubernetes",
        ),  # label values are case-sensitive, ACM writes OpenShift
    ],
)
def test_the_platform_is_detected_from_the_vendor_label_or_the_product_claim(
    managed: JSON | None, want: str
) -> None:
    assert detected_platform(managed) == want
    assert agent_platform("auto", managed) == want


def test_an_explicit_setting_wins_over_detection() -> None:
    assert agent_platform("kubernetes", OPENSHIFT) == "kubernetes"
    assert agent_platform("openshift", PLAIN) == "openshift"
    with pytest.raises(ValueError, match="unknown platform"):
        agent_platform("windows", PLAIN)


def test_on_kubernetes_the_pod_pins_the_images_user() -> None:
    for p in (pod(), pod(managed=PLAIN), pod("kubernetes", OPENSHIFT)):
        assert p["securityContext"]["runAsUser"] == 65532
        assert p["securityContext"]["runAsGroup"] == 65532


def test_on_openshift_the_pod_names_no_user_and_keeps_the_rest_of_the_restricted_profile() -> None:
    for p in (pod(managed=OPENSHIFT), pod("openshift", PLAIN), pod("auto", OPENSHIFT)):
        assert p["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        (container,) = p["containers"]
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }


def test_the_openshift_pod_meets_restricted_v2_and_the_kubernetes_one_only_fails_on_its_user() -> None:
    assert violations(pod(managed=OPENSHIFT)) == []
    assert violations(pod(managed=PLAIN)) == [
        "securityContext.runAsUser is set (65532)",
        "securityContext.runAsGroup is set (65532)",
    ]


def test_every_optional_part_of_the_agent_still_meets_restricted_v2() -> None:
    config = adc(
        customizedVariables=variables(
            Platform="openshift",
            OtlpReceiverPort="4318",
            OtlpBearerTokenSecret="otlp-token",
            OtlpTlsSecret="otlp-tls",
            OtlpClientCaSecret="otlp-ca",
        ),
        proxyConfig={"httpsProxy": "http://proxy:3128", "caBundle": b64(PEM)},
    )
    rendered = render_agent(mca=mca(), adc=config, cluster=PLAIN)
    spec = pod_spec(by_kind(rendered.manifests, "Deployment"))
    assert {v["name"] for v in spec["volumes"]} >= {"tmp", "hub-kubeconfig", "proxy-ca", "otlp-tls"}
    assert violations(spec) == []


def test_a_bad_platform_value_is_a_condition_naming_the_variable() -> None:
    with pytest.raises(
        AddonConfigError, match=r"customizedVariables\[Platform\].*auto, kubernetes, openshift"
    ):
        pod("OpenShift4")


def test_the_vendor_label_changes_the_render_fingerprint_only_for_openshift() -> None:
    def fingerprint(managed: JSON) -> bytes:
        return render_fingerprint(mca(), None, managed, "img")

    base = fingerprint(cluster())
    assert fingerprint(PLAIN) == base  # labels other than an OpenShift vendor change nothing
    assert fingerprint(OPENSHIFT) != base
    claimed = copy.deepcopy(cluster(claims={"product.open-cluster-management.io": "ARO"}))
    assert fingerprint(claimed) == fingerprint(OPENSHIFT)
