"""The ordered-MultiKueue controller: a MultiKueueConfig per opted-in Placement, best-scored cluster first.

Runs only when the hub admin starts the manager with `--multikueue-order` (its RBAC comes with that
option: docs/multikueue-order.md).  Keyed by Placement (`namespace/name`).  It reads, in the one
namespace `--multikueue-namespace` names (`kueue-system` by default):

* Placements labelled `dynamic-scoring.open-cluster-management.io/multikueue-order=score` (selected
  by the apiserver, so other Placements cost nothing);
* the PlacementDecisions (the decided clusters);

and on the whole hub:

* the AddOnPlacementScores, ours and other addons', through the manager's two shared caches;
* every MultiKueueConfig (cluster-scoped, few), to see whether the name it would write is taken.

A reconcile lists exactly the clusters the Placement decided, sorted by the Placement's weighted
AddOn scores (`dynamic_scoring.addon.multikueue.rank`); past Kueue's 20, a listed cluster keeps its
place while it is decided and only freed places go to the best unlisted (`choose`, given the list
as the apiserver holds it).  It writes `spec.clusters` only when the order or the set changed;
each change is a Normal Event on the Placement giving the totals.  One writer per object: a
MultiKueueConfig we did not write (kueue-addon's, a hand-made one) is never touched, and the
Placement gets a Warning saying so.  With no cluster decided, or when the Placement leaves the
selection or is deleted, its MultiKueueConfig is deleted, as kueue-addon does with its own (Kueue
refuses an empty list).

Score changes wake every opted-in Placement (they are few); an expiring score needs no timer of
its own, because the score-expiry controller marks it at expiry and that write is an update here.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from dynamic_scoring.addon.controllers import HubContext, agent_scores, foreign_scores
from dynamic_scoring.addon.controllers.notices import Notices
from dynamic_scoring.addon.multikueue import (
    choose,
    config_name,
    decided_clusters,
    desired_config,
    listed,
    order_message,
    placement_of,
    placement_selector,
    rank,
)
from dynamic_scoring.kube.api import Conflict, NotFound
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.informer import Objects
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import MULTIKUEUE_CONFIGS, PLACEMENT_DECISIONS, PLACEMENTS, split_key
from dynamic_scoring.kube.writes import Writer
from dynamic_scoring.ocm.placement_policy import PLACEMENT_LABEL, Misconfigured

log = logging.getLogger(__name__)

NAME = "multikueue-order"


class Cache(Protocol):
    """What the reconcile reads of an informer's cache (so a unit test can hand it a dict)."""

    def get(self, key: str) -> JSON | None:
        """The cached object of `key`, or None."""

    def list(self, namespace: str | None = None) -> Objects:
        """Cached objects, of one namespace or of all."""


