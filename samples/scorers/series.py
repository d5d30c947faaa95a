"""Reading the scoring request: ``{"data": [...]}`` with Prometheus range-query (matrix) series.

The agent splices Prometheus' ``data.result`` arrays into ``data`` unchanged, so each element is
``{"metric": {label: value}, "values": [[unix_seconds, "value"], ...]}`` with values as strings.
Prometheus writes ``"NaN"``, ``"+Inf"`` and ``"-Inf"`` for values that are not finite; those
points are dropped here, since neither a mean nor a fit can use them.  Anything that is not this
shape is a ``RequestError`` naming the element, which the server answers with HTTP 400.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from samples.scorers.formulas import Point


class RequestError(ValueError):
    """The request body is not a scoring request; the message says where."""


@dataclass(frozen=True)
class Series:
    """One series: its labels and its finite points, oldest first."""

    labels: dict[str, str]
    points: list[Point]


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RequestError(f"{where}: expected a number or a numeric string")
    try:
        return float(value)
    except ValueError:
        raise RequestError(f"{where}: not a number") from None


def _series(index: int, item: Any) -> Series:
    where = f"data[{index}]"
    if not isinstance(item, dict):
        raise RequestError(f"{where}: expected an object with metric and values")
    metric = item.get("metric") or {}
    if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
        raise RequestError(f"{where}.metric: expected an object of string label values")
    values = item.get("values")
    if values is None:
        values = [item["value"]] if "value" in item else []  # an instant vector element: one point
    if not isinstance(values, list):
        raise RequestError(f"{where}.values: expected a list of [time, value] pairs")
    points: list[Point] = []
    for j, pair in enumerate(values):
        if not isinstance(pair, list) or len(pair) != 2:
            raise RequestError(f"{where}.values[{j}]: expected [time, value]")
        t = _number(pair[0], f"{where}.values[{j}][0]")
        v = _number(pair[1], f"{where}.values[{j}][1]")
        if math.isfinite(t) and math.isfinite(v):
            points.append((t, v))
    points.sort(key=lambda p: p[0])
    return Series(labels=dict(metric), points=points)


def parse_request(body: bytes) -> list[Series]:
    """Decode a scoring request body; ``{"data": null}`` or a missing ``data`` is no series."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise RequestError('the body must be a JSON object {"data": [...]}')
    data = document.get("data")
    if data is None:
        return []
    if not isinstance(data, list):
        raise RequestError("data: expected a list of series")
    return [_series(i, item) for i, item in enumerate(data)]


__all__ = ["RequestError", "Series", "parse_request"]
