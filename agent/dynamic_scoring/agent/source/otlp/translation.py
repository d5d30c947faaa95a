"""Flatten an ``ExportMetricsServiceRequest`` into labelled points, with the matrix mapping's kinds.

Labels.  Resource attributes, then scope attributes, then point attributes become labels, a later
level winning on a clash; names are translated as Prometheus' OTLP endpoint does by default (every
character outside ``[A-Za-z0-9_:]`` becomes ``_``, so ``service.name`` is ``service_name``).  The
scope's name and version become ``otel_scope_name`` / ``otel_scope_version``.  Attribute values of
kind array or key-value list are written as their JSON text; bytes as hex.

Kinds (how ``store`` renders each point in the matrix):

* gauge: value per point;
* sum, cumulative and monotonic (a counter): the value as sent, or a reset-aware per-second rate
  when the selector asks for ``rate``;
* sum, cumulative and not monotonic (an up-down counter): like a gauge;
* sum, delta: the delta as sent, or with ``rate`` the sum of the deltas in a step per second;
* histogram: series ``<name>_count``, ``<name>_sum`` and ``<name>_bucket{le="<bound>"}`` (cumulative
  bucket counts, the last with ``le="+Inf"``), each with the histogram's temporality, so rates of
  ``_bucket`` series feed a quantile estimate exactly as Prometheus' ``histogram_quantile`` input;
* exponential histogram: ``<name>_count`` and ``<name>_sum`` only (its buckets have no fixed
  ``le`` bounds to name a series by);
* summary: ``<name>_count``, ``<name>_sum`` (counters) and ``<name>{quantile="q"}`` (gauges).

A point without a timestamp, or with a value that is neither a double nor an int, is rejected and
counted in the response's ``partial_success``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, NamedTuple

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    Metric,
    NumberDataPoint,
)

from dynamic_scoring.agent.source.otlp.selection import sanitize_name

Kind = Literal["gauge", "counter", "delta"]
"""``gauge``: value per point; ``counter``: cumulative monotonic; ``delta``: a delta per point."""

Labels = tuple[tuple[str, str], ...]
"""Sorted (name, value) pairs, without ``__name__``."""


class Point(NamedTuple):
    """One sample of one series, ready for the store (a tuple: built once per data point, fast)."""

    name: str
    """The series' metric name (translated, with ``_count``/``_sum``/``_bucket`` for histograms)."""
    base: str
    """The metric's translated name (the same as ``name`` except for histogram parts)."""
    labels: Labels
    time: float
    """Seconds since the epoch."""
    value: float
    kind: Kind


@dataclass
class Flattened:
    """The points of one request, and how many data points had to be rejected (and one reason)."""

    points: list[Point]
    rejected: int = 0
    reason: str = ""


def _text(value: AnyValue) -> str:
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "bool_value":
        return "true" if value.bool_value else "false"
    if which == "int_value":
        return str(value.int_value)
    if which == "double_value":
        return repr(value.double_value)
    if which == "bytes_value":
        return value.bytes_value.hex()
    if which == "array_value":
        return json.dumps([_text(v) for v in value.array_value.values])
    if which == "kvlist_value":
        return json.dumps({kv.key: _text(kv.value) for kv in value.kvlist_value.values})
    return ""


def _labels(into: dict[str, str], attributes: Iterable[KeyValue]) -> None:
    for kv in attributes:
        into[sanitize_name(kv.key)] = _text(kv.value)


def _bound(value: float) -> str:
    # As Prometheus' OTLP translation writes ``le``: shortest decimal, ``+Inf`` for the last bucket.
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    if "e" in text:
        return format(Decimal(text), "f")
    return text[:-2] if text.endswith(".0") else text


class _Builder:
    def __init__(self) -> None:
        self.out = Flattened([])

    def reject(self, count: int, reason: str) -> None:
        self.out.rejected += count
        if not self.out.reason:
            self.out.reason = reason

    def add(self, name: str, base: str, labels: dict[str, str], t_ns: int, value: float, kind: Kind) -> None:
        self.out.points.append(Point(name, base, tuple(sorted(labels.items())), t_ns / 1e9, value, kind))


def _number(point: NumberDataPoint) -> float | None:
    which = point.WhichOneof("value")
    if which == "as_double":
        return float(point.as_double)
    if which == "as_int":
        return float(point.as_int)
    return None


