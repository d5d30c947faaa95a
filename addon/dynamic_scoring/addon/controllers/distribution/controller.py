"""The distribution controller: every enabled cluster's summaries, delivered as a ManifestWork.

Three kinds of keys on one queue:

* ``@plan`` (every DynamicScorer, DynamicScoringConfig, ManagedClusterAddOn or ManagedCluster
  change): compute ``dynamic_scoring.addon.distribution.plan`` from the caches, the desired config work of
  every enabled cluster, and queue ``work/<cluster>`` only for clusters whose work differs from the cache
  (or must go).  One scorer edit therefore costs one plan and one write per affected cluster.
* ``work/<cluster>``: create, merge-patch or delete that cluster's work ``addon-dynamic-scoring-config``
  (``Writer.ensure`` sends nothing when nothing differs).
* ``@status`` (work status and AddOnPlacementScore changes, and after every plan): the
  DynamicScoringConfig's conditions and per-cluster entries, and each DynamicScorer's
  ``Distributed`` condition and ``status.clusters`` (the agents' reports), written only on difference.

Why a work of its own rather than a manifest in the deploy work: a scorer edit then rewrites only this
small work; the agent Deployment's work, its rollout and OCM's Progressing for it are not touched.  The
work carries the addon-name label (``clusteradm get addon`` and OCM list the addon's works by it) and the
MCA's ``config-spec-hash`` annotation, so OCM's Progressing, which requires every labelled work to
match the MCA's config references and be Applied and Available, still completes.

Every plan is cut to what one ConfigMap in one work can carry
(``dynamic_scoring.addon.distribution.budget``): a
scorer whose summary alone is too large goes nowhere (``Distributed=False/SummaryTooLarge``), and
where the summaries together would still be too large the newest scorers are left out of that
cluster (``WorkTooLarge``), each with a Warning Event.  One scorer can therefore never make a
cluster's work too large for the apiserver or OCM to accept and so stop every other scorer's changes,
and a newcomer can never push an established scorer out.

Without the DynamicScoringConfig (or while it is being deleted) every config work is deleted: the
agents lose their ConfigMap, stop scoring and remove their AddOnPlacementScores.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from dynamic_scoring.addon.constants import (
    ADDON_NAME,
    ADDON_NAME_LABEL,
    CONFIG_SPEC_HASH_ANNOTATION,
    MANAGED_BY_LABEL,
)
from dynamic_scoring.addon.controllers import HubContext, agent_scores, foreign_scores
from dynamic_scoring.addon.distribution.budget import fit
from dynamic_scoring.addon.distribution.configmap import payloads, summaries_configmap
from dynamic_scoring.addon.distribution.plan import ClusterInput, Plan, ScorerInput, ScorerOutcome, plan
from dynamic_scoring.addon.distribution.status import (
    accepted_condition,
    cluster_entries,
    distributed_condition,
    scorer_distributed_condition,
)
from dynamic_scoring.addon.distribution.target import CONFIG_NAME, config_target_problem
from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.models import (
    DynamicScoringConfig,
    SpecProblem,
    parse_config,
    parse_scorer,
)
from dynamic_scoring.addon.registry.reports import cluster_reports
from dynamic_scoring.addon.registry.status import DISTRIBUTED, ConditionSpec, apply_conditions
from dynamic_scoring.addon.work.builder import (
    WORK_API_VERSION,
    config_spec_hash_annotation,
    dropping_stale_hash,
    owner_reference,
)
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.informer import Informer, WatchEvent
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import (
    DYNAMIC_SCORERS,
    DYNAMIC_SCORING_CONFIGS,
    MANAGED_CLUSTER_ADDONS,
    MANAGED_CLUSTERS,
    MANIFEST_WORKS,
    resource_version,
)
from dynamic_scoring.kube.workqueue import WorkQueue
from dynamic_scoring.kube.writes import Writer, labelled, merge_patch
from dynamic_scoring.ocm.naming import aps_name

log = logging.getLogger(__name__)

NAME = "distribution"
WORK_NAME = f"addon-{ADDON_NAME}-config"
OURS = labelled({ADDON_NAME_LABEL: ADDON_NAME})
"""A config work we may patch or delete: labelled as the works informer selects."""
PLAN_KEY = "@plan"
STATUS_KEY = "@status"
WORK_KEY_PREFIX = "work/"
WARNING_REASONS = frozenset(
    {
        "ScoreNameTaken",
        "AcceptedWithWarnings",
        "WrongName",
        "WrongNamespace",
        "InvalidSpec",
        "Conflict",
        "NotApplied",
        "SummaryTooLarge",
        "WorkTooLarge",
    }
)
"""Condition reasons that also get a Warning Event (naming the field or the cluster), once per change."""
CONFIG_STATUS = frozenset({"config"})
SCORER_STATUS = frozenset({"scorers"})
ALL_STATUS = CONFIG_STATUS | SCORER_STATUS
STATUS_DEBOUNCE_SECONDS = 1.0
"""Status is recomputed at most this soon after the events that ask for it."""
FIRST_PLAN_PROBE_WAIT_SECONDS = 30.0
"""A process's first plan waits up to this long for every DynamicScorer's first probe: a manager
started beside scorers no one has probed yet would otherwise write every config work without them
and again a few seconds later with them.  A scorer's status write wakes the plan at once."""
FLEET_PLAN_DELAY_SECONDS = 1.0
"""A plan woken by an MCA or a ManagedCluster runs this long after the first such change (the queue
keeps the earliest wait per key), so a burst of fleet changes costs one plan a second.  Config and
scorer edits plan at once."""
REPORT_REFRESH_SECONDS = 60.0
"""How often the per-cluster reports are re-read without an event (scores expire by time alone)."""


