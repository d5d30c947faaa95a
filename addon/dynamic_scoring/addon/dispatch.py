"""Kueue's External MultiKueue dispatcher, by score: which clusters a waiting Workload is nominated to.

Kueue (v0.13 and newer) lets an outside controller choose the worker clusters of a MultiKueue
Workload: with `multiKueue.dispatcherName` set to a name that is not one of Kueue's own, MultiKueue
copies a Workload only to the clusters in its `status.nominatedClusterNames`.  Kueue's own
incremental dispatcher adds one cluster per round, and a round is a constant 5 minutes; this one
adds the next best-scored cluster after a delay the hub admin sets in seconds.

Why these rules:
* **Only Workloads of our ordered configs.**  A Workload is ours to dispatch only while it waits on
  a `kueue.x-k8s.io/multikueue` AdmissionCheck (state `Pending`, quota reserved on the hub, no
  `status.clusterName`) whose MultiKueueConfig the hub wrote (`multikueue.placement_of`).  Its
  `spec.clusters` is the order: the Placement's decided clusters, best-scored first.
* **Best first, then one more per delay, never one taken away.**  Nothing is withdrawn for a
  change of score, because a copy may be about to be admitted there; Kueue itself withdraws the
  others once one cluster admits.  A cluster that left the Placement (and so the config) is
  dropped from the nominations and never nominated again.
* **Another writer's nominations are left alone.**  A person or another controller may pin a
  Workload; the field's owner in `metadata.managedFields` tells.  We write with our own field
  manager, so a non-empty list that manager does not own is someone else's.
* **Nothing kept only in memory.**  When we last nominated is the `time` of our managedFields
  entry, so a restarted or new leader continues each Workload where it stood.

Everything here is pure: objects in, a decision out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.timestamps import format_time, parse_time

DISPATCHER_NAME: Final = "dynamic-scoring.open-cluster-management.io/multikueue-dispatcher"
"""What Kueue's Configuration `multiKueue.dispatcherName` is set to for this dispatcher."""
FIELD_MANAGER: Final = "dynamic-scoring-multikueue-dispatcher"
"""The field manager of our nominations: how we tell ours from another writer's."""
MULTIKUEUE_CONTROLLER: Final = "kueue.x-k8s.io/multikueue"
DEFAULT_DELAY_SECONDS: Final = 10.0
CONDITION: Final = "MultiKueueNominated"
"""Our condition on a Workload we dispatch: whom it was nominated to, and what comes next."""
_NOMINATED: Final = "f:nominatedClusterNames"


def check_config(check: JSON) -> str | None:
    """The MultiKueueConfig a `kueue.x-k8s.io/multikueue` AdmissionCheck names, or None for any other."""
    spec = check.get("spec") or {}
    if spec.get("controllerName") != MULTIKUEUE_CONTROLLER:
        return None
    params = spec.get("parameters") or {}
    if params.get("apiGroup") != "kueue.x-k8s.io" or params.get("kind") != "MultiKueueConfig":
        return None
    name = params.get("name")
    return str(name) if name else None


def _condition_true(workload: JSON, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (workload.get("status") or {}).get("conditions") or []
    )


@dataclass(frozen=True)
class Waiting:
    """A Workload waiting on one of our ordered configs: the check and the config's order."""

    check: str
    config: str
    order: tuple[str, ...]


def waiting(
    workload: JSON, configs_of_checks: Mapping[str, str], orders: Mapping[str, list[str]]
) -> Waiting | None:
    """Why `workload` is ours to dispatch now, or None when it is not.

    `configs_of_checks`: AdmissionCheck name -> the MultiKueueConfig it names (`check_config`);
    `orders`: our configs' names -> their `spec.clusters`.  Kueue nominates only while the hub has
    reserved quota and the check is `Pending`, and never once `clusterName` is set (admitted); a
    finished or deleted Workload is none of ours either.  Like Kueue's own dispatchers, it waits
    until every other admission check of the Workload is `Ready` (a provisioning request, say):
    MultiKueue creates no copy before that, and a delay counted meanwhile would nominate every
    cluster at once.
    """
    status = workload.get("status") or {}
    if status.get("clusterName") or (workload.get("metadata") or {}).get("deletionTimestamp"):
        return None
    if not _condition_true(workload, "QuotaReserved") or _condition_true(workload, "Finished"):
        return None
    states = status.get("admissionChecks") or []
    for state in states:
        name = str(state.get("name") or "")
        config = configs_of_checks.get(name)
        if config is None or config not in orders or state.get("state") != "Pending":
            continue
        if any(s.get("state") != "Ready" for s in states if s is not state):
            return None
        return Waiting(name, config, tuple(orders[config]))
    return None


def nominated(workload: JSON) -> list[str]:
    """`status.nominatedClusterNames`, in order ([] for none)."""
    return [str(c) for c in (workload.get("status") or {}).get("nominatedClusterNames") or []]


def _owns_nominations(entry: JSON) -> bool:
    fields = entry.get("fieldsV1") or {}
    return _NOMINATED in (fields.get("f:status") or {})


def owners(workload: JSON) -> list[str]:
    """The field managers that own `status.nominatedClusterNames` (needs the object's managedFields)."""
    return sorted(
        {
            str(e.get("manager"))
            for e in (workload.get("metadata") or {}).get("managedFields") or []
            if _owns_nominations(e)
        }
    )


