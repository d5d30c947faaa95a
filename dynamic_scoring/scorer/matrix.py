"""Reading the scoring request: ``{"data": [...], "params": {...}}`` with Prometheus matrix series.

The agent splices Prometheus' ``data.result`` arrays into ``data`` unchanged, so each element is
``{"metric": {label: value}, "values": [[unix_seconds, "value"], ...]}`` with values as *strings*,
and ``NaN``, ``+Inf`` and ``-Inf`` written out as such.  Those are explicit here: a ``Series``
holds only its finite points (what a mean or a fit can use) and counts the others in
``non_finite``, so a scorer can tell "no data" from "data that is not a number" if it cares.
Anything that is not this shape is a ``RequestError`` naming the element, which the app answers
with HTTP 400.  ``params`` (the DynamicScorer's ``scoring.params``, sent by this project's agent
only) is kept as given; upstream agents send none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dynamic_scoring.scorer import maths
from dynamic_scoring.scorer.maths import Point


class RequestError(ValueError):
    """The request body is not a scoring request; the message says where."""


@dataclass(frozen=True)
class Series:
    """One series: its labels, its finite points oldest first, and how many points were not finite."""

    labels: dict[str, str]
    points: list[Point]
    non_finite: int = 0

    def label(self, name: str, default: str = "") -> str:
        """One label's value, ``default`` when the series has no such label."""
        return self.labels.get(name, default)

    def pick(self, *names: str) -> dict[str, str]:
        """The named labels that the series has (for passing a few labels through to the result)."""
        return {n: self.labels[n] for n in names if n in self.labels}

    @property
    def values(self) -> list[float]:
        """The finite values, oldest first."""
        return [v for _, v in self.points]

    def mean(self) -> float:
        """Mean of the finite values; ``EmptySeriesError`` when there are none."""
        return maths.mean(self.points)

    def last(self) -> float:
        """The newest finite value; ``EmptySeriesError`` when there are none."""
        return maths.last(self.points)

    def rate(self) -> float:
        """Change per second from the first to the last finite point."""
        return maths.rate(self.points)

    def trend(self) -> float:
        """Least-squares slope per second."""
        return maths.trend(self.points)

    def forecast(self, horizon: float) -> float:
        """The least-squares line's value ``horizon`` seconds after the last point."""
        return maths.forecast(self.points, horizon)

    def seasonal_forecast(self, horizon: float, *, season: float = 86_400.0, level: float = 3_600.0) -> float:
        """The mean value expected over the next ``horizon`` seconds, from earlier seasons (see ``maths``)."""
        return maths.seasonal_forecast(self.points, horizon, season=season, level=level)

    def blended_forecast(
        self,
        horizon: float,
        *,
        season: float = 86_400.0,
        level: float = 3_600.0,
        weight: float | None = None,
    ) -> float:
        """The seasonal forecast blended with the recent level, by the horizon's weight (see ``maths``)."""
        return maths.blended_forecast(self.points, horizon, season=season, level=level, weight=weight)


@dataclass(frozen=True)
class ScoringRequest:
    """A decoded scoring request: the series in the order sent, and the scorer's parameters."""

    series: list[Series]
    params: dict[str, Any] = field(default_factory=dict)

    def with_points(self) -> Iterable[Series]:
        """The series that have at least one finite point (the ones a statistic can be taken of)."""
        return (s for s in self.series if s.points)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RequestError(f"{where}: expected a number or a numeric string")
    try:
        return float(value)
    except ValueError:
        raise RequestError(f"{where}: not a number") from None


def _fast_points(values: list[Any]) -> list[Point] | None:
    """The points when every pair is well-formed, else ``None`` (then ``_checked_points`` says why).

    10,000 series of 60 points are 600,000 pairs: checking each with a message ready took 5 s,
    this loop a fraction of that, so the careful path runs only for a body that is wrong.
    """
    out: list[Point] = []
    append = out.append
    try:
        for pair in values:
            if pair.__class__ is not list or len(pair) != 2:
                return None
            t, v = pair
            if t.__class__ is bool or v.__class__ is bool:
                return None
            append((float(t), float(v)))
    except (TypeError, ValueError):
        return None
    return out


def _checked_points(values: list[Any], where: str) -> list[Point]:
    points: list[Point] = []
    for j, pair in enumerate(values):
        if not isinstance(pair, list) or len(pair) != 2:
            raise RequestError(f"{where}.values[{j}]: expected [time, value]")
        t = _number(pair[0], f"{where}.values[{j}][0]")
        v = _number(pair[1], f"{where}.values[{j}][1]")
        points.append((t, v))
    return points


def parse_series(index: int, item: Any) -> Series:
    """One element of ``data``; ``index`` is used in error messages only."""
    where = f"data[{index}]"
    if not isinstance(item, Mapping):
        raise RequestError(f"{where}: expected an object with metric and values")
    metric = item.get("metric") or {}
    if not isinstance(metric, Mapping) or not all(isinstance(v, str) for v in metric.values()):
        raise RequestError(f"{where}.metric: expected an object of string label values")
    values = item.get("values")
    if values is None:
        values = [item["value"]] if "value" in item else []  # an instant vector element: one point
    if not isinstance(values, list):
        raise RequestError(f"{where}.values: expected a list of [time, value] pairs")
    raw = _fast_points(values)
    if raw is None:
        raw = _checked_points(values, where)
    points = [p for p in raw if math.isfinite(p[0]) and math.isfinite(p[1])]
    non_finite = len(raw) - len(points)
    points.sort(key=lambda p: p[0])
    return Series(labels=dict(metric), points=points, non_finite=non_finite)


def parse_request(body: bytes) -> ScoringRequest:
    """Decode a scoring request body; ``{"data": null}`` or a missing ``data`` is no series."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise RequestError('the body must be a JSON object {"data": [...]}')
    data = document.get("data")
    if data is None:
        data = []
    if not isinstance(data, list):
        raise RequestError("data: expected a list of series")
    params = document.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RequestError("params: expected an object")
    return ScoringRequest([parse_series(i, item) for i, item in enumerate(data)], params)


__all__ = ["RequestError", "ScoringRequest", "Series", "parse_request", "parse_series"]
