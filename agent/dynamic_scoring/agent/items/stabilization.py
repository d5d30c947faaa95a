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

Memory and time are bounded whatever the window and the interval: a window is kept in 64 cells,
and observations that fall in one cell share it (`_Extremes`).  That can delay a rise (or a fall) by
one cell, window / 64, and never hastens it; observations at least a cell apart are kept exactly.

What the windows never delay: an item seen for the first time is published as it is (there is
nothing to hold it against), and `reset` starts an item over from a value (the missing-data score
published at once, or the value found on the hub after a restart).  A restart therefore does not
jump: the window starts from what the hub shows, as if that value had just been observed.

This module is pure (no clock, no I/O): the worker passes ``now`` (monotonic seconds).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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


CELLS = 64
"""How finely each window is remembered: an item keeps at most ``CELLS + 2`` entries of it (the
cells the window spans, and the entry in effect at its start).  A window whose observations are
at least window / ``CELLS`` apart is kept exactly."""


class _Extremes:
    """The lowest (or highest) value in effect over one item's sliding window, in bounded memory.

    Why not every observation: a scorer sets both the window (up to a day) and the interval (down to
    a second), so the observations inside a window are the scorer author's to choose, and every item
    of every scorer on the cluster shares the agent's memory and event loop.  Kept one by one, a day
    at one a second is 86,400 values per item, scanned every cycle.

    So the window is cut into `CELLS` cells of equal width, and observations made in the same cell
    share one entry holding their extreme.  An entry is dropped once the entry after it started at
    or before the window's start (its values were no longer in effect then), as single observations
    are.  A merged cell can only widen the set of values the extreme is taken over, never narrow
    it: a rise is never published before it held for the whole window, and at most one cell width
    (window / 64) later than with every observation kept.  When the interval is at least a cell
    wide no two observations share a cell, and the rule is exact.

    Two arrays instead of a deque of tuples: about 10 bytes an entry instead of about 100, so an
    item costs at most ~1.4 KiB for both windows whatever the scorer asks for.
    """

    __slots__ = ("lowest", "starts", "values", "width", "window")

    def __init__(self, window: float, lowest: bool, now: float, value: int) -> None:
        self.window = window
        self.width = window / CELLS
        self.lowest = lowest
        self.starts = array("d", [now])
        self.values = array("h", [value])

    def observe(self, now: float, value: int) -> None:
        """Record ``value`` as in effect from ``now`` on, and forget what left the window."""
        starts, values = self.starts, self.values
        if math.floor(starts[-1] / self.width) == math.floor(now / self.width):
            old = values[-1]
            values[-1] = min(old, value) if self.lowest else max(old, value)
        else:
            starts.append(now)
            values.append(value)
        start = now - self.window
        drop = 0
        while drop + 1 < len(starts) and starts[drop + 1] <= start:
            drop += 1
        if drop:
            del starts[:drop]
            del values[:drop]

    def extreme(self) -> int:
        """The lowest (highest) value in effect at some moment of the window."""
        return min(self.values) if self.lowest else max(self.values)

    def held_since(self, now: float, holds: Callable[[int], bool]) -> float:
        """When the values started to satisfy ``holds`` without a break (``now`` if the latest does not)."""
        since = now
        for i in range(len(self.values) - 1, -1, -1):
            if not holds(self.values[i]):
                break
            since = self.starts[i]
        return since

    def rewindowed(self, window: float) -> _Extremes:
        """The same history under another window (settings changed): merged cells stay merged."""
        out = _Extremes(window, self.lowest, self.starts[0], self.values[0])
        for t, v in zip(self.starts[1:], self.values[1:], strict=True):
            out.observe(t, v)
        return out

    def __len__(self) -> int:
        return len(self.values)


class _Item:
    """One item's published value, its latest observation, and its windows' extremes."""

    __slots__ = ("fall", "last_time", "last_value", "published", "rise")

    def __init__(self, now: float, value: int) -> None:
        self.published = value
        self.last_time = now
        self.last_value = value
        self.rise: _Extremes | None = None
        self.fall: _Extremes | None = None

    def observe(self, now: float, value: int, settings: Stabilization) -> None:
        """Record this cycle's value in both windows, re-cut if the settings changed them."""
        self.rise = self._window(self.rise, settings.rise_window_seconds, True)
        self.fall = self._window(self.fall, settings.fall_window_seconds, False)
        for window in (self.rise, self.fall):
            if window is not None:
                window.observe(now, value)
        self.last_time, self.last_value = now, value

    def _window(self, current: _Extremes | None, seconds: float, lowest: bool) -> _Extremes | None:
        if seconds <= 0:
            return None
        if current is None:  # a window just set: it starts from the value in effect until now
            return _Extremes(seconds, lowest, self.last_time, self.last_value)
        return current if current.window == seconds else current.rewindowed(seconds)

    def kept(self) -> int:
        return sum(len(w) for w in (self.rise, self.fall) if w is not None)


