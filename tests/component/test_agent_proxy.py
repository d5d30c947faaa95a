"""The ADC's proxyConfig, as rendered into the agent's environment, is what the agent's calls use."""

from __future__ import annotations

import dataclasses
import http.client
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from agent.memory import MemoryPublisher, MemorySecrets
from agent.metrics import AgentMetrics
from agent.ports import ScoreItem
from agent.proxy import proxy_settings_from_env
from agent.supervisor import Supervisor
from tests.component.conftest import FAST
from tests.component.harness import ScorerProcess, eventually, summary

pytestmark = [pytest.mark.component, pytest.mark.anyio]


class _Forwarder(BaseHTTPRequestHandler):
    """A plain forward proxy for http:// URLs in absolute form; it records what passed through."""

    seen: list[str]

    def _forward(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        target = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        conn = http.client.HTTPConnection(target.hostname or "", target.port or 80, timeout=10)
        path = target.path + (f"?{target.query}" if target.query else "")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "host")}
        conn.request(self.command, path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = _forward  # http.server dispatches to do_<METHOD>
    do_POST = _forward

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Recording", (_Forwarder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def _supervisor(env: dict[str, str]) -> tuple[Supervisor, MemoryPublisher]:
    settings = dataclasses.replace(FAST, proxies=proxy_settings_from_env(env))
    publisher = MemoryPublisher()
    sup = Supervisor(
        cluster_name="cluster1",
        secrets=MemorySecrets(),
        publisher=publisher,
        metrics=AgentMetrics(process_collectors=False),
        settings=settings,
    )
    return sup, publisher


@pytest.fixture
async def scored(scorer: ScorerProcess) -> AsyncIterator[tuple[str, ScorerProcess]]:
    key = uuid.uuid4().hex
    scorer.respond(key, {"results": [{"metric": {"pod": "p"}, "score": 42}]})
    yield scorer.url(f"/fixed/{key}/scoring"), scorer


async def scored_once(publisher: MemoryPublisher, name: str) -> list[ScoreItem] | None:
    """The items of the first successful cycle (a loaded machine may fail one first)."""

    def success() -> list[ScoreItem] | None:
        return next((r.items for r in publisher.requests_for(name) if r.items is not None), None)

    return await eventually(success, timeout=30, what=f"a successful cycle of {name}")


async def test_scorer_calls_go_through_the_configured_proxy(
    proxy: tuple[str, list[str]], scored: tuple[str, ScorerProcess]
) -> None:
    proxy_url, seen = proxy
    url, _ = scored
    sup, publisher = _supervisor({"HTTP_PROXY": proxy_url})
    try:
        await sup.apply([summary("via_proxy", url, scoringInterval=1, scoreDimensionFormat="${pod}")])
        assert await scored_once(publisher, "via_proxy") == [ScoreItem("p", 42)]
    finally:
        await sup.close(2)
    assert any(line.startswith("POST http://127.0.0.1:") and "/scoring" in line for line in seen), seen


async def test_no_proxy_hosts_are_called_direct(
    proxy: tuple[str, list[str]], scored: tuple[str, ScorerProcess]
) -> None:
    proxy_url, seen = proxy
    url, _ = scored
    sup, publisher = _supervisor({"HTTP_PROXY": proxy_url, "NO_PROXY": "localhost,127.0.0.1"})
    try:
        await sup.apply([summary("direct", url, scoringInterval=1, scoreDimensionFormat="${pod}")])
        assert await scored_once(publisher, "direct") == [ScoreItem("p", 42)]
    finally:
        await sup.close(2)
    assert seen == []
