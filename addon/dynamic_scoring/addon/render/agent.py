"""The agent's manifests for one managed cluster: MCA + ADC + ManagedCluster in, objects out.

Pure: the caller reads the three objects from its caches and gets back the list of objects to put
in the deploy ManifestWork, plus the install namespace to write to the MCA status.  Invalid
configuration raises `AddonConfigError` before anything is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynamic_scoring.addon.config.deployment_config import (
    DeploymentConfig,
    ResourceRule,
    parse_deployment_config,
)
from dynamic_scoring.addon.config.install_namespace import (
    NamespacePlan,
    plan_namespace,
    resolve_install_namespace,
)
from dynamic_scoring.addon.config.variables import DEFAULT_OTLP_NAMESPACE_SELECTOR
from dynamic_scoring.addon.constants import (
    ADDON_NAME,
    AGENT_CONTAINER,
    AGENT_DEPLOYMENT,
    AGENT_SERVICE_ACCOUNT,
    DEFAULT_IMAGE,
    HUB_KUBECONFIG_SECRET,
    SUMMARY_CONFIGMAP,
)
from dynamic_scoring.addon.render.image_allow import allowed_prefixes, check_agent_image
from dynamic_scoring.addon.render.images import resolve_image
from dynamic_scoring.addon.render.platform import Platform, agent_platform
from dynamic_scoring.addon.render.templating import TEMPLATES_DIR, render_objects
from dynamic_scoring.addon.render.token_allow import NOTHING_ALLOWED, AgentTokenAllow, check_agent_token
from dynamic_scoring.kube.jsontypes import JSON

AGENT_TEMPLATES = (
    "agent/namespace.yaml.j2",
    "agent/serviceaccount.yaml.j2",
    "agent/role.yaml.j2",
    "agent/proxy-ca.yaml.j2",
    "agent/deployment.yaml.j2",
    "agent/otlp-service.yaml.j2",
    "agent/otlp-networkpolicy.yaml.j2",
    "agent/monitoring-binding.yaml.j2",
)
HUB_KUBECONFIG_DIR = "/var/run/hub"
PROXY_CA_DIR = "/etc/dynamic-scoring/proxy-ca"
PROXY_CA_CONFIG_MAP = f"{ADDON_NAME}-proxy-ca"
OTLP_TOKEN_DIR = "/etc/dynamic-scoring/otlp-token"
OTLP_TLS_DIR = "/etc/dynamic-scoring/otlp-tls"
OTLP_CLIENT_CA_DIR = "/etc/dynamic-scoring/otlp-client-ca"
AGENT_TOKEN_DIR = "/var/run/secrets/dynamic-scoring/agent-token"
"""Where the agent's projected token for metrics sources is mounted (not the kube-api-access one)."""

# Sized from docs/agent.md: 61 MiB resident with 20 scorers; a 17 MB Prometheus result adds about
# twice its size at peak.  The ADC's resourceRequirements replace these per container.
DEFAULT_RESOURCES: JSON = {
    "requests": {"cpu": "50m", "memory": "128Mi"},
    "limits": {"cpu": "1", "memory": "512Mi"},
}

# kind -> the containerID's kind part, for the workloads a template may render.
_WORKLOAD_PLURALS = {
    "Deployment": "deployments",
    "DaemonSet": "daemonsets",
    "StatefulSet": "statefulsets",
    "ReplicaSet": "replicasets",
    "Job": "jobs",
}


@dataclass(frozen=True)
class AgentRender:
    """The rendered agent for one cluster."""

    cluster_name: str
    namespace: NamespacePlan
    image: str
    manifests: list[JSON]


def template_values(
    cluster_name: str,
    namespace: NamespacePlan,
    config: DeploymentConfig,
    image: str,
    platform: Platform = "kubernetes",
) -> dict[str, Any]:
    """Every value the agent templates use (templates/agent/*.j2 render with StrictUndefined)."""
    v = config.variables
    proxy = config.proxy
    proxy_env = [
        (name, value)
        for name, value in (
            ("HTTP_PROXY", proxy.http_proxy),
            ("HTTPS_PROXY", proxy.https_proxy),
            ("NO_PROXY", proxy.no_proxy),
        )
        if value
    ]
    return {
        "addon_name": ADDON_NAME,
        "cluster_name": cluster_name,
        "namespace": namespace.name,
        "namespace_manifest": namespace.manifest,
        "namespace_orphan": namespace.orphan,
        "service_account": AGENT_SERVICE_ACCOUNT,
        "agent_role": f"{ADDON_NAME}-agent",
        "config_map": SUMMARY_CONFIGMAP,
        "lease_name": ADDON_NAME,
        "deployment_name": AGENT_DEPLOYMENT,
        "container_name": AGENT_CONTAINER,
        "image": image,
        "image_pull_policy": v.image_pull_policy,
        "image_pull_secrets": [{"name": n} for n in v.image_pull_secrets],
        "hub_kubeconfig_secret": HUB_KUBECONFIG_SECRET,
        "hub_kubeconfig_dir": HUB_KUBECONFIG_DIR,
        "metrics_bind_address": v.metrics_bind_address,
        "metrics_port": v.metrics_port,
        "log_level": v.log_level,
        "max_concurrent_cycles": v.max_concurrent_cycles,
        "max_score_bytes": v.max_score_bytes,
        "allow_cidrs": list(v.agent_allow_cidrs),
        "replicas": v.agent_replicas,
        "otlp_port": v.otlp_receiver_port,
        "otlp_service": f"{AGENT_DEPLOYMENT}-otlp",
        "otlp_token_secret": v.otlp_bearer_token_secret,
        "otlp_token_dir": OTLP_TOKEN_DIR,
        "otlp_tls_secret": v.otlp_tls_secret,
        "otlp_tls_dir": OTLP_TLS_DIR,
        "otlp_client_ca_secret": v.otlp_client_ca_secret,
        "otlp_client_ca_dir": OTLP_CLIENT_CA_DIR,
        "otlp_network_policy": v.otlp_network_policy,
        "otlp_allowed_namespaces": dict(
            v.otlp_network_policy_namespace_selector
            if v.otlp_network_policy_namespace_selector is not None
            else DEFAULT_OTLP_NAMESPACE_SELECTOR
        ),
        "otlp_allowed_pods": (
            dict(v.otlp_network_policy_pod_selector)
            if v.otlp_network_policy_pod_selector is not None
            else None
        ),
        "node_selector": config.node_selector or {},
        "tolerations": config.tolerations or [],
        "proxy_env": proxy_env,
        "proxy_ca_bundle": proxy.ca_bundle,
        "proxy_ca_dir": PROXY_CA_DIR,
        "proxy_ca_config_map": PROXY_CA_CONFIG_MAP,
        "resources": DEFAULT_RESOURCES,
        "agent_token_destinations": v.agent_token_destinations,
        "agent_token_scorers": v.agent_token_scorers,
        "agent_token_audience": v.agent_token_audience,
        "agent_token_expiration_seconds": v.agent_token_expiration_seconds,
        "agent_token_dir": AGENT_TOKEN_DIR,
        "monitoring_cluster_role": v.agent_monitoring_cluster_role,
        # One name per install namespace: two installs of the addon on one cluster do not share it.
        "monitoring_binding": f"{ADDON_NAME}-agent-{namespace.name}-monitoring"[:253],
        # OpenShift's SCC assigns the user; anywhere else the pod pins the image's (platform.py)
        "pin_user": platform != "openshift",
    }