def _metric(b: _Builder, metric: Metric, common: dict[str, str]) -> None:
    base = sanitize_name(metric.name) if metric.name else ""
    data = metric.WhichOneof("data")
    if not base:
        count = len(getattr(metric, data).data_points) if data else 0
        b.reject(count, "a metric without a name")
        return
    if data in ("gauge", "sum"):
        if data == "gauge":
            kind: Kind = "gauge"
            points = metric.gauge.data_points
        else:
            points = metric.sum.data_points
            if metric.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA:
                kind = "delta"
            else:
                kind = "counter" if metric.sum.is_monotonic else "gauge"
        for p in points:
            value = _number(p)
            if value is None:
                b.reject(1, f"{metric.name}: a data point without a value")
                continue
            labels = _point_labels(b, metric.name, common, p.time_unix_nano, p.attributes)
            if labels is not None:
                b.add(base, base, labels, p.time_unix_nano, value, kind)
    elif data == "histogram":
        kind = _temporality(metric.histogram.aggregation_temporality)
        for hp in metric.histogram.data_points:
            labels = _point_labels(b, metric.name, common, hp.time_unix_nano, hp.attributes)
            if labels is not None:
                t = hp.time_unix_nano
                _totals(b, base, labels, t, hp.count, hp.sum if hp.HasField("sum") else None, kind)
                _buckets(b, base, labels, t, list(hp.explicit_bounds), list(hp.bucket_counts), kind)
    elif data == "exponential_histogram":
        kind = _temporality(metric.exponential_histogram.aggregation_temporality)
        for ep in metric.exponential_histogram.data_points:
            labels = _point_labels(b, metric.name, common, ep.time_unix_nano, ep.attributes)
            if labels is not None:
                sum_ = ep.sum if ep.HasField("sum") else None
                _totals(b, base, labels, ep.time_unix_nano, ep.count, sum_, kind)
    elif data == "summary":
        for sp in metric.summary.data_points:
            labels = _point_labels(b, metric.name, common, sp.time_unix_nano, sp.attributes)
            if labels is not None:
                t = sp.time_unix_nano
                _totals(b, base, labels, t, sp.count, sp.sum, "counter")
                for q in sp.quantile_values:
                    b.add(base, base, {**labels, "quantile": repr(q.quantile)}, t, q.value, "gauge")


def _temporality(value: int) -> Kind:
    return "delta" if value == AGGREGATION_TEMPORALITY_DELTA else "counter"


def _point_labels(
    b: _Builder, metric: str, common: dict[str, str], t_ns: int, attributes: Iterable[KeyValue]
) -> dict[str, str] | None:
    if not t_ns:
        b.reject(1, f"{metric}: a data point without a time")
        return None
    labels = dict(common)
    _labels(labels, attributes)
    return labels


def _totals(
    b: _Builder, base: str, labels: dict[str, str], t: int, count: int, sum_: float | None, kind: Kind
) -> None:
    b.add(base + "_count", base, labels, t, float(count), kind)
    if sum_ is not None:
        b.add(base + "_sum", base, labels, t, sum_, kind)


def _buckets(
    b: _Builder, base: str, labels: dict[str, str], t: int, bounds: list[float], counts: list[int], kind: Kind
) -> None:
    if len(counts) != len(bounds) + 1:
        if counts:  # an empty bucket_counts is allowed: the histogram then has no buckets
            b.reject(1, f"{base}: bucket_counts must have one more entry than explicit_bounds")
        return
    running = 0
    for bound, count in zip([*bounds, math.inf], counts, strict=True):
        running += count
        b.add(base + "_bucket", base, {**labels, "le": _bound(bound)}, t, float(running), kind)


def flatten(request: ExportMetricsServiceRequest) -> Flattened:
    """Every data point of ``request`` as ``Point``s, in the order they were sent."""
    b = _Builder()
    for rm in request.resource_metrics:
        resource: dict[str, str] = {}
        _labels(resource, rm.resource.attributes)
        for sm in rm.scope_metrics:
            common = dict(resource)
            if sm.scope.name:
                common["otel_scope_name"] = sm.scope.name
            if sm.scope.version:
                common["otel_scope_version"] = sm.scope.version
            _labels(common, sm.scope.attributes)
            for metric in sm.metrics:
                _metric(b, metric, common)
    return b.out


__all__ = ["Flattened", "Kind", "Labels", "Point", "flatten"]
