"""Kubernetes timestamps (``metav1.Time``) read and written the same way by hub, agent and CLI.

``validUntil``, ``lastTransitionTime``, ``timeAdded`` and managedFields ``time`` are all RFC 3339.
Every reader used to carry its own parser; one of them returned naive datetimes for an offset-less
value, which then failed to compare with an aware ``now``.  Here a value without an offset is UTC,
as the apiserver means it, and anything unreadable is ``None`` so one bad object never raises.
"""

from __future__ import annotations

import datetime as dt


def format_time(t: dt.datetime) -> str:
    """``metav1.Time``: RFC 3339 in UTC with second precision (what the apiserver itself writes)."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: dt.datetime) -> str:
    """``metav1.MicroTime`` (Lease times): UTC with exactly six fractional digits, even when zero.

    The apiserver parses a MicroTime only with all six digits, so ``isoformat`` (which drops a zero
    fraction) cannot be used.
    """
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: object) -> dt.datetime | None:
    """An RFC 3339 timestamp as an aware datetime; ``None`` when absent, not a string, or malformed.

    Fractions and offsets are accepted (``MicroTime`` and hand-written objects carry them).
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
