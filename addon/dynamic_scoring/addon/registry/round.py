"""One probe round of one DynamicScorer, from probe results to the status patch and the Event.

The scorer controller does the I/O (reads the probe Secret, calls ``probe_health`` and, in Full mode,
``fetch_config``), then hands the results to ``evaluate_round``.  Everything it writes follows from this
one pure function, so the whole decision is unit-tested: the health transition, which ``lastSyncedConfig``
to keep, the effective summary, and the four scorer-owned conditions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from dynamic_scoring.addon.registry.effective import Resolution, resolve
from dynamic_scoring.addon.registry.health import HealthEvent, HealthState, next_state
from dynamic_scoring.addon.registry.models import DynamicScorer, SpecProblem, parse_scorer
from dynamic_scoring.addon.registry.probe import ConfigResult, ProbeResult
from dynamic_scoring.addon.registry.status import (
    ConditionSpec,
    apply_conditions,
    config_synced_condition,
    healthy_condition,
    status_patch,
    synced_config_after,
    valid_condition,
)

NO_TARGET = ProbeResult(
    False, "NoProbeTarget", "neither configURL nor scoring.host is a usable URL; nothing to probe"
)


@dataclass(frozen=True)
class RoundOutcome:
    """What to write after a round.

    Attributes:
        status: the merge patch for ``/status`` (owned fields and the full ``conditions`` list).
        event: the Event to record (only when the health status changed).
        resolution: the scorer's effective summary (or why there is none), for distribution.
        passed: whether the round passed.
        changed: whether ``status`` differs from the object's current status in anything but
            ``lastProbeTime``.  A steady scorer's rounds change nothing, and the controller writes
            nothing, so 200 healthy scorers cost no apiserver writes at all.
    """

    status: dict[str, Any]
    event: HealthEvent | None
    resolution: Resolution | SpecProblem
    passed: bool
    changed: bool = True


def _differs(patch: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    for key, value in patch.items():
        if key == "lastProbeTime":
            continue
        if current.get(key) != value:
            return True
    return False


def round_result(
    scorer: DynamicScorer, health: ProbeResult | None, config: ConfigResult | None
) -> ProbeResult:
    """The verdict: ``/healthz`` first, then (Full mode) ``/config``; the first failure explains it."""
    if health is None:
        return NO_TARGET
    if not health.ok:
        return health
    if scorer.spec.config_sync_mode == "Full":
        if config is None:
            return ProbeResult(False, "NotFetched", "configSyncMode is Full but /config was not fetched")
        if not config.result.ok:
            return config.result
    return health


def evaluate_round(
    obj: Mapping[str, Any],
    health: ProbeResult | None,
    config: ConfigResult | None,
    *,
    failure_threshold: int,
    now: datetime,
) -> RoundOutcome:
    """Fold one round's results into the DynamicScorer ``obj`` (as read from the cache).

    ``health`` is None when there was nothing to probe (no usable URL), which counts as a failure.
    """
    parsed = parse_scorer(obj)
    status = obj.get("status") or {}
    conditions = list(status.get("conditions") or [])
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    if isinstance(parsed, SpecProblem):
        valid = valid_condition(parsed)
        patch = {
            "observedGeneration": generation,
            "healthStatus": status.get("healthStatus") or "Unknown",
            "conditions": apply_conditions(conditions, [valid], generation, now),
        }
        return RoundOutcome(patch, None, parsed, False, _differs(patch, status))
    verdict = round_result(parsed, health, config)
    prev = HealthState(parsed.status.health_status or "Unknown", parsed.status.consecutive_failures)
    transition = next_state(prev, verdict.ok, verdict.message, failure_threshold=failure_threshold)
    synced = synced_config_after(parsed, config)
    current = replace(parsed, status=parsed.status.model_copy(update={"last_synced_config": synced}))
    resolution = resolve(current)
    patch = status_patch(parsed, transition.state, synced, resolution, now)
    specs: list[ConditionSpec] = [
        healthy_condition(transition.state, verdict, failure_threshold),
        config_synced_condition(parsed, config),
        valid_condition(resolution),
    ]
    patch["conditions"] = apply_conditions(conditions, specs, generation, now)
    return RoundOutcome(patch, transition.event, resolution, verdict.ok, _differs(patch, status))


__all__ = ["NO_TARGET", "RoundOutcome", "evaluate_round", "round_result"]
