"""The e2e Prometheus harness itself: backfilled history is queryable and live load is scraped."""

from __future__ import annotations

from e2e.procs import wait_until
from e2e.prometheus import synthetic_cpu_openmetrics
from tests.component.conftest import GAUGE, PODS, PromFixture


def test_backfilled_gauges_are_exact(prometheus: PromFixture) -> None:
    result = prometheus.server.query(GAUGE)
    got = {
        (r["metric"]["namespace"], r["metric"]["pod"], r["metric"]["node"]): float(r["value"][1])
        for r in result
    }
    assert got == PODS


def test_live_load_is_scraped_and_changes(prometheus: PromFixture) -> None:
    prometheus.exporter.set_cpu_rate("live", "pod-a", 2.0)

    def value() -> float | None:
        found = prometheus.server.query('container_cpu_usage_seconds_total{namespace="live",pod="pod-a"}')
        return float(found[0]["value"][1]) if found else None

    def exported() -> float:
        return float(prometheus.exporter.render().split('pod="pod-a"}')[1].split()[0])

    first = wait_until(value, timeout=30, what="the live counter in Prometheus")
    # At 2 cores the counter Prometheus scrapes keeps growing.
    wait_until(lambda: (v := value()) is not None and v > first, timeout=30, what="the counter to grow")

    prometheus.exporter.set_cpu_rate("live", "pod-a", 0.0)
    frozen = exported()
    # At 0 cores it stops: a scrape after the change sees exactly the frozen value, which a counter
    # still growing at 2 per second could never show, and the exporter still holds it afterwards.
    wait_until(lambda: value() == frozen, timeout=30, what="Prometheus to scrape the plateau")
    assert exported() == frozen
    assert frozen > first


def test_synthetic_counter_grows_by_the_rate() -> None:
    text = synthetic_cpu_openmetrics({("ns", "p"): 0.25}, 1000.0, 1060.0, 30.0)
    samples = [
        line.split() for line in text.splitlines() if line.startswith("container_cpu_usage_seconds_total")
    ]
    assert [(float(v), float(t)) for _, v, t in samples] == [(0.0, 1000.0), (7.5, 1030.0), (15.0, 1060.0)]
    assert text.startswith("# TYPE container_cpu_usage_seconds counter\n") and text.endswith("# EOF\n")
