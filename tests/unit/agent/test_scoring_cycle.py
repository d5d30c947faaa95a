"""``ScoringCycle`` end to end over ``httpx.MockTransport``: no sockets, real wire formats.

The transport answers as Prometheus (``query_range`` matrices) and as a scoring API (``{"data": [...]}``
in, ``{"results": [...]}`` out) would, and records every request, so each test checks what the cycle
sent as well as what it produced.  The same cycle against a real Prometheus and a real scorer is in
tests/component/test_agent_cycle.py and test_agent_sources.py; here the cases are the ones that are
awkward to stage with real servers: no data, a masked pair, one of two sources failing, and the
byte budget refusing an answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from dynamic_scoring.agent.cycle import CycleEnv, CycleResult, ScoringCycle
from dynamic_scoring.agent.errors import (
    PrometheusResponseError,
    PrometheusUnavailable,
    ScorerResponseTooLarge,
    SecretNotFound,
)
from dynamic_scoring.agent.http import ClientPool
from dynamic_scoring.agent.plan import plan_summary
from dynamic_scoring.agent.ports import ScoreItem, SecretContents
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.contract.wire import ScorerSummary

pytestmark = pytest.mark.anyio

CLUSTER = "cluster1"
PROM_A = "http://prom-a:9090/api/v1/query_range"
PROM_B = "http://prom-b:9090/api/v1/query_range"
SCORER = "http://scorer:8000/scoring"
NOW = 1_700_000_000.0

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class NoSecrets:
    """A ``SecretReader`` with no Secrets: the summaries here use no auth, so none is read."""

    async def get(self, name: str) -> SecretContents:
        raise SecretNotFound(f"secret {name!r} is referenced but none exists here")


def matrix(*series: tuple[dict[str, str], float]) -> dict[str, Any]:
    """A successful Prometheus range answer: each series with two points, the last one ``value``."""
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": labels, "values": [[NOW - 60, "0"], [NOW, repr(value)]]}
                for labels, value in series
            ],
        },
    }


class Chunks(httpx.AsyncByteStream):
    """A body streamed in 64 KiB chunks, as a server's would be (``content=`` bytes count as read)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for offset in range(0, len(self._body), 65536):
            yield self._body[offset : offset + 65536]


def answer(body: bytes, status: int = 200, **headers: str) -> httpx.Response:
    """A streamed response with its ``Content-Length``, as an HTTP/1.1 server sends it."""
    fields = {k.replace("_", "-"): v for k, v in headers.items()} | {"content-length": str(len(body))}
    return httpx.Response(status, headers=fields, stream=Chunks(body))


def as_json(data: Any, status: int = 200, **headers: str) -> httpx.Response:
    return answer(json.dumps(data).encode(), status, **headers)


def last_value_scorer(request: httpx.Request) -> httpx.Response:
    """A scoring API that scores each series by its last value and echoes its labels."""
    series = json.loads(request.content)["data"]
    return as_json({"results": [{"metric": s["metric"], "score": float(s["values"][-1][1])} for s in series]})


@dataclass
class Wire:
    """The MockTransport's peers by host, and every request they received, in order."""

    peers: dict[str, Handler]
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.peers[request.url.host](request)

    def sent_to(self, host: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.host == host]

    def scored_series(self) -> list[dict[str, Any]]:
        """The series the scoring API received (from the one scoring request)."""
        (post,) = self.sent_to("scorer")
        data: list[dict[str, Any]] = json.loads(post.content)["data"]
        return data


def summary(sources: list[dict[str, Any]], **fields: Any) -> ScorerSummary:
    data: dict[str, Any] = {
        "name": "scorer",
        "scoreName": "s",
        "scoringEndpoint": SCORER,
        "scoringInterval": 30,
        "scoreDimensionFormat": "${node}",
        "sources": sources,
    }
    data.update(fields)
    return ScorerSummary.model_validate(data)


