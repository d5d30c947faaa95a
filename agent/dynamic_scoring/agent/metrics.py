"""The agent's Prometheus metrics: upstream's, unchanged, and better ones beside them.

Upstream's names, types and labels are kept exactly so existing dashboards work:

* ``dynamic_score{ds_cluster, ds_node, ds_device, ds_namespace, ds_app, ds_pod, ds_container, ds_meta,
  ds_score_name}``: the raw score of each result (before normalisation and clamping).  The seven
  label values taken from the result are truncated to 256 *characters* (upstream cut bytes, which
  could split a character).
* ``dynamic_scoring_requests_total{score_name, status}`` with ``status`` ``success`` or ``failure``.
* ``dynamic_scoring_{fetch,perform,send}_seconds_total{score_name}``: cumulative seconds of the
  successful fetch, scoring call and write.

Added:

* ``dynamic_scoring_stage_duration_seconds{score_name, stage}``: histogram of every attempt's stage
  time (``fetch``, ``score``, ``write``), successful or not;
* ``dynamic_scoring_failures_total{score_name, stage, reason}``: failed cycles by failing stage and
  error class;
* ``dynamic_scoring_source_failures_total{score_name, source, reason}``: failed fetches from one
  named source (``sources``); ``source`` only takes the names of the scorer's own sources;
* ``dynamic_scoring_retries_total{score_name, stage}``;
* ``dynamic_scoring_items_rejected_total{score_name}`` and ``dynamic_scoring_scores_clamped_total``;
* ``dynamic_scoring_unstabilized_score{score_name, item}`` and
  ``dynamic_scoring_stabilized_items{score_name, trend}``, for scorers with ``stabilization`` only:
  each item's value before stabilization, and how many items are held back (``rising``,
  ``falling``, ``within-tolerance``);
* ``dynamic_scoring_last_success_timestamp_seconds{score_name}`` and
  ``dynamic_scoring_score_expires_in_seconds{score_name}``, computed at scrape time (the latter
  turns negative once the published scores have expired).

Series of a score name disappear with its worker, and ``dynamic_score`` series whose label tuple is
absent from the latest successful result are removed, so no dashboard shows a value that no scorer
produces any more.  The registry is private (not the global default) and ``*_created`` series are
off; process and platform collectors are included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from dynamic_scoring.agent.errors import Stage
from dynamic_scoring.agent.items.stabilization import ItemState
from dynamic_scoring.agent.scorer_client.answer import ScoredSeries

LABEL_VALUE_MAX_CHARS = 256
SCORE_LABELS: tuple[str, ...] = (
    "ds_cluster",
    "ds_node",
    "ds_device",
    "ds_namespace",
    "ds_app",
    "ds_pod",
    "ds_container",
    "ds_meta",
    "ds_score_name",
)
_RESULT_KEYS = ("node", "device", "namespace", "app", "pod", "container", "meta")
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def truncate_label(value: str) -> str:
    """Cut a label value to 256 characters (never inside a character)."""
    return value[:LABEL_VALUE_MAX_CHARS]


def score_labels(cluster: str, score_name: str, result: ScoredSeries) -> tuple[str, ...]:
    """The ``dynamic_score`` label values for one result, in ``SCORE_LABELS`` order."""
    values = [truncate_label(result.metric.get(key, "")) for key in _RESULT_KEYS]
    return (cluster, *values, score_name)


class _Freshness(Collector):
    """Per-scorer time of last success and seconds until expiry, computed when scraped."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_success: dict[str, float] = {}
        self._valid_until: dict[str, float] = {}

    def set(self, score_name: str, last_success: float, valid_until: float) -> None:
        with self._lock:
            self._last_success[score_name] = last_success
            self._valid_until[score_name] = valid_until

    def forget(self, score_name: str) -> None:
        with self._lock:
            self._last_success.pop(score_name, None)
            self._valid_until.pop(score_name, None)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        now = self._clock()
        last = GaugeMetricFamily(
            "dynamic_scoring_last_success_timestamp_seconds",
            "Unix time of the last successful scoring cycle",
            labels=["score_name"],
        )
        expires = GaugeMetricFamily(
            "dynamic_scoring_score_expires_in_seconds",
            "Seconds until the last published scores expire (negative once expired)",
            labels=["score_name"],
        )
        with self._lock:
            for name, ts in sorted(self._last_success.items()):
                last.add_metric([name], ts)
                expires.add_metric([name], self._valid_until[name] - now)
        yield last
        yield expires


