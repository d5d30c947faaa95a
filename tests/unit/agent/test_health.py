from __future__ import annotations

import logging

import pytest

from dynamic_scoring.agent.health import Health, Heartbeat


def test_health_follows_its_checks_and_reverts() -> None:
    state: dict[str, str | None] = {"watch": None}
    health = Health([lambda: state["watch"]])
    assert health.healthy() and health.problems() == []
    state["watch"] = "summaries watch down for 130s (limit 120s)"
    assert not health.healthy()
    assert health.problems() == ["summaries watch down for 130s (limit 120s)"]
    state["watch"] = None
    assert health.healthy()  # not set once: it is asked again every time


def test_a_check_that_raises_is_a_problem_not_a_pass() -> None:
    def broken() -> str | None:
        raise KeyError("boom")

    health = Health([broken])
    assert not health.healthy()
    assert "KeyError" in health.problems()[0]


def test_transitions_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    problem: list[str | None] = [None]
    health = Health([lambda: problem[0]])
    caplog.set_level(logging.INFO, logger="dynamic_scoring.agent.health")
    health.problems()
    problem[0] = "worker task ended: a (cancelled)"
    for _ in range(3):
        health.problems()
    problem[0] = None
    health.problems()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["agent unhealthy: worker task ended: a (cancelled)", "agent healthy again"]


def test_heartbeat_reports_a_stalled_loop_and_recovers() -> None:
    now = [100.0]
    beat = Heartbeat(stall_limit_seconds=30, clock=lambda: now[0])
    assert beat.problems() == []
    now[0] += 31
    assert beat.problems() == ["event loop stalled for 31s (limit 30s)"]
    beat.beat()
    assert beat.problems() == []


def test_livez_follows_the_heartbeat_not_the_health_checks() -> None:
    # An apiserver outage makes /healthz fail; the kubelet's liveness probe (/livez) must not
    # restart the agent for it, only for a stuck process.
    import urllib.error
    import urllib.request

    from dynamic_scoring.agent.metrics import AgentMetrics
    from dynamic_scoring.agent.server import HealthServer

    now = [0.0]
    beat = Heartbeat(stall_limit_seconds=30, clock=lambda: now[0])
    server = HealthServer(
        AgentMetrics(), lambda: True, port=0, problems=lambda: ["watch down"], live=beat.problems
    )
    server.start()

    def status(path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    try:
        assert status("/healthz") == 503
        assert status("/livez") == 200
        now[0] += 60
        assert status("/livez") == 503
    finally:
        server.stop()
