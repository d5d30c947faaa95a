"""Several sources per scorer, and one central Prometheus serving two clusters through ``${cluster}``.

Real parts only: the session's Prometheus scrapes gauges that carry a ``cluster`` label (as a
central Thanos or a remote-write hub Prometheus would hold them), two agents' supervisors named
``cluster1`` and ``cluster2`` run the same summary against it, and the scorer is a real process.
A source that fails is a loopback port with nothing listening.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from e2e.procs import wait_until
from tests.component.conftest import FAST, PromFixture
from tests.component.harness import ScorerProcess, free_port, published, summary

pytestmark = pytest.mark.anyio

LOAD = "ds_test_cluster_load"
LOADS = {
    ("cluster1", "n1"): 10.0,
    ("cluster1", "n2"): 20.0,
    ("cluster2", "n1"): 30.0,
    ("cluster2", "n3"): 40.0,
}
"""What the central store holds: the load of each node of each cluster."""
OWN = "ds_test_labelled_load"
"""A gauge whose series carry a ``source`` label of their own."""


@pytest.fixture(scope="module")
def central(prometheus: PromFixture) -> Iterator[PromFixture]:
    """The session Prometheus, once it holds every cluster's series (scraped live, 1 s interval)."""
    for (cluster, node), value in LOADS.items():
        prometheus.exporter.set_gauge(LOAD, {"cluster": cluster, "node": node}, value)
    prometheus.exporter.set_gauge(OWN, {"node": "n9", "source": "node-exporter"}, 5.0)

    def loaded() -> bool:
        # Held for 1.5 s already: a range query's last step (end = now in whole seconds) then sees
        # every series, not only those scraped before the truncated end.
        at = time.time() - 1.5
        return len(prometheus.server.query(LOAD, at)) == len(LOADS) and bool(prometheus.server.query(OWN, at))

    # Prometheus scrapes the exporter every second; wait for the condition, not for a time.
    wait_until(loaded, timeout=40, what="Prometheus holding the central-store gauges", interval=0.2)
    yield prometheus


@pytest.fixture
async def cluster2() -> AsyncIterator[tuple[Supervisor, MemoryPublisher]]:
    """A second agent, as it runs on cluster2."""
    publisher = MemoryPublisher()
    sup = Supervisor(
        cluster_name="cluster2",
        secrets=MemorySecrets(namespace="dynamic-scoring"),
        publisher=publisher,
        metrics=AgentMetrics(process_collectors=False),
        settings=FAST,
    )
    try:
        yield sup, publisher
    finally:
        await sup.close()


def central_source(prom: PromFixture, name: str = "central", query: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "type": "Prometheus",
        "endpoint": prom.query_range_url,
        "queries": [query or f'{LOAD}{{cluster="${{cluster}}"}}'],
        "range": 60,
        "step": 5,
    }


def down_source(name: str = "down") -> dict[str, Any]:
    return {
        "name": name,
        "endpoint": f"http://127.0.0.1:{free_port()}/api/v1/query_range",
        "queries": ["up"],
        "range": 60,
        "step": 5,
    }


def received(scorer: ScorerProcess, path: str) -> list[dict[str, str]]:
    """The series labels the scorer got on ``path`` (with its ``?run=`` key) in its latest request."""
    route, key = path.split("?")
    mine = [r for r in scorer.requests(route) if r["query"] == key]
    assert mine, f"the scorer got nothing on {path}"
    series: list[dict[str, str]] = mine[-1]["series"]
    return series


async def test_one_central_prometheus_scores_each_cluster_from_its_own_series(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    cluster2: tuple[Supervisor, MemoryPublisher],
    central: PromFixture,
    scorer: ScorerProcess,
) -> None:
    path = f"/mean/scoring?run={uuid.uuid4().hex}"
    s = summary(
        "central_load",
        scorer.url(path),
        sources=[central_source(central)],
        scoreDimensionFormat="${cluster}-${node}",
    )
    sup2, publisher2 = cluster2
    await supervisor.apply([s])
    await sup2.apply([s])

    one = (await published(publisher, "central_load"))[0]
    two = (await published(publisher2, "central_load"))[0]

    assert one.condition.status == "True", one.condition
    assert one.items == [ScoreItem("cluster1-n1", 10), ScoreItem("cluster1-n2", 20)]
    assert two.condition.status == "True", two.condition
    assert two.items == [ScoreItem("cluster2-n1", 30), ScoreItem("cluster2-n3", 40)]
    series = received(scorer, path)
    assert {x["source"] for x in series} == {"central"}  # every series names its source


