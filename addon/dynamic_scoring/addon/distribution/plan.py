"""Which summaries each cluster receives: the pure core of the distribution controller.

Input: every DynamicScorer of the manager's namespace (its effective summary, its health, its optional
cluster selector), the DynamicScoringConfig's masks, and the clusters where the addon is enabled (a
ManagedClusterAddOn exists) with their labels.  Output: per cluster, the sorted summary list, plus what
was left out and why.

Rules, in order, for each scorer and cluster:

1. A scorer without a summary (invalid spec, or Full mode before its first ``/config``) goes nowhere.
2. Conflicts: scorers whose score names are equal, or differ but sanitise to the same AddOnPlacementScore
   name (``a_b`` and ``a-b``), would overwrite each other's scores on every cluster, as they did upstream.
   The oldest scorer (creation time, then name) keeps the name; the others go nowhere and are reported.
   Conflicts are decided among all resolvable scorers, healthy or not, so that the owner of a name does
   not change each time a scorer flaps.
3. A scorer that is not ``Active`` goes nowhere.
4. A scorer with ``spec.clusterSelector`` goes only to clusters whose labels match.
5. A mask ``(clusterName, scoreName)`` keeps that score from that cluster.  Under ``maskPolicy: Score``
   the pair is still sent, marked ``masked: true``, when the scorer states a ``missingDataScore``: the
   agent then writes that score without querying or scoring, so the masked cluster ranks as the
   user said instead of at 0 (Placement's value for a missing score).  A scorer without one is kept
   from the cluster as under ``Skip``, and reported: there is nothing to write.

Each cluster's list is sorted by ``(scoreName, name)`` so that an unchanged registry always produces the
same bytes and the controller writes nothing (upstream's cache order caused rewrites).  Masks that
name a cluster without the addon, or a score no scorer provides, are reported: they do nothing and are
most likely typos.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dynamic_scoring.addon.errors import FieldProblem
from dynamic_scoring.addon.registry.models import LabelSelector, Mask
from dynamic_scoring.contract.wire import ScorerSummary
from dynamic_scoring.ocm.naming import aps_name as default_aps_name


@dataclass(frozen=True)
class ScorerInput:
    """One DynamicScorer as the distribution sees it.

    Attributes:
        name: ``metadata.name``.
        created: ``metadata.creationTimestamp`` (RFC 3339, so it sorts as text).
        summary: the effective summary, or None when the scorer does not resolve.
        active: whether ``status.healthStatus`` is ``Active``.
        selector: ``spec.clusterSelector``, or None for every enabled cluster.
    """

    name: str
    created: str
    summary: ScorerSummary | None
    active: bool
    selector: LabelSelector | None = None


@dataclass(frozen=True)
class ClusterInput:
    """One cluster where the addon is enabled, with its ManagedCluster labels and agent namespace."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace: str = ""


@dataclass(frozen=True)
class ScorerOutcome:
    """Where one scorer went, for its ``Distributed`` condition.

    Attributes:
        reason: ``Distributed``, ``NoMatchingCluster``, ``NotResolved``, ``Inactive`` or ``Conflict``;
            ``budget.fit`` adds ``SummaryTooLarge`` and ``WorkTooLarge``.
        message: one line that names clusters and fields.
        clusters: the clusters that receive it (sorted).
    """

    reason: str
    message: str
    clusters: tuple[str, ...] = ()

    @property
    def distributed(self) -> bool:
        """Whether at least one cluster receives the scorer."""
        return bool(self.clusters)


@dataclass(frozen=True)
class Plan:
    """The distribution's result.

    Attributes:
        clusters: cluster name -> the summaries it receives, sorted by ``(scoreName, name)``.
        scorers: scorer name -> its outcome.
        problems: misconfiguration of the DynamicScoringConfig (masks) and conflicts between scorers.
        created: scorer name -> its ``metadata.creationTimestamp``.  ``budget.fit`` keeps the summaries
            of older scorers first when a cluster's work is too small for all, so that a newcomer
            cannot push an established scorer out; the plan carries the times so that the trim
            depends on nothing but the plan.
    """

    clusters: dict[str, tuple[ScorerSummary, ...]]
    scorers: dict[str, ScorerOutcome]
    problems: tuple[FieldProblem, ...]
    created: dict[str, str] = field(default_factory=dict)


def _order(s: ScorerInput) -> tuple[str, str]:
    return (s.created, s.name)


def _conflicts(
    scorers: Sequence[ScorerInput], aps_name: Callable[[str], str]
) -> tuple[dict[str, ScorerOutcome], list[FieldProblem]]:
    """Decide the owner of every score name and AddOnPlacementScore name; report the losers."""
    lost: dict[str, ScorerOutcome] = {}
    problems: list[FieldProblem] = []
    resolvable = sorted((s for s in scorers if s.summary is not None), key=_order)
    by_score: dict[str, ScorerInput] = {}
    by_aps: dict[str, ScorerInput] = {}
    for s in resolvable:
        assert s.summary is not None
        score = s.summary.score_name
        aps = aps_name(score)
        owner = by_score.get(score)
        if owner is not None:
            msg = (
                f"score name {score!r} is already used by DynamicScorer {owner.name!r} (older); "
                f"{s.name!r} is not distributed"
            )
        elif (owner := by_aps.get(aps)) is not None:
            assert owner.summary is not None
            msg = (
                f"score name {score!r} and {owner.summary.score_name!r} of DynamicScorer "
                f"{owner.name!r} (older) both publish AddOnPlacementScore {aps!r}; "
                f"{s.name!r} is not distributed"
            )
        else:
            by_score[score] = s
            by_aps[aps] = s
            continue
        lost[s.name] = ScorerOutcome("Conflict", f"spec.scoring.params.name: {msg}")
        problems.append(FieldProblem(f"DynamicScorer {s.name}: spec.scoring.params.name", msg))
    return lost, problems


