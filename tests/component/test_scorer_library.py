"""The scorer library over real HTTP on loopback: its stdlib server, the pytest helper, the README scorer.

The README's "Write a scorer" code is read out of README.md and run through the conformance
check, so the documented scorer cannot stop working without this failing.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

import dynamic_scoring.scorer
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.contract.wire import MAX_SCORING_PARAMS_BYTES, MAX_SOURCE_QUERIES, MAX_SOURCES
from dynamic_scoring.scorer import (
    MAX_BODY_BYTES,
    BearerToken,
    ScorerApp,
    ScoreResult,
    ScorerServer,
    ScoringRequest,
    result,
)
from dynamic_scoring.scorer.testing import assert_conformant, check_app
from e2e.procs import wait_until

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000
BODY = json.dumps({"data": [{"metric": {"pod": "p"}, "values": [[T0, "1"], [T0 + 15, "3"]]}]}).encode()


def readme_scorer() -> str:
    section = ROOT.joinpath("README.md").read_text().split("## Write a scorer", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return str(code)


def test_the_readme_scorer_is_short_and_conforms() -> None:
    code = readme_scorer()
    assert len(code.strip().splitlines()) < 30
    module = types.ModuleType("node_headroom")
    exec(compile(code, "README.md", "exec"), module.__dict__)  # not __main__: it does not serve
    report = assert_conformant(module.app, large=False)
    assert [f for f in report.findings if f.severity == "warning"] == []
    assert {lat.input for lat in report.latency} == {"empty", "small", "non-finite"}


def score(request: ScoringRequest) -> list[ScoreResult]:
    if any(s.label("pod") == "boom" for s in request.series):
        raise ZeroDivisionError("bug")
    return [result(s.mean(), pod=s.label("pod")) for s in request.with_points()]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ScorerServer]:
    (tmp_path / "token").write_text("tok")
    app = ScorerApp(
        score, name="x", query="up", range=60, step=15, token=BearerToken.from_file(tmp_path / "token")
    )
    server = ScorerServer(app, "127.0.0.1", 0)
    thread = server.start_in_thread()
    yield server
    server.shutdown()
    thread.join(timeout=10)


def call(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, bytes]:
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def test_server_answers_failures_and_keeps_serving(served: ScorerServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    auth = {"Authorization": "Bearer tok", "Content-Type": "application/json"}
    try:
        assert call(conn, "POST", "/scoring", BODY, auth) == (
            200,
            b'{"results":[{"metric":{"pod":"p"},"score":2.0}]}',
        )
        assert call(conn, "POST", "/scoring", BODY, {})[0] == 401
        boom = BODY.replace(b'"p"', b'"boom"')
        status, body = call(conn, "POST", "/scoring", boom, auth)
        assert (status, json.loads(body)) == (500, {"error": "scoring failed: ZeroDivisionError"})
        assert call(conn, "GET", "/healthz", None, {}) == (200, b"ok")  # still serving
        assert json.loads(call(conn, "GET", "/config", None, {})[1])["scoring"]["host"] == ""
    finally:
        conn.close()


def test_server_refuses_unbounded_bodies_before_reading_them(served: ScorerServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    try:
        conn.putrequest("POST", "/scoring")
        conn.putheader("Authorization", "Bearer tok")
        conn.putheader("Content-Length", str(served.app.max_body_bytes + 1))
        conn.endheaders()  # no body is sent: the answer must come without it
        response = conn.getresponse()
        assert response.status == 413 and b"larger than" in response.read()
    finally:
        conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    try:
        conn.putrequest("POST", "/scoring")
        conn.putheader("Authorization", "Bearer tok")  # without it the answer is 401, whatever the body
        conn.endheaders()
        assert conn.getresponse().status == 411
    finally:
        conn.close()


def test_the_pytest_helper_fails_naming_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCORER_TOKEN", "tok-env")
    guarded = ScorerApp(
        score, name="x", query="up", range=60, step=15, token=BearerToken.from_env("SCORER_TOKEN")
    )
    # An app is sent its own token; with another, every scoring request is refused, and it says so.
    assert check_app(guarded, large=False).ok
    with pytest.raises(AssertionError, match=r"HTTP 401"):
        assert_conformant(guarded, large=False, token="not-the-token")
    assert check_app(guarded, large=False, token="tok-env").ok


# The security of the library's servers: the token before the body, bounded bodies, bounded threads.

MIB = 1024 * 1024


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def head_only(port: int, headers: dict[str, str], timeout: float = 20.0) -> tuple[int, dict[str, str]]:
    """POST /scoring with only the request head sent; the status and headers of the answer.

    The declared body is never sent, so a server that reads it before answering waits for bytes
    that never come and the client times out (an exception: the test fails).  Any answer at all is
    therefore proof it was sent before the body was read, whatever the clock says; ``timeout`` only
    bounds how long such a regression takes to fail, and is far above any scheduling delay.
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest("POST", "/scoring")
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def test_the_default_body_limit_is_what_the_agent_can_send() -> None:
    # {"data":[ + a comma between every two of 16 x 32 queries' arrays + ],"params": + params + }
    envelope = len(b'{"data":[') + MAX_SOURCES * MAX_SOURCE_QUERIES - 1 + len(b'],"params":}')
    agent_can_send = AgentSettings().max_source_bytes_per_cycle + envelope + MAX_SCORING_PARAMS_BYTES
    assert agent_can_send == MAX_BODY_BYTES
    assert MAX_BODY_BYTES == 67_125_780