class Stabilizer:
    """The published values of one scorer's items, stabilized by `settings`.

    One per scorer on one cluster (the worker owns it).  Items the scorer stops returning are
    forgotten, so memory follows the current item set, and each item keeps at most
    2 x (`CELLS` + 2) entries whatever the windows and the interval: at 20,000 items, well under
    30 MiB at worst, and a cycle's work is linear in the items.
    """

    def __init__(self, settings: Stabilization) -> None:
        self.settings = settings
        self._items: dict[str, _Item] = {}

    def update(self, settings: Stabilization) -> None:
        """Use new settings from the next cycle on; the history so far is kept (re-cut to the new windows)."""
        self.settings = settings

    def reset(self, now: float, values: Iterable[tuple[str, int]]) -> None:
        """Start over from these items and values, as published at ``now``; other items are forgotten.

        For the values found on the hub after a restart, and for values that must be published
        whatever the windows say (the missing-data score): each becomes the published value and the
        only observation, so later rises and falls are held against it.
        """
        self._items = {}
        for name, value in values:
            item = _Item(now, value)
            item.observe(now, value, self.settings)
            self._items[name] = item

    def clear(self) -> None:
        """Forget every item (the scorer's scores expired or were removed from the hub)."""
        self._items.clear()

    def published(self) -> dict[str, int]:
        """The value published last for each item."""
        return {name: item.published for name, item in self._items.items()}

    def kept(self) -> int:
        """How many window entries all items hold together (the bound the docstring states)."""
        return sum(item.kept() for item in self._items.values())

    def apply(self, now: float, raw: Iterable[tuple[str, int]]) -> dict[str, ItemState]:
        """Observe this cycle's raw values and decide what to publish for each item.

        Items missing from ``raw`` are forgotten (a withdrawn item is withdrawn at once, as
        without stabilization); new ones are published as they are.
        """
        settings = self.settings
        states: dict[str, ItemState] = {}
        items: dict[str, _Item] = {}
        for name, value in raw:
            item = self._items.get(name)
            if item is None:
                item = _Item(now, value)
                item.observe(now, value, settings)
                states[name] = ItemState(value, value, "steady")
            else:
                item.observe(now, value, settings)
                states[name] = _decide(item, now, value, settings)
            items[name] = item
        self._items = items
        return states


def _decide(item: _Item, now: float, raw: int, settings: Stabilization) -> ItemState:
    """Move ``item.published`` by the rule of the module docstring and say why it differs."""
    published = item.published
    tolerance = max(settings.tolerance, 1)  # a change of 0 points is no change
    if raw > published:
        low = item.rise.extreme() if item.rise is not None else raw
        if low > published and low - published >= tolerance:
            item.published = low
    elif raw < published:
        high = item.fall.extreme() if item.fall is not None else raw
        if high < published and published - high >= tolerance:
            item.published = high
    return _state(item, now, raw, settings)


def _state(item: _Item, now: float, raw: int, settings: Stabilization) -> ItemState:
    published = item.published
    if raw == published:
        return ItemState(raw, published, "steady")
    tolerance = max(settings.tolerance, 1)
    if abs(raw - published) < tolerance:
        return ItemState(raw, published, "within-tolerance")
    if raw > published:
        window, extremes = settings.rise_window_seconds, item.rise
        since = extremes.held_since(now, lambda v: v - published >= tolerance) if extremes else now
        return ItemState(raw, published, "rising", now - since, window)
    window, extremes = settings.fall_window_seconds, item.fall
    since = extremes.held_since(now, lambda v: published - v >= tolerance) if extremes else now
    return ItemState(raw, published, "falling", now - since, window)


__all__ = ["CELLS", "ItemState", "Stabilization", "Stabilizer", "Trend"]