class _Scores(Collector):
    """``dynamic_score``: the latest results of each scorer, turned into samples when scraped.

    A ``Gauge`` child per result cost 60 ms a cycle at 10,000 per-series results (a labelled child
    is created or looked up per tuple, and vanished tuples removed one by one), on the scoring
    cycle's own time; building the label tuples alone still cost 23 ms.  So a cycle only keeps a
    reference to its results, and the tuples are built at the first scrape after it (once: later
    scrapes reuse them), off the scoring path.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[str, Sequence[ScoredSeries]]] = {}
        self._series: dict[str, dict[tuple[str, ...], float]] = {}

    def replace(self, score_name: str, cluster: str, results: Sequence[ScoredSeries]) -> None:
        with self._lock:
            self._latest[score_name] = (cluster, results)
            self._series.pop(score_name, None)

    def forget(self, score_name: str) -> None:
        with self._lock:
            self._latest.pop(score_name, None)
            self._series.pop(score_name, None)

    def series(self, score_name: str) -> dict[tuple[str, ...], float]:
        """The label tuples and values of one scorer (last wins per tuple); built once per cycle."""
        with self._lock:
            built = self._series.get(score_name)
            latest = self._latest.get(score_name)
        if built is not None or latest is None:
            return built or {}
        cluster, results = latest
        built = {score_labels(cluster, score_name, r): r.score for r in results}
        with self._lock:
            if self._latest.get(score_name) is latest:  # not replaced meanwhile
                self._series[score_name] = built
        return built

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("dynamic_score", "Dynamic score from each scorer", labels=SCORE_LABELS)
        with self._lock:
            names = sorted(self._latest)
        for name in names:
            for labels, value in self.series(name).items():
                family.add_metric(labels, value)
        yield family


class _Stabilized(Collector):
    """The value of each item before stabilization, and how many items are held back, per scorer.

    ``dynamic_score`` keeps its meaning (the scorer's raw result); this is the value the agent
    would publish without stabilization, so a dashboard can plot it beside the published one.  Only
    scorers with stabilization have series.  Like ``_Scores``, a cycle keeps a reference and the
    samples are built when scraped.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, Mapping[str, ItemState]] = {}

    def replace(self, score_name: str, states: Mapping[str, ItemState]) -> None:
        with self._lock:
            if states:
                self._latest[score_name] = states
            else:
                self._latest.pop(score_name, None)

    def forget(self, score_name: str) -> None:
        with self._lock:
            self._latest.pop(score_name, None)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        raw = GaugeMetricFamily(
            "dynamic_scoring_unstabilized_score",
            "Each item's score before stabilization (what would be published without it)",
            labels=("score_name", "item"),
        )
        held = GaugeMetricFamily(
            "dynamic_scoring_stabilized_items",
            "Items whose published score differs from the unstabilized one, by trend",
            labels=("score_name", "trend"),
        )
        with self._lock:
            latest = sorted(self._latest.items())
        for name, states in latest:
            counts = dict.fromkeys(("rising", "falling", "within-tolerance"), 0)
            for item, state in states.items():
                raw.add_metric((name, truncate_label(item)), state.raw)
                if state.trend in counts:
                    counts[state.trend] += 1
            for trend, count in counts.items():
                held.add_metric((name, trend), count)
        yield raw
        yield held


