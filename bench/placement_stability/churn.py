"""What a placement-stability run observed, and the numbers read from it: decision changes, reaction
times, AddOnPlacementScore writes and the spread of the published scores.

Pure functions over a list of ``Sample`` values (one per poll of the hub), so the counting rules are
unit-tested apart from the control plane that produces the samples (``bench.placement_stability.live``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

Key = tuple[str, str]
"""(score name, cluster): one AddOnPlacementScore item."""


@dataclass(frozen=True)
class Sample:
    """The hub as one poll saw it, ``t`` seconds after the scenario started."""

    t: float
    # the true mean headroom the load driver aims each cluster at (before noise), in score points
    loads: dict[str, float] = field(default_factory=dict)
    # the published value of each (score, cluster), None while the hub has none
    scores: dict[Key, int | None] = field(default_factory=dict)
    # the resourceVersion of each (score, cluster)'s AddOnPlacementScore: a new one is a write
    versions: dict[Key, str] = field(default_factory=dict)
    # each Placement's decided clusters, sorted; empty while none is decided (or the read failed)
    decisions: dict[str, tuple[str, ...]] = field(default_factory=dict)


def decision_changes(samples: Sequence[Sample], placement: str) -> list[float]:
    """The times at which the Placement's decision changed to another non-empty set of clusters.

    The first decision seen is the baseline, not a change.  An empty read (no PlacementDecision
    yet, or a failed read) is skipped rather than counted as two moves.
    """
    changes: list[float] = []
    current: tuple[str, ...] | None = None
    for s in samples:
        decided = s.decisions.get(placement, ())
        if not decided:
            continue
        if current is not None and decided != current:
            changes.append(s.t)
        current = decided
    return changes


def reaction(
    samples: Sequence[Sample], placement: str, target: tuple[str, ...], onset: float
) -> float | None:
    """Seconds from ``onset`` until the Placement first decided ``target``; None if it never did."""
    for s in samples:
        if s.t >= onset and s.decisions.get(placement) == target:
            return s.t - onset
    return None


def writes(samples: Sequence[Sample], score: str) -> int:
    """How many times the score's AddOnPlacementScores changed, summed over clusters.

    Every write moves the object's resourceVersion, so a new version between two polls is at least
    one write; the agent writes an object at most once a cycle, far slower than the poll.
    """
    count = 0
    last: dict[Key, str] = {}
    for s in samples:
        for key, version in s.versions.items():
            if key[0] != score:
                continue
            if key in last and last[key] != version:
                count += 1
            last[key] = version
    return count


def published_values(samples: Sequence[Sample], key: Key) -> list[int]:
    """The value of one item at each write seen (a new resourceVersion), in order."""
    values: list[int] = []
    last: str | None = None
    for s in samples:
        version = s.versions.get(key)
        value = s.scores.get(key)
        if version is not None and version != last and value is not None:
            values.append(value)
        last = version if version is not None else last
    return values


def spread(samples: Sequence[Sample], key: Key) -> float:
    """The standard deviation of an item's published values (0 with fewer than two)."""
    values = published_values(samples, key)
    return statistics.pstdev(values) if len(values) > 1 else 0.0


def per_hour(count: float, seconds: float, compression: float = 1.0) -> float:
    """``count`` events over a run of ``seconds``, per hour of time at the uncompressed pace.

    A run whose intervals are ``compression`` times shorter than production's covers that many
    times more cycles per second: its hour is ``compression`` hours of production.
    """
    return count * 3600.0 / (seconds * compression)
