"""Status conditions with `meta.SetStatusCondition` semantics, on plain JSON lists.

Several writers share one `status.conditions` list (on a ManagedClusterAddOn: our manager, OCM's
addon-manager and the klusterlet).  A merge patch replaces the list whole, so a writer must send
the list as it read it with only its own entries changed.  These helpers never touch an entry of
another type, and return the input list itself when nothing changed, so a caller can tell "no
difference, no write" with `is` or `==`.
"""

from __future__ import annotations

import datetime as dt

from dynamic_scoring.kube.jsontypes import JSON


def rfc3339(t: dt.datetime) -> str:
    """metav1.Time: seconds precision, UTC, `Z`."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(conditions: list[JSON] | None, type_: str) -> JSON | None:
    """The condition of `type_`, or None."""
    for cond in conditions or []:
        if cond.get("type") == type_:
            return cond
    return None


def set_condition(
    conditions: list[JSON],
    type_: str,
    status: str,
    reason: str,
    message: str,
    observed_generation: int | None = None,
    now: dt.datetime | None = None,
) -> list[JSON]:
    """A new list with the condition of `type_` set; the same list if it already says this.

    `lastTransitionTime` moves only when `status` changes (a new reason or message alone is not a
    transition); every other condition is kept as it was, in its place.
    """
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"condition status must be True, False or Unknown, not {status!r}")
    old = find_condition(conditions, type_)
    if (
        old is not None
        and old.get("status") == status
        and old.get("reason") == reason
        and old.get("message") == message
        and (observed_generation is None or old.get("observedGeneration") == observed_generation)
        and old.get("lastTransitionTime")
    ):
        return conditions
    new: JSON = {"type": type_, "status": status, "reason": reason, "message": message}
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    elif old is not None and "observedGeneration" in old:
        new["observedGeneration"] = old["observedGeneration"]
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        new["lastTransitionTime"] = old["lastTransitionTime"]
    else:
        new["lastTransitionTime"] = rfc3339(now or dt.datetime.now(dt.UTC))
    if old is None:
        return [*conditions, new]
    return [new if c is old else c for c in conditions]


def remove_condition(conditions: list[JSON], type_: str) -> list[JSON]:
    """A new list without the condition of `type_`; the same list if there was none."""
    if find_condition(conditions, type_) is None:
        return conditions
    return [c for c in conditions if c.get("type") != type_]


def is_true(conditions: list[JSON] | None, type_: str) -> bool:
    """Whether the condition of `type_` is present with status True."""
    cond = find_condition(conditions, type_)
    return cond is not None and cond.get("status") == "True"
