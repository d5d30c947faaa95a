"""The agent's address policy and message rule against real loopback servers (finding S3).

Before: every agent sent Prometheus and scoring requests to whatever address a DynamicScorer's author
named (loopback, link-local, cloud metadata), with the author's headers, and copied the first 200
characters of a non-2xx body into the AddOnPlacementScore condition.  Here the agent runs with the
deployed default policy (loopback refused) or with the harness's loopback opt-in, and the servers
record every request, so "never connected" is checked on the server's side.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher, MemorySecrets
from dynamic_scoring.agent.metrics import AgentMetrics
from dynamic_scoring.agent.supervisor import Supervisor
from dynamic_scoring.outbound.addresses import STRICT
from tests.component.conftest import FAST
from tests.component.harness import ScorerProcess, published, summary
from tests.component.scorer_app import LEAKED_SECRET

pytestmark = pytest.mark.anyio


@pytest.fixture
async def strict(publisher: MemoryPublisher) -> AsyncIterator[Supervisor]:
    """An agent with the deployed default policy: 127.0.0.0/8 is not allowed."""
    sup = Supervisor(
        cluster_name="cluster1",
        secrets=MemorySecrets(),
        publisher=publisher,
        metrics=AgentMetrics(process_collectors=False),
        settings=dataclasses.replace(FAST, address_policy=STRICT),
    )
    try:
        yield sup
    finally:
        await sup.close()


async def test_a_scorer_on_loopback_is_refused_without_a_connection(
    strict: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    run = uuid.uuid4().hex
    await strict.apply([summary("refused", scorer.url(f"/count/scoring?run={run}"))])
    first = (await published(publisher, "refused", timeout=20))[0]
    assert first.condition.reason == "ScorerAddressRefused", first.condition
    assert "127.0.0.1 is a loopback address" in first.condition.message
    assert "AgentAllowCIDRs" in first.condition.message
    assert [r for r in scorer.requests("/count/") if run in r["query"]] == []


async def test_a_prometheus_on_loopback_is_refused_and_the_scorer_is_not_called(
    strict: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    s = summary(
        "refused_source",
        scorer.url(f"/count/scoring?run={key}"),
        sourceType="Prometheus",
        sourceEndpoint=scorer.url(f"/prom/{key}/api/v1/query_range"),
        sourceQuery="up",
        sourceRange=60,
        sourceStep=30,
    )
    await strict.apply([s])
    first = (await published(publisher, "refused_source", timeout=20))[0]
    assert first.condition.reason == "PrometheusAddressRefused", first.condition
    assert "loopback" in first.condition.message
    assert scorer.requests(f"/prom/{key}/") == []
    assert [r for r in scorer.requests("/count/") if key in r["query"]] == []


async def test_the_allow_list_lets_the_same_scorer_through(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    """``supervisor`` is the harness's agent: ``FAST`` allows 127.0.0.0/8 as AgentAllowCIDRs would."""
    run = uuid.uuid4().hex
    await supervisor.apply([summary("allowed", scorer.url(f"/count/scoring?run={run}"))])
    first = (await published(publisher, "allowed", timeout=20))[0]
    assert first.condition.status == "True", first.condition
    assert [r for r in scorer.requests("/count/") if run in r["query"]] != []


async def test_a_scorers_error_body_never_reaches_the_condition(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    """Before: the condition said ``answered HTTP 500: {"detail": "internal: AccessKeyId=...``."""
    await supervisor.apply([summary("leaky", scorer.url("/leak/scoring"))])
    first = (await published(publisher, "leaky", timeout=20))[0]
    message = first.condition.message
    assert first.condition.reason == "ScorerHTTPError", first.condition
    assert message.endswith("answered HTTP 500 (Internal Server Error)"), message
    for part in ("ASIAFAKEKEY", "SecretAccessKey", "leaked", "internal:", "detail"):
        assert part not in message, message
    assert LEAKED_SECRET.split()[0] not in message


async def test_prometheus_free_text_is_dropped_and_its_error_type_kept(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    s = summary(
        "leaky_source",
        scorer.url("/count/scoring"),
        sourceType="Prometheus",
        sourceEndpoint=scorer.url("/hostile/leak/api/v1/query_range"),
        sourceQuery="up",
        sourceRange=60,
        sourceStep=15,
    )
    await supervisor.apply([s])
    first = (await published(publisher, "leaky_source", timeout=20))[0]
    message = first.condition.message
    assert first.condition.reason == "PrometheusQueryError", first.condition
    assert "HTTP 400 (Bad Request), errorType bad_data" in message and "`up`" in message, message
    assert "ASIAFAKEKEY" not in message and "near" not in message, message


@pytest.mark.parametrize("header", ["Metadata-Flavor", "metadata", "X-AWS-EC2-Metadata-Token"])
async def test_a_metadata_header_is_refused_by_name_and_never_sent(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess, header: str
) -> None:
    run = uuid.uuid4().hex
    s = summary(
        "metadata_header",
        scorer.url(f"/count/scoring?run={run}"),
        scoringAuth={"headers": [{"name": header, "value": "Google"}]},
    )
    await supervisor.apply([s])
    first = (await published(publisher, "metadata_header", timeout=20))[0]
    assert first.condition.reason == "ScorerRequestInvalid", first.condition
    assert f"header {header!r} is a cloud metadata-service header" in first.condition.message
    assert [r for r in scorer.requests("/count/") if run in r["query"]] == []
