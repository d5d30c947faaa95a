"""Whether the synthetic fleet's conclusions agree with the real fleet's, comparison by comparison.

Why.  The synthetic samples were generated from the real traces, but they are one day each, start at
different times of day and repeat themselves (``bench.placement_quality.fleet``).  A result on 54 synthetic
clusters is worth quoting only where it says what the real fleet says, or where the difference is
itself the finding (herding that grows with the number of Placements, say).  So every comparison the
two runs share, the same pair of placers at the same life, form, k and lag (open loop) or life, size
and measure (closed loop), is set side by side and sorted into: clear in both and the same way, clear
in both and opposite, clear in one only, or clear in neither.  "Clear" is a 95 % interval that
excludes 0, as everywhere in the benchmark.

Pure: records in, counts out; the records are the comparison objects the runs' JSON files hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

KEY_FIELDS = ("life", "form", "k", "lag", "size", "measure", "a", "b")
"""What identifies a comparison across runs: whichever of these its record holds."""

Record = Mapping[str, Any]


def key(record: Record) -> tuple[tuple[str, Any], ...]:
    """The identity of one comparison record (its :data:`KEY_FIELDS` that are present).

    An open-loop record without a ``measure`` (runs before idle cores were judged) compares regret.
    """
    filled = {"measure": "regret", **record} if "form" in record else record
    return tuple((name, filled[name]) for name in KEY_FIELDS if name in filled)


def sign(record: Record) -> int:
    """+1 when the interval is above 0 (``a`` worse), -1 below (``a`` better), 0 when it holds 0."""
    if record["low"] > 0:
        return 1
    if record["high"] < 0:
        return -1
    return 0


@dataclass(frozen=True)
class Agreement:
    """How the comparisons two runs share line up; ``pairs`` holds each shared one, both sides."""

    shared: int
    same: int
    opposite: int
    synthetic_only: int
    real_only: int
    neither: int
    opposites: list[str] = field(default_factory=list)
    pairs: list[dict[str, Any]] = field(default_factory=list)


def _say(record: Record) -> str:
    where = ", ".join(f"{name} {record[name]}" for name in KEY_FIELDS[:-2] if name in record)
    return f"{record['a']} - {record['b']} ({where})"


def _interval(record: Record) -> str:
    return f"{record['difference']:+.2f} [{record['low']:+.2f}, {record['high']:+.2f}]"


def agree(synthetic: Sequence[Record], real: Sequence[Record]) -> Agreement:
    """Sort every comparison present in both ``synthetic`` and ``real`` by whether their verdicts agree."""
    theirs = {key(r): r for r in real}
    counts = {"same": 0, "opposite": 0, "synthetic_only": 0, "real_only": 0, "neither": 0}
    opposites: list[str] = []
    pairs: list[dict[str, Any]] = []
    for ours in synthetic:
        other = theirs.get(key(ours))
        if other is None:
            continue
        s, r = sign(ours), sign(other)
        if s and r:
            outcome = "same" if s == r else "opposite"
        elif s:
            outcome = "synthetic_only"
        elif r:
            outcome = "real_only"
        else:
            outcome = "neither"
        counts[outcome] += 1
        if outcome == "opposite":
            opposites.append(f"{_say(ours)}: synthetic {_interval(ours)}, real {_interval(other)}")
        pairs.append(
            {
                **dict(key(ours)),
                "outcome": outcome,
                "synthetic": [ours["difference"], ours["low"], ours["high"]],
                "real": [other["difference"], other["low"], other["high"]],
            }
        )
    return Agreement(shared=len(pairs), opposites=opposites, pairs=pairs, **counts)


__all__ = ["KEY_FIELDS", "Agreement", "agree", "key", "sign"]
