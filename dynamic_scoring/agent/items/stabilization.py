"""Score stabilization: publish a score change only once it has held, and only when it matters.

Why.  Raw scores move with every noisy sample.  When two clusters score within a few points of each
other, each wobble reorders them and a Placement moves its workload back and forth; every move is
a real one (an application deleted here and created there).  The HorizontalPodAutoscaler solved the
same trade with stabilization windows: act at once in the safe direction, wait in the risky one.
Here a *rise* is the risky direction (a cluster looks better and may attract work), a *fall* the
safe one (a cluster that got worse should lose work now), so by default falls are immediate.

The rule, per item, at each cycle (``now``, the raw value, the value currently published ``P``):

* a rise publishes the **lowest** raw value seen over the last ``rise_window`` seconds, and only
  when that value is above ``P``: the new value must have held for the whole window;
* a fall publishes the **highest** raw value seen over the last ``fall_window`` seconds, and only
  when that value is below ``P``;
* a change smaller than ``tolerance`` points is not published at all.

"Seen over the window" means every value in effect at some moment of ``[now - window, now]``: the
observations made inside it and the last one made at or before its start (the value that was in
effect when it began).  So a new value counts as held only from its first observation, and a rise
first seen at ``t`` is published at the first cycle at or after ``t + window``, never sooner,
however the cycles fall.  A window of 0 is the current value alone, so a zero window and zero
tolerance publish every raw value as it comes (the behaviour without stabilization).

What the windows never delay: an item seen for the first time is published as it is (there is
nothing to hold it against), and `reset` starts an item over from a value (the missing-data score
published at once, or the value found on the hub after a restart).  A restart therefore does not
jump: the window starts from what the hub shows, as if that value had just been observed.

This module is pure (no clock, no I/O): the worker passes ``now`` (monotonic seconds).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Trend = Literal["steady", "within-tolerance", "rising", "falling"]


@dataclass(frozen=True)
class Stabilization:
    """A scorer's ``spec.stabilization`` (all zero: publish every raw value at once)."""

    tolerance: int = 0
    rise_window_seconds: float = 0.0
    fall_window_seconds: float = 0.0

    @property
    def active(self) -> bool:
        """False when this is today's behaviour exactly (no window, no tolerance)."""
        return bool(self.tolerance or self.rise_window_seconds or self.fall_window_seconds)


@dataclass(frozen=True)
class ItemState:
    """What was published for one item this cycle, and why it differs from the raw value."""

    raw: int
    published: int
    trend: Trend
    held_seconds: float = 0.0
    """For ``rising`` / ``falling``: how long the raw value has stayed on that side of the
    published one by at least the tolerance."""
    window_seconds: float = 0.0
    """For ``rising`` / ``falling``: the window it must hold for."""

    def explain(self) -> str:
        """One phrase for `status`, `why` and `explain`: e.g. ``rising, held 120 of 300 s``."""
        if self.trend == "steady":
            return "steady"
        if self.trend == "within-tolerance":
            return f"within tolerance (raw {self.raw}, published {self.published})"
        return f"{self.trend}, held {self.held_seconds:.0f} of {self.window_seconds:.0f} s"


@dataclass
class _Item:
    """One item's observations over the longest window and the value published for it."""

    published: int
    seen: deque[tuple[float, int]] = field(default_factory=deque)
    """(time, raw value), oldest first: those inside the longer of the two windows, and the last
    one at or before its start."""


class Stabilizer:
    """The published values of one scorer's items, stabilized by `settings`.

    One per scorer on one cluster (the worker owns it).  Items the scorer stops returning are
    forgotten, so memory follows the current item set.  At 10,000 items and a window of ten
    intervals it holds 100,000 observations, and each cycle scans them once.
    """

    def __init__(self, settings: Stabilization) -> None:
        self.settings = settings
        self._items: dict[str, _Item] = {}

    def update(self, settings: Stabilization) -> None:
        """Use new settings from the next cycle on; the observations so far are kept."""
        self.settings = settings

    def reset(self, now: float, values: Iterable[tuple[str, int]]) -> None:
        """Start over from these items and values, as published at ``now``; other items are forgotten.

        For the values found on the hub after a restart, and for values that must be published
        whatever the windows say (the missing-data score): each becomes the published value and the
        only observation, so later rises and falls are held against it.
        """
        self._items = {name: _Item(value, deque([(now, value)])) for name, value in values}

    def clear(self) -> None:
        """Forget every item (the scorer's scores expired or were removed from the hub)."""
        self._items.clear()

    def published(self) -> dict[str, int]:
        """The value published last for each item."""
        return {name: item.published for name, item in self._items.items()}

    def apply(self, now: float, raw: Iterable[tuple[str, int]]) -> dict[str, ItemState]:
        """Observe this cycle's raw values and decide what to publish for each item.

        Items missing from ``raw`` are forgotten (a withdrawn item is withdrawn at once, as
        without stabilization); new ones are published as they are.
        """
        settings = self.settings
        keep = max(settings.rise_window_seconds, settings.fall_window_seconds)
        states: dict[str, ItemState] = {}
        items: dict[str, _Item] = {}
        for name, value in raw:
            item = self._items.get(name)
            if item is None:
                item = _Item(value, deque([(now, value)]))
                states[name] = ItemState(value, value, "steady")
            else:
                item.seen.append((now, value))
                # keep the last observation at or before the start of the longest window
                while len(item.seen) > 1 and item.seen[1][0] <= now - keep:
                    item.seen.popleft()
                states[name] = _decide(item, now, value, settings)
            items[name] = item
        self._items = items
        return states


def _decide(item: _Item, now: float, raw: int, settings: Stabilization) -> ItemState:
    """Move ``item.published`` by the rule of the module docstring and say why it differs."""
    published = item.published
    tolerance = max(settings.tolerance, 1)  # a change of 0 points is no change
    if raw > published:
        low = min(_in_window(item.seen, now - settings.rise_window_seconds))
        if low > published and low - published >= tolerance:
            item.published = low
    elif raw < published:
        high = max(_in_window(item.seen, now - settings.fall_window_seconds))
        if high < published and published - high >= tolerance:
            item.published = high
    return _state(item, now, raw, settings)


def _in_window(seen: deque[tuple[float, int]], start: float) -> list[int]:
    """The values in effect over ``[start, now]``.

    Those observed after ``start``, and the last one observed at or before it (the current
    observation alone when the window is 0).
    """
    values: list[int] = []
    for t, v in reversed(seen):
        values.append(v)
        if t <= start:
            break
    return values


def _state(item: _Item, now: float, raw: int, settings: Stabilization) -> ItemState:
    published = item.published
    if raw == published:
        return ItemState(raw, published, "steady")
    tolerance = max(settings.tolerance, 1)
    if abs(raw - published) < tolerance:
        return ItemState(raw, published, "within-tolerance")
    rising = raw > published
    window = settings.rise_window_seconds if rising else settings.fall_window_seconds
    since = now
    for t, v in reversed(item.seen):
        if (v - published if rising else published - v) < tolerance:
            break
        since = t
    return ItemState(raw, published, "rising" if rising else "falling", now - since, window)


__all__ = ["ItemState", "Stabilization", "Stabilizer", "Trend"]
