"""The scorer library over real HTTP on loopback: its stdlib server, the pytest helper, the README scorer.

The README's "Writing a scorer" code is read out of README.md and run through the conformance
check, so the documented scorer cannot stop working without this failing.
"""

from __future__ import annotations

import http.client
import json
import re
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from dynamic_scoring.scorer import BearerToken, ScorerApp, ScoreResult, ScorerServer, ScoringRequest, result
from dynamic_scoring.scorer.testing import assert_conformant, check_app

pytestmark = pytest.mark.component

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000
BODY = json.dumps({"data": [{"metric": {"pod": "p"}, "values": [[T0, "1"], [T0 + 15, "3"]]}]}).encode()


def readme_scorer() -> str:
    section = ROOT.joinpath("README.md").read_text().split("## Writing a scorer", 1)[1].split("\n## ", 1)[0]
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
        conn.endheaders()
        assert conn.getresponse().status == 411
    finally:
        conn.close()


def test_the_pytest_helper_fails_naming_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCORER_TOKEN", "tok-env")
    guarded = ScorerApp(
        score, name="x", query="up", range=60, step=15, token=BearerToken.from_env("SCORER_TOKEN")
    )
    # Without the token every scoring request is refused, and the helper says so.
    with pytest.raises(AssertionError, match=r"\[token\] POST /scoring without a token answered HTTP 401"):
        assert_conformant(guarded, large=False)
    assert check_app(guarded, large=False, token="tok-env").ok
