"""The pushed series some scorer selects, held in memory under a hard bound, rendered as a matrix.

What is kept.  Only series that a current selector matches (the supervisor calls ``configure``
whenever the summaries change), and only points young enough for the longest range any selector
asks for plus one lookback.  Everything else is discarded as it arrives, so a Collector that
forwards a whole cluster's metrics costs a decode and a dictionary lookup per point, not memory.

Bounds.  At most ``max_series`` series; a new series beyond that is dropped (counted once per
series in ``series_dropped`` and per point in ``points_dropped["series_limit"]``) until room
frees up.  A new selected series whose labels exceed ``LabelLimits`` (count, name length, value
length, total characters) is not stored: its points are rejected in the response's
``partial_success`` and counted in ``points_dropped["label_limit"]``.  Rejecting only those points,
rather than the whole push with a 400, keeps a Collector's honest series in the same batch flowing;
the limits together bound what one series may hold, hence what ``max_series`` series may hold.
Unselected series are not checked (they are not kept), and the sets remembering which series were
ignored or refused hold hashes of the keys, not the pusher's strings.

Points per series are bounded by the range and step: time is cut into slots of
half the finest step, and a series' points in one slot are merged into one (the later value wins;
deltas are added; a counter reset starts a new point), so a series holds at most
``2 * retention / finest_step + 2`` points, capped at ``max_points_per_series``.  Rendering holds
priority over decoding (``wait_for_renders``), since both need the GIL and a cycle has a deadline.

Rendering (``render``) follows Prometheus ``query_range``: timestamps ``start, start + step, ...,
end``; at each one a series' value is its latest point in the preceding lookback (five minutes,
or the step when longer), Prometheus' staleness default.  With ``rate`` counters become a
reset-aware per-second rate over the step (increase across the step's points and the last point
before it, divided by the time between the first and last of them) and deltas the sum of the
step's deltas divided by the step; ``__name__`` is then dropped, as PromQL's ``rate`` does.
Gauges are never rated.
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import msgspec

from dynamic_scoring.agent.source.otlp.selection import Selector
from dynamic_scoring.agent.source.otlp.translation import Flattened, Kind, Labels, Point
from dynamic_scoring.agent.source.prometheus import RangeWindow

LOOKBACK_SECONDS = 300
"""Prometheus' default staleness window: how far back a step looks for a series' latest value."""
SWEEP_SECONDS = 10.0
"""Expired points and empty series are removed at most this often (and on ``configure``)."""


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it: shortest round-trip decimal, no exponent."""
    text = repr(value)
    if text.endswith(".0"):
        return text[:-2]
    if "e" not in text and "n" not in text:  # the common case, without the checks below
        return text
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(text), "f")
    return text[:-2] if text.endswith(".0") else text


@dataclass
class _Series:
    name: str
    base: str
    labels: Labels
    kind: Kind
    times: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class LabelLimits:
    """Caps on one series' labels (after resource, scope and point attributes are merged).

    The defaults leave room for a Collector's Kubernetes and resource-detection attributes while
    bounding a series to ``max_total_chars`` characters of labels: 20,000 series at most about
    160 MiB of label text.
    """

    max_labels: int = 64
    max_name_length: int = 256
    max_value_length: int = 2048
    max_total_chars: int = 8192

    def problem(self, labels: Labels) -> str | None:
        """Why ``labels`` exceed the caps (no label value is quoted), or None when they fit."""
        if len(labels) > self.max_labels:
            return f"{len(labels)} labels, more than the limit of {self.max_labels}"
        total = 0
        for name, value in labels:
            if len(name) > self.max_name_length:
                return f"a label name of {len(name)} characters, limit {self.max_name_length}"
            if len(value) > self.max_value_length:
                return f"label {name[:64]}: a value of {len(value)} characters, limit {self.max_value_length}"
            total += len(name) + len(value)
        if total > self.max_total_chars:
            return f"{total} characters of labels, limit {self.max_total_chars}"
        return None


@dataclass
class StoreStats:
    """Counters since start (plain integers, read by ``telemetry``)."""

    points_received: int = 0
    points_stored: int = 0
    series_dropped: int = 0
    points_dropped: dict[str, int] = field(
        default_factory=lambda: {
            "series_limit": 0,
            "label_limit": 0,
            "out_of_order": 0,
            "too_old": 0,
            "invalid": 0,
        }
    )


@dataclass(frozen=True)
class IngestResult:
    """What one request's points did: rejected ones go into the OTLP ``partial_success``."""

    accepted: int
    rejected: int
    message: str = ""


