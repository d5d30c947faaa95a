"""An AddOnDeploymentConfig, validated into the settings the agent manifests are rendered with.

The API server's CRD schema already checks the shapes (types, name patterns, lengths); this adds
what the schema cannot know: which customized variables this addon has, that resource quantities
parse, that containerIDs have three parts, that a CA bundle is PEM.  Everything is checked before
anything is rendered, so an invalid config leaves the previous work untouched.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

from dynamic_scoring.addon.config.variables import Variables, parse_variables
from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.kube.jsontypes import JSON

# A Kubernetes resource.Quantity, as its parser accepts it.
_QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i?|[munkMGTPE])?\Z")
_CONTAINER_ID_KINDS = {
    "deployments",
    "daemonsets",
    "statefulsets",
    "replicasets",
    "jobs",
    "cronjobs",
    "pods",
    "*",
}


@dataclass(frozen=True)
class ImageMirror:
    """One `spec.registries[]` rule: replace the `source` prefix by `mirror` (all registries if no source)."""

    mirror: str
    source: str = ""


@dataclass(frozen=True)
class ProxyConfig:
    """`spec.proxyConfig`, with the CA bundle decoded to PEM text."""

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""
    ca_bundle: str = ""


@dataclass(frozen=True)
class ResourceRule:
    """One `spec.resourceRequirements[]` entry: a containerID pattern and the resources to set."""

    container_id: str
    resources: JSON

    def matches(self, kind_plural: str, name: str, container: str) -> bool:
        """Whether `<kind_plural>:<name>:<container>` matches, `*` standing for any non-empty part."""
        return all(
            pattern == "*" or pattern == part
            for pattern, part in zip(
                self.container_id.split(":"), (kind_plural, name, container), strict=True
            )
        ) and all((kind_plural, name, container))


@dataclass(frozen=True)
class DeploymentConfig:
    """The parts of an ADC this addon applies, validated; the empty config changes nothing."""

    node_selector: dict[str, str] | None = None
    tolerations: list[JSON] | None = None
    registries: tuple[ImageMirror, ...] = ()
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    resource_rules: tuple[ResourceRule, ...] = ()
    variables: Variables = field(default_factory=Variables)
    agent_install_namespace: str = ""


def _proxy(spec: JSON) -> ProxyConfig:
    raw = spec.get("proxyConfig") or {}
    ca = ""
    if raw.get("caBundle"):
        try:
            ca = base64.b64decode(raw["caBundle"], validate=True).decode("ascii")
        except (binascii.Error, UnicodeDecodeError):
            raise AddonConfigError("spec.proxyConfig.caBundle", "is not base64-encoded PEM") from None
        if "-----BEGIN CERTIFICATE-----" not in ca:
            raise AddonConfigError("spec.proxyConfig.caBundle", "holds no PEM certificate") from None
    return ProxyConfig(
        http_proxy=raw.get("httpProxy") or "",
        https_proxy=raw.get("httpsProxy") or "",
        no_proxy=raw.get("noProxy") or "",
        ca_bundle=ca,
    )


def _resource_rules(spec: JSON) -> tuple[ResourceRule, ...]:
    rules = []
    for i, item in enumerate(spec.get("resourceRequirements") or []):
        where = f"spec.resourceRequirements[{i}]"
        container_id = item.get("containerID", "")
        parts = container_id.split(":")
        if len(parts) != 3 or not all(parts) or parts[0] not in _CONTAINER_ID_KINDS:
            raise AddonConfigError(
                f"{where}.containerID",
                f"{container_id!r} must be <kind-plural|*>:<name|*>:<container|*>, "
                "e.g. deployments:dynamic-scoring-agent:dynamic-scoring-agent",
            )
        resources = item.get("resources") or {}
        for part in ("requests", "limits"):
            for name, quantity in (resources.get(part) or {}).items():
                if not _QUANTITY.match(str(quantity)):
                    raise AddonConfigError(
                        f"{where}.resources.{part}.{name}", f"{quantity!r} is not a quantity"
                    )
        rules.append(
            ResourceRule(
                container_id=container_id,
                resources={k: dict(v) for k, v in resources.items() if k in ("requests", "limits") and v},
            )
        )
    return tuple(rules)


def parse_deployment_config(adc: JSON | None) -> DeploymentConfig:
    """Validate an AddOnDeploymentConfig object (as read from the API server); None gives the defaults.

    Raises:
        AddonConfigError: naming the first field that cannot be applied.
    """
    if adc is None:
        return DeploymentConfig()
    spec = adc.get("spec") or {}
    placement = spec.get("nodePlacement")
    return DeploymentConfig(
        node_selector=dict(placement.get("nodeSelector") or {}) if placement is not None else None,
        tolerations=list(placement.get("tolerations") or []) if placement is not None else None,
        registries=tuple(
            ImageMirror(mirror=r.get("mirror", ""), source=r.get("source") or "")
            for r in spec.get("registries") or []
        ),
        proxy=_proxy(spec),
        resource_rules=_resource_rules(spec),
        variables=parse_variables(spec.get("customizedVariables")),
        agent_install_namespace=spec.get("agentInstallNamespace") or "",
    )
