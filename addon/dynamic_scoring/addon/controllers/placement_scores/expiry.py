"""The score-expiry controller: makes Placement notice an AddOnPlacementScore the moment it expires.

Keyed by AddOnPlacementScore, on the manager's shared AddOnPlacementScore informer
(`dynamic_scoring.addon.controllers.agent_scores`, selected by our agents' labels), which the distribution
controller already keeps: this controller adds no watch and no cache of its own.  The placement
scores of other addons are theirs to manage, and never reach this cache.

A reconcile asks `decision.decide`: before expiry it sets one wake-up at ``validUntil`` plus the
margin; after it, it merge-patches a single annotation naming the expired ``validUntil``.  That
metadata-only write is the smallest change that raises an update event in OCM's placement
controller, which then re-schedules and counts the score as 0.  It does not fight the agent: the
agent writes ``status`` through the status subresource and ``ownerReferences`` by merge patch,
neither of which removes an annotation, and a later good write simply moves ``validUntil`` past the
marked value.  Each mark is also an Event on the object and one count in
``dynamic_scoring_hub_scores_expired_total``.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter

from dynamic_scoring.addon.controllers import HubContext, agent_scores
from dynamic_scoring.addon.controllers.placement_scores.decision import (
    EXPIRED_ANNOTATION,
    SCORE_NAME_ANNOTATION,
    decide,
    is_ours,
)
from dynamic_scoring.kube.api import NotFound
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES, object_key
from dynamic_scoring.kube.writes import NotOurs, Writer

log = logging.getLogger(__name__)

NAME = "score-expiry"


class ScoreExpiry:
    """The reconcile: a wake-up at expiry, then one mark."""

    def __init__(
        self,
        writer: Writer,
        cache_get: Callable[[str], JSON | None],
        registry: CollectorRegistry | None,
        *,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.writer = writer
        self._get = cache_get
        self._clock = clock
        self.expired = Counter(
            "dynamic_scoring_hub_scores_expired",
            "AddOnPlacementScores written by our agents that expired without a newer score, each "
            "marked once so that Placement re-schedules and counts them as 0.",
            registry=registry,
        )

    def reconcile(self, key: str) -> Result | None:
        """Wait for the object's expiry, then mark it once (see `decision.decide`)."""
        obj = self._get(key)
        if obj is None or not is_ours(obj):
            return None
        verdict = decide(obj, self._clock())
        if verdict.requeue_after is not None:
            return Result(requeue_after=verdict.requeue_after)  # the queue keeps the earliest wait per key
        if verdict.mark is None:
            return None
        meta = obj["metadata"]
        desired: JSON = {
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "annotations": {EXPIRED_ANNOTATION: verdict.mark},
            }
        }
        try:
            self.writer.ensure(ADDON_PLACEMENT_SCORES, desired, obj, owns=is_ours)
        except NotFound:
            return None  # deleted meanwhile: nothing left to count
        except NotOurs:
            return None  # replaced meanwhile by another writer's score: not ours to mark
        self.expired.inc()
        cluster = meta["namespace"]
        score = (meta.get("annotations") or {}).get(SCORE_NAME_ANNOTATION) or meta["name"]
        message = (
            f"score {score} of cluster {cluster} expired at {verdict.mark} with no newer score; "
            f"Placement now counts it as 0; check the agent on {cluster}"
        )
        log.warning("AddOnPlacementScore %s: %s", key, message, extra={"controller": NAME, "key": key})
        self.writer.event(obj, "Warning", "ScoreExpired", message)
        return None


def _our_key(obj: JSON) -> Iterable[str]:
    return (object_key(obj),) if is_ours(obj) else ()


def score_expiry_controller(ctx: HubContext) -> list[Controller]:
    """The controller on the manager's shared AddOnPlacementScore informer (a ``ControllerFactory``)."""
    scores = agent_scores(ctx.manager)
    expiry = ScoreExpiry(ctx.manager.writer(NAME), scores.get, ctx.manager.registry)
    controller = Controller(NAME, expiry.reconcile, resync_seconds=ctx.resync_seconds)
    controller.watch(scores, _our_key)
    return [controller]


__all__ = ["NAME", "ScoreExpiry", "score_expiry_controller"]
