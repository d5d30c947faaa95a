"""Scores written by an agent that is not ours: the hub prepares the objects it fills.

A cluster whose AddOnDeploymentConfig sets ``AgentReplicas: "0"`` gets everything from this addon
but the agent process: the namespace, the summaries ConfigMap, the hub credentials and their RBAC.
Another agent scores it, in practice the upstream Go agent during a migration (docs/migration.md).
That agent creates its AddOnPlacementScores with nothing but a name and writes ``status.scores``
only: no labels, so the hub's labelled watch (`dynamic_scoring.addon.controllers.agent_scores`) would never
see them; no owner, so they would outlive the addon; and no ``validUntil`` or condition, so whatever
this addon's own agent wrote there before would stay and, once past, make Placement count the
cluster's score as 0 for good.

So for such a cluster this controller keeps, per summary the cluster receives:

* the AddOnPlacementScore, created by the hub when missing, labelled as our agents', annotated
  with its score name and owned by the cluster's ManagedClusterAddOn; field tracking is reset after
  the create, as the agent does (agent/dynamic_scoring/agent/kube/scores.py says why).  An existing object
  of that name that this addon did not create is someone else's and is left exactly as it is (the scorer
  reports ``ScoreNameTaken``), unless the hub admin started the manager with
  ``--adopt-unlabelled-scores`` and the object has no owner and no addon label, as the upstream
  agent leaves them: that one is adopted;
* none of what only this addon's agent writes: ``status.validUntil``, the ``ScoresUpToDate``
  condition and the expiry controller's mark are removed (they are stale: that agent is gone);

and it deletes the labelled scores of summaries the cluster no longer receives, as our agent
would.  The other agent updates an existing object's status (a read, then a status update), so
the object stays in the watch and is reported on the DynamicScorer (``ScoresWithoutCondition``).

Which clusters: read from the API objects, not from the ADC, so this controller depends on no
other: the deploy ManifestWork's Deployment has 0 replicas.  Which scores: the ``summaries`` of
the config ManifestWork.  Both informers are the ones the lifecycle and distribution controllers
already keep.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from dynamic_scoring.addon.constants import ADDON_NAME, ADDON_NAME_LABEL, CONFIG_WORK_NAME, DEPLOY_WORK_PREFIX
from dynamic_scoring.addon.controllers import HubContext, agent_scores, foreign_scores
from dynamic_scoring.addon.controllers.placement_scores.decision import (
    EXPIRED_ANNOTATION,
    SCORE_NAME_ANNOTATION,
)
from dynamic_scoring.addon.registry.reports import AGENT_CONDITION
from dynamic_scoring.addon.render.hub_rbac import config_work_summaries
from dynamic_scoring.kube.api import MERGE_PATCH, Conflict, NotFound
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES, MANAGED_CLUSTER_ADDONS, MANIFEST_WORKS
from dynamic_scoring.kube.writes import NotOurs, Writer
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.ocm.score_labels import adoptable, score_labels, written_by_agent

log = logging.getLogger(__name__)

NAME = "external-agent-scores"
DEPLOY_WORK = f"{DEPLOY_WORK_PREFIX}-0"
RESET_MANAGED_FIELDS: list[JSON] = [{}]


def deployment_replicas(work: JSON | None) -> int | None:
    """The replicas of the agent Deployment in a deploy ManifestWork; None without one."""
    for manifest in ((work or {}).get("spec") or {}).get("workload", {}).get("manifests") or []:
        if manifest.get("kind") == "Deployment":
            replicas = (manifest.get("spec") or {}).get("replicas", 1)
            return int(replicas) if isinstance(replicas, int) else 1
    return None


def wanted_scores(work: JSON | None) -> dict[str, str] | None:
    """AddOnPlacementScore name -> score name, for each summary a config ManifestWork delivers.

    None when the work or its ConfigMap cannot be read: nothing is then deleted on a guess.
    """
    entries = config_work_summaries(work)
    if entries is None:
        return None
    return {
        aps_name(e["scoreName"]): e["scoreName"]
        for e in entries
        if e.get("scoreDestination") == "AddOnPlacementScore"
        and isinstance(e.get("scoreName"), str)
        and e["scoreName"]
    }


def stale_status(obj: JSON) -> JSON | None:
    """The status merge patch removing what only this addon's agent writes; None when clean."""
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    kept = [c for c in conditions if c.get("type") != AGENT_CONDITION]
    patch: JSON = {}
    if status.get("validUntil") is not None:
        patch["validUntil"] = None
    if len(kept) != len(conditions):
        patch["conditions"] = kept or None
    return patch or None