def _deleting(obj: JSON | None) -> bool:
    return obj is not None and bool((obj.get("metadata") or {}).get("deletionTimestamp"))


@dataclass(frozen=True)
class Caches:
    """The informers the distribution reads (shared with the lifecycle controllers where they overlap)."""

    scorers: Informer
    configs: Informer
    addons: Informer
    clusters: Informer
    works: Informer
    scores: Informer
    foreign: Informer
    """Scores our agents did not write: which score names are taken on which cluster."""

    @classmethod
    def of(cls, ctx: HubContext) -> Caches:
        manager = ctx.manager
        return cls(
            scorers=manager.informer(DYNAMIC_SCORERS, namespace=ctx.namespace),
            configs=manager.informer(DYNAMIC_SCORING_CONFIGS),
            addons=manager.informer(MANAGED_CLUSTER_ADDONS, field_selector=f"metadata.name={ADDON_NAME}"),
            clusters=manager.informer(MANAGED_CLUSTERS),
            works=manager.informer(MANIFEST_WORKS, label_selector=f"{ADDON_NAME_LABEL}={ADDON_NAME}"),
            scores=agent_scores(manager),
            foreign=foreign_scores(manager),
        )


@dataclass
class _Latest:
    """The last plan and what it wants, shared between the key kinds."""

    config: JSON | None = None
    result: Plan | None = None
    clusters: list[ClusterInput] = field(default_factory=list)
    desired: dict[str, JSON] = field(default_factory=dict)
    planned: bool = False
    """False until a plan has run on this process: an empty `desired` then means "not known yet",
    not "withdraw every work" (a new leader's first work events arrive before its first plan)."""


def config_work(mca: JSON, namespace: str, payload: str) -> JSON:
    """The cluster's config work: one ConfigMap in the agent's install ``namespace``, owned by the MCA."""
    cluster = mca["metadata"]["namespace"]
    configmap = summaries_configmap(namespace, (), payload=payload)
    metadata: JSON = {
        "name": WORK_NAME,
        "namespace": cluster,
        "labels": {ADDON_NAME_LABEL: ADDON_NAME, MANAGED_BY_LABEL: ADDON_NAME},
        "ownerReferences": [owner_reference(mca, controller=True)],
    }
    annotation = config_spec_hash_annotation(mca)
    if annotation is not None:
        metadata["annotations"] = {CONFIG_SPEC_HASH_ANNOTATION: annotation}
    return {
        "apiVersion": WORK_API_VERSION,
        "kind": "ManifestWork",
        "metadata": metadata,
        "spec": {"workload": {"manifests": [configmap]}},
    }


