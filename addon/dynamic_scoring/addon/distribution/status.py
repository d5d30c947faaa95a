"""Conditions and per-cluster status that the distribution controller writes, computed without I/O.

On the DynamicScoringConfig: ``Accepted`` (is this the object in effect, is its spec readable, do its
masks name real clusters and scores) and ``Distributed`` (is every enabled cluster's ManifestWork
applied), plus ``status.clusters`` and ``status.distributedClusters``.  On each DynamicScorer:
``Distributed`` (where it went, where not and why, and which clusters' agents report failures).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from dynamic_scoring.addon.distribution.plan import ClusterInput, Plan, ScorerOutcome
from dynamic_scoring.addon.registry.models import SpecProblem
from dynamic_scoring.addon.registry.reports import ClusterReport, reports_message
from dynamic_scoring.addon.registry.status import DISTRIBUTED, ConditionSpec

ACCEPTED = "Accepted"


def accepted_condition(
    target_problem: str | None,
    spec_problem: SpecProblem | None,
    result: Plan | None,
    notes: Sequence[str] = (),
) -> ConditionSpec:
    """``Accepted`` of a DynamicScoringConfig: False when it is ignored or unreadable, else True.

    Masks that name an unknown cluster or score do not stop distribution, but they do nothing and are
    most likely typos: they make the reason ``AcceptedWithWarnings`` and are listed by field.  So does
    ``maskPolicy: Score`` for a masked scorer that states no missing-data score (nothing to write).
    """
    if target_problem is not None:
        reason = "WrongName" if target_problem.startswith("metadata.name") else "WrongNamespace"
        return ConditionSpec(ACCEPTED, "False", reason, target_problem)
    if spec_problem is not None:
        return ConditionSpec(ACCEPTED, "False", "InvalidSpec", spec_problem.message)
    warnings = [str(p) for p in result.problems if p.field.startswith("spec.mask")] if result else []
    extra = list(notes)
    if warnings:
        return ConditionSpec(ACCEPTED, "True", "AcceptedWithWarnings", "; ".join(warnings + extra))
    return ConditionSpec(ACCEPTED, "True", "Accepted", "; ".join(extra) or "this configuration is in effect")


def cluster_entries(
    clusters: Sequence[ClusterInput], result: Plan, applied: Mapping[str, Literal["True", "False", "Unknown"]]
) -> list[dict[str, Any]]:
    """``status.clusters``: per enabled cluster, its namespace, how many scorers, and the work's state.

    ``applied`` maps a cluster to its ManifestWork's ``Applied`` condition status (missing: Unknown).
    """
    entries = []
    for c in sorted(clusters, key=lambda c: c.name):
        entry: dict[str, Any] = {
            "clusterName": c.name,
            "namespace": c.namespace,
            "scorers": len(result.clusters.get(c.name, ())),
            "applied": applied.get(c.name, "Unknown"),
        }
        if not c.namespace:
            entry["message"] = "the ManagedClusterAddOn reports no install namespace yet"
        entries.append(entry)
    return entries


def distributed_condition(entries: Sequence[Mapping[str, Any]]) -> ConditionSpec:
    """``Distributed`` of the DynamicScoringConfig, from ``cluster_entries``."""
    if not entries:
        return ConditionSpec(DISTRIBUTED, "False", "NoEnabledClusters", "no cluster has the addon enabled")
    pending = [e["clusterName"] for e in entries if e["applied"] != "True"]
    if not pending:
        return ConditionSpec(
            DISTRIBUTED, "True", "Applied", f"applied on all {len(entries)} enabled cluster(s)"
        )
    shown = ", ".join(pending[:5]) + (f" and {len(pending) - 5} more" if len(pending) > 5 else "")
    failed = any(e["applied"] == "False" for e in entries)
    return ConditionSpec(
        DISTRIBUTED,
        "False" if failed else "Unknown",
        "NotApplied" if failed else "Applying",
        f"not applied on {len(pending)} of {len(entries)} cluster(s): {shown}",
    )


def scorer_distributed_condition(
    outcome: ScorerOutcome, reports: Sequence[ClusterReport] = ()
) -> ConditionSpec:
    """``Distributed`` of one DynamicScorer: where it went (or why nowhere), plus the agents' failures."""
    if not outcome.distributed:
        return ConditionSpec(DISTRIBUTED, "False", outcome.reason, outcome.message)
    failing, summary = reports_message(reports) if reports else (False, "")
    message = outcome.message + (f"; {summary}" if summary else "")
    reason = outcome.reason
    if any(r.reason == "ScoreNameTaken" for r in reports):
        reason = "ScoreNameTaken"  # the one failure only the scorer's author can fix: say it first
    elif failing:
        reason = "AgentsReportFailures"
    return ConditionSpec(DISTRIBUTED, "True", reason, message)


__all__ = [
    "ACCEPTED",
    "accepted_condition",
    "cluster_entries",
    "distributed_condition",
    "scorer_distributed_condition",
]