class ExternalAgentScores:
    """The reconcile, keyed by cluster name."""

    def __init__(
        self,
        writer: Writer,
        addons: Informer,
        works: Informer,
        scores: Informer,
        foreign: Informer,
        *,
        adopt_unlabelled: bool = False,
    ) -> None:
        self.writer = writer
        self.addons = addons
        self.works = works
        self.scores = scores
        self.foreign = foreign
        self.adopt_unlabelled = adopt_unlabelled

    def reconcile(self, key: str) -> Result | None:
        """Prepare the scores of a cluster whose agent is not ours; nothing for any other cluster.

        `key` is the cluster's ManagedClusterAddOn (``<cluster>/dynamic-scoring``).
        """
        cluster = key.partition("/")[0]
        mca = self.addons.get(f"{cluster}/{ADDON_NAME}")
        if mca is None or (mca.get("metadata") or {}).get("deletionTimestamp"):
            return None
        if deployment_replicas(self.works.get(f"{cluster}/{DEPLOY_WORK}")) != 0:
            return None  # our agent writes (or nothing is deployed yet)
        wanted = wanted_scores(self.works.get(f"{cluster}/{CONFIG_WORK_NAME}"))
        if wanted is None:
            return None
        owner = {
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "ManagedClusterAddOn",
            "name": ADDON_NAME,
            "uid": mca["metadata"]["uid"],
        }
        for name, score in sorted(wanted.items()):
            self._prepare(cluster, name, score, owner)
        for obj in self.scores.list(cluster):
            name = obj["metadata"]["name"]
            if name not in wanted and self.writer.delete(
                ADDON_PLACEMENT_SCORES, cluster, name, current=obj, owns=_written_by_our_agents
            ):
                log.info(
                    "AddOnPlacementScore %s/%s deleted: cluster %s no longer receives its scorer",
                    cluster,
                    name,
                    cluster,
                    extra={"controller": NAME, "key": f"{cluster}/{ADDON_NAME}"},
                )
        return None

    def _existing(self, cluster: str, name: str) -> JSON | None:
        """The object of that name: ours from the cache, another owner's from the other cache or the API.

        The API is asked only when neither cache holds it (a new score, or an object in neither
        selection), so that a create never meets an object nobody looked at.
        """
        key = f"{cluster}/{name}"
        found = self.scores.get(key) or self.foreign.get(key)
        if found is not None:
            return found
        try:
            return self.writer.api.request("GET", ADDON_PLACEMENT_SCORES.path(cluster, name))
        except NotFound:
            return None

    def _prepare(self, cluster: str, name: str, score: str, owner: JSON) -> None:
        current = self._existing(cluster, name)
        if current is not None and not self._may_write(current):
            log.debug(
                "AddOnPlacementScore %s/%s is another owner's; left alone (ScoreNameTaken)",
                cluster,
                name,
                extra={"controller": NAME, "key": f"{cluster}/{ADDON_NAME}"},
            )
            return
        desired: JSON = {
            "metadata": {
                "name": name,
                "namespace": cluster,
                "labels": score_labels(ADDON_NAME),
                "annotations": {SCORE_NAME_ANNOTATION: score, EXPIRED_ANNOTATION: None},
                "ownerReferences": [owner],
            }
        }
        try:
            obj = self.writer.ensure(ADDON_PLACEMENT_SCORES, desired, current, owns=self._may_write)
            meta = obj.get("metadata", {})
            if meta.get("managedFields"):
                # on the object just written or checked, by its uid and resourceVersion: a replacement
                # (or a newer version, whose own event brings us back) answers 409 and is left alone
                guard = {k: meta[k] for k in ("uid", "resourceVersion") if meta.get(k)}
                try:
                    obj = self.writer.api.request(
                        "PATCH",
                        ADDON_PLACEMENT_SCORES.path(cluster, name),
                        body={"metadata": {"managedFields": RESET_MANAGED_FIELDS, **guard}},
                        content_type=MERGE_PATCH,
                    )
                except Conflict:
                    return
            if stale_status(obj) is not None:
                self.writer.patch_status(
                    ADDON_PLACEMENT_SCORES,
                    cluster,
                    name,
                    stale_status,
                    current=obj,
                    owns=_written_by_our_agents,
                )
                log.info(
                    "AddOnPlacementScore %s/%s: removed validUntil and the agent condition left by this "
                    "addon's agent; cluster %s is scored by another agent (AgentReplicas 0)",
                    cluster,
                    name,
                    cluster,
                    extra={"controller": NAME, "key": f"{cluster}/{ADDON_NAME}"},
                )
        except NotFound:
            return  # deleted meanwhile (the addon is going): its event brings us back if needed
        except NotOurs:
            return  # replaced meanwhile by another owner's score (logged by the writer): left alone

    def _may_write(self, obj: JSON) -> bool:
        """The test `_prepare` makes of an existing score: ours, or adoptable with the opt-in."""
        return written_by_agent(obj, ADDON_NAME) or (self.adopt_unlabelled and adoptable(obj))


def _written_by_our_agents(obj: JSON) -> bool:
    """A score this addon's agents (or this controller for them) wrote: ours to delete or clean."""
    return written_by_agent(obj, ADDON_NAME)


def _addon_key(obj: JSON) -> Iterable[str]:
    """The key of the ManagedClusterAddOn in the object's namespace (the cluster's)."""
    namespace = (obj.get("metadata") or {}).get("namespace")
    return (f"{namespace}/{ADDON_NAME}",) if namespace else ()


def external_agent_scores_controller(ctx: HubContext) -> list[Controller]:
    """The controller on the shared MCA, ManifestWork and score informers (a ``ControllerFactory``)."""
    manager = ctx.manager
    addons = manager.informer(MANAGED_CLUSTER_ADDONS, field_selector=f"metadata.name={ADDON_NAME}")
    works = manager.informer(MANIFEST_WORKS, label_selector=f"{ADDON_NAME_LABEL}={ADDON_NAME}")
    scores = agent_scores(manager)
    foreign = foreign_scores(manager)
    logic = ExternalAgentScores(
        manager.writer(NAME), addons, works, scores, foreign, adopt_unlabelled=ctx.adopt_unlabelled_scores
    )
    controller = Controller(NAME, logic.reconcile, resync_seconds=ctx.resync_seconds)
    controller.watch(addons)  # the primary: the resync goes over every cluster's addon
    controller.watch(works, _addon_key)
    controller.watch(scores, _addon_key)
    controller.watch(foreign, _addon_key)  # a taken name freed (or taken) is looked at again
    return [controller]


__all__ = [
    "NAME",
    "ExternalAgentScores",
    "deployment_replicas",
    "external_agent_scores_controller",
    "stale_status",
    "wanted_scores",
]