def test_an_unauthenticated_post_is_refused_before_its_body(served: ScorerServer) -> None:
    # head_only never sends the body: an answer proves the server did not wait for it (see there)
    status, headers = head_only(served.port, {"Content-Length": str(32 * MIB)})
    assert (status, headers["www-authenticate"]) == (401, "Bearer")
    status, _ = head_only(served.port, {"Content-Length": str(32 * MIB), "Authorization": "Bearer nope"})
    assert status == 401
    # The token comes first: an unauthenticated client does not learn the limit either.
    status, _ = head_only(served.port, {"Content-Length": str(served.app.max_body_bytes + 1)})
    assert status == 401


def test_an_early_answer_closes_the_connection(served: ScorerServer) -> None:
    # Bytes the server did not read must not be parsed as a second request on the same connection.
    smuggled = b"GET /healthz HTTP/1.0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
        head = f"POST /scoring HTTP/1.1\r\nHost: x\r\nContent-Length: {len(smuggled)}\r\n\r\n"
        sock.sendall(head.encode() + smuggled)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.0 401 ") and answer.count(b"HTTP/1.") == 1


SERVER = """
import os, sys
from dynamic_scoring.scorer import BearerToken, ScorerApp, ScorerServer, result
app = ScorerApp(
    lambda request: [result(1.0, pod="p")], name="x", query="up", range=60, step=15,
    token=BearerToken.from_env("SCORER_TOKEN"),
)
server = ScorerServer(app, "127.0.0.1", 0)
print(server.port, flush=True)
server.serve_forever()
"""


def peak_rss_kib(pid: int) -> int:
    """The process' peak resident set (``VmHWM``): what it held at its worst, even if freed since."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.fixture
def scorer_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The library's server in its own process (its memory is measured alone), with token ``tok``."""
    tree = str(Path(dynamic_scoring.scorer.__file__).resolve().parents[2])  # the code under test, whichever
    env = {**os.environ, "PYTHONPATH": tree, "SCORER_TOKEN": "tok"}
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, env=env, cwd=tree
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield process, f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_unauthenticated_large_posts_do_not_grow_the_server(
    scorer_process: tuple[subprocess.Popen[str], str],
) -> None:
    process, url = scorer_process
    warm = httpx.post(f"{url}/scoring", content=BODY, headers={"Authorization": "Bearer tok"}, timeout=10)
    assert warm.status_code == 200
    before = peak_rss_kib(process.pid)
    body = b"x" * (64 * MIB)

    def attack(token: str) -> int:
        return httpx.post(
            f"{url}/scoring", content=body, headers={"Authorization": token}, timeout=30
        ).status_code

    began = time.monotonic()
    with ThreadPoolExecutor(6) as pool:  # the finding's six POSTs, at once
        statuses = list(pool.map(attack, ["", "Bearer nope"] * 3))
    took = time.monotonic() - began
    grown = (peak_rss_kib(process.pid) - before) // 1024
    print(f"peak RSS {before // 1024} MiB before, +{grown} MiB after six 64 MiB POSTs in {took:.2f} s")
    assert statuses == [401] * 6
    assert grown < 16  # reading even one body first costs 64 MiB
    assert httpx.post(
        f"{url}/scoring", content=BODY, headers={"Authorization": "Bearer tok"}, timeout=10
    ).json() == {"results": [{"metric": {"pod": "p"}, "score": 1.0}]}


def asgi_call(
    app: ScorerApp, headers: list[tuple[bytes, bytes]], chunks: list[bytes]
) -> tuple[int, dict[str, Any], int]:
    """POST /scoring through the ASGI entry; status, response body and how often it called receive()."""
    calls = 0
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/scoring", "headers": headers}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], json.loads(sent[1]["body"]), calls


def test_the_asgi_entry_checks_the_token_before_it_receives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCORER_TOKEN", "tok")
    app = ScorerApp(
        score, name="x", query="up", range=60, step=15, token=BearerToken.from_env("SCORER_TOKEN")
    )
    body = [BODY[:10], BODY[10:]]
    assert asgi_call(app, [], list(body))[::2] == (401, 0)
    assert asgi_call(app, [(b"authorization", b"Bearer nope")], list(body))[::2] == (401, 0)
    good = [(b"authorization", b"Bearer tok")]
    assert asgi_call(app, good, list(body)) == (200, {"results": [{"metric": {"pod": "p"}, "score": 2.0}]}, 2)
    declared = [*good, (b"content-length", str(app.max_body_bytes + 1).encode())]
    assert asgi_call(app, declared, list(body))[::2] == (413, 0)
    # A body without a declared length stops being received once it passes the limit.
    small = ScorerApp(score, name="x", query="up", range=60, step=15, max_body_bytes=100)
    assert asgi_call(small, [], [b"x" * 60] * 5)[::2] == (413, 2)


