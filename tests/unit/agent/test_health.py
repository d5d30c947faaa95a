from __future__ import annotations

import logging

import pytest

from agent.health import Health


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
    caplog.set_level(logging.INFO, logger="agent.health")
    health.problems()
    problem[0] = "worker task ended: a (cancelled)"
    for _ in range(3):
        health.problems()
    problem[0] = None
    health.problems()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["agent unhealthy: worker task ended: a (cancelled)", "agent healthy again"]
