"""Request bodies: content types, bounded gzip, OTLP JSON's particulars, and the matrix mapping of
every metric type (gauge, sums, histogram, exponential histogram, summary)."""

from __future__ import annotations

import gzip
import json

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

from dynamic_scoring.agent.source.otlp.decoding import BodyError, encoding_of, inflate, parse
from dynamic_scoring.agent.source.otlp.translation import flatten

T = 1_700_000_000_000_000_000


def test_content_types_and_encodings() -> None:
    assert encoding_of("application/x-protobuf") == "protobuf"
    assert encoding_of("Application/JSON; charset=utf-8") == "json"
    for bad in (None, "text/plain", "application/grpc"):
        with pytest.raises(BodyError) as err:
            encoding_of(bad)
        assert err.value.status == 415
    with pytest.raises(BodyError) as err:
        inflate(b"x", "deflate", 10)
    assert err.value.status == 415


def test_gzip_inflation_is_bounded_and_corruption_is_a_400() -> None:
    data = b"a" * 1000
    assert inflate(gzip.compress(data), "gzip", 1000) == data
    with pytest.raises(BodyError) as err:
        inflate(gzip.compress(data), "gzip", 999)
    assert err.value.status == 413
    with pytest.raises(BodyError) as err:
        inflate(b"\x1f\x8b not gzip", "gzip", 1000)
    assert err.value.status == 400
    with pytest.raises(BodyError) as err:
        inflate(gzip.compress(data)[:20], "gzip", 1000)
    assert err.value.status == 400


def test_otlp_json_with_string_int64_hex_ids_and_camel_case() -> None:
    body = {
        "resourceMetrics": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "scopeMetrics": [
                    {
                        "scope": {"name": "lib", "version": "1.2"},
                        "metrics": [
                            {
                                "name": "jobs.done",
                                "sum": {
                                    "aggregationTemporality": 2,
                                    "isMonotonic": True,
                                    "dataPoints": [
                                        {
                                            "attributes": [{"key": "queue", "value": {"intValue": "3"}}],
                                            "startTimeUnixNano": str(T - 10**9),
                                            "timeUnixNano": str(T),
                                            "asInt": "9007199254740993",
                                            "exemplars": [
                                                {
                                                    "traceId": "5b8efff798038103d269b633813fc60c",
                                                    "spanId": "eee19b7ec3c1b174",
                                                    "timeUnixNano": str(T),
                                                    "asDouble": 1.0,
                                                }
                                            ],
                                        }
                                    ],
                                },
                            }
                        ],
                    }
                ],
            }
        ]
    }
    flat = flatten(parse(json.dumps(body).encode(), "json"))
    [point] = flat.points
    assert point.name == "jobs_done" and point.kind == "counter" and point.time == T / 1e9
    assert point.value == float(9007199254740993)
    assert dict(point.labels) == {
        "service_name": "svc",
        "otel_scope_name": "lib",
        "otel_scope_version": "1.2",
        "queue": "3",
    }
    for bad in (b"[1]", b"{", json.dumps({"resourceMetrics": "x"}).encode()):
        with pytest.raises(BodyError) as err:
            parse(bad, "json")
        assert err.value.status == 400
    with pytest.raises(BodyError):
        parse(b"\xff\xff\xff", "protobuf")


def request_with(metric: m.Metric) -> ExportMetricsServiceRequest:
    req = ExportMetricsServiceRequest()
    req.resource_metrics.add().scope_metrics.add().metrics.append(metric)
    return req


def test_histograms_become_count_sum_and_cumulative_buckets() -> None:
    metric = m.Metric(
        name="latency", histogram=m.Histogram(aggregation_temporality=m.AGGREGATION_TEMPORALITY_DELTA)
    )
    metric.histogram.data_points.add(
        time_unix_nano=T, count=6, sum=2.5, explicit_bounds=[0.1, 1.0], bucket_counts=[1, 3, 2]
    )
    flat = flatten(request_with(metric))
    got = {(p.name, dict(p.labels).get("le")): (p.value, p.kind) for p in flat.points}
    assert got == {
        ("latency_count", None): (6.0, "delta"),
        ("latency_sum", None): (2.5, "delta"),
        ("latency_bucket", "0.1"): (1.0, "delta"),
        ("latency_bucket", "1"): (4.0, "delta"),
        ("latency_bucket", "+Inf"): (6.0, "delta"),
    }
    assert {p.base for p in flat.points} == {"latency"}
    bad = m.Metric(name="h", histogram=m.Histogram())
    bad.histogram.data_points.add(time_unix_nano=T, count=1, explicit_bounds=[1.0], bucket_counts=[1, 0, 0])
    assert flatten(request_with(bad)).rejected == 1


def test_other_types_and_rejected_points() -> None:
    exp = m.Metric(
        name="e",
        exponential_histogram=m.ExponentialHistogram(
            aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE
        ),
    )
    exp.exponential_histogram.data_points.add(time_unix_nano=T, count=4, sum=8.0)
    assert sorted(p.name for p in flatten(request_with(exp)).points) == ["e_count", "e_sum"]
    summ = m.Metric(name="s", summary=m.Summary())
    dp = summ.summary.data_points.add(time_unix_nano=T, count=2, sum=3.0)
    dp.quantile_values.add(quantile=0.5, value=1.5)
    assert {(p.name, dict(p.labels).get("quantile"), p.kind) for p in flatten(request_with(summ)).points} == {
        ("s_count", None, "counter"),
        ("s_sum", None, "counter"),
        ("s", "0.5", "gauge"),
    }
    updown = m.Metric(
        name="u", sum=m.Sum(aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE, is_monotonic=False)
    )
    updown.sum.data_points.add(time_unix_nano=T, as_double=-1.0)
    updown.sum.data_points.add(time_unix_nano=0, as_double=1.0)  # no time: rejected
    updown.sum.data_points.add(time_unix_nano=T)  # no value: rejected
    flat = flatten(request_with(updown))
    assert [(p.kind, p.value) for p in flat.points] == [("gauge", -1.0)] and flat.rejected == 2
    assert flat.reason
