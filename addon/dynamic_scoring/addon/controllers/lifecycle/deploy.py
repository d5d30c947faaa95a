"""E. Agent delivery: render the agent for each MCA and keep its deploy ManifestWork(s) equal to it.

Preconditions are the framework's: the MCA has a `RegistrationApplied`
condition (any status), its ManagedCluster exists, neither is being deleted, and a referenced
AddOnDeploymentConfig has its spec hash.  Then: render (templates + ADC), build the works
(`addon-dynamic-scoring-deploy-<i>`, one unless over 409,600 bytes), create or merge-patch them
on difference, delete deploy works no longer needed, and mirror the works' `Applied` into
`ManifestApplied`.

What the user got wrong (an ADC that does not exist, one that cannot be applied, an install
namespace that is not a name or is a system namespace such as `kube-system`) becomes
`ManifestApplied=False/ManifestWorkApplyFailed` with the reason in the message, plus one Warning
Event, and the last good work stays as it is (for a new MCA: no work is created).  OCM's
`Progressing` and the klusterlet's `Available` are never written here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from dynamic_scoring.addon.config.install_namespace import InstallNamespaceRefusedError
from dynamic_scoring.addon.constants import ADDON_NAME, ADDON_NAME_LABEL, DEFAULT_IMAGE
from dynamic_scoring.addon.controllers.lifecycle.inputs import (
    Caches,
    desired_config,
    digest,
    every_addon,
    in_cluster_namespace,
    of_cluster,
    referencing,
)
from dynamic_scoring.addon.controllers.notices import Notices
from dynamic_scoring.addon.controllers.verified import Verified, Versions
from dynamic_scoring.addon.errors import AddonConfigError, TemplatesUnavailableError, WorkTooLargeError
from dynamic_scoring.addon.registration.status import REGISTRATION_APPLIED, manifest_applied_patch
from dynamic_scoring.addon.render.agent import render_agent
from dynamic_scoring.addon.render.image_allow import AgentImageNotAllowedError
from dynamic_scoring.addon.render.platform import detected_platform
from dynamic_scoring.addon.render.token_allow import (
    NOTHING_ALLOWED,
    AgentTokenAllow,
    AgentTokenNotAllowedError,
)
from dynamic_scoring.addon.work.builder import build_deploy_works, manifest_applied, work_index
from dynamic_scoring.kube.api import KubeError
from dynamic_scoring.kube.conditions import find_condition
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import (
    MANAGED_CLUSTER_ADDONS,
    MANIFEST_WORKS,
    object_key,
    resource_version,
)
from dynamic_scoring.kube.writes import Writer, labelled

log = logging.getLogger(__name__)

NAME = "deploy"
OURS = labelled({ADDON_NAME_LABEL: ADDON_NAME})
"""A deploy work we may patch or delete: labelled as `build_deploy_works` labels it."""
APPLY_FAILED = "ManifestWorkApplyFailed"
INSTALL_NAMESPACE_REFUSED = "InstallNamespaceNotAllowed"
TEMPLATES_UNAVAILABLE = "AgentTemplatesUnavailable"
AGENT_IMAGE_NOT_ALLOWED = "AgentImageNotAllowed"
AGENT_TOKEN_NOT_ALLOWED = "AgentTokenNotAllowed"


def _deleting(obj: JSON | None) -> bool:
    return obj is not None and bool(obj.get("metadata", {}).get("deletionTimestamp"))


def _reason(exc: Exception) -> str:
    """The Event reason for a render that cannot be applied."""
    if isinstance(exc, InstallNamespaceRefusedError):
        return INSTALL_NAMESPACE_REFUSED
    if isinstance(exc, TemplatesUnavailableError):
        return TEMPLATES_UNAVAILABLE
    if isinstance(exc, AgentImageNotAllowedError):
        return AGENT_IMAGE_NOT_ALLOWED
    if isinstance(exc, AgentTokenNotAllowedError):
        return AGENT_TOKEN_NOT_ALLOWED
    return "InvalidAddOnDeploymentConfig" if isinstance(exc, AddonConfigError) else "WorkTooLarge"


def _where(exc: Exception, ref: str | None) -> str:
    """`AddOnDeploymentConfig <ref>: ` when the problem is in the ADC, not in the MCA's own fields."""
    if isinstance(exc, TemplatesUnavailableError):
        return ""  # the manager's own installation, whatever the config says
    # a field of the MCA, or the ManagedCluster's image-registries annotation: not in the ADC
    if not ref or (isinstance(exc, AddonConfigError) and exc.field.startswith("ManagedCluster")):
        return ""
    return f"AddOnDeploymentConfig {ref}: "


