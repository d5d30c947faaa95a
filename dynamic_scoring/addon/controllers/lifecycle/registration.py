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

from dynamic_scoring.addon.config.install_namespace import install_namespace_for
from dynamic_scoring.addon.constants import ADDON_NAME, CONFIG_WORK_NAME, DEFAULT_INSTALL_NAMESPACE
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
from dynamic_scoring.addon.errors import AddonConfigError, TemplatesUnavailableError
from dynamic_scoring.addon.registration.identity import subject_problem
from dynamic_scoring.addon.registration.status import (
    owned_by_cma,
    registration_patch,
    registration_subject,
    supported_configs_patch,
)
from dynamic_scoring.addon.render.hub_rbac import granted_score_names, render_hub_rbac, sent_score_names
from dynamic_scoring.jsontypes import JSON
from dynamic_scoring.kube.api import KubeError
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.informer import WatchEvent
from dynamic_scoring.kube.resources import (
    MANAGED_CLUSTER_ADDONS,
    ROLE_BINDINGS,
    ROLES,
    object_key,
    resource_version,
)
from dynamic_scoring.kube.writes import Writer
from dynamic_scoring.score_labels import adoptable

log = logging.getLogger(__name__)

NAME = "registration"
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
    notices = Notices(writer)
    subject_notices = Notices(writer)  # its own memory: `notices.clear` runs on every reconcile
    rbac_caches = {
        ROLES.kind: (ROLES, caches.roles),
        ROLE_BINDINGS.kind: (ROLE_BINDINGS, caches.role_bindings),
    }

    sent: dict[str, tuple[str, list[str]]] = {}  # cluster -> (work resourceVersion, its score names)
    sent_lock = threading.Lock()

    def score_names(cluster: str) -> list[str]:
        """`granted_score_names`, decoding each config work version once (it may hold ~400 KB)."""
        work = caches.works.get(f"{cluster}/{CONFIG_WORK_NAME}")
        version = str(((work or {}).get("metadata") or {}).get("resourceVersion") or "")
        with sent_lock:
            known = sent.get(cluster)
        if known is None or known[0] != version:
            known = (version, sorted(sent_score_names(work)))
            with sent_lock:
                sent[cluster] = known
        taken = [
            str(obj["metadata"]["name"])
            for obj in caches.foreign.list(cluster)
            if not (adopt_unlabelled_scores and adoptable(obj))
        ]
        return granted_score_names(known[1], caches.scores.list(cluster), taken)

    # cluster -> (digest of the RBAC's inputs, [(kind, key, resourceVersion)] of the Role and
    # RoleBinding as they were when they last matched them): while both hold, the objects need
    # neither a render nor a comparison.  An edit or a deletion changes the resourceVersion.
    verified: dict[str, tuple[bytes, tuple[tuple[str, str, str], ...]]] = {}

    def unchanged(cluster: str, inputs: bytes) -> bool:
        with sent_lock:
            known = verified.get(cluster)
        if known is None or known[0] != inputs:
            return False
        return all(resource_version(rbac_caches[kind][1].get(key)) == rv for kind, key, rv in known[1])

    def ensure_rbac(mca: JSON, subject: JSON) -> str | None:
        """Make the hub Role/RoleBinding agree; the error text when the apiserver refused."""
        cluster = mca["metadata"]["namespace"]
        scores = score_names(cluster)
        inputs = digest([mca["metadata"].get("uid"), mca["metadata"]["name"], cluster, subject, scores])
        if unchanged(cluster, inputs):
            return None
        written = []
        try:
            for obj in render_hub_rbac(mca, subject, score_names=scores):
                resource, cache = rbac_caches[obj["kind"]]
                result = writer.ensure(resource, obj, cache.get(object_key(obj)))
                written.append((str(obj["kind"]), object_key(obj), resource_version(result)))
        except (KubeError, TemplatesUnavailableError) as exc:
            return str(exc)  # a missing template: the deploy controller reports it on ManifestApplied
        with sent_lock:
            verified[cluster] = (inputs, tuple(written))
        return None

    def reconcile(key: str) -> Result | None:
        mca = caches.addons.get(key)
        if mca is None:
            with sent_lock:
                sent.pop(key.partition("/")[0], None)
                verified.pop(key.partition("/")[0], None)
            return None  # disabled: garbage collection removes what it owned
        cluster = mca["metadata"]["namespace"]
        if caches.clusters.get(cluster) is None:
            notices.warn(
                key,
                mca,
                "ManagedClusterNotFound",
                f"ManagedCluster {cluster} does not exist; the addon is not registered or deployed there",
            )
            return None
        notices.clear(key)
        if not owned_by_cma(mca, addon_name):
            log.debug("waiting for OCM to set the owner reference to the CMA", extra={"key": key})
            return None
        lookup = desired_config(mca, caches.configs, caches.cma.get(addon_name))
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
            subject_notices.warn(key, mca, SUBJECT_REFUSED, f"ManagedClusterAddOn {key}: {refused}")
        else:
            subject_notices.clear(key)
        # with a refused subject the binding is still written, naming only what may be bound
        error = ensure_rbac(mca, subject) if subject is not None else None

        def compute(fresh: JSON) -> JSON | None:
            """The supportedConfigs and registration fields in one write (the framework sends two)."""
            patch = {
                **(supported_configs_patch(fresh) or {}),
                **(registration_patch(fresh, namespace=namespace, permission_error=error or refused) or {}),
            }
            return patch or None

        if compute(mca) is not None and writer.patch_status(
            MANAGED_CLUSTER_ADDONS, cluster, addon_name, compute, current=mca
        ):
            log.info("registration status updated (namespace %s)", namespace, extra={"key": key})
        if error is not None:
            raise RuntimeError(f"hub RBAC for the agent not applied: {error}")
        return None

    controller = Controller(NAME, reconcile, workers=workers, resync_seconds=resync_seconds)
    controller.watch(caches.addons)
    controller.watch(caches.clusters, keys=of_cluster)
    controller.watch(caches.roles, keys=in_cluster_namespace)
    controller.watch(caches.role_bindings, keys=in_cluster_namespace)
    controller.watch(caches.configs, keys=lambda adc: referencing(caches.addons.list(), adc))
    # a default config added to or removed from the CMA changes what the MCAs wait for
    controller.watch(caches.cma, keys=every_addon(caches.addons))
    controller.watch(caches.works, keys=lambda _work: ())  # waits for it; `on_work` picks what wakes
    controller.watch(caches.scores, keys=lambda _score: ())  # likewise, `on_score`
    controller.watch(caches.foreign, keys=lambda _score: ())  # likewise, `on_foreign`

    def on_work(event: WatchEvent) -> None:
        """A config work created, deleted or with a new spec: the score names it sends changed."""
        if event.obj.get("metadata", {}).get("name") != CONFIG_WORK_NAME:
            return
        if event.type == "MODIFIED" and _generation(event.obj) == _generation(event.old):
            return  # status only (the work agent reporting)
        for key in in_cluster_namespace(event.obj):
            controller.enqueue(key)

    def on_score(event: WatchEvent) -> None:
        """A score of our agent created or deleted; not its status writes.

        The informer selects our agents' scores by label, so a score relabelled into or out of
        that selection arrives as ADDED or DELETED too.
        """
        if event.type == "MODIFIED":
            return
        for key in in_cluster_namespace(event.obj):
            controller.enqueue(key)

    def on_foreign(event: WatchEvent) -> None:
        """Another owner's score created or deleted, or made (un)adoptable: a name taken or freed."""
        if event.type == "MODIFIED" and adoptable(event.obj) == adoptable(event.old or {}):
            return
        for key in in_cluster_namespace(event.obj):
            controller.enqueue(key)

    caches.works.add_handler(on_work)
    caches.scores.add_handler(on_score)
    caches.foreign.add_handler(on_foreign)
    return controller


def _generation(obj: JSON | None) -> object:
    return ((obj or {}).get("metadata") or {}).get("generation")
