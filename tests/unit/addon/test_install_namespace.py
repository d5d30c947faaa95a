from __future__ import annotations

import pytest

from dynamic_scoring.addon.config.deployment_config import DeploymentConfig, parse_deployment_config
from dynamic_scoring.addon.config.install_namespace import (
    InstallNamespaceRefusedError,
    NamespacePlan,
    install_namespace_for,
    is_system_namespace,
    plan_namespace,
    resolve_install_namespace,
)
from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.work.builder import build_deploy_works
from tests.unit.addon.helpers import adc, mca, variables

DEFAULT = "open-cluster-management-agent-addon"


def test_default_when_nothing_says_otherwise() -> None:
    assert resolve_install_namespace(mca(), None) == DEFAULT


def test_mca_install_namespace() -> None:
    assert resolve_install_namespace(mca(install_namespace="team-a"), None) == "team-a"


def test_v1beta1_annotation_when_spec_is_empty() -> None:
    obj = mca()
    obj["metadata"]["annotations"] = {"addon.open-cluster-management.io/v1alpha1-install-namespace": "team-b"}
    assert resolve_install_namespace(obj, None) == "team-b"


def test_adc_wins_over_mca() -> None:
    config = parse_deployment_config(adc(agentInstallNamespace="from-adc"))
    assert resolve_install_namespace(mca(install_namespace="team-a"), config) == "from-adc"


def test_empty_adc_value_defers_to_mca() -> None:
    config = parse_deployment_config(adc(agentInstallNamespace=""))
    assert resolve_install_namespace(mca(install_namespace="team-a"), config) == "team-a"


def test_invalid_namespace_is_reported() -> None:
    with pytest.raises(AddonConfigError, match="Bad_NS"):
        resolve_install_namespace(mca(install_namespace="Bad_NS"), None)


def test_status_namespace_and_manifests_agree() -> None:
    r = render_agent(mca=mca(install_namespace="team-a"), adc=adc(agentInstallNamespace="from-adc"))
    assert r.namespace.name == "from-adc"
    namespaced = [m for m in r.manifests if m["kind"] != "Namespace"]
    assert {m["metadata"]["namespace"] for m in namespaced} == {"from-adc"}
    deployment = next(m for m in r.manifests if m["kind"] == "Deployment")
    assert "--addon-namespace=from-adc" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_default_namespace_is_created_but_never_deleted() -> None:
    assert plan_namespace(DEFAULT, DeploymentConfig()) == NamespacePlan(DEFAULT, manifest=True, orphan=True)


def test_custom_namespace_is_orphaned_unless_the_user_gives_it_to_the_addon() -> None:
    assert plan_namespace("scoring", DeploymentConfig()).orphan is True
    owned = parse_deployment_config(adc(customizedVariables=variables(DeleteInstallNamespace="true")))
    assert plan_namespace("scoring", owned) == NamespacePlan("scoring", manifest=True, orphan=False)


SYSTEM = [
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "openshift",
    "openshift-monitoring",
    "open-cluster-management",
    "open-cluster-management-agent",
    "open-cluster-management-hub",
    "open-cluster-management-observability",
]


@pytest.mark.parametrize("namespace", SYSTEM)
def test_system_namespaces_are_never_in_the_work(namespace: str) -> None:
    plan = plan_namespace(namespace, DeploymentConfig())
    assert plan.manifest is False


@pytest.mark.parametrize("namespace", SYSTEM)
def test_system_namespaces_are_refused_for_installation_from_the_mca(namespace: str) -> None:
    with pytest.raises(InstallNamespaceRefusedError) as caught:
        render_agent(mca=mca(install_namespace=namespace), adc=None)
    message = str(caught.value)
    assert message.startswith("ManagedClusterAddOn spec.installNamespace: ")
    assert repr(namespace) in message and repr(DEFAULT) in message
    with pytest.raises(AddonConfigError):
        install_namespace_for(mca(install_namespace=namespace), None)


@pytest.mark.parametrize("namespace", ["kube-system", "open-cluster-management-agent"])
def test_system_namespaces_are_refused_for_installation_from_the_adc(namespace: str) -> None:
    with pytest.raises(InstallNamespaceRefusedError, match=r"spec\.agentInstallNamespace") as caught:
        render_agent(mca=mca(install_namespace="team-a"), adc=adc(agentInstallNamespace=namespace))
    assert caught.value.namespace == namespace


@pytest.mark.parametrize(
    "namespace", [DEFAULT, "team-a", "kubeflow", "openshiftish", "dynamic-scoring", "ocm-addons"]
)
def test_the_shared_addon_namespace_and_user_namespaces_stay_allowed(namespace: str) -> None:
    assert not is_system_namespace(namespace)
    assert render_agent(mca=mca(install_namespace=namespace), adc=None).namespace.name == namespace


@pytest.mark.parametrize("namespace", [DEFAULT, "kube-system"])
def test_shared_namespaces_cannot_be_given_to_the_addon(namespace: str) -> None:
    owned = parse_deployment_config(adc(customizedVariables=variables(DeleteInstallNamespace="true")))
    with pytest.raises(AddonConfigError, match="DeleteInstallNamespace"):
        plan_namespace(namespace, owned)


def test_orphaned_namespace_is_in_the_work_delete_option() -> None:
    r = render_agent(mca=mca(install_namespace="scoring"), adc=None)
    (namespace,) = [m for m in r.manifests if m["kind"] == "Namespace"]
    assert "addon.open-cluster-management.io/deletion-orphan" in namespace["metadata"]["annotations"]
    (work,) = build_deploy_works(mca(install_namespace="scoring"), r.manifests).works
    assert work["spec"]["deleteOption"] == {
        "propagationPolicy": "SelectivelyOrphan",
        "selectivelyOrphans": {
            "orphaningRules": [{"group": "", "resource": "namespaces", "name": "scoring"}]
        },
    }


def test_owned_namespace_is_deleted_with_the_work() -> None:
    config = adc(customizedVariables=variables(DeleteInstallNamespace="true"))
    r = render_agent(mca=mca(install_namespace="scoring"), adc=config)
    (namespace,) = [m for m in r.manifests if m["kind"] == "Namespace"]
    assert "annotations" not in namespace["metadata"]
    (work,) = build_deploy_works(mca(), r.manifests).works
    assert "deleteOption" not in work["spec"]


def test_status_namespace_ignores_unrelated_invalid_adc_fields() -> None:
    broken = adc(agentInstallNamespace="from-adc", customizedVariables=variables(LogLevel="loud"))
    with pytest.raises(AddonConfigError):
        render_agent(mca=mca(), adc=broken)
    assert install_namespace_for(mca(install_namespace="team-a"), broken) == "from-adc"
    assert install_namespace_for(mca(install_namespace="team-a"), adc()) == "team-a"
    assert install_namespace_for(mca(install_namespace="team-a"), None) == "team-a"


def test_a_refused_namespace_from_the_v1beta1_annotation_names_the_annotation() -> None:
    """Where the value came from the annotation (a v1beta1 write), the message must not send the
    user to a v1alpha1 field that `kubectl get mca` does not show them."""
    addon = mca()
    addon["metadata"]["annotations"] = {
        "addon.open-cluster-management.io/v1alpha1-install-namespace": "kube-system"
    }
    with pytest.raises(InstallNamespaceRefusedError) as caught:
        resolve_install_namespace(addon, None)
    assert str(caught.value).startswith(
        "ManagedClusterAddOn annotation addon.open-cluster-management.io/v1alpha1-install-namespace: "
    )
