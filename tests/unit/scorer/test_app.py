"""The scoring API as a pure function of the request, and its ASGI entry driven by hand."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.scorer import BearerToken, ScorerApp, ScorerConfig, ScoreResult, ScoringRequest, result
from dynamic_scoring.scorer.matrix import Series

T0 = 1_800_000_000
BODY = json.dumps({"data": [{"metric": {"pod": "p1"}, "values": [[T0, "1"], [T0 + 15, "3"]]}]}).encode()


def mean_score(request: ScoringRequest) -> list[ScoreResult]:
    return [result(s.mean(), pod=s.label("pod")) for s in request.with_points()]


def make(score: Any = mean_score, **kwargs: Any) -> ScorerApp:
    settings: dict[str, Any] = {"name": "load", "query": "up", "range": 300, "step": 15, **kwargs}
    return ScorerApp(score, **settings)


def test_config_document_is_what_the_hub_reads() -> None:
    app = make(description="d", params={"model": "linear"}, source_host="http://prom:9090")
    response = app.handle("GET", "/config", {}, b"")
    assert response.status == 200
    doc = ScorerConfig.model_validate(response.json())
    assert doc.name == "load" and doc.scoring.params.name == "load" and doc.scoring.params.interval == 30
    assert doc.scoring.params.extra_params == {"model": "linear"}
    assert (doc.scoring.host, doc.scoring.path) == ("", "/scoring")  # the hub uses configURL's origin
    assert (doc.source.type, doc.source.host, doc.source.params.query) == (
        "Prometheus",
        "http://prom:9090",
        "up",
    )
    advertised = make(advertise_url="https://scorer.example").config()
    assert advertised.scoring.host == "https://scorer.example"


def test_scoring_answers_the_agents_schema() -> None:
    response = make().handle("POST", "/scoring?x=1", {}, BODY)
    assert (response.status, response.json()) == (200, {"results": [{"metric": {"pod": "p1"}, "score": 2.0}]})
    assert make().handle("GET", "/healthz", {}, b"").body == b"ok"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("GET", "/nope", b"", 404, "no such path"),
        ("GET", "/scoring", b"", 405, "POST the series"),
        ("POST", "/healthz", b"", 405, "use GET"),
        ("POST", "/scoring", b"{", 400, "not JSON"),
        ("POST", "/scoring", b'{"data": [{"values": [[1, "x"]]}]}', 400, r"data\[0\]\.values\[0\]\[1\]"),
    ],
)
def test_bad_requests_get_a_named_error(
    method: str, path: str, body: bytes, status: int, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "dynamic_scoring.scorer"):
        response = make().handle(method, path, {}, body)
    assert response.status == status
    assert response.json()["error"] and __import__("re").search(message, response.json()["error"])
    assert f"-> {status}" in caplog.text


def broken(kind: str) -> Any:
    def score(request: ScoringRequest) -> Iterable[Any]:
        if kind == "raises":
            raise ZeroDivisionError("bug")
        if kind == "empty-mean":  # a ValueError of the maths helpers: the author's code failed
            return [{"metric": {}, "score": Series({}, []).mean()}]
        if kind == "generator":  # raised while the results are iterated
            return (1 / 0 for _ in request.series)
        if kind == "nan":
            return [ScoreResult.model_construct(metric={}, score=float("nan"))]
        return [{"metric": {"pod": "p"}, "score": "high"}]

    return score


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("raises", "scoring failed: ZeroDivisionError"),
        ("empty-mean", "scoring failed: EmptySeriesError"),
        ("generator", "scoring failed: ZeroDivisionError"),
        ("nan", "invalid result: ValueError"),
        ("wrong", "invalid result: ValidationError"),
    ],
)
def test_a_broken_score_function_is_a_500_naming_the_cause(kind: str, message: str) -> None:
    app = make(broken(kind))
    response = app.handle("POST", "/scoring", {}, BODY)
    assert (response.status, response.json()) == (500, {"error": message})
    assert app.handle("GET", "/healthz", {}, b"").status == 200


def test_the_token_guards_only_the_scoring_path(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "t").write_text("tok-123")
    app = make(token=BearerToken.from_file(tmp_path / "t"))
    with caplog.at_level(logging.DEBUG):
        refused = app.handle("POST", "/scoring", {"authorization": "Bearer tok-12"}, BODY)
        bare = app.handle("POST", "/scoring", {}, BODY)
    assert refused.status == bare.status == 401
    assert ("WWW-Authenticate", "Bearer") in refused.headers
    assert app.handle("POST", "/scoring", {"authorization": "Bearer tok-123"}, BODY).status == 200
    assert (
        app.handle("GET", "/config", {}, b"").status == 200
        and app.handle("GET", "/healthz", {}, b"").status == 200
    )
    assert "tok-12" not in caplog.text


def test_bodies_over_the_cap_are_refused() -> None:
    assert make(max_body_bytes=10).handle("POST", "/scoring", {}, BODY).status == 413


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scoring_path": "/config"}, "scoring_path"),
        ({"step": 600}, "step <= range"),
        ({"interval": 0}, "interval"),
    ],
)
def test_bad_settings_fail_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(**kwargs)


def asgi(
    app: ScorerApp, method: str, path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]]
) -> Any:
    sent: list[dict[str, Any]] = []
    incoming = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
    ]

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": headers, "server": ("127.0.0.1", 9)}
    asyncio.run(app(scope, receive, send))
    return sent


def test_asgi_entry_serves_the_same_contract() -> None:
    app = make()
    half = len(BODY) // 2
    start, body = asgi(
        app, "POST", "/scoring", [BODY[:half], BODY[half:]], [(b"Content-Type", b"application/json")]
    )
    assert start["status"] == 200 and json.loads(body["body"])["results"][0]["score"] == 2.0
    assert (b"content-length", str(len(body["body"])).encode()) in start["headers"]
    start, body = asgi(app, "GET", "/config", [b""], [])
    assert json.loads(body["body"])["scoring"]["host"] == ""
    start, _ = asgi(make(max_body_bytes=10), "POST", "/scoring", [BODY[:8], BODY[8:]], [])
    assert start["status"] == 413


def test_asgi_lifespan_completes() -> None:
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[Any] = []

    async def receive() -> Any:
        return messages.pop(0)

    async def send(message: Any) -> None:
        sent.append(message["type"])

    asyncio.run(make()({"type": "lifespan"}, receive, send))
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_a_request_the_function_refuses_is_a_400_with_its_message() -> None:
    from dynamic_scoring.scorer import RequestError

    def picky(request: ScoringRequest) -> list[ScoreResult]:
        raise RequestError("params.model: 'arima' is not implemented")

    response = make(picky).handle("POST", "/scoring", {}, BODY)
    assert (response.status, response.json()) == (400, {"error": "params.model: 'arima' is not implemented"})
