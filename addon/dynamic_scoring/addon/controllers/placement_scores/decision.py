"""When an expired AddOnPlacementScore needs a nudge: the pure half of the expiry controller.

OCM's placement controller (v1.2.1) reads ``status.validUntil`` only while it schedules, and it
schedules on events: an AddOnPlacementScore add/update/delete, a cluster change, a Placement edit,
or its informers' 10-minute resync.  It has no timer at ``validUntil``.  So a score whose agent has
died keeps winning until something else happens.  The controller closes that gap by touching the
object once, just after it expires; this module decides *when* and *whether*, from the object and a
clock, so it can be tested without a cluster.

Both clocks that matter are on the hub: the manager's (when we wake) and the placement
controller's (whether it then counts the score as expired).  The agent's clock only decides *which*
instant ``validUntil`` names; a skewed agent moves that instant for both of them alike.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from dynamic_scoring.addon.constants import ADDON_NAME
from dynamic_scoring.kube.timestamps import parse_time
from dynamic_scoring.ocm.score_labels import written_by_agent

EXPIRED_ANNOTATION = "dynamic-scoring.open-cluster-management.io/expired"
"""Holds the ``validUntil`` this controller last marked as expired; the write OCM reacts to."""

SCORE_NAME_ANNOTATION = "dynamic-scoring.open-cluster-management.io/score-name"

MARGIN_SECONDS = 1.0
"""How long after ``validUntil`` we write.

OCM tests ``now.After(validUntil)``: a write that lands at or before ``validUntil`` on the
placement controller's clock makes it re-schedule while the score still counts, and nothing
would wake it again.  ``validUntil`` has whole-second precision and the work queue's timer fires a
few milliseconds late or early, so one second is the smallest round margin that keeps the write
strictly after expiry, with room for hub hosts whose clocks agree to within a second (NTP keeps
them within milliseconds).  It is also the extra time an expired score can keep winning.
"""


def is_ours(obj: dict[str, Any]) -> bool:
    """True for AddOnPlacementScores our agents wrote (`score_labels`; the informer selects only those)."""
    return written_by_agent(obj, ADDON_NAME)


def parse_valid_until(text: object) -> dt.datetime | None:
    """``status.validUntil`` as an aware datetime; None when absent or not RFC 3339."""
    return parse_time(text)


@dataclass(frozen=True)
class Verdict:
    """What to do with one object now.

    Attributes:
        mark: the ``validUntil`` text to record in `EXPIRED_ANNOTATION` (a write is due), or None.
        requeue_after: seconds until the object should be looked at again, or None (no timer:
            the next change to the object wakes us).
    """

    mark: str | None = None
    requeue_after: float | None = None


def decide(obj: dict[str, Any], now: dt.datetime, margin: float = MARGIN_SECONDS) -> Verdict:
    """Wait for expiry (plus `margin`), then mark each ``validUntil`` exactly once.

    Idempotent: once the annotation names the current ``validUntil`` nothing more is due, so a
    resync or our own write's echo does nothing.  A fresh agent write moves ``validUntil`` past
    the annotation, and the cycle starts again for the new value.
    """
    if not is_ours(obj):
        return Verdict()
    text = (obj.get("status") or {}).get("validUntil")
    valid_until = parse_valid_until(text)
    if valid_until is None:
        return Verdict()  # no expiry: OCM counts the score for ever; nothing to trigger
    remaining = (valid_until - now).total_seconds() + margin
    if remaining > 0:
        return Verdict(requeue_after=remaining)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if annotations.get(EXPIRED_ANNOTATION) == text:
        return Verdict()
    return Verdict(mark=str(text))