def render_fingerprint(
    mca: JSON,
    adc: JSON | None,
    cluster: JSON,
    image: str,
    adopt: bool = False,
    image_allow: tuple[str, ...] = (),
    trust_proxy_ca: bool = False,
    token_allow: AgentTokenAllow = NOTHING_ALLOWED,
) -> bytes:
    """A digest of everything the agent's works are built from (`render_agent`, `build_deploy_works`).

    The MCA's identity, spec, annotations and config references; the ADC's identity and version;
    the cluster's annotations (image mirrors) and detected platform; the manager's agent image,
    adoption opt-in, image allow-list, proxy-CA opt-in and agent-token bound (a changed allow-list
    or bound may admit or refuse the image or the token).  Its conditions, which OCM, the klusterlet
    and we rewrite all the time, are not among them.
    """
    meta = mca.get("metadata") or {}
    adc_meta = (adc or {}).get("metadata") or {}
    inputs = [
        meta.get("uid"),
        meta.get("name"),
        meta.get("annotations"),
        mca.get("spec"),
        (mca.get("status") or {}).get("configReferences"),
        adc_meta.get("uid"),
        adc_meta.get("resourceVersion"),
        ((cluster.get("metadata") or {}).get("annotations")),
        # the cluster's platform (vendor label, product claim) decides the pod's user; absent on
        # Kubernetes, so existing fingerprints are unchanged
        *([{"platform": "openshift"}] if detected_platform(cluster) == "openshift" else []),
        image,
        *([True] if adopt else []),  # absent when off, so existing fingerprints are unchanged
        *([{"imageAllow": list(image_allow)}] if image_allow else []),  # likewise
        *([{"trustProxyCA": True}] if trust_proxy_ca else []),  # likewise
        *([bound] if (bound := token_allow.fingerprint()) is not None else []),  # likewise
    ]
    return digest(inputs)


def _versions(works: list[JSON]) -> Versions:
    """(name, resourceVersion) of the deploy works among `works`, sorted."""
    return tuple(sorted((str(w["metadata"]["name"]), resource_version(w)) for w in _deploy_works(works)))


def _deploy_works(works: list[JSON]) -> list[JSON]:
    """The numbered deploy works among `works` (the namespace also holds the config work)."""
    return [w for w in works if work_index(str(w["metadata"]["name"])) is not None]


@dataclass(frozen=True)
class AgentRenderOptions:
    """The manager's options that shape every cluster's agent (its flags of the same names)."""

    agent_image: str = DEFAULT_IMAGE
    adopt_unlabelled_scores: bool = False
    agent_image_allow: tuple[str, ...] = ()
    trust_proxy_ca_for_destinations: bool = False
    agent_token_allow: AgentTokenAllow = NOTHING_ALLOWED