class AgentMetrics:
    """All metrics of one agent process, on their own registry.

    Args:
        registry: where to register; a new private ``CollectorRegistry`` by default.
        process_collectors: add the ``process_*`` and ``python_info`` collectors.
        clock: Unix seconds, used at scrape time for the expiry gauge.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        process_collectors: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry()
        if process_collectors:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
        r = self.registry
        self.score = _Scores()
        r.register(self.score)
        self.requests = Counter(
            "dynamic_scoring_requests", "Counter for scoring attempts", ["score_name", "status"], registry=r
        )
        self.fetch_seconds = Counter(
            "dynamic_scoring_fetch_seconds", "Cumulative seconds spent fetching source data", ["score_name"],
            registry=r,
        )  # fmt: skip
        self.perform_seconds = Counter(
            "dynamic_scoring_perform_seconds", "Cumulative seconds spent calling the scoring API",
            ["score_name"], registry=r,
        )  # fmt: skip
        self.send_seconds = Counter(
            "dynamic_scoring_send_seconds", "Cumulative seconds spent writing scores", ["score_name"],
            registry=r,
        )  # fmt: skip
        self.stage_duration = Histogram(
            "dynamic_scoring_stage_duration_seconds",
            "Duration of each stage of a scoring cycle (fetch, score, write), successful or not",
            ["score_name", "stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.failures = Counter(
            "dynamic_scoring_failures",
            "Failed scoring cycles by failing stage and reason (error class)",
            ["score_name", "stage", "reason"],
            registry=r,
        )
        self.source_failures = Counter(
            "dynamic_scoring_source_failures",
            "Failed fetches from one named source of a scorer (sources extension), by reason",
            ["score_name", "source", "reason"],
            registry=r,
        )
        self.retries = Counter(
            "dynamic_scoring_retries", "Retried requests after transient failures", ["score_name", "stage"],
            registry=r,
        )  # fmt: skip
        self.items_rejected = Counter(
            "dynamic_scoring_items_rejected",
            "Results dropped because their rendered item name is invalid",
            ["score_name"],
            registry=r,
        )
        self.scores_clamped = Counter(
            "dynamic_scoring_scores_clamped",
            "Scores that fell outside [-100, 100] after normalisation and were clamped",
            ["score_name"],
            registry=r,
        )
        self._freshness = _Freshness(clock)
        r.register(self._freshness)
        self._stabilized = _Stabilized()
        r.register(self._stabilized)

    # -- upstream metrics -------------------------------------------------------------------------

    def set_scores(self, cluster: str, score_name: str, results: Sequence[ScoredSeries]) -> None:
        """Set one ``dynamic_score`` per result (last wins per label tuple) and drop vanished tuples.

        The tuples are built when scraped (see `_Scores`); ``results`` must not change afterwards.
        """
        self.score.replace(score_name, cluster, results)

    def clear_scores(self, score_name: str) -> None:
        """Remove every ``dynamic_score`` series of ``score_name`` (worker gone, or scores expired)."""
        self.score.forget(score_name)

    def count_cycle(self, score_name: str, *, success: bool) -> None:
        """Count one finished cycle in ``dynamic_scoring_requests_total``."""
        self.requests.labels(score_name, "success" if success else "failure").inc()

    def add_stage_seconds(self, score_name: str, stage: Stage, seconds: float, *, success: bool) -> None:
        """Record a stage's duration; successful ones also feed upstream's cumulative counters."""
        self.stage_duration.labels(score_name, stage).observe(seconds)
        if success:
            counter = {"fetch": self.fetch_seconds, "score": self.perform_seconds, "write": self.send_seconds}
            counter[stage].labels(score_name).inc(seconds)

    # -- additions --------------------------------------------------------------------------------

    def count_failure(self, score_name: str, stage: Stage, reason: str) -> None:
        """Count a failed cycle by failing stage and reason."""
        self.failures.labels(score_name, stage, reason).inc()

    def count_source_failure(self, score_name: str, source: str, reason: str) -> None:
        """Count one failed fetch from the named source ``source`` (bounded by the scorer's sources)."""
        self.source_failures.labels(score_name, source, reason).inc()

    def forget_sources(self, score_name: str, sources: Iterable[str]) -> None:
        """Drop the source-failure series of ``sources`` (removed from the scorer's summary)."""
        for source in sources:
            self.source_failures.remove_by_labels({"score_name": score_name, "source": source})

    def count_retry(self, score_name: str, stage: Stage) -> None:
        """Count one retry of a request after a transient failure."""
        self.retries.labels(score_name, stage).inc()

    def count_items(self, score_name: str, *, rejected: int, clamped: int) -> None:
        """Count rejected item names and clamped scores of one successful cycle."""
        self.items_rejected.labels(score_name).inc(rejected)
        self.scores_clamped.labels(score_name).inc(clamped)

    def set_freshness(self, score_name: str, last_success: float, valid_until: float) -> None:
        """Record the last success and expiry (Unix seconds) for the scrape-time gauges."""
        self._freshness.set(score_name, last_success, valid_until)

    def set_stabilized(self, score_name: str, states: Mapping[str, ItemState]) -> None:
        """The latest cycle's per-item states under stabilization (empty: the scorer has none)."""
        self._stabilized.replace(score_name, states)

    def forget(self, score_name: str) -> None:
        """Remove every series labelled with ``score_name`` (its worker stopped)."""
        self.clear_scores(score_name)
        self._stabilized.forget(score_name)
        for metric in (
            self.requests,
            self.fetch_seconds,
            self.perform_seconds,
            self.send_seconds,
            self.stage_duration,
            self.failures,
            self.source_failures,
            self.retries,
            self.items_rejected,
            self.scores_clamped,
        ):
            metric.remove_by_labels({"score_name": score_name})
        self._freshness.forget(score_name)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


__all__ = ["LABEL_VALUE_MAX_CHARS", "SCORE_LABELS", "AgentMetrics", "score_labels", "truncate_label"]