async def test_a_format_placeholder_the_series_do_not_carry_is_a_condition_naming_it_and_their_labels(
    supervisor: Supervisor, publisher: MemoryPublisher, central: PromFixture, scorer: ScorerProcess
) -> None:
    """The series carry `node`, the format asks for `${device}`: nothing can be named, and it says so.

    Upstream renders the empty name and drops the item without a word (OpenShift's node metrics
    carry `instance`, not `node`, and a `${node}` format then publishes nothing).
    """
    path = f"/mean/scoring?run={uuid.uuid4().hex}"
    s = summary(
        "by_device", scorer.url(path), sources=[central_source(central)], scoreDimensionFormat="${device}"
    )
    await supervisor.apply([s])
    first = (await published(publisher, "by_device"))[0]
    assert first.items == []
    assert (first.condition.status, first.condition.reason) == ("False", "EmptyPlaceholder"), first.condition
    message = first.condition.message
    assert (
        '${device} is empty in format "${device}" for 2 of 2 result(s), 2 of which publish no item' in message
    )
    assert 'node="n1"' in message and 'source="central"' in message, message
    assert "name a label the results have in scoreDimensionFormat" in message


async def test_a_label_mapping_fills_a_placeholder_from_another_label(
    supervisor: Supervisor, publisher: MemoryPublisher, central: PromFixture, scorer: ScorerProcess
) -> None:
    """`scoreDimensionLabels: {device: node}`: `${device}` reads the series' `node` label.

    The same shape as OpenShift's node metrics with `{node: instance}`; a mapping to a label the
    results lack is reported like any empty placeholder, naming the label it reads.
    """
    path = f"/mean/scoring?run={uuid.uuid4().hex}"
    s = summary(
        "mapped",
        scorer.url(path),
        sources=[central_source(central)],
        scoreDimensionFormat="${device}",
        scoreDimensionLabels={"device": "node"},
    )
    await supervisor.apply([s])
    first = (await published(publisher, "mapped"))[0]
    assert first.condition.status == "True", first.condition
    assert first.items == [ScoreItem("n1", 10), ScoreItem("n2", 20)]

    wrong = summary(
        "mapped_wrong",
        scorer.url(path),
        sources=[central_source(central)],
        scoreDimensionFormat="${device}",
        scoreDimensionLabels={"device": "instance_name"},
    )
    await supervisor.apply([s, wrong])
    bad = (await published(publisher, "mapped_wrong"))[0]
    assert (bad.condition.status, bad.condition.reason) == ("False", "EmptyPlaceholder"), bad.condition
    assert "${device} (read from label instance_name) is empty" in bad.condition.message


async def test_series_of_several_sources_arrive_in_source_order_and_a_source_label_is_kept_aside(
    supervisor: Supervisor, publisher: MemoryPublisher, central: PromFixture, scorer: ScorerProcess
) -> None:
    path = f"/count/scoring?run={uuid.uuid4().hex}"
    s = summary(
        "ordered",
        scorer.url(path),
        sources=[
            central_source(central, "own", OWN),
            central_source(central, "fleet"),
        ],
        scoreDimensionFormat="${meta}",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "ordered"))[0]
    assert first.condition.status == "True", first.condition
    assert first.items == [ScoreItem("count", 3)]
    assert "1 series had a source label of their own, kept as exported_source" in first.condition.message
    series = received(scorer, path)
    assert [(x["source"], x.get("exported_source"), x["node"]) for x in series] == [
        ("own", "node-exporter", "n9"),
        ("fleet", None, "n1"),
        ("fleet", None, "n2"),
    ]


async def test_a_failing_source_fails_the_cycle_by_name_under_fail(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    central: PromFixture,
    scorer: ScorerProcess,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="dynamic_scoring.agent.worker")
    s = summary(
        "strict",
        scorer.url("/mean/scoring"),
        sources=[central_source(central), down_source()],
        onSourceError="Fail",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "strict"))[0]

    assert first.items is None  # the last scores (none yet) stay
    assert first.condition.status == "False"
    assert first.condition.reason == "PrometheusUnavailable"
    assert 'source "down"' in first.condition.message
    assert any('source "down"' in r.getMessage() for r in caplog.records)
    labels = {"score_name": "strict", "source": "down", "reason": "PrometheusUnavailable"}
    assert supervisor.metrics.registry.get_sample_value("dynamic_scoring_source_failures_total", labels)
    ok = {"score_name": "strict", "source": "central", "reason": "PrometheusUnavailable"}
    assert supervisor.metrics.registry.get_sample_value("dynamic_scoring_source_failures_total", ok) is None


async def test_score_with_available_scores_what_arrived_and_says_which_source_is_missing(
    supervisor: Supervisor, publisher: MemoryPublisher, central: PromFixture, scorer: ScorerProcess
) -> None:
    s = summary(
        "lenient",
        scorer.url("/mean/scoring"),
        sources=[down_source("edge"), central_source(central)],
        onSourceError="ScoreWithAvailable",
        scoreDimensionFormat="${node}",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "lenient"))[0]

    assert first.condition.status == "True", first.condition
    assert first.condition.reason == "ScoredWithSourceErrors"
    assert "without source(s) edge" in first.condition.message
    assert "PrometheusUnavailable" in first.condition.message
    assert first.items == [ScoreItem("n1", 10), ScoreItem("n2", 20)]
    labels = {"score_name": "lenient", "source": "edge", "reason": "PrometheusUnavailable"}
    assert supervisor.metrics.registry.get_sample_value("dynamic_scoring_source_failures_total", labels)


