"""Where the agent is installed on the managed cluster, and whether that namespace is ours.

The same name must reach three places: the rendered manifests, MCA
`status.namespace` (where the klusterlet writes the hub-kubeconfig Secret and reads the Lease) and
the agent's `--addon-namespace`.  Computing it once, here, is what keeps them equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dynamic_scoring.addon.config.deployment_config import DeploymentConfig
from dynamic_scoring.addon.constants import DEFAULT_INSTALL_NAMESPACE, INSTALL_NAMESPACE_ANNOTATION
from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.kube.jsontypes import JSON

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")

# Namespaces that belong to Kubernetes, OpenShift or OCM itself.  The agent is never installed
# there: its Role (which reads Secrets in its install namespace) would land beside the credentials
# of the control plane (kube-system), of the klusterlet (open-cluster-management-agent: its hub
# kubeconfig and bootstrap Secrets), of the hub's controllers (open-cluster-management-hub) or of
# the platform (openshift-*).  `default` is refused too: everything created without a namespace
# lands there, the addon can never own it, and no agent needs it.  The shared addon namespace
# `open-cluster-management-agent-addon` (the default) is the one OCM name that is allowed: OCM made
# it for addon agents.  Such a namespace is also never created or deleted (the work agent would
# take ownership of it), which `plan_namespace` keeps for callers that bypass the refusal.
_SYSTEM_NAMESPACES = frozenset({"default", "openshift", "open-cluster-management"})
_SYSTEM_PREFIXES = ("kube-", "openshift-", "open-cluster-management-")
_ALLOWED_SHARED = frozenset({DEFAULT_INSTALL_NAMESPACE})


def is_system_namespace(namespace: str) -> bool:
    """Whether `namespace` belongs to Kubernetes, OpenShift or OCM (see `_SYSTEM_NAMESPACES`).

    `kube-*`, `openshift`, `openshift-*`, `default`, `open-cluster-management` and every
    `open-cluster-management-*` except the shared addon namespace `open-cluster-management-agent-addon`.
    """
    if namespace in _ALLOWED_SHARED:
        return False
    return namespace in _SYSTEM_NAMESPACES or namespace.startswith(_SYSTEM_PREFIXES)


class InstallNamespaceRefusedError(AddonConfigError):
    """The install namespace is a system namespace: the agent is not installed there.

    A subclass so that the deploy controller can give it its own Event reason; everything that
    handles an `AddonConfigError` (keep the last good work, report on `ManifestApplied`) applies.
    """

    def __init__(self, field: str, namespace: str) -> None:
        super().__init__(
            field,
            f"namespace {namespace!r} belongs to Kubernetes, OpenShift or OCM, and the agent is not "
            "installed there (its ServiceAccount, Role and Secrets would sit beside the platform's "
            f"credentials); set {field} to a namespace of your own, or leave it empty for "
            f"{DEFAULT_INSTALL_NAMESPACE!r}",
        )
        self.namespace = namespace


def resolve_install_namespace(mca: JSON, config: DeploymentConfig | None) -> str:
    """The install namespace: the ADC's `agentInstallNamespace`, else the MCA's, else the default.

    `config` is the ADC referenced by the MCA (None when none is).  The ADC CRD defaults its field
    to `open-cluster-management-agent-addon`, so a referenced ADC wins over `clusteradm
    --namespace` unless it sets the field to "" explicitly: that is the framework's rule, kept.

    Raises:
        AddonConfigError: the chosen name is not a DNS label.
        InstallNamespaceRefusedError: the chosen name is a system namespace (`is_system_namespace`).
    """
    if config is not None and config.agent_install_namespace:
        namespace, where = config.agent_install_namespace, "spec.agentInstallNamespace"
    else:
        spec_ns = (mca.get("spec") or {}).get("installNamespace") or ""
        annotated = ((mca.get("metadata") or {}).get("annotations") or {}).get(
            INSTALL_NAMESPACE_ANNOTATION, ""
        )
        namespace = spec_ns or annotated or DEFAULT_INSTALL_NAMESPACE
        # v1alpha1's field; a v1beta1 read (what `kubectl get mca` shows on a cluster-manager hub)
        # carries the same value as an annotation, so name whichever the value came from
        where = (
            "ManagedClusterAddOn spec.installNamespace"
            if spec_ns or not annotated
            else f"ManagedClusterAddOn annotation {INSTALL_NAMESPACE_ANNOTATION}"
        )
    if not _DNS_LABEL.match(namespace):
        raise AddonConfigError(where, f"{namespace!r} is not a valid namespace name")
    if is_system_namespace(namespace):
        raise InstallNamespaceRefusedError(where, namespace)
    return namespace


def install_namespace_for(mca: JSON, adc: JSON | None) -> str:
    """`resolve_install_namespace` reading only the ADC's `agentInstallNamespace`.

    For MCA `status.namespace`: registration must not stall because some other ADC field is
    invalid (that problem is reported on `ManifestApplied`), and the value must still be the one
    the manifests use once the ADC is fixed.

    Raises:
        AddonConfigError: the chosen name is not a DNS label or is a system namespace.
    """
    if adc is None:
        return resolve_install_namespace(mca, None)
    value = (adc.get("spec") or {}).get("agentInstallNamespace") or ""
    return resolve_install_namespace(mca, DeploymentConfig(agent_install_namespace=value))


@dataclass(frozen=True)
class NamespacePlan:
    """What the work does with the install namespace.

    Attributes:
        name: the namespace.
        manifest: whether the work carries a Namespace object (so the work agent creates it if
            missing; the klusterlet needs it to exist before it can write the hub kubeconfig).
        orphan: whether that object carries the deletion-orphan annotation, so that disabling the
            addon leaves the namespace (and anything else in it) where it is.
    """

    name: str
    manifest: bool
    orphan: bool


def plan_namespace(namespace: str, config: DeploymentConfig) -> NamespacePlan:
    """Decide whether the namespace is the addon's to create and to delete.

    The hub cannot see whether a namespace already existed on the managed cluster, and the work
    agent adopts an existing object it applies, deleting it with the work.  So the safe default is:
    create it when missing, never delete it (orphan).  Only a user who says the namespace is the
    addon's own (`DeleteInstallNamespace=true`) gets it deleted on disable, and never the shared
    default namespace or a system one.

    Raises:
        AddonConfigError: `DeleteInstallNamespace=true` for a namespace that is not the addon's to delete.
    """
    system = is_system_namespace(namespace)
    delete = config.variables.delete_install_namespace
    if delete and (system or namespace == DEFAULT_INSTALL_NAMESPACE):
        raise AddonConfigError(
            "spec.customizedVariables[DeleteInstallNamespace]",
            f"namespace {namespace!r} is shared with other components and is never deleted by this addon",
        )
    if system:
        return NamespacePlan(name=namespace, manifest=False, orphan=True)
    return NamespacePlan(name=namespace, manifest=True, orphan=not delete)
