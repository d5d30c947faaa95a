"""C and F. Registration: the MCA status fields that let the klusterlet register the agent.

Per MCA owned by our CMA (OCM sets that ownerReference; the framework waits for it) whose
deployment config OCM has resolved (its spec hash is in the status): the agent's hub Role/RoleBinding in the
cluster namespace (owned by the MCA, so garbage collection removes them on disable; compared on
every reconcile, so an edit is reverted and a deletion recreated), then `registrations` (the CSR
subject the klusterlet asks for), `namespace` (where the klusterlet writes the hub kubeconfig and
reads the Lease), `healthCheck.mode: Lease` (the klusterlet then owns `Available`), `RegistrationApplied` and
`supportedConfigs`, in one status write.  Nothing is written where the cache shows it right already.

The hub Role names the AddOnPlacementScores the agent may touch (`render.hub_rbac`): those in the
cluster's config work, less those another owner's score holds, and those its agent wrote.  So a
change of the config work's spec, a score of our agent appearing or going, or another owner's score
appearing or going wakes the cluster's key too; score status writes (every interval,
on every cluster) do not.

The RoleBinding names only the forms this cluster's agent identity can take
(`identity.rbac_subjects`).  A token-auth subject of any other form, which the klusterlet writes
into the MCA status, is not bound: `RegistrationApplied=False` and one Warning Event say so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial

from dynamic_scoring.addon.config.install_namespace import install_namespace_for
from dynamic_scoring.addon.constants import (
    ADDON_NAME,
    CONFIG_WORK_NAME,
    DEFAULT_INSTALL_NAMESPACE,
    MANAGED_BY_LABEL,
)
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
from dynamic_scoring.addon.errors import AddonConfigError, TemplatesUnavailableError
from dynamic_scoring.addon.registration.identity import subject_problem
from dynamic_scoring.addon.registration.status import (
    owned_by_cma,
    registration_patch,
    registration_subject,
    supported_configs_patch,
)
from dynamic_scoring.addon.render.hub_rbac import granted_score_names, render_hub_rbac, sent_score_names
from dynamic_scoring.kube.api import KubeError
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.informer import WatchEvent
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import (
    MANAGED_CLUSTER_ADDONS,
    ROLE_BINDINGS,
    ROLES,
    object_key,
    resource_version,
)
from dynamic_scoring.kube.writes import Writer, labelled
from dynamic_scoring.ocm.score_labels import adoptable

log = logging.getLogger(__name__)

NAME = "registration"
HUB_RBAC_OURS = labelled({MANAGED_BY_LABEL: ADDON_NAME})
"""A hub Role or RoleBinding we may patch: labelled as the template labels it."""
SUBJECT_REFUSED = "RegistrationSubjectRefused"


def install_namespace(mca: JSON, adc: JSON | None) -> str:
    """The namespace for `status.namespace` (`install_namespace_for`: only the ADC's namespace field).

    A name that is not valid keeps what the status says (or the default); the deploy controller
    reports it on `ManifestApplied`.
    """
    try:
        return install_namespace_for(mca, adc)
    except AddonConfigError:
        return str((mca.get("status") or {}).get("namespace") or DEFAULT_INSTALL_NAMESPACE)


class Registration:
    """The reconcile, keyed by MCA: hub RBAC first, then the registration fields in one status write."""

    def __init__(
        self,
        caches: Caches,
        writer: Writer,
        *,
        addon_name: str = ADDON_NAME,
        adopt_unlabelled_scores: bool = False,
    ) -> None:
        self.caches = caches
        self.writer = writer
        self.addon_name = addon_name
        self.adopt_unlabelled_scores = adopt_unlabelled_scores
        self.notices = Notices(writer)
        self.subject_notices = Notices(writer)  # its own memory: `notices.clear` runs on every reconcile
        self._rbac_caches = {
            ROLES.kind: (ROLES, caches.roles),
            ROLE_BINDINGS.kind: (ROLE_BINDINGS, caches.role_bindings),
        }
        # cluster -> (config work resourceVersion, its score names): a work (up to ~400 KB) is
        # decoded once per version, not once per reconcile
        self._sent: dict[str, tuple[str, list[str]]] = {}
        self._sent_lock = threading.Lock()
        # cluster -> the RBAC's inputs and the Role's and RoleBinding's versions when they matched
        self.verified = Verified()

    def score_names(self, cluster: str) -> list[str]:
        """`granted_score_names`, decoding each config work version once."""
        work = self.caches.works.get(f"{cluster}/{CONFIG_WORK_NAME}")
        version = str(((work or {}).get("metadata") or {}).get("resourceVersion") or "")
        with self._sent_lock:
            known = self._sent.get(cluster)
        if known is None or known[0] != version:
            known = (version, sorted(sent_score_names(work)))
            with self._sent_lock:
                self._sent[cluster] = known
        taken = [
            str(obj["metadata"]["name"])
            for obj in self.caches.foreign.list(cluster)
            if not (self.adopt_unlabelled_scores and adoptable(obj))
        ]
        return granted_score_names(known[1], self.caches.scores.list(cluster), taken)

    def _now(self, written: Versions) -> Versions:
        """The cache's versions of the (kind, key, version) objects in `written`."""
        return tuple(
            (kind, key, resource_version(self._rbac_caches[kind][1].get(key))) for kind, key, _ in written
        )

    def ensure_rbac(self, mca: JSON, subject: JSON) -> str | None:
        """Make the hub Role/RoleBinding agree; the error text when the apiserver refused."""
        cluster = mca["metadata"]["namespace"]
        scores = self.score_names(cluster)
        inputs = digest([mca["metadata"].get("uid"), mca["metadata"]["name"], cluster, subject, scores])
        if self.verified.holds(cluster, inputs, self._now):
            return None
        written = []
        try:
            for obj in render_hub_rbac(mca, subject, score_names=scores):
                resource, cache = self._rbac_caches[obj["kind"]]
                result = self.writer.ensure(resource, obj, cache.get(object_key(obj)), owns=HUB_RBAC_OURS)
                written.append((str(obj["kind"]), object_key(obj), resource_version(result)))
        except (KubeError, TemplatesUnavailableError) as exc:
            return str(exc)  # a missing template: the deploy controller reports it on ManifestApplied
        self.verified.remember(cluster, inputs, tuple(written))
        return None

    def reconcile(self, key: str) -> Result | None:
        """Register the agent of one MCA (see the module docstring)."""
        caches = self.caches
        mca = caches.addons.get(key)
        if mca is None:
            cluster = key.partition("/")[0]
            with self._sent_lock:
                self._sent.pop(cluster, None)
            self.verified.forget(cluster)
            return None  # disabled: garbage collection removes what it owned
        cluster = mca["metadata"]["namespace"]
        if caches.clusters.get(cluster) is None:
            self.notices.warn(
                key,
                mca,
                "ManagedClusterNotFound",
                f"ManagedCluster {cluster} does not exist; the addon is not registered or deployed there",
            )
            return None
        self.notices.clear(key)
        if not owned_by_cma(mca, self.addon_name):
            log.debug("waiting for OCM to set the owner reference to the CMA", extra={"key": key})
            return None
        lookup = desired_config(mca, caches.configs, caches.cma.get(self.addon_name))
        if lookup.pending:
            # Nothing is written yet: OCM resolves configs from the CMA and the MCA's spec, not from
            # the MCA's supportedConfigs (which only its Progressing condition reads), so writing
            # that field alone first would cost every cluster a second status write.
            log.debug(
                "waiting for OCM to resolve the deployment config %s",
                lookup.ref or "(the CMA default or the MCA's own)",
                extra={"key": key},
            )
            return None
        namespace = install_namespace(mca, lookup.adc)
        subject = registration_subject(mca)
        refused = subject_problem(subject, cluster) if subject is not None else None
        if refused is not None:
            self.subject_notices.warn(key, mca, SUBJECT_REFUSED, f"ManagedClusterAddOn {key}: {refused}")
        else:
            self.subject_notices.clear(key)
        # with a refused subject the binding is still written, naming only what may be bound
        error = self.ensure_rbac(mca, subject) if subject is not None else None

        def compute(fresh: JSON) -> JSON | None:
            """The supportedConfigs and registration fields in one write (the framework sends two)."""
            patch = {
                **(supported_configs_patch(fresh) or {}),
                **(registration_patch(fresh, namespace=namespace, permission_error=error or refused) or {}),
            }
            return patch or None

        if compute(mca) is not None and self.writer.patch_status(
            MANAGED_CLUSTER_ADDONS, cluster, self.addon_name, compute, current=mca
        ):
            log.info("registration status updated (namespace %s)", namespace, extra={"key": key})
        if error is not None:
            raise RuntimeError(f"hub RBAC for the agent not applied: {error}")
        return None


def woken_by_work(event: WatchEvent) -> tuple[str, ...]:
    """A config work created, deleted or with a new spec: the score names it sends changed."""
    if event.obj.get("metadata", {}).get("name") != CONFIG_WORK_NAME:
        return ()
    if event.type == "MODIFIED" and _generation(event.obj) == _generation(event.old):
        return ()  # status only (the work agent reporting)
    return tuple(in_cluster_namespace(event.obj))


def woken_by_score(event: WatchEvent) -> tuple[str, ...]:
    """A score of our agent created or deleted; not its status writes.

    The informer selects our agents' scores by label, so a score relabelled into or out of
    that selection arrives as ADDED or DELETED too.
    """
    return () if event.type == "MODIFIED" else tuple(in_cluster_namespace(event.obj))


def woken_by_foreign(event: WatchEvent) -> tuple[str, ...]:
    """Another owner's score created or deleted, or made (un)adoptable: a name taken or freed."""
    if event.type == "MODIFIED" and adoptable(event.obj) == adoptable(event.old or {}):
        return ()
    return tuple(in_cluster_namespace(event.obj))


def registration_controller(
    caches: Caches,
    writer: Writer,
    *,
    resync_seconds: float,
    workers: int = 1,
    addon_name: str = ADDON_NAME,
    adopt_unlabelled_scores: bool = False,
) -> Controller:
    """The controller: keyed by MCA; woken by MCAs, clusters, referenced ADCs and our hub RBAC."""
    registration = Registration(
        caches, writer, addon_name=addon_name, adopt_unlabelled_scores=adopt_unlabelled_scores
    )
    controller = Controller(NAME, registration.reconcile, workers=workers, resync_seconds=resync_seconds)
    controller.watch(caches.addons)
    controller.watch(caches.clusters, keys=of_cluster)
    controller.watch(caches.roles, keys=in_cluster_namespace)
    controller.watch(caches.role_bindings, keys=in_cluster_namespace)
    controller.watch(caches.configs, keys=lambda adc: referencing(caches.addons.list(), adc))
    # a default config added to or removed from the CMA changes what the MCAs wait for
    controller.watch(caches.cma, keys=every_addon(caches.addons))
    # the works and scores are waited for; the handlers below pick which of their changes wake a key
    for cache, woken_by in (
        (caches.works, woken_by_work),
        (caches.scores, woken_by_score),
        (caches.foreign, woken_by_foreign),
    ):
        controller.watch(cache, keys=lambda _obj: ())
        cache.add_handler(partial(_enqueue, controller, woken_by))
    return controller


def _enqueue(
    controller: Controller, woken_by: Callable[[WatchEvent], tuple[str, ...]], event: WatchEvent
) -> None:
    for key in woken_by(event):
        controller.enqueue(key)


def _generation(obj: JSON | None) -> object:
    return ((obj or {}).get("metadata") or {}).get("generation")