async def test_score_with_available_still_fails_when_every_source_fails(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    s = summary(
        "nothing",
        scorer.url("/mean/scoring"),
        sources=[down_source("a"), down_source("b")],
        onSourceError="ScoreWithAvailable",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "nothing"))[0]
    assert first.condition.status == "False"
    assert first.condition.message.startswith("fetch failed for scorer nothing-scorer: every source failed")
    assert 'source "a"' in first.condition.message


async def test_placeholder_outside_a_string_is_refused_before_any_query(
    supervisor: Supervisor, central: PromFixture, scorer: ScorerProcess
) -> None:
    s = summary(
        "injected",
        scorer.url("/mean/scoring"),
        sources=[central_source(central, query=f"{LOAD} + ${{cluster}}")],
    )
    report = await supervisor.apply([s])
    assert report.started == []
    reasons = [r.reason for r in report.rejected]
    assert any(
        "sources[0] (central).queries: query #1: ${cluster} stands in the expression" in r for r in reasons
    )
    assert "injected" not in supervisor.workers


async def test_each_source_sends_only_its_own_credentials(
    supervisor: Supervisor, publisher: MemoryPublisher, secrets: MemorySecrets, scorer: ScorerProcess
) -> None:
    key_a, key_b = uuid.uuid4().hex, uuid.uuid4().hex
    secrets.set("source-a", "token", "token-for-a\n", allowed_hosts=f"127.0.0.1:{scorer.port}")
    secrets.set("tenant", "id", "tenant-b", allowed_hosts=f"127.0.0.1:{scorer.port}")
    scorer.expect(key_a, {"Authorization": "Bearer token-for-a"})
    scorer.expect(key_b, {"X-Scope-OrgID": "tenant-b"})
    path = f"/count/scoring?run={uuid.uuid4().hex}"
    s = summary(
        "two_tenants",
        scorer.url(path),
        sources=[
            {
                "name": "a",
                "endpoint": scorer.url(f"/prom/{key_a}/api/v1/query_range"),
                "queries": ["up"],
                "range": 60,
                "step": 30,
                "auth": {"bearerTokenSecretRef": {"name": "source-a", "key": "token"}},
            },
            {
                "name": "b",
                "endpoint": scorer.url(f"/prom/{key_b}/api/v1/query_range"),
                "queries": ["up"],
                "range": 60,
                "step": 30,
                "auth": {
                    "headers": [{"name": "X-Scope-OrgID", "secretKeyRef": {"name": "tenant", "key": "id"}}]
                },
            },
        ],
        scoreDimensionFormat="${meta}",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "two_tenants"))[0]
    assert first.condition.status == "True", first.condition
    assert first.items == [ScoreItem("count", 2)]
    to_b = scorer.requests(f"/prom/{key_b}/")[-1]["headers"]
    assert "authorization" not in to_b  # a's token never goes to b
    to_a = scorer.requests(f"/prom/{key_a}/")[-1]["headers"]
    assert "x-scope-orgid" not in to_a
    assert [x["source"] for x in received(scorer, path)] == ["a", "b"]


async def test_failure_series_of_a_removed_source_go_with_it(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    def failures(source: str) -> float | None:
        labels = {"score_name": "renamed", "source": source, "reason": "PrometheusUnavailable"}
        value: float | None = supervisor.metrics.registry.get_sample_value(
            "dynamic_scoring_source_failures_total", labels
        )
        return value

    old = summary("renamed", scorer.url("/mean/scoring"), sources=[down_source("old")])
    await supervisor.apply([old])
    await published(publisher, "renamed")
    assert failures("old") == 1

    new = summary("renamed", scorer.url("/mean/scoring"), sources=[down_source("new")])
    report = await supervisor.apply([new])
    assert report.updated == ["renamed"]
    assert failures("old") is None  # the label stays bounded by the scorer's current sources


async def test_a_hanging_source_under_score_with_available_leaves_the_scorer_its_half(
    supervisor: Supervisor, publisher: MemoryPublisher, central: PromFixture, scorer: ScorerProcess
) -> None:
    interval = 4
    s = summary(
        "patient",
        scorer.url("/mean/scoring"),
        scoringInterval=interval,
        sources=[
            dict(down_source("drip"), endpoint=scorer.url("/hostile/drip/api/v1/query_range")),
            central_source(central),
        ],
        onSourceError="ScoreWithAvailable",
        scoreDimensionFormat="${node}",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "patient", timeout=3 * interval))[0]

    assert first.condition.reason == "ScoredWithSourceErrors", first.condition
    assert "without source(s) drip" in first.condition.message
    assert "PrometheusTimeout" in first.condition.message
    assert first.items == [ScoreItem("n1", 10), ScoreItem("n2", 20)]
    fetch = supervisor.metrics.registry.get_sample_value(
        "dynamic_scoring_stage_duration_seconds_sum", {"score_name": "patient", "stage": "fetch"}
    )
    # The drip took its slot (a quarter of the interval: half the interval, two sources), the central
    # Prometheus answered in the next, and the scorer had the other half; not the whole interval.
    assert fetch is not None and interval / 4 - 0.1 <= fetch <= interval / 2 + 0.25, fetch
