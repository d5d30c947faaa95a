"""Workers over time: hot reload, removal, rejection, isolation between scorers, shutdown, probes."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import urllib.error
import urllib.request
import uuid

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.server import HealthServer
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.contract.wire import dump_summaries
from tests.component.conftest import FAST, LOOPBACK
from tests.component.harness import ScorerProcess, eventually, published, summary

pytestmark = pytest.mark.anyio


def fixed(scorer: ScorerProcess, score: float, pod: str = "p") -> str:
    key = uuid.uuid4().hex
    scorer.respond(key, {"results": [{"metric": {"pod": pod, "app": "a"}, "score": score}]})
    return scorer.url(f"/fixed/{key}/scoring")


async def test_changed_interval_endpoint_and_format_apply_at_the_next_cycle(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    first_url, second_url = fixed(scorer, 10), fixed(scorer, 20)
    await supervisor.apply([summary("hot", first_url, scoringInterval=3600, scoreDimensionFormat="${pod}")])
    assert (await published(publisher, "hot"))[0].items == [ScoreItem("p", 10)]

    # An hour-long wait is cut short by the new interval, and the new endpoint and format are used.
    report = await supervisor.apply(
        [summary("hot", second_url, scoringInterval=1, scoreDimensionFormat="${app}")]
    )
    assert report.updated == ["hot"]
    second = (await published(publisher, "hot", 2))[1]
    assert second.items == [ScoreItem("a", 20)]
    assert second.interval_seconds == 1

    report = await supervisor.apply(
        [summary("hot", second_url, scoringInterval=1, scoreDimensionFormat="${app}")]
    )
    assert report.unchanged == ["hot"]


async def test_removed_scorer_stops_and_leaves_nothing_behind(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    await supervisor.apply(
        [
            summary("going", fixed(scorer, 5), scoringInterval=1),
            summary("staying", fixed(scorer, 6), scoringInterval=1),
        ]
    )
    await published(publisher, "going")
    await published(publisher, "staying")
    assert 'ds_score_name="going"' in supervisor.metrics.exposition().decode()

    report = await supervisor.apply([summary("staying", fixed(scorer, 6), scoringInterval=1)])
    assert report.stopped == ["going"]
    assert publisher.removed == ["going"]
    assert "going" not in supervisor.workers
    assert '"going"' not in supervisor.metrics.exposition().decode()
    count = len(publisher.requests_for("going"))
    await published(publisher, "staying", len(publisher.requests_for("staying")) + 2)
    assert len(publisher.requests_for("going")) == count

    gone = await supervisor.apply_payload(None)  # the ConfigMap is gone
    assert gone is not None and gone.stopped == ["staying"]
    assert publisher.removed == ["going", "staying"]
    assert not supervisor.workers


async def test_invalid_and_duplicate_entries_are_rejected_by_name(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    scorer: ScorerProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = summary("good", fixed(scorer, 1))
    payload = dump_summaries(
        [
            good,
            summary("zero", scorer.url("/mean/scoring"), scoringInterval=0),
            summary("good", fixed(scorer, 99)),
            summary("odd", scorer.url("/mean/scoring"), sourceType="Graphite"),
        ]
    )
    payload = payload[:-1] + ',{"scoreName":"typed","scoringInterval":"30"}]'
    report = await supervisor.apply_payload(payload)
    assert report is not None
    assert report.started == ["good"]
    reasons = {r.name: r.reason for r in report.rejected}
    assert set(reasons) == {"typed", "zero", "good", "odd"}
    assert "scoringInterval" in reasons["zero"] and "sourceType" in reasons["odd"]
    assert "duplicate" in reasons["good"]
    assert "scorer=zero-scorer score=zero rejected" in caplog.text
    assert (await published(publisher, "good"))[0].items == [ScoreItem("good", 1)]


async def test_names_that_collide_after_sanitising_start_one_worker(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    # col_a, col-a and COL-A- all become AddOnPlacementScore "col-a"; three workers would
    # overwrite each other's scores on every cycle.
    report = await supervisor.apply(
        [
            summary("col_a", fixed(scorer, 1)),
            summary("col-a", fixed(scorer, 2)),
            summary("COL-A-", fixed(scorer, 3)),
        ]
    )
    assert report.started == ["col_a"]
    assert sorted(r.name for r in report.rejected) == ["COL-A-", "col-a"]
    assert all("already written for scoreName 'col_a'" in r.reason for r in report.rejected)
    assert set(supervisor.workers) == {"col_a"}
    assert (await published(publisher, "col_a"))[0].items == [ScoreItem("col_a", 1)]


async def test_destination_none_exports_metrics_without_publishing(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    await supervisor.apply(
        [summary("metrics_only", fixed(scorer, 7), scoreDestination="None", scoringInterval=1)]
    )
    worker = supervisor.workers["metrics_only"]
    await eventually(lambda: worker.cycles >= 2, what="two cycles")
    assert publisher.requests_for("metrics_only") == []
    assert 'ds_score_name="metrics_only"' in supervisor.metrics.exposition().decode()


async def test_a_slow_scorer_never_delays_another(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    slow = summary("slow", scorer.url("/sleep/20/scoring"), scoringInterval=60, timeoutSeconds=30)
    fast = summary("fast", fixed(scorer, 3), scoringInterval=1)
    await supervisor.apply([slow, fast])
    await published(publisher, "fast", 4)
    assert publisher.requests_for("slow") == []  # still inside its first cycle


async def test_concurrency_is_bounded(publisher: MemoryPublisher, scorer: ScorerProcess) -> None:
    from dataclasses import replace

    sup = Supervisor(
        cluster_name="c",
        secrets=MemorySecrets(),
        publisher=publisher,
        metrics=AgentMetrics(process_collectors=False),
        settings=replace(FAST, max_concurrent_cycles=1),
    )
    try:
        run = uuid.uuid4().hex
        await sup.apply(
            [
                summary(f"s{i}", scorer.url(f"/sleep/0.5/scoring?run={run}"), scoringInterval=30)
                for i in range(3)
            ]
        )
        await eventually(lambda: len(publisher.published) >= 3, what="three cycles")
        received = sorted(r["received"] for r in scorer.requests("/sleep/0.5/") if r["query"] == f"run={run}")
        assert len(received) == 3
        assert all(b - a >= 0.45 for a, b in itertools.pairwise(received))  # one at a time
    finally:
        await sup.close()


async def test_close_ends_everything_without_waiting_for_requests_in_flight(
    publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    sup = Supervisor(
        cluster_name="c",
        secrets=MemorySecrets(),
        publisher=publisher,
        metrics=AgentMetrics(process_collectors=False),
        settings=AgentSettings(address_policy=LOOPBACK),
    )
    run = uuid.uuid4().hex
    await sup.apply([summary(f"busy{i}", scorer.url(f"/sleep/30/scoring?run={run}")) for i in range(5)])

    def in_flight() -> bool:
        return len([r for r in scorer.requests("/sleep/30/") if r["query"] == f"run={run}"]) == 5

    await eventually(in_flight, timeout=15, what="five requests in flight")
    began = time.monotonic()
    await sup.close()  # its own budget is 4 s (Supervisor.close's timeout)
    # The five requests in flight hold out for 30 s (they have just been received), so a close that
    # waited for them would take ~30 s.  Under 20 s proves it did not, and leaves 16 s over close's
    # 4 s budget for scheduling delay: a loaded machine cannot break it, a waiting close still does.
    assert time.monotonic() - began < 20
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("scorer:")]
    assert publisher.removed == []  # shutdown is not removal: scores expire on their own


async def test_health_server_probes_and_metrics(supervisor: Supervisor, scorer: ScorerProcess) -> None:
    server = HealthServer(supervisor.metrics, lambda: supervisor.ready, port=0)
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"

        def status(path: str) -> int:
            try:
                with urllib.request.urlopen(base + path, timeout=5) as response:
                    return int(response.status)
            except urllib.error.HTTPError as exc:
                return exc.code

        assert await asyncio.to_thread(status, "/healthz") == 200
        assert await asyncio.to_thread(status, "/readyz") == 503
        await supervisor.apply([summary("probe", fixed(scorer, 1), scoringInterval=1)])
        assert await asyncio.to_thread(status, "/readyz") == 200
        await eventually(lambda: supervisor.workers["probe"].cycles >= 1, what="a cycle")

        def metrics() -> str:
            with urllib.request.urlopen(base + "/metrics", timeout=5) as response:
                return str(response.read().decode())

        text = await asyncio.to_thread(metrics)
        assert any(
            line.startswith("dynamic_score{") and 'ds_cluster="cluster1"' in line
            for line in text.splitlines()
        )
        assert "dynamic_scoring_requests_total" in text and "_created" not in text
    finally:
        server.stop()


async def test_log_lines_name_the_scorer(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    scorer: ScorerProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    await supervisor.apply([summary("talkative", scorer.url("/status/503/scoring"), scoringInterval=5)])
    await published(publisher, "talkative")
    lines = [r.getMessage() for r in caplog.records if r.name == "dynamic_scoring.agent.worker"]
    assert lines and all("scorer=talkative-scorer score=talkative" in line for line in lines)