class SeriesStore:
    """Thread-safe store of selected series (the receiver's threads write, workers read).

    Args:
        max_series: hard bound on series held.
        max_points_per_series: hard bound on points per series, whatever range and step say.
        label_limits: caps on a new series' labels.
        clock: seconds since the epoch (tests move it).
    """

    def __init__(
        self,
        *,
        max_series: int = 20_000,
        max_points_per_series: int = 2_000,
        label_limits: LabelLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_series = max_series
        self.label_limits = label_limits or LabelLimits()
        self.max_points_per_series = max_points_per_series
        self._clock = clock
        self._lock = threading.Lock()
        self._renders = 0
        self._idle = threading.Condition()
        self._series: dict[tuple[str, Labels], _Series] = {}
        # Hashes, not keys: these remember up to 4 * max_series series that are not kept, and must
        # not hold the pusher's strings.  str hashes are salted per process, so a pusher cannot
        # craft a collision; a chance one only delays a series until the next ``configure``.
        self._ignored: set[int] = set()
        self._refused: set[int] = set()
        self._index: dict[str, list[Selector]] = {}
        self._retention = 0.0
        self._resolution = 1.0
        self._points_cap = 2
        self._last_sweep = 0.0
        self.stats = StoreStats()

    # -- configuration --------------------------------------------------------------------------

    def configure(self, selectors: Sequence[Selector], longest_range: int, finest_step: int) -> None:
        """Keep only series matching ``selectors``, for ``longest_range`` plus one lookback."""
        index: dict[str, list[Selector]] = {}
        for sel in selectors:
            index.setdefault(sel.metric, []).append(sel)
        finest = max(1, finest_step)
        retention = float(longest_range + max(LOOKBACK_SECONDS, finest))
        with self._lock:
            self._index = index
            self._retention = retention if index else 0.0
            self._resolution = max(1.0, finest / 2)
            self._points_cap = min(self.max_points_per_series, math.ceil(retention / self._resolution) + 2)
            self._ignored.clear()
            self._refused.clear()
            for key, series in list(self._series.items()):
                if not self._selected(series.name, series.base, series.labels):
                    del self._series[key]
            self._sweep(self._clock())

    @property
    def points_cap(self) -> int:
        """Points one series may hold under the current configuration."""
        return self._points_cap

    @property
    def series_held(self) -> int:
        """Series currently held."""
        return len(self._series)

    def _selected(self, name: str, base: str, labels: Labels) -> bool:
        candidates = self._index.get(name, [])
        if base != name:
            candidates = candidates + self._index.get(base, [])
        if not candidates:
            return False
        as_dict = dict(labels)
        return any(sel.matches(name, base, as_dict) for sel in candidates)

    # -- ingest ---------------------------------------------------------------------------------

    def ingest(self, flat: Flattened) -> IngestResult:
        """Store the selected points of one request; count what was dropped and why."""
        now = self._clock()
        rejected = flat.rejected
        message = flat.reason
        dropped_limit = 0
        dropped_labels = 0
        label_problem = ""
        limits = self.label_limits
        with self._lock:
            stats = self.stats
            stats.points_received += len(flat.points) + flat.rejected
            stats.points_dropped["invalid"] += flat.rejected
            if now - self._last_sweep >= SWEEP_SECONDS:
                self._sweep(now)
            if not self._index:
                return IngestResult(len(flat.points), rejected, message)
            oldest = now - self._retention
            for point in flat.points:
                key = (point.name, point.labels)
                series = self._series.get(key)
                if series is None:
                    hashed = hash(key)
                    if hashed in self._ignored:
                        continue
                    if hashed in self._refused:
                        dropped_limit += 1
                        continue
                    if not self._selected(point.name, point.base, point.labels):
                        if len(self._ignored) > 4 * self.max_series:
                            self._ignored.clear()
                        self._ignored.add(hashed)
                        continue
                    problem = limits.problem(point.labels)
                    if problem is not None:
                        dropped_labels += 1
                        label_problem = label_problem or f"a series of {point.name} has {problem}"
                        continue
                    if len(self._series) >= self.max_series:
                        if len(self._refused) > 4 * self.max_series:
                            self._refused.clear()
                        self._refused.add(hashed)
                        stats.series_dropped += 1
                        dropped_limit += 1
                        continue
                    series = _Series(point.name, point.base, point.labels, point.kind)
                    self._series[key] = series
                if point.time < oldest:
                    stats.points_dropped["too_old"] += 1
                    continue
                if self._append(series, point):
                    stats.points_stored += 1
                else:
                    stats.points_dropped["out_of_order"] += 1
            stats.points_dropped["series_limit"] += dropped_limit
            stats.points_dropped["label_limit"] += dropped_labels
        if dropped_labels:
            rejected += dropped_labels
            message = message or f"{dropped_labels} point(s) refused: {label_problem}"
        if dropped_limit:
            rejected += dropped_limit
            message = message or (
                f"the agent holds its limit of {self.max_series} series; "
                f"{dropped_limit} point(s) of new series were dropped"
            )
        return IngestResult(len(flat.points) - dropped_limit - dropped_labels, rejected, message)

    def _append(self, series: _Series, point: Point) -> bool:
        times, values = series.times, series.values
        if times:
            last = times[-1]
            if point.time < last:
                return False
            same_slot = math.floor(point.time / self._resolution) == math.floor(last / self._resolution)
            reset = series.kind == "counter" and point.value < values[-1]
            if same_slot and not reset:
                values[-1] = values[-1] + point.value if series.kind == "delta" else point.value
                times[-1] = point.time
                return True
        times.append(point.time)
        values.append(point.value)
        if len(times) > self._points_cap:
            del times[: len(times) - self._points_cap]
            del values[: len(values) - self._points_cap]
        return True

    def _sweep(self, now: float) -> None:
        self._last_sweep = now
        oldest = now - self._retention
        for key, series in list(self._series.items()):
            cut = bisect_right(series.times, oldest)
            if cut:
                del series.times[:cut]
                del series.values[:cut]
            if not series.times:
                del self._series[key]

    # -- rendering ------------------------------------------------------------------------------

    def wait_for_renders(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds while a scoring cycle renders (the receiver calls it).

        Rendering and decoding are both CPU work under one GIL; a cycle goes first, so a steady
        stream of pushes delays a cycle's render by at most the one request already decoding.
        """
        with self._idle:
            self._idle.wait_for(lambda: self._renders == 0, timeout)

    def render(self, selector: Selector, window: RangeWindow) -> bytes:
        """The matrix (a JSON array of ``{"metric", "values"}``) of one selector over ``window``."""
        with self._idle:
            self._renders += 1
        try:
            return self._render(selector, window)
        finally:
            with self._idle:
                self._renders -= 1
                self._idle.notify_all()

    def _render(self, selector: Selector, window: RangeWindow) -> bytes:
        with self._lock:
            chosen = [
                (s.name, s.labels, s.kind, list(s.times), list(s.values))
                for s in self._series.values()
                if selector.matches(s.name, s.base, dict(s.labels))
            ]
        chosen.sort(key=lambda c: (c[0], c[1]))
        step = max(1, window.step)
        lookback = max(LOOKBACK_SECONDS, step)
        stamps = range(window.start, window.end + 1, step)
        out = []
        for name, labels, kind, times, values in chosen:
            rated = selector.rate and kind != "gauge"
            samples: list[list[int | str]]
            if rated:
                samples = []
                for t in stamps:
                    value = _rate(times, values, t, step, lookback, kind)
                    if value is not None:
                        samples.append([t, format_value(value)])
            else:
                samples = _latest_per_stamp(times, values, stamps, lookback)
            if samples:
                metric = dict(labels)
                if not rated:
                    metric = {"__name__": name, **metric}
                out.append({"metric": metric, "values": samples})
        return msgspec.json.encode(out)


def _latest_per_stamp(
    times: list[float], values: list[float], stamps: range, lookback: float
) -> list[list[int | str]]:
    """Each stamp's latest point within the lookback, walking points and stamps together once."""
    out: list[list[int | str]] = []
    i, n = -1, len(times)
    last_text, last_i = "", -2
    for t in stamps:
        while i + 1 < n and times[i + 1] <= t:
            i += 1
        if i < 0 or times[i] <= t - lookback:
            continue
        if i != last_i:  # a value repeated over several stamps is formatted once
            last_text, last_i = format_value(values[i]), i
        out.append([t, last_text])
    return out


def _rate(
    times: list[float], values: list[float], t: float, step: float, lookback: float, kind: Kind
) -> float | None:
    hi = bisect_right(times, t)
    lo = bisect_right(times, t - step)
    if kind == "delta":
        return math.fsum(values[lo:hi]) / step if hi > lo else None
    first = lo - 1 if lo > 0 and times[lo - 1] > t - step - lookback else lo
    if hi - first < 2:
        return None
    increase = 0.0
    for i in range(first + 1, hi):
        before, after = values[i - 1], values[i]
        increase += after - before if after >= before else after
    span = times[hi - 1] - times[first]
    return increase / span if span > 0 else None


__all__ = ["LOOKBACK_SECONDS", "IngestResult", "LabelLimits", "SeriesStore", "StoreStats", "format_value"]
