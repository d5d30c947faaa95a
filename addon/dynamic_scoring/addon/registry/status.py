"""What the scorer controller writes into a DynamicScorer's ``status``, computed without side effects.

The scorer controller owns ``healthStatus``, ``consecutiveFailures``, ``lastProbeTime``,
``lastSyncedConfig``, ``observedGeneration``, ``scoreName``, ``scoringInterval`` and the conditions
``Healthy``, ``ConfigSynced`` and ``Valid``.  ``Distributed`` and ``clusters`` belong to the
distribution controller; nothing here touches them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from dynamic_scoring.addon.registry.effective import Resolution
from dynamic_scoring.addon.registry.health import HealthState
from dynamic_scoring.addon.registry.models import DynamicScorer, SpecProblem
from dynamic_scoring.addon.registry.probe import ConfigResult, ProbeResult
from dynamic_scoring.addon.registry.summary_size import SUMMARY_LIMIT, summary_size, too_large_message
from dynamic_scoring.contract.wire import ScorerConfig
from dynamic_scoring.kube.conditions import set_condition

HEALTHY = "Healthy"
CONFIG_SYNCED = "ConfigSynced"
VALID = "Valid"
DISTRIBUTED = "Distributed"


@dataclass(frozen=True)
class ConditionSpec:
    """One condition to set (``dynamic_scoring.kube.conditions.set_condition`` adds the timestamps)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


def apply_conditions(
    existing: list[dict[str, Any]],
    specs: Iterable[ConditionSpec],
    generation: int,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """``existing`` with each of ``specs`` set; others' conditions and unchanged timestamps are kept."""
    conditions = existing
    for spec in specs:
        conditions = set_condition(
            conditions, spec.type, spec.status, spec.reason, spec.message[:32768], generation, now
        )
    return conditions


def healthy_condition(state: HealthState, last: ProbeResult | None, threshold: int) -> ConditionSpec:
    """``Healthy`` from the health state and the last round's first failing (or passing) check."""
    if last is None or (state.status == "Unknown" and state.consecutive_failures == 0):
        return ConditionSpec(HEALTHY, "Unknown", "NotProbedYet", "the hub has not probed this scorer yet")
    if state.status == "Active" and last.ok:
        return ConditionSpec(HEALTHY, "True", last.reason, last.message)
    if state.status == "Inactive":
        return ConditionSpec(
            HEALTHY,
            "False",
            last.reason,
            f"{last.message} ({state.consecutive_failures} failed probe(s) in a row; "
            f"Inactive from {threshold})",
        )
    status: Literal["True", "Unknown"] = "True" if state.status == "Active" else "Unknown"
    return ConditionSpec(
        HEALTHY,
        status,
        last.reason,
        f"{last.message} ({state.consecutive_failures} of {threshold} failed probes before Inactive)",
    )


def config_synced_condition(scorer: DynamicScorer, fetch: ConfigResult | None) -> ConditionSpec:
    """``ConfigSynced``: only meaningful in Full mode; in None mode it says the spec is used as is."""
    if scorer.spec.config_sync_mode != "Full":
        return ConditionSpec(
            CONFIG_SYNCED,
            "True",
            "SyncDisabled",
            "configSyncMode is None: the spec is used, /config is not read",
        )
    if fetch is None:
        return ConditionSpec(
            CONFIG_SYNCED, "Unknown", "NotFetchedYet", "the hub has not fetched configURL yet"
        )
    if fetch.result.ok:
        return ConditionSpec(CONFIG_SYNCED, "True", fetch.result.reason, fetch.result.message)
    stale = scorer.status.last_synced_config is not None
    suffix = "; the last valid document is kept until the scorer is Inactive" if stale else ""
    return ConditionSpec(CONFIG_SYNCED, "False", fetch.result.reason, fetch.result.message + suffix)


def valid_condition(resolution: Resolution | SpecProblem) -> ConditionSpec:
    """``Valid``: whether the spec (with the synced /config) resolves to a summary, and why not.

    A summary larger than one scorer may take in a cluster's config work (``SUMMARY_LIMIT``) is not
    valid either (``SummaryTooLarge``, naming the size and the limit).
    """
    if isinstance(resolution, SpecProblem):
        return ConditionSpec(VALID, "False", "InvalidSpec", resolution.message)
    notes = "; ".join(resolution.notes)
    if resolution.problems:
        message = resolution.message + (f" (notes: {notes})" if notes else "")
        return ConditionSpec(VALID, "False", "InvalidSpec", message)
    if resolution.pending is not None:
        return ConditionSpec(VALID, "Unknown", "WaitingForConfig", resolution.pending)
    if resolution.summary is not None:
        # no cluster's config work could carry it: the distribution leaves it out (same measure)
        size = summary_size(resolution.summary)
        if size > SUMMARY_LIMIT:
            return ConditionSpec(VALID, "False", "SummaryTooLarge", too_large_message(size))
    if resolution.withheld:
        # Still valid and distributed, but not as the spec reads: say so with its own reason.
        message = "; ".join(resolution.withheld) + (f" (notes: {notes})" if notes else "")
        return ConditionSpec(VALID, "True", "CredentialsWithheld", message)
    return ConditionSpec(VALID, "True", "Resolved", notes or "the spec resolves to a summary")


def synced_config_after(scorer: DynamicScorer, fetch: ConfigResult | None) -> ScorerConfig | None:
    """The ``lastSyncedConfig`` to store: the new document, the kept one, or none.

    None mode stores nothing, so a document from an earlier Full period cannot override the spec.  A
    failed fetch keeps the last valid document only while the spec is the one it was fetched under: after
    an edit (``metadata.generation`` moved past ``status.observedGeneration``) it may come from another
    ``configURL``, so it is dropped.
    """
    if scorer.spec.config_sync_mode != "Full":
        return None
    if fetch is not None and fetch.config is not None:
        return fetch.config
    if scorer.status.observed_generation != scorer.generation:
        return None
    return scorer.status.last_synced_config


def status_patch(
    scorer: DynamicScorer,
    state: HealthState,
    synced: ScorerConfig | None,
    resolution: Resolution | SpecProblem,
    probed_at: datetime | None,
) -> dict[str, Any]:
    """The merge patch of the controller-owned ``status`` fields (conditions excluded).

    ``lastSyncedConfig: None`` in the patch deletes a stale document (merge-patch semantics).
    """
    patch: dict[str, Any] = {
        "observedGeneration": scorer.generation,
        "healthStatus": state.status,
        "consecutiveFailures": state.consecutive_failures,
        "lastSyncedConfig": synced.model_dump(mode="json") if synced is not None else None,
    }
    if probed_at is not None:
        patch["lastProbeTime"] = probed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    summary = resolution.summary if isinstance(resolution, Resolution) else None
    patch["scoreName"] = summary.score_name if summary else None
    patch["scoringInterval"] = summary.scoring_interval if summary else None
    return patch


__all__ = [
    "CONFIG_SYNCED",
    "DISTRIBUTED",
    "HEALTHY",
    "VALID",
    "ConditionSpec",
    "apply_conditions",
    "config_synced_condition",
    "healthy_condition",
    "status_patch",
    "synced_config_after",
    "valid_condition",
]