def matching_resources(
    rules: tuple[ResourceRule, ...], kind_plural: str, name: str, container: str
) -> JSON | None:
    """The resources of the last rule matching `<kind_plural>:<name>:<container>`, as the framework picks."""
    found = None
    for rule in rules:
        if rule.matches(kind_plural, name, container):
            found = rule.resources
    return found


def apply_resource_rules(manifests: list[JSON], rules: tuple[ResourceRule, ...]) -> None:
    """Replace each workload container's `resources` by the last matching rule's, in place.

    The whole block is replaced, not merged: a rule that lowers only the memory limit must not
    leave a default request above it, which the API server would reject.
    """
    if not rules:
        return
    for obj in manifests:
        plural = _WORKLOAD_PLURALS.get(obj.get("kind", ""))
        if plural is None:
            continue
        pod_spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]:
            resources = matching_resources(rules, plural, obj["metadata"]["name"], container["name"])
            if resources is not None:
                container["resources"] = {k: dict(v) for k, v in resources.items()}


def render_agent(
    *,
    mca: JSON,
    adc: JSON | None,
    cluster: JSON | None = None,
    default_image: str = DEFAULT_IMAGE,
    templates_dir: Path = TEMPLATES_DIR,
    adopt_unlabelled_scores: bool = False,
    agent_image_allow: tuple[str, ...] = (),
    trust_proxy_ca_for_destinations: bool = False,
    agent_token_allow: AgentTokenAllow = NOTHING_ALLOWED,
) -> AgentRender:
    """Render the agent for the cluster of `mca` (its namespace), configured by `adc`.

    Args:
        mca: the ManagedClusterAddOn.
        adc: the AddOnDeploymentConfig its status references (`config.references`), or None.
        cluster: the ManagedCluster, for its image-registries annotation and its platform (``vendor``
            label, product claim; ``dynamic_scoring.addon.render.platform``); None is allowed.
        default_image: the agent image when the ADC sets no `Image` variable.
        templates_dir: where `agent/*.yaml.j2` live.
        adopt_unlabelled_scores: the manager's migration opt-in, passed to the agent as its flag.
        agent_image_allow: repository prefixes the final image may lie under, besides the
            repository of `default_image` (the manager's --agent-image-allow;
            `dynamic_scoring.addon.render.image_allow`).
        trust_proxy_ca_for_destinations: the manager's opt-in for a TLS-intercepting proxy, passed to
            the agent as its flag: the ADC's proxy CA is then trusted for scorers and Prometheus too.
        agent_token_allow: the hub admin's bound on the ADC's token destinations, audience and
            monitoring role (the manager's --agent-token-*-allow and --agent-monitoring-role-allow;
            `dynamic_scoring.addon.render.token_allow`).  The default allows no destination.

    Raises:
        AddonConfigError: the ADC or the MCA's install namespace cannot be applied.
    """
    cluster_name = mca["metadata"]["namespace"]
    config = parse_deployment_config(adc)
    namespace = plan_namespace(resolve_install_namespace(mca, config if adc is not None else None), config)
    configured = config.variables.image or default_image
    image = resolve_image(configured, config.registries, cluster)
    check_agent_image(
        configured=configured,
        image=image,
        image_variable_set=config.variables.image is not None,
        adc_rules=config.registries,
        cluster=cluster,
        prefixes=allowed_prefixes(default_image, agent_image_allow),
    )
    check_agent_token(config.variables, agent_token_allow)
    values = {
        **template_values(
            cluster_name, namespace, config, image, agent_platform(config.variables.platform, cluster)
        ),
        "adopt_unlabelled_scores": adopt_unlabelled_scores,
        "trust_proxy_ca_for_destinations": trust_proxy_ca_for_destinations,
    }
    manifests: list[JSON] = []
    for template in AGENT_TEMPLATES:
        manifests.extend(render_objects(template, values, templates_dir))
    apply_resource_rules(manifests, config.resource_rules)
    return AgentRender(cluster_name=cluster_name, namespace=namespace, image=image, manifests=manifests)