def last_nominated(workload: JSON, manager: str = FIELD_MANAGER) -> dt.datetime | None:
    """When `manager` last wrote the nominations: the `time` of its entry that owns them.

    Its condition is written with server-side apply, an entry of its own, so that write does not
    count as a nomination.
    """
    for entry in (workload.get("metadata") or {}).get("managedFields") or []:
        if (
            entry.get("manager") == manager
            and entry.get("operation") == "Update"
            and entry.get("subresource") == "status"
            and _owns_nominations(entry)
        ):
            return parse_time(entry.get("time"))
    return None


def _truncated(t: dt.datetime) -> float:
    """How much later than `t` a write may have been: managedFields times are cut to the second."""
    return 1.0 if t.microsecond == 0 else 0.0


@dataclass(frozen=True)
class Decision:
    """What to do with one waiting Workload.

    `nominate`: the full list to write, or None to write nothing; `added`: the clusters it adds and
    `dropped` those it removes (they left the config); `wake_in`: seconds until the next look, or
    None; `exhausted`: every cluster was nominated a delay ago and none admitted; `foreign`: the
    nominations are another writer's (its field managers), so nothing is done.
    """

    nominate: list[str] | None = None
    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    wake_in: float | None = None
    exhausted: bool = False
    foreign: tuple[str, ...] = ()


def decide(
    workload: JSON,
    order: Iterable[str],
    now: dt.datetime,
    delay: float,
    manager: str = FIELD_MANAGER,
) -> Decision:
    """The next nominations of a Workload `waiting` found ours, from its object with managedFields.

    None nominated: the best cluster.  Ours nominated: the next best not yet nominated, once `delay`
    seconds have passed since our last write; clusters no longer in `order` are dropped at once.
    Someone else's: nothing (`foreign`).
    """
    ranked = list(order)
    current = nominated(workload)
    if current:
        holders = owners(workload)
        if manager not in holders:
            return Decision(foreign=tuple(holders) or ("unknown",))
    kept = [c for c in current if c in ranked]
    dropped = tuple(c for c in current if c not in ranked)
    rest = [c for c in ranked if c not in kept]
    if not kept:
        if not rest:
            return Decision()  # an empty config: nothing to nominate (Kueue refuses one anyway)
        return Decision(nominate=[rest[0]], added=(rest[0],), dropped=dropped, wake_in=delay)
    last = last_nominated(workload, manager)
    waited = delay if last is None else (now - last).total_seconds() - _truncated(last)
    if waited < delay:
        return Decision(nominate=kept if dropped else None, dropped=dropped, wake_in=max(delay - waited, 0.5))
    if not rest:
        return Decision(nominate=kept if dropped else None, dropped=dropped, exhausted=True)
    return Decision(nominate=[*kept, rest[0]], added=(rest[0],), dropped=dropped, wake_in=delay)


def nomination_message(config: str, decision: Decision, before: list[str], delay: float) -> str:
    """The Event text of a nomination: which cluster, why, and what was nominated before."""
    parts = []
    if decision.added and not before:
        parts.append(f"nominated {decision.added[0]}, the best-scored cluster of MultiKueueConfig {config}")
    elif decision.added:
        parts.append(
            f"no cluster reserved quota within {delay:g} s of the last nomination: nominated "
            f"{decision.added[0]}, the next of MultiKueueConfig {config} "
            f"(nominated before: {', '.join(before)})"
        )
    if decision.dropped:
        parts.append(f"withdrew {', '.join(decision.dropped)}: no longer in MultiKueueConfig {config}")
    return "; ".join(parts)


def condition(
    workload: JSON, config: str, nominated_now: list[str], decision: Decision, delay: float, now: dt.datetime
) -> JSON:
    """Our condition on the Workload after `decision`: True while we dispatch it, naming what is next.

    Reason `Nominated` while clusters of the config remain, `AllClustersNominated` once every one
    is and none admitted (the message is the Warning's).  `lastTransitionTime` moves only when the
    reason does, as for Kueue's own conditions.
    """
    if decision.exhausted:
        reason, message = "AllClustersNominated", exhausted_message(config, nominated_now, delay)
    else:
        message = f"nominated {', '.join(nominated_now)} of MultiKueueConfig {config}, best-scored first"
        if decision.wake_in is not None:
            message += f"; the next one unless a cluster admits the Workload within {delay:g} s"
        reason = "Nominated"
    since = format_time(now)
    for existing in (workload.get("status") or {}).get("conditions") or []:
        if existing.get("type") == CONDITION and existing.get("reason") == reason:
            since = str(existing.get("lastTransitionTime") or since)
    return {
        "type": CONDITION,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


def exhausted_message(config: str, clusters: list[str], delay: float) -> str:
    """The Warning text when every cluster of the config was nominated and none reserved quota."""
    return (
        f"every cluster of MultiKueueConfig {config} is nominated ({', '.join(clusters)}) and none has "
        f"reserved quota {delay:g} s after the last nomination; the Workload keeps waiting for one to "
        "admit it. Check the workers' ClusterQueues (quota, flavors) and the Placement's decisions"
    )


__all__ = [
    "CONDITION",
    "DEFAULT_DELAY_SECONDS",
    "DISPATCHER_NAME",
    "FIELD_MANAGER",
    "MULTIKUEUE_CONTROLLER",
    "Decision",
    "Waiting",
    "check_config",
    "condition",
    "decide",
    "exhausted_message",
    "last_nominated",
    "nominated",
    "nomination_message",
    "owners",
    "waiting",
]