class Deploy:
    """The reconcile, keyed by MCA: render the agent, keep its deploy works equal, mirror `Applied`."""

    def __init__(
        self,
        caches: Caches,
        writer: Writer,
        options: AgentRenderOptions = AgentRenderOptions(),
        *,
        addon_name: str = ADDON_NAME,
    ) -> None:
        self.caches = caches
        self.writer = writer
        self.options = options
        self.addon_name = addon_name
        self.notices = Notices(writer)
        # MCA key -> the render fingerprint and the deploy works' versions when they last matched
        self.verified = Verified()

    def set_applied(self, mca: JSON, applied: tuple[str, str, str] | None) -> None:
        """Mirror the works' `Applied` (or our refusal) into the MCA's `ManifestApplied`."""
        namespace = mca["metadata"]["namespace"]

        def compute(fresh: JSON) -> JSON | None:
            return manifest_applied_patch(fresh, applied)

        if compute(mca) is not None:
            self.writer.patch_status(MANAGED_CLUSTER_ADDONS, namespace, self.addon_name, compute, current=mca)

    def refuse(self, key: str, mca: JSON, reason: str, message: str) -> None:
        """Report a problem the user must fix; the existing works are left as they are."""
        self.set_applied(mca, ("False", APPLY_FAILED, message))
        self.notices.warn(key, mca, reason, message)

    def reconcile(self, key: str) -> Result | None:
        """Deliver the agent of one MCA (see the module docstring)."""
        caches = self.caches
        mca = caches.addons.get(key)
        if mca is None:
            self.verified.forget(key)
            return None
        cluster_name = mca["metadata"]["namespace"]
        cluster = caches.clusters.get(cluster_name)
        if (
            cluster is None
            or find_condition((mca.get("status") or {}).get("conditions"), REGISTRATION_APPLIED) is None
        ):
            return None
        if _deleting(mca) or _deleting(cluster):
            return None  # no pre-delete hook: the works are left to garbage collection
        lookup = desired_config(mca, caches.configs, caches.cma.get(mca["metadata"]["name"]))
        if lookup.missing:
            self.refuse(
                key,
                mca,
                "AddOnDeploymentConfigNotFound",
                f"failed to get manifest from agent interface: AddOnDeploymentConfig {lookup.ref} not found",
            )
            return None
        if lookup.pending:
            return None  # the hash fillers and OCM are catching up; their status write wakes us
        existing = caches.works.list(cluster_name)
        o = self.options
        fingerprint = render_fingerprint(
            mca,
            lookup.adc,
            cluster,
            o.agent_image,
            o.adopt_unlabelled_scores,
            o.agent_image_allow,
            o.trust_proxy_ca_for_destinations,
            o.agent_token_allow,
        )
        # every deploy work in the namespace, so that an extra one appearing is noticed too
        if self.verified.holds(key, fingerprint, lambda _known: _versions(existing)):
            self.notices.clear(key)
            self.set_applied(mca, manifest_applied(_deploy_works(existing)))
            return None
        try:
            rendered = render_agent(
                mca=mca,
                adc=lookup.adc,
                cluster=cluster,
                default_image=o.agent_image,
                adopt_unlabelled_scores=o.adopt_unlabelled_scores,
                agent_image_allow=o.agent_image_allow,
                trust_proxy_ca_for_destinations=o.trust_proxy_ca_for_destinations,
                agent_token_allow=o.agent_token_allow,
            )
            plan = build_deploy_works(mca, rendered.manifests, existing)
        except (AddonConfigError, WorkTooLargeError, TemplatesUnavailableError) as exc:
            self.refuse(
                key,
                mca,
                _reason(exc),
                f"failed to get manifest from agent interface: {_where(exc, lookup.ref)}{exc}",
            )
            return None
        works: list[JSON] = []
        try:
            for desired in plan.works:
                works.append(
                    self.writer.ensure(
                        MANIFEST_WORKS, desired, caches.works.get(object_key(desired)), owns=OURS
                    )
                )
            for name in plan.obsolete:
                old = caches.works.get(f"{cluster_name}/{name}")
                if work_index(name) is not None and self.writer.delete(
                    MANIFEST_WORKS, cluster_name, name, current=old, owns=OURS
                ):
                    log.info("deleted obsolete work %s", name, extra={"key": key})
        except KubeError as exc:
            self.set_applied(mca, ("False", APPLY_FAILED, f"failed to apply the deploy work: {exc}"))
            raise
        self.verified.remember(key, fingerprint, _versions(works))
        self.notices.clear(key)
        self.set_applied(mca, manifest_applied(works))
        return None


def deploy_controller(
    caches: Caches,
    writer: Writer,
    options: AgentRenderOptions = AgentRenderOptions(),
    *,
    resync_seconds: float,
    workers: int = 2,
    addon_name: str = ADDON_NAME,
) -> Controller:
    """The controller: keyed by MCA; woken by MCAs, their works, clusters and referenced ADCs."""
    deploy = Deploy(caches, writer, options, addon_name=addon_name)
    controller = Controller(NAME, deploy.reconcile, workers=workers, resync_seconds=resync_seconds)
    controller.watch(caches.addons)
    controller.watch(caches.works, keys=in_cluster_namespace)
    controller.watch(caches.clusters, keys=of_cluster)
    controller.watch(caches.configs, keys=lambda adc: referencing(caches.addons.list(), adc))
    # a default config added to or removed from the CMA changes what the MCAs wait for
    controller.watch(caches.cma, keys=every_addon(caches.addons))
    return controller