def _mask_problems(
    masks: Sequence[Mask], clusters: Iterable[str], scores: Iterable[str]
) -> list[FieldProblem]:
    known_clusters, known_scores = set(clusters), set(scores)
    problems = []
    for i, mask in enumerate(masks):
        if mask.cluster_name not in known_clusters:
            problems.append(
                FieldProblem(
                    f"spec.masks[{i}].clusterName",
                    f"cluster {mask.cluster_name!r} does not exist or has no dynamic-scoring addon enabled",
                )
            )
        if mask.score_name not in known_scores:
            problems.append(
                FieldProblem(
                    f"spec.masks[{i}].scoreName",
                    f"no DynamicScorer provides score name {mask.score_name!r}",
                )
            )
    return problems


def _listing(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def plan(
    scorers: Sequence[ScorerInput],
    masks: Sequence[Mask],
    clusters: Sequence[ClusterInput],
    *,
    aps_name: Callable[[str], str] = default_aps_name,
    mask_policy: str = "Skip",
) -> Plan:
    """Compute every enabled cluster's summary list (the result does not depend on input order).

    ``aps_name`` is the AddOnPlacementScore name rule the agents apply (``dynamic_scoring.ocm.naming``);
    a test may pass another rule.  ``mask_policy`` is the config's ``maskPolicy`` (``Skip`` or
    ``Score``).
    """
    outcomes, problems = _conflicts(scorers, aps_name)
    score_masked = mask_policy == "Score"
    nothing_to_write: list[str] = []
    masked = {(m.cluster_name, m.score_name) for m in masks}
    ordered_clusters = sorted(clusters, key=lambda c: c.name)
    per_cluster: dict[str, list[ScorerSummary]] = {c.name: [] for c in ordered_clusters}
    scores = set()
    for s in sorted(scorers, key=lambda s: s.name):
        if s.summary is not None:
            scores.add(s.summary.score_name)
        if s.name in outcomes:
            continue
        if s.summary is None:
            outcomes[s.name] = ScorerOutcome(
                "NotResolved", "the spec does not resolve to a summary (see the Valid condition)"
            )
            continue
        if not s.active:
            outcomes[s.name] = ScorerOutcome(
                "Inactive", "the scorer is not Active (see the Healthy condition)"
            )
            continue
        reached: list[str] = []
        unselected: list[str] = []
        masked_on: list[str] = []
        defaulted_on: list[str] = []
        stated = s.summary.missing_data_score is not None
        for c in ordered_clusters:
            if s.selector is not None and not s.selector.matches(c.labels):
                unselected.append(c.name)
            elif (c.name, s.summary.score_name) in masked:
                if score_masked and stated:
                    defaulted_on.append(c.name)
                    per_cluster[c.name].append(s.summary.model_copy(update={"masked": True}))
                else:
                    masked_on.append(c.name)
            else:
                reached.append(c.name)
                per_cluster[c.name].append(s.summary)
        if masked_on and score_masked:
            nothing_to_write.append(s.name)
        detail = []
        if masked_on:
            detail.append(f"masked on {_listing(masked_on)}")
        if defaulted_on:
            score = s.summary.missing_data_score
            detail.append(
                f"masked on {_listing(defaulted_on)}, where the agent writes the default score {score}"
            )
        if unselected:
            detail.append(f"clusterSelector excludes {_listing(unselected)}")
        tail = f" ({'; '.join(detail)})" if detail else ""
        total = len(ordered_clusters)
        if reached or defaulted_on:
            sent = tuple(sorted(reached + defaulted_on))
            outcomes[s.name] = ScorerOutcome(
                "Distributed", f"sent to {len(reached)} of {total} enabled cluster(s){tail}", sent
            )
        else:
            outcomes[s.name] = ScorerOutcome(
                "NoMatchingCluster", f"sent to none of {total} enabled cluster(s){tail}"
            )
    problems.extend(_mask_problems(masks, per_cluster, scores))
    if nothing_to_write:
        problems.append(
            FieldProblem(
                "spec.maskPolicy",
                f"Score, but DynamicScorer(s) {_listing(sorted(nothing_to_write))} state no "
                "spec.missingData.score: their masked clusters receive nothing (as under Skip)",
            )
        )
    result = {
        name: tuple(sorted(items, key=lambda x: (x.score_name, x.name)))
        for name, items in per_cluster.items()
    }
    created = {s.name: s.created for s in sorted(scorers, key=lambda s: s.name)}
    return Plan(result, dict(sorted(outcomes.items())), tuple(problems), created)


def clusters_by_summary(result: Plan) -> dict[str, list[str]]:
    """Score name -> clusters receiving it (a reverse index for status and tests)."""
    index: dict[str, list[str]] = defaultdict(list)
    for cluster, summaries in result.clusters.items():
        for s in summaries:
            index[s.score_name].append(cluster)
    return dict(index)


__all__ = ["ClusterInput", "Plan", "ScorerInput", "ScorerOutcome", "clusters_by_summary", "plan"]