def _mca_plan_inputs(mca: JSON) -> tuple[object, ...]:
    """What of an MCA the plan reads (`Distribution._clusters`, `config_work`).

    Most MCA events are condition writes (ours, OCM's, the klusterlet's) that change none of it;
    planning on those would run the whole fleet's plan once per event.
    """
    meta = mca.get("metadata") or {}
    status = mca.get("status") or {}
    return (
        meta.get("uid"),
        meta.get("deletionTimestamp"),
        status.get("namespace"),
        config_spec_hash_annotation(mca),
    )


def _cluster_plan_inputs(cluster: JSON) -> tuple[object, ...]:
    """What of a ManagedCluster the plan reads: its labels (cluster selectors) and whether it goes."""
    meta = cluster.get("metadata") or {}
    return meta.get("uid"), meta.get("deletionTimestamp"), meta.get("labels")


def _applied(work: JSON | None) -> Literal["True", "False", "Unknown"]:
    for cond in ((work or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Applied" and cond.get("status") in ("True", "False"):
            generation = (work or {}).get("metadata", {}).get("generation")
            if cond.get("observedGeneration") not in (None, generation):
                return "Unknown"  # the agent has not seen our last write yet
            value: Literal["True", "False"] = cond["status"]
            return value
    return "Unknown"


class Distribution:
    """The reconcile of the distribution controller."""

    def __init__(self, caches: Caches, writer: Writer, namespace: str) -> None:
        self.caches = caches
        self.writer = writer
        self.namespace = namespace
        self.enqueue: Callable[[str], None] = lambda key: None
        self.enqueue_after: Callable[[str, float], None] = lambda key, delay: None
        self._lock = threading.Lock()
        self._latest = _Latest()
        self._status_soon = False
        self._status_parts: frozenset[str] = frozenset()
        self._written: dict[str, tuple[str, JSON]] = {}
        self._probe_wait_until: float | None = None
        self.clock: Callable[[], float] = time.monotonic
        self.plans = 0

    # -- inputs ---------------------------------------------------------------------------------

    def _config(self) -> JSON | None:
        config = self.caches.configs.get(f"{self.namespace}/{CONFIG_NAME}")
        return None if _deleting(config) else config

    def _clusters(self) -> tuple[list[ClusterInput], dict[str, JSON]]:
        clusters: list[ClusterInput] = []
        mcas: dict[str, JSON] = {}
        for mca in self.caches.addons.list():
            name = mca["metadata"]["namespace"]
            cluster = self.caches.clusters.get(name)
            if cluster is None or _deleting(mca) or _deleting(cluster):
                continue
            labels = (cluster.get("metadata") or {}).get("labels") or {}
            namespace = str((mca.get("status") or {}).get("namespace") or "")
            clusters.append(ClusterInput(name, labels, namespace))
            mcas[name] = mca
        return clusters, mcas

    def _scorers(self) -> list[ScorerInput]:
        inputs = []
        for obj in self.caches.scorers.list(self.namespace):
            parsed = parse_scorer(obj)
            meta = obj["metadata"]
            created = str(meta.get("creationTimestamp") or "")
            if isinstance(parsed, SpecProblem):
                inputs.append(ScorerInput(meta["name"], created, None, False))
                continue
            summary = resolve(parsed).summary
            active = parsed.status.health_status == "Active"
            inputs.append(ScorerInput(meta["name"], created, summary, active, parsed.spec.cluster_selector))
        return inputs

    # -- keys -----------------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result | None:
        """Dispatch on the key kind (any other key, e.g. from the resync, means ``@plan``)."""
        if key.startswith(WORK_KEY_PREFIX):
            self._work(key[len(WORK_KEY_PREFIX) :])
            return None
        if key == STATUS_KEY:
            return self._status()
        self._plan()
        self.request_status()
        return None

    def request_status(self, parts: frozenset[str] = ALL_STATUS) -> None:
        """Ask for ``@status`` (the config's and/or the scorers' ``parts``) soon, once per burst.

        A scorer edit on 1,000 clusters brings 1,000 work events; recomputing every scorer's
        per-cluster reports for each would hold the interpreter while the work patches wait.  Work
        events only need the config's status (Applied per cluster), report events only the scorers'.
        """
        with self._lock:
            self._status_parts |= parts
            if self._status_soon:
                return
            self._status_soon = True
        self.enqueue_after(STATUS_KEY, STATUS_DEBOUNCE_SECONDS)

    def _plan(self) -> None:
        config = self._config()
        parsed: DynamicScoringConfig | SpecProblem | None = parse_config(config) if config else None
        if isinstance(parsed, SpecProblem):
            with self._lock:
                self._latest.config = config
            return  # an unreadable spec changes nothing: the last good works stay (status says why)
        if parsed is not None and self._waiting_for_first_probes():
            return
        desired: dict[str, JSON] = {}
        result: Plan | None = None
        clusters: list[ClusterInput] = []
        if parsed is not None:  # without a config nothing is distributed: the fleet is not read
            clusters, mcas = self._clusters()
            result = plan(self._scorers(), parsed.spec.masks, clusters, mask_policy=parsed.spec.mask_policy)
            result = fit(result, clusters)  # what one ConfigMap in one work can carry (budget.py)
            encoded = payloads(result)
            for c in clusters:
                if c.namespace:
                    desired[c.name] = config_work(mcas[c.name], c.namespace, encoded[c.name])
        self.plans += 1
        with self._lock:
            self._latest = _Latest(config, result, clusters, desired, planned=True)
        stale = {
            w["metadata"]["namespace"] for w in self.caches.works.list() if w["metadata"]["name"] == WORK_NAME
        }
        for cluster in sorted(stale | set(desired)):
            want = desired.get(cluster)
            have = self.caches.works.get(f"{cluster}/{WORK_NAME}")
            if want is None or have is None or merge_patch(have, want) is not None:
                self.enqueue(WORK_KEY_PREFIX + cluster)

    def _waiting_for_first_probes(self) -> bool:
        """Whether this first plan waits for scorers never probed (`FIRST_PLAN_PROBE_WAIT_SECONDS`)."""
        with self._lock:
            if self._latest.planned:
                return False
        unprobed = [
            o["metadata"]["name"]
            for o in self.caches.scorers.list(self.namespace)
            if not (o.get("status") or {}).get("healthStatus") and not _deleting(o)
        ]
        if not unprobed:
            return False
        now = self.clock()
        if self._probe_wait_until is None:
            self._probe_wait_until = now + FIRST_PLAN_PROBE_WAIT_SECONDS
        left = self._probe_wait_until - now
        if left <= 0:
            return False
        log.info(
            "first plan waits up to %.0f s for the first probe of %d scorer(s), e.g. %s",
            left,
            len(unprobed),
            sorted(unprobed)[0],
        )
        self.enqueue_after(PLAN_KEY, left)
        return True

    def _work(self, cluster: str) -> None:
        with self._lock:
            planned = self._latest.planned
            want = self._latest.desired.get(cluster)
            written = self._written.get(cluster)
        if not planned:
            # Nothing is known yet (a new leader's informers deliver every work before the first
            # plan runs, or the config is unreadable): plan first; the plan enqueues this key again.
            self.enqueue(PLAN_KEY)
            return
        have = self.caches.works.get(f"{cluster}/{WORK_NAME}")
        if written is not None and have is not None and resource_version(have) == written[0]:
            # the watch has not delivered our last write yet: compare with what the apiserver answered,
            # or a plan run in between would make us send the same patch twice
            have = written[1]
        mca = self.caches.addons.get(f"{cluster}/{ADDON_NAME}")
        if want is not None and (mca is None or _deleting(mca)):
            # The plan predates the MCA's deletion: a plan woken by an MCA waits
            # FLEET_PLAN_DELAY_SECONDS, and meanwhile OCM deletes the addon's labelled works.  Writing
            # `want` now would re-create the work OCM just withdrew, and a work deleted before the work
            # agent adds its finalizer leaves its ConfigMap behind on the cluster.  That plan withdraws it.
            return
        if want is None:
            with self._lock:
                self._written.pop(cluster, None)
            if have is not None and self.writer.delete(
                MANIFEST_WORKS, cluster, WORK_NAME, current=have, owns=OURS
            ):
                log.info("withdrew the config work of cluster %s", cluster, extra={"key": cluster})
            return
        want = dropping_stale_hash(want, have)  # the MCA lost its config references
        result = self.writer.ensure(MANIFEST_WORKS, want, have, owns=OURS)
        if have is None or resource_version(result) != resource_version(have):
            cached = self.caches.works.get(f"{cluster}/{WORK_NAME}")
            with self._lock:
                self._written[cluster] = (resource_version(cached) if cached is not None else "", result)

    # -- status ---------------------------------------------------------------------------------

    def _status(self) -> Result | None:
        with self._lock:
            latest = self._latest
            self._status_soon = False
            parts = self._status_parts or ALL_STATUS  # empty: the periodic refresh
            self._status_parts = frozenset()
        if not latest.planned:
            config = self._config()
            if config is not None and isinstance(parse_config(config), SpecProblem):
                self._config_status(latest)  # no plan can run: say why (Accepted=False/InvalidSpec)
                return None
            # a new leader's report and work events come before its first plan: writing status from
            # nothing would flip every condition (and warn) until the plan, which asks again
            self.enqueue(PLAN_KEY)
            return None
        now = datetime.now(UTC)
        if "config" in parts:
            self._config_status(latest)
        if "scorers" in parts:
            outcomes = latest.result.scorers if latest.result is not None else {}
            for obj in self.caches.scorers.list(self.namespace):
                name = obj["metadata"]["name"]
                outcome = outcomes.get(name)
                self._scorer_status(obj, outcome, latest, now)
        return self._refresh()

    def _refresh(self) -> Result | None:
        """Re-read the reports once per refresh period: the queue keeps one wait per key, the earliest."""
        self.enqueue_after(STATUS_KEY, REPORT_REFRESH_SECONDS)
        return None

    def _config_status(self, latest: _Latest) -> None:
        for obj in self.caches.configs.list():
            meta = obj["metadata"]
            if _deleting(obj):
                continue
            problem = config_target_problem(meta["name"], meta["namespace"], self.namespace)
            generation = int(meta.get("generation") or 0)
            if problem is not None:
                specs = [accepted_condition(problem, None, None)]
                extra: JSON = {}
            else:
                parsed = parse_config(obj)
                spec_problem = parsed if isinstance(parsed, SpecProblem) else None
                notes = parsed.notes if isinstance(parsed, DynamicScoringConfig) else ()
                result = latest.result if spec_problem is None else None
                specs = [accepted_condition(None, spec_problem, result, notes)]
                extra = {}
                if result is not None:
                    applied = {
                        c.name: _applied(self.caches.works.get(f"{c.name}/{WORK_NAME}"))
                        for c in latest.clusters
                    }
                    entries = cluster_entries(latest.clusters, result, applied)
                    specs.append(distributed_condition(entries))
                    extra = {
                        "clusters": entries,
                        "distributedClusters": sum(1 for e in entries if e["applied"] == "True"),
                    }
            self._patch(DYNAMIC_SCORING_CONFIGS, obj, specs, extra, generation)

    def _scorer_status(
        self, obj: JSON, outcome: ScorerOutcome | None, latest: _Latest, now: datetime
    ) -> None:
        generation = int(obj["metadata"].get("generation") or 0)
        if latest.result is not None and outcome is None:
            return  # created after the last plan; the plan it triggered comes next
        if latest.result is None or outcome is None:
            spec = ConditionSpec(
                DISTRIBUTED,
                "False",
                "NoDynamicScoringConfig",
                f"distribution is off: no DynamicScoringConfig {CONFIG_NAME!r} "
                f"in namespace {self.namespace!r}",
            )
            self._patch(DYNAMIC_SCORERS, obj, [spec], {"clusters": None}, generation)
            return
        reports = []
        summary = next(
            (
                s
                for c in outcome.clusters[:1]
                for s in latest.result.clusters.get(c, ())
                if s.name == obj["metadata"]["name"]
            ),
            None,
        )
        if summary is not None:
            aps = aps_name(summary.score_name)
            found = {}
            taken = {}
            for cluster in outcome.clusters:
                item = self.caches.scores.get(f"{cluster}/{aps}")
                if item is not None:
                    found[cluster] = item
                elif (other := self.caches.foreign.get(f"{cluster}/{aps}")) is not None:
                    taken[cluster] = other
            reports = cluster_reports(summary.score_name, outcome.clusters, found, now, taken)
        spec = scorer_distributed_condition(outcome, reports)
        entries = [r.to_status() for r in reports] or None
        self._patch(DYNAMIC_SCORERS, obj, [spec], {"clusters": entries}, generation)

    def _patch(
        self, resource: Any, obj: JSON, specs: list[ConditionSpec], extra: JSON, generation: int
    ) -> None:
        """Merge-patch our conditions and fields into status, only when they differ from the cache."""

        def compute(fresh: JSON) -> JSON | None:
            status = fresh.get("status") or {}
            current = list(status.get("conditions") or [])
            conditions = apply_conditions(current, specs, generation)
            patch: JSON = {}
            if conditions != current:
                patch["conditions"] = conditions
            for key, value in extra.items():
                if status.get(key) != value:
                    patch[key] = value
            return patch or None

        if compute(obj) is not None:
            meta = obj["metadata"]
            self.writer.patch_status(resource, meta["namespace"], meta["name"], compute)
            self._warn(obj, specs)

    def _warn(self, obj: JSON, specs: list[ConditionSpec]) -> None:
        """One Warning Event when a condition turns to a problem the user must fix (not on repeats)."""
        current = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
        for spec in specs:
            if spec.reason not in WARNING_REASONS:
                continue
            old = current.get(spec.type) or {}
            if (old.get("reason"), old.get("message")) != (spec.reason, spec.message):
                self.writer.event(obj, "Warning", spec.reason, spec.message[:1024])


def _work_keys(logic: Distribution) -> Callable[[JSON], list[str]]:
    def keys(work: JSON) -> list[str]:
        meta = work.get("metadata") or {}
        if meta.get("name") != WORK_NAME:
            return []
        logic.request_status(CONFIG_STATUS)  # the Applied state feeds the config's status
        return [WORK_KEY_PREFIX + str(meta.get("namespace"))]

    return keys


def _report_keys(logic: Distribution) -> Callable[[JSON], list[str]]:
    def keys(_aps: JSON) -> list[str]:
        logic.request_status(SCORER_STATUS)
        return []

    return keys


def plan_when_changed(
    queue: WorkQueue, inputs: Callable[[JSON], tuple[object, ...]]
) -> Callable[[WatchEvent], None]:
    """The handler that asks for a plan when what the plan reads of an object changed.

    A fleet enabled at once changes every MCA twice (install namespace, config hash): the plan
    runs `FLEET_PLAN_DELAY_SECONDS` after the first of such changes, once for all of them, not
    once per event (each plan reads the whole fleet).
    """

    def on_event(event: WatchEvent) -> None:
        if event.type == "MODIFIED" and event.old is not None and inputs(event.old) == inputs(event.obj):
            return  # nothing the plan reads changed
        queue.add_after(PLAN_KEY, FLEET_PLAN_DELAY_SECONDS)

    return on_event


def distribution_controller(ctx: HubContext) -> list[Controller]:
    """The distribution controller (a ``ControllerFactory``)."""
    caches = Caches.of(ctx)
    workers = ctx.workers
    logic = Distribution(caches, ctx.manager.writer(NAME), ctx.namespace)
    controller = Controller(NAME, logic.reconcile, workers=workers, resync_seconds=ctx.resync_seconds)
    logic.enqueue = controller.enqueue
    logic.enqueue_after = controller.queue.add_after
    to_plan = lambda _obj: [PLAN_KEY]  # noqa: E731 - one line per watch reads best
    controller.watch(caches.configs, keys=to_plan)
    controller.watch(caches.scorers, keys=to_plan)

    for informer, inputs in ((caches.addons, _mca_plan_inputs), (caches.clusters, _cluster_plan_inputs)):
        controller.uses(informer)
        informer.add_handler(plan_when_changed(controller.queue, inputs))
    controller.watch(caches.works, keys=_work_keys(logic))
    controller.watch(caches.scores, keys=_report_keys(logic))
    controller.watch(caches.foreign, keys=_report_keys(logic))
    return [controller]


__all__ = ["NAME", "WORK_NAME", "Distribution", "config_work", "distribution_controller", "plan_when_changed"]