def test_the_concurrency_cap_answers_503_and_frees_its_slots(tmp_path: Path) -> None:
    release = threading.Event()
    inside = threading.Semaphore(0)

    def slow(request: ScoringRequest) -> list[ScoreResult]:
        inside.release()
        assert release.wait(20)
        return [result(1.0, pod="p")]

    app = ScorerApp(slow, name="x", query="up", range=60, step=15)
    server = ScorerServer(app, "127.0.0.1", 0, max_concurrent=2)
    thread = server.start_in_thread()

    def post() -> httpx.Response:
        return httpx.post(f"{server.base_url}/scoring", content=BODY, timeout=20)

    try:
        with ThreadPoolExecutor(2) as pool:
            held = [pool.submit(post) for _ in range(2)]
            for _ in range(2):
                assert inside.acquire(timeout=10)  # both slots are taken by requests being scored
            busy = post()
            assert (busy.status_code, busy.headers["retry-after"]) == (503, "1")
            assert busy.json() == {"error": "too many requests at once; retry later"}
            # Refused at once, not queued: the 503 came while both slots were still held (their
            # requests are parked until release is set below), and it never reached the app.  A
            # queued request would wait for a slot that frees only after release: no 503 (the
            # held requests give up after 20 s, then it is scored or times out), so this fails.
            assert not any(f.done() for f in held)
            assert not inside.acquire(blocking=False), "the refused request reached the app"
            release.set()
            assert [f.result().status_code for f in held] == [200, 200]
        # The slots are given back when the two connections end.
        wait_for(lambda: post().status_code == 200)
    finally:
        release.set()
        server.shutdown()
        thread.join(timeout=10)
    with pytest.raises(ValueError, match="max_concurrent"):
        ScorerServer(app, "127.0.0.1", 0, max_concurrent=0)


def test_an_authenticated_request_is_scored_and_an_oversized_one_refused(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("tok")
    app = ScorerApp(
        score,
        name="x",
        query="up",
        range=60,
        step=15,
        token=BearerToken.from_file(tmp_path / "token"),
        max_body_bytes=len(BODY),
    )
    server = ScorerServer(app, "127.0.0.1", 0)
    thread = server.start_in_thread()
    auth = {"Authorization": "Bearer tok"}
    try:
        scored = httpx.post(f"{server.base_url}/scoring", content=BODY, headers=auth, timeout=10)
        assert scored.json() == {"results": [{"metric": {"pod": "p"}, "score": 2.0}]}
        over = httpx.post(f"{server.base_url}/scoring", content=BODY + b" ", headers=auth, timeout=10)
        assert over.status_code == 413 and "larger than" in over.json()["error"]
        assert head_only(server.port, {**auth, "Content-Length": str(len(BODY) + 1)})[0] == 413
    finally:
        server.shutdown()
        thread.join(timeout=10)


def test_slow_heads_cannot_hold_the_slots(tmp_path: Path) -> None:
    """Two slots, two dripping clients: both are cut at the head deadline and an agent gets in.

    A header byte every 0.1 s never trips the 30 s per-read timeout; only the deadline on the whole
    head ends them.  Without it they would hold both slots and every call would get 503.
    """
    app = ScorerApp(score, name="x", query="up", range=60, step=15)
    server = ScorerServer(app, "127.0.0.1", 0, max_concurrent=2, head_timeout_seconds=0.5)
    thread = server.start_in_thread()
    stop = threading.Event()
    drippers: list[socket.socket] = []

    def drip(sock: socket.socket) -> None:
        while not stop.wait(0.1):
            try:
                sock.send(b"a")
            except OSError:
                return

    try:
        for _ in range(2):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"POST /scoring HTTP/1.0\r\nX-Drip: ")
            drippers.append(sock)
            threading.Thread(target=drip, args=(sock,), daemon=True).start()
        for sock in drippers:
            sock.settimeout(20)  # a liveness bound: the server must close it long before
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(1024) == b""  # closed, never answered

        def answered() -> bool:
            # A cut dripper's socket closes a moment before its handler gives the slot back, so the
            # first call may still meet the cap (a 503, or a close before the body is read).
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
            try:
                return call(conn, "POST", "/scoring", BODY, {"Content-Type": "application/json"})[0] == 200
            finally:
                conn.close()

        wait_until(answered, timeout=20, what="a call answered once the dripping heads are cut")
    finally:
        stop.set()
        for sock in drippers:
            sock.close()
        server.shutdown()
        thread.join(timeout=10)
