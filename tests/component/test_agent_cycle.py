"""One scorer's cycle against a real Prometheus and a real scoring API: success and every failure."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from tests.component.conftest import GAUGE, PromFixture
from tests.component.harness import ScorerProcess, free_port, published, summary

pytestmark = pytest.mark.anyio

NORMALISE = {"min": 0, "max": 2}


def sample(sup: Supervisor, name: str, labels: dict[str, str]) -> float | None:
    value: float | None = sup.metrics.registry.get_sample_value(name, labels)
    return value


async def test_happy_path_scores_every_pod_exactly(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    s = summary(
        "cpu_headroom",
        scorer.url("/mean/scoring"),
        sourceType="Prometheus",
        sourceEndpoint=prometheus.query_range_url,
        sourceQuery=GAUGE,
        sourceRange=3600,
        sourceStep=60,
        scoreDimensionFormat="${node};${namespace};${pod}",
        scoreNormalization=NORMALISE,
    )
    before = datetime.now(UTC)
    report = await supervisor.apply([s])
    assert report.started == ["cpu_headroom"]

    first = (await published(publisher, "cpu_headroom"))[0]

    assert first.condition.status == "True", first.condition
    assert first.aps_name == "cpu-headroom"
    assert first.items == [
        ScoreItem("node-1;team-a;web-1", 25),
        ScoreItem("node-1;team-a;web-2", 75),
        ScoreItem("node-2;team-b;db-1", 50),
    ]
    assert first.valid_until is not None
    window = timedelta(seconds=90)  # max(3 x 30, 30 + 60)
    assert before + window <= first.valid_until <= datetime.now(UTC) + window
    labels = {
        "ds_cluster": "cluster1",
        "ds_node": "node-1",
        "ds_device": "",
        "ds_namespace": "team-a",
        "ds_app": "",
        "ds_pod": "web-2",
        "ds_container": "app",
        "ds_meta": "",
        "ds_score_name": "cpu_headroom",
    }
    assert sample(supervisor, "dynamic_score", labels) == 1.5  # the raw score, as upstream exports it
    assert (
        sample(
            supervisor, "dynamic_scoring_requests_total", {"score_name": "cpu_headroom", "status": "success"}
        )
        == 1
    )
    expires = sample(supervisor, "dynamic_scoring_score_expires_in_seconds", {"score_name": "cpu_headroom"})
    assert expires is not None and 0 < expires <= 90


async def test_legacy_semicolon_queries_keep_order_and_do_not_split_inside_regex(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    path = f"/count/scoring?run={uuid.uuid4().hex}"
    query = f'{GAUGE}{{namespace="team-b"}} ;; {GAUGE}{{pod=~"web-1|x;y"}};  '
    s = summary(
        "two_queries",
        scorer.url(path),
        sourceType="Prometheus",
        sourceEndpoint=prometheus.query_range_url,
        sourceQuery=query,
        sourceRange=600,
        sourceStep=60,
        scoreDimensionFormat="${meta}",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "two_queries"))[0]
    assert first.items == [ScoreItem("count", 2)], first.condition
    received = scorer.requests(path.split("?")[0])
    mine = [r for r in received if r["query"] == path.split("?")[1]]
    assert [m["pod"] for m in mine[0]["series"]] == ["db-1", "web-1"]  # query order is kept


async def test_source_queries_extension_wins_over_source_query(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    s = summary(
        "listed_queries",
        scorer.url("/count/scoring"),
        sourceType="prometheus",  # case-insensitive, unlike upstream
        sourceEndpoint=prometheus.query_range_url,
        sourceQuery="this is not promql",
        sourceQueries=[f'{GAUGE}{{namespace="team-a"}}', f'{GAUGE}{{namespace="team-b"}}'],
        sourceRange=600,
        sourceStep=60,
        scoreDimensionFormat="${meta}",
    )
    await supervisor.apply([s])
    first = (await published(publisher, "listed_queries"))[0]
    assert first.items == [ScoreItem("count", 3)], first.condition


async def test_prometheus_down_fails_the_fetch_stage(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    s = summary(
        "no_prometheus",
        scorer.url("/mean/scoring"),
        sourceType="Prometheus",
        sourceEndpoint=f"http://127.0.0.1:{free_port()}/api/v1/query_range",
        sourceQuery="up",
        sourceRange=60,
        sourceStep=15,
        scoringInterval=5,
    )
    await supervisor.apply([s])
    first = (await published(publisher, "no_prometheus"))[0]
    assert first.items is None
    assert first.valid_until is None
    assert first.condition.status == "False"
    assert first.condition.reason == "PrometheusUnavailable"
    assert first.condition.message.startswith("fetch failed for scorer no_prometheus-scorer")
    failures = {"score_name": "no_prometheus", "stage": "fetch", "reason": "PrometheusUnavailable"}
    assert sample(supervisor, "dynamic_scoring_failures_total", failures) == 1
    assert sample(
        supervisor, "dynamic_scoring_retries_total", {"score_name": "no_prometheus", "stage": "fetch"}
    )
    assert sample(
        supervisor, "dynamic_scoring_requests_total", {"score_name": "no_prometheus", "status": "failure"}
    )


async def test_bad_promql_names_the_query(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    s = summary(
        "bad_query",
        scorer.url("/mean/scoring"),
        sourceType="Prometheus",
        sourceEndpoint=prometheus.query_range_url,
        sourceQuery=f"{GAUGE}; sum(rate({GAUGE}[5m]) by (pod)",
        sourceRange=600,
        sourceStep=60,
    )
    await supervisor.apply([s])
    first = (await published(publisher, "bad_query"))[0]
    assert first.condition.reason == "PrometheusQueryError"
    message = first.condition.message
    assert "query #2" in message and "sum(rate(ds_test_cpu_cores[5m]) by (pod)" in message
    assert "bad_data" in message  # Prometheus' own error type and text are passed on
    assert (
        sample(supervisor, "dynamic_scoring_retries_total", {"score_name": "bad_query", "stage": "fetch"})
        is None
    )


@pytest.mark.parametrize(
    ("path", "reason", "retried"),
    [
        ("/status/500/scoring", "ScorerHTTPError", True),
        ("/status/404/scoring", "ScorerHTTPError", False),
        ("/nonjson/scoring", "ScorerResponseInvalid", False),
        ("/nan/scoring", "ScorerResponseInvalid", False),
        ("/huge/scoring", "ScorerResponseTooLarge", False),
    ],
)
async def test_scorer_failures_are_reported_by_stage_and_reason(
    supervisor: Supervisor,
    publisher: MemoryPublisher,
    scorer: ScorerProcess,
    path: str,
    reason: str,
    retried: bool,
) -> None:
    await supervisor.apply([summary("failing", scorer.url(path), scoringInterval=10)])
    first = (await published(publisher, "failing"))[0]
    assert first.items is None
    assert first.condition.reason == reason, first.condition
    assert first.condition.message.startswith("score failed for scorer failing-scorer")
    retries = sample(supervisor, "dynamic_scoring_retries_total", {"score_name": "failing", "stage": "score"})
    assert bool(retries) == retried
    labels = {"score_name": "failing", "stage": "score", "reason": reason}
    assert sample(supervisor, "dynamic_scoring_failures_total", labels) == 1


async def test_scorer_timeout_is_bounded_and_reported(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    s = summary("slowpoke", scorer.url("/sleep/10/scoring"), scoringInterval=4, timeoutSeconds=0.5)
    await supervisor.apply([s])
    first = (await published(publisher, "slowpoke"))[0]
    assert first.condition.reason == "ScorerTimeout"
    assert "did not answer within 0.5s" in first.condition.message


async def test_transient_errors_are_retried_within_the_cycle(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    s = summary("flaky", scorer.url(f"/flaky/2/scoring?key={uuid.uuid4().hex}"), scoringInterval=10)
    await supervisor.apply([s])
    first = (await published(publisher, "flaky"))[0]
    assert first.condition.status == "True"
    assert sample(supervisor, "dynamic_scoring_retries_total", {"score_name": "flaky", "stage": "score"}) == 2


async def test_out_of_range_scores_are_clamped_then_rounded(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    await supervisor.apply(
        [summary("wild", scorer.url("/outofrange/scoring"), scoreDimensionFormat="${pod}")]
    )
    first = (await published(publisher, "wild"))[0]
    assert first.items == [ScoreItem("high", 100), ScoreItem("low", -100), ScoreItem("mid", 43)]
    assert "2 score(s) clamped" in first.condition.message
    assert sample(supervisor, "dynamic_scoring_scores_clamped_total", {"score_name": "wild"}) == 2


async def test_source_none_sends_an_empty_list(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    path = f"/static/scoring/{uuid.uuid4().hex}"
    await supervisor.apply(
        [summary("static_perf", scorer.url(path), scoreDimensionFormat="${app};${device}")]
    )
    first = (await published(publisher, "static_perf"))[0]
    assert [i.name for i in first.items or []] == ["app01;3g.48gb", "app01;all", "app02;3g.48gb", "app02;all"]
    (request,) = scorer.requests(path)
    assert request["data_is_list"] and request["series"] == []


async def test_failure_keeps_the_last_scores_and_their_expiry(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    scorer.respond(key, {"results": [{"metric": {"pod": "p"}, "score": 12.5}]})
    good = summary(
        "sticky", scorer.url(f"/fixed/{key}/scoring"), scoringInterval=1, scoreDimensionFormat="${pod}"
    )
    await supervisor.apply([good])
    ok = (await published(publisher, "sticky"))[0]
    assert ok.items == [ScoreItem("p", 13)]
    await supervisor.apply([summary("sticky", scorer.url("/status/400/scoring"), scoringInterval=1)])

    def failed() -> bool:
        return any(r.items is None for r in publisher.requests_for("sticky"))

    await published(publisher, "sticky", 2)
    from tests.component.harness import eventually

    await eventually(failed, what="a failed cycle")
    bad = next(r for r in publisher.requests_for("sticky") if r.items is None)
    assert bad.valid_until == ok.valid_until
    assert publisher.scores["sticky"].items == [ScoreItem("p", 13)]
    assert publisher.scores["sticky"].condition.status == "False"


async def test_prometheus_request_format(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    endpoint = scorer.url(f"/prom/{key}/api/v1/query_range?dedup=true")
    s = summary(
        "format_check",
        scorer.url("/count/scoring"),
        sourceType="Prometheus",
        sourceEndpoint=endpoint,
        sourceQuery='sum by (pod) (rate(x{a="b c"}[1m]))',
        sourceRange=3600,
        sourceStep=60,
        scoreDimensionFormat="${meta}",
    )
    now = int(time.time())
    await supervisor.apply([s])
    first = (await published(publisher, "format_check"))[0]
    assert first.items == [ScoreItem("count", 1)]
    (request,) = scorer.requests(f"/prom/{key}/")
    params = request["query"].split("&")
    assert params[0] == "dedup=true"
    assert [p.split("=")[0] for p in params[1:]] == ["end", "query", "start", "step"]
    end, start = int(params[1][4:]), int(params[3][6:])
    assert end - start == 3600 and abs(end - now) < 60
    assert params[2] == "query=sum+by+%28pod%29+%28rate%28x%7Ba%3D%22b+c%22%7D%5B1m%5D%29%29"
    assert params[4] == "step=60"