class MultiKueueOrder:
    """The reconcile of one Placement's ordered MultiKueueConfig."""

    def __init__(
        self,
        writer: Writer,
        *,
        placements: Cache,
        decisions: Cache,
        configs: Cache,
        scores: Iterable[Cache],
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.writer = writer
        self.notices = Notices(writer)
        self._placements = placements
        self._decisions = decisions
        self._configs = configs
        self._scores = tuple(scores)
        self._clock = clock

    def _score(self, cluster: str, name: str) -> JSON | None:
        key = f"{cluster}/{name}"
        for cache in self._scores:
            found = cache.get(key)
            if found is not None:
                return found
        return None

    def reconcile(self, key: str) -> Result | None:
        """Make the Placement's MultiKueueConfig list its decided clusters in score order."""
        namespace, name = split_key(key)
        if namespace is None:
            return None
        target = config_name(name)
        current = self._configs.get(target) if target else None
        ours = current is not None and placement_of(current) == key
        placement = self._placements.get(key)
        if placement is None:  # deleted, or its label removed: its config goes too
            self.notices.clear(key)
            if ours and target and current is not None:
                self._delete(current, key, f"Placement {key} no longer asks for an ordered MultiKueueConfig")
            return None
        if target is None:
            self.notices.warn(
                key,
                placement,
                "MultiKueueConfigNameInvalid",
                f"an AdmissionCheck can name only a MultiKueueConfig whose name is a DNS label (at most "
                f"63 characters: a-z, 0-9, '-'); '{name}' is not one: give the Placement such a name",
            )
            return None
        if current is not None and not ours:
            self.notices.warn(
                key,
                placement,
                "MultiKueueConfigNotOurs",
                f"MultiKueueConfig {target} exists and was not written for this Placement by "
                f"{self.writer.component}; it is left as it is. Delete it (or rename the Placement) to let "
                "the ordered one be written",
            )
            return None
        clusters = decided_clusters(self._decisions.list(namespace), namespace, name)
        if not clusters:
            self.notices.clear(key)
            if current is not None and self._delete(current, key, f"Placement {key} decided no cluster"):
                self.writer.event(
                    placement,
                    "Normal",
                    "MultiKueueConfigDeleted",
                    f"deleted MultiKueueConfig {target}: the Placement decided no cluster",
                )
            return None
        try:
            ranked = rank(placement, clusters, self._score, self._clock())
        except Misconfigured as exc:
            self.notices.warn(
                key,
                placement,
                "PrioritizerPolicyInvalid",
                f"cannot order MultiKueueConfig {target}: {exc}; "
                "it keeps its order until the policy is fixed",
            )
            return None
        self.notices.clear(key)
        before = listed(current)
        chosen, left_out = choose(ranked, before)
        if current is not None and [r.cluster for r in chosen] != before:
            # Who stays listed is decided by the list as it is, and the cache may not show our own
            # last write yet: from its older list, a cluster that entered since could be pushed off.
            live = self._live(target, key)
            if live is None:
                return Result(requeue_after=1.0)  # deleted or taken meanwhile: the next pass sees which
            current, before = live, listed(live)
            chosen, left_out = choose(ranked, before)
        order = [r.cluster for r in chosen]
        if order == before:
            return None
        dropped = {r.cluster: r.total for r in left_out}
        desired = desired_config(target, key, order)
        try:
            if current is None:
                self.writer.create(MULTIKUEUE_CONFIGS, desired)
            else:
                self.writer.ensure(
                    MULTIKUEUE_CONFIGS, desired, current, owns=lambda c: placement_of(c) == key
                )
        except Conflict:
            # created, or replaced by another writer's (`NotOurs`), meanwhile: the next reconcile
            # reads who holds it and warns on the Placement if it is not ours
            return Result(requeue_after=1.0)
        except NotFound:
            return Result(requeue_after=1.0)  # deleted meanwhile: create it on the next pass
        message = f"MultiKueueConfig {target}: " + order_message(chosen, before, dropped)
        log.info("%s", message, extra={"controller": NAME, "key": key})
        self.writer.event(placement, "Warning" if dropped else "Normal", "MultiKueueOrderChanged", message)
        return None

    def _live(self, target: str, key: str) -> JSON | None:
        """The apiserver's copy of config `target`, if it is still the one we wrote for `key`.

        Read only before the list changes, which is rare; its resourceVersion then guards the patch.
        """
        try:
            live = self.writer.api.request("GET", MULTIKUEUE_CONFIGS.path(None, target))
        except NotFound:
            return None
        return live if placement_of(live) == key else None

    def _delete(self, current: JSON, key: str, why: str) -> bool:
        """Delete `current`, our config for Placement `key`; False if it is gone or no longer ours.

        The delete names `current`'s uid and resourceVersion, so a config that replaced it (another
        writer's of the same name) is refused by the apiserver and left as it is.
        """
        target = current["metadata"]["name"]
        if self.writer.delete(
            MULTIKUEUE_CONFIGS, None, target, current=current, owns=lambda c: placement_of(c) == key
        ):
            log.info("deleted MultiKueueConfig %s: %s", target, why, extra={"controller": NAME})
            return True
        return False


def _placement_of_decision(pd: JSON) -> Iterable[str]:
    meta = pd.get("metadata") or {}
    placement = (meta.get("labels") or {}).get(PLACEMENT_LABEL)
    return (f"{meta.get('namespace')}/{placement}",) if placement else ()


def _placement_of_config(namespace: str, config: JSON) -> Iterable[str]:
    """The Placement we wrote it for, and the one its name spells.

    A foreign config of that name going away must wake that Placement, so its own is written.
    """
    keys = set()
    key = placement_of(config)
    if key:
        keys.add(key)
    keys.add(f"{namespace}/{(config.get('metadata') or {}).get('name', '')}")
    return keys


def multikueue_order_controller(ctx: HubContext) -> list[Controller]:
    """The controller, when the manager runs with `--multikueue-order` (a ``ControllerFactory``)."""
    if not ctx.multikueue_order:
        return []
    manager = ctx.manager
    namespace = ctx.multikueue_namespace
    placements = manager.informer(PLACEMENTS, namespace=namespace, label_selector=placement_selector())
    decisions = manager.informer(PLACEMENT_DECISIONS, namespace=namespace, label_selector=PLACEMENT_LABEL)
    configs = manager.informer(MULTIKUEUE_CONFIGS)
    scores = (agent_scores(manager), foreign_scores(manager))
    order = MultiKueueOrder(
        manager.writer(NAME), placements=placements, decisions=decisions, configs=configs, scores=scores
    )
    controller = Controller(NAME, order.reconcile, resync_seconds=ctx.resync_seconds)
    controller.watch(placements)
    controller.watch(decisions, _placement_of_decision)
    controller.watch(configs, lambda config: _placement_of_config(namespace, config))
    for cache in scores:
        controller.watch(cache, lambda _obj: placements.keys())
    return [controller]


__all__ = ["NAME", "MultiKueueOrder", "multikueue_order_controller"]
