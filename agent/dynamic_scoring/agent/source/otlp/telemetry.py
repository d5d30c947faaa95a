"""The receiver's and the store's own metrics, ``dynamic_scoring_otlp_*``, computed when scraped.

Labels are bounded: ``reason`` takes the store's drop reasons or the receiver's connection
refusals (``receiver.CONNECTION_REFUSALS``) and ``code`` the receiver's status codes
(``receiver.STATUS_CODES``).  No metric or attribute name a pusher sends ever becomes a
label value here.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from dynamic_scoring.agent.source.otlp.receiver import OtlpReceiver
from dynamic_scoring.agent.source.otlp.store import SeriesStore


class OtlpTelemetry(Collector):
    """Reads ``store`` and ``receiver`` counters at scrape time (register it on the agent's registry)."""

    def __init__(self, store: SeriesStore, receiver: OtlpReceiver | None = None) -> None:
        self._store = store
        self._receiver = receiver

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        """The current values (prometheus_client adds ``_total`` to the counters' names)."""
        store = self._store
        stats = store.stats
        yield GaugeMetricFamily(
            "dynamic_scoring_otlp_series_held", "Series the OTLP store holds now", value=store.series_held
        )
        yield GaugeMetricFamily(
            "dynamic_scoring_otlp_series_limit", "Most series the OTLP store may hold", value=store.max_series
        )
        yield GaugeMetricFamily(
            "dynamic_scoring_otlp_points_per_series_limit",
            "Most points one series may hold (from the longest range and finest step)",
            value=store.points_cap,
        )
        yield CounterMetricFamily(
            "dynamic_scoring_otlp_series_dropped",
            "New series refused because the store held its limit",
            value=stats.series_dropped,
        )
        yield CounterMetricFamily(
            "dynamic_scoring_otlp_points_received",
            "Data points received over OTLP",
            value=stats.points_received,
        )
        yield CounterMetricFamily(
            "dynamic_scoring_otlp_points_stored",
            "Data points a scorer selects, stored",
            value=stats.points_stored,
        )
        dropped = CounterMetricFamily(
            "dynamic_scoring_otlp_points_dropped", "Data points dropped, by reason", labels=["reason"]
        )
        for reason, count in sorted(stats.points_dropped.items()):
            dropped.add_metric([reason], count)
        yield dropped
        if self._receiver is not None:
            requests = CounterMetricFamily(
                "dynamic_scoring_otlp_requests", "OTLP requests answered, by HTTP status", labels=["code"]
            )
            for code, count in sorted(self._receiver.responses.items()):
                requests.add_metric([str(code)], count)
            yield requests
            yield CounterMetricFamily(
                "dynamic_scoring_otlp_tls_handshake_failures",
                "TLS handshakes with the OTLP receiver that failed (with mutual TLS: no or an untrusted "
                "client certificate)",
                value=self._receiver.tls_handshake_failures,
            )
            refused = CounterMetricFamily(
                "dynamic_scoring_otlp_connections_refused",
                "OTLP connections closed unserved, by reason: head_timeout (the request head missed its "
                "deadline), peer_cap (the client address held its connection cap), total_cap (every "
                "slot was taken)",
                labels=["reason"],
            )
            for reason, count in sorted(self._receiver.connections_refused.items()):
                refused.add_metric([reason], count)
            yield refused


__all__ = ["OtlpTelemetry"]