def src(name: str, endpoint: str, *queries: str) -> dict[str, Any]:
    return {"name": name, "endpoint": endpoint, "queries": list(queries or ("up",)), "range": 600, "step": 60}


@pytest.fixture
async def pool_for() -> AsyncIterator[Callable[[Wire], ClientPool]]:
    pools: list[ClientPool] = []

    def make(wire: Wire) -> ClientPool:
        pools.append(ClientPool(transport=httpx.MockTransport(wire)))
        return pools[-1]

    yield make
    for pool in pools:
        await pool.aclose()


async def run(
    s: ScorerSummary, wire: Wire, pool_for: Callable[[Wire], ClientPool], **settings: Any
) -> CycleResult:
    env = CycleEnv(CLUSTER, NoSecrets(), pool_for(wire), AgentSettings(**settings), clock=lambda: NOW)
    return await ScoringCycle(plan_summary(s), env).run(time.monotonic() + 30)


async def test_a_source_answer_reaches_the_scorer_and_becomes_items(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    wire = Wire(
        {
            "prom-a": lambda _: as_json(matrix(({"node": "n1"}, 42.4), ({"node": "n2"}, 17.6))),
            "scorer": last_value_scorer,
        }
    )
    result = await run(summary([src("a", PROM_A, 'up{job="x"}')]), wire, pool_for)

    assert result.kind == "Scored"
    assert result.items == [ScoreItem("n1", 42), ScoreItem("n2", 18)]
    (query,) = wire.sent_to("prom-a")
    assert query.method == "GET"
    assert dict(query.url.params) == {
        "end": "1700000000",
        "query": 'up{job="x"}',
        "start": "1699999400",
        "step": "60",
    }
    assert [s["metric"] for s in wire.scored_series()] == [
        {"node": "n1", "source": "a"},
        {"node": "n2", "source": "a"},
    ]


async def test_no_data_writes_the_missing_data_score_without_calling_the_scorer(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    wire = Wire({"prom-a": lambda _: as_json(matrix()), "scorer": last_value_scorer})
    result = await run(summary([src("a", PROM_A, "up", "down")], missingDataScore=7), wire, pool_for)

    assert result.kind == "NoData"
    assert result.default_score == 7
    assert result.items == [ScoreItem("s", 7)]  # ${node} needs a series label: the score name instead
    assert len(wire.sent_to("prom-a")) == 2  # every query was asked, and all were empty
    assert wire.sent_to("scorer") == []


async def test_no_data_without_a_missing_data_score_asks_the_scorer_with_an_empty_list(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    wire = Wire({"prom-a": lambda _: as_json(matrix()), "scorer": last_value_scorer})
    result = await run(summary([src("a", PROM_A)]), wire, pool_for)

    assert result.kind == "Scored"
    assert result.items == []
    assert wire.scored_series() == []  # {"data": []}, never null


async def test_a_masked_pair_writes_its_default_and_sends_nothing(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    wire = Wire({"prom-a": lambda _: as_json(matrix(({"node": "n1"}, 1.0))), "scorer": last_value_scorer})
    s = summary(
        [src("a", PROM_A)], masked=True, missingDataScore=-5, scoreDimensionFormats=["${cluster}", "${node}"]
    )
    result = await run(s, wire, pool_for)

    assert result.kind == "Masked"
    assert result.default_score == -5
    # ${cluster} renders without a series; ${node} falls back to the score name.
    assert result.items == [ScoreItem(CLUSTER, -5), ScoreItem("s", -5)]
    assert result.answer is None and result.failed_sources == []
    assert wire.requests == []  # neither the source nor the scorer is asked


async def test_one_failing_source_is_tolerated_and_the_others_scores_are_published(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    wire = Wire(
        {
            "prom-a": lambda _: as_json({"status": "error"}, 503, retry_after="7"),
            "prom-b": lambda _: as_json(matrix(({"node": "n2"}, 55.0))),
            "scorer": last_value_scorer,
        }
    )
    s = summary([src("a", PROM_A), src("b", PROM_B)], onSourceError="ScoreWithAvailable")
    result = await run(s, wire, pool_for)

    assert result.kind == "Scored"
    assert result.items == [ScoreItem("n2", 55)]
    assert [s["metric"] for s in wire.scored_series()] == [{"node": "n2", "source": "b"}]
    ((source, error),) = result.failed_sources
    assert source.name == "a"
    assert isinstance(error, PrometheusUnavailable)
    assert error.stage == "fetch"
    assert error.retry_after == 7.0
    assert str(error) == (
        f'source "a": query #1 `up`: Prometheus at {PROM_A} answered HTTP 503 (Service Unavailable)'
    )


async def test_without_score_with_available_the_failing_source_fails_the_cycle(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    wire = Wire(
        {
            "prom-a": lambda _: as_json({"status": "error"}, 503),
            "prom-b": lambda _: as_json(matrix(({"node": "n2"}, 55.0))),
            "scorer": last_value_scorer,
        }
    )
    with pytest.raises(
        PrometheusUnavailable, match=r'^source "a": query #1 `up`: .* answered HTTP 503'
    ) as caught:
        await run(summary([src("a", PROM_A), src("b", PROM_B)]), wire, pool_for)
    assert caught.value.stage == "fetch"
    assert wire.sent_to("prom-b") == [] and wire.sent_to("scorer") == []


async def test_the_cycle_byte_budget_refuses_the_query_that_would_exceed_it(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    body = json.dumps(matrix(({"node": "n1"}, 1.0))).encode()
    wire = Wire({"prom-a": lambda _: answer(body), "scorer": last_value_scorer})
    # The data.result arrays held count against the budget: the first query's fits, the second's not.
    raw = len(json.dumps(matrix(({"node": "n1"}, 1.0))["data"]["result"]).encode())
    budget = raw + len(body) - 1
    s = summary([src("a", PROM_A, "first", "second")])

    with pytest.raises(PrometheusResponseError) as caught:
        await run(s, wire, pool_for, max_source_bytes_per_cycle=budget)

    left = budget - raw
    assert (
        str(caught.value)
        == f'source "a": query #2 `second`: response from {PROM_A} is larger than {left} bytes'
    )
    assert caught.value.stage == "fetch"
    assert len(wire.sent_to("prom-a")) == 2 and wire.sent_to("scorer") == []


async def test_each_of_two_sources_gets_an_equal_share_of_the_byte_budget(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    body = json.dumps(matrix(({"node": "n1"}, 1.0))).encode()
    wire = Wire(
        {
            "prom-a": lambda _: answer(body),
            "prom-b": lambda _: answer(body),
            "scorer": last_value_scorer,
        }
    )
    budget = 2 * len(body) - 2  # a whole answer would fit in the budget, not in a source's half of it
    s = summary([src("a", PROM_A), src("b", PROM_B)], onSourceError="ScoreWithAvailable")

    with pytest.raises(PrometheusResponseError) as caught:
        await run(s, wire, pool_for, max_source_bytes_per_cycle=budget)

    assert str(caught.value) == (
        f'every source failed; first: source "a": query #1 `up`: response from {PROM_A} is larger than '
        f"{budget // 2} bytes"
    )


async def test_the_scorer_answer_past_its_limit_is_refused_with_the_limit_named(
    pool_for: Callable[[Wire], ClientPool],
) -> None:
    wire = Wire({"prom-a": lambda _: as_json(matrix(({"node": "n1"}, 42.0))), "scorer": last_value_scorer})
    with pytest.raises(ScorerResponseTooLarge) as caught:
        await run(summary([src("a", PROM_A)]), wire, pool_for, max_response_bytes=20)

    assert str(caught.value) == f"scoring API {SCORER} answered with more than 20 bytes"
    assert caught.value.stage == "score"
    assert len(wire.sent_to("scorer")) == 1
