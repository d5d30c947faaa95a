"""The controller's worker step: errors back off per key, success forgets, requeue_after delays."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from dynamic_scoring.kube.api import NotFound
from dynamic_scoring.kube.controller import Controller, Result
from dynamic_scoring.kube.metrics import ControllerMetrics
from dynamic_scoring.kube.workqueue import WorkQueue


def make(reconcile: object) -> tuple[Controller, CollectorRegistry]:
    registry = CollectorRegistry()
    controller = Controller(
        "c",
        reconcile,  # type: ignore[arg-type]
        metrics=ControllerMetrics(registry),
        queue=WorkQueue(base_delay=10, max_delay=100),
    )
    return controller, registry


def count(registry: CollectorRegistry, result: str) -> float:
    return (
        registry.get_sample_value(
            "dynamic_scoring_controller_reconcile_total", {"controller": "c", "result": result}
        )
        or 0.0
    )


def test_a_raising_reconcile_is_logged_with_its_key_counted_and_backed_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def reconcile(key: str) -> None:
        raise NotFound(404, "NotFound", "cluster gone")

    controller, registry = make(reconcile)
    controller.enqueue("ns/a")
    with caplog.at_level(logging.ERROR):
        assert controller.process_one(timeout=0)
    assert count(registry, "error") == 1
    assert controller.queue.num_requeues("ns/a") == 1
    assert controller.queue.delayed == 1 and len(controller.queue) == 0  # waits 10 s, not at once
    assert controller.queue.backoff("ns/a") == 20
    record = caplog.records[-1]
    assert "ns/a" in record.getMessage() and record.key == "ns/a" and record.controller == "c"  # type: ignore[attr-defined]
    assert not record.exc_info  # an API error is the world's state, not a bug: no traceback


def test_an_unexpected_exception_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    def reconcile(key: str) -> None:
        raise KeyError("spec")

    controller, _ = make(reconcile)
    controller.enqueue("a")
    with caplog.at_level(logging.ERROR):
        controller.process_one(timeout=0)
    assert caplog.records[-1].exc_info


def test_success_forgets_the_backoff_and_requeue_after_delays() -> None:
    outcomes: list[Result | Exception | None] = [RuntimeError("x"), Result(requeue_after=30), None]

    def reconcile(key: str) -> Result | None:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    controller, registry = make(reconcile)
    controller.queue._failures["a"] = 3  # as if it had failed before
    controller.enqueue("a")
    controller.process_one(timeout=0)
    assert controller.queue.num_requeues("a") == 4
    controller.queue._waiting.clear()
    controller.enqueue("a")
    controller.process_one(timeout=0)
    assert controller.queue.num_requeues("a") == 0
    assert controller.queue.delayed == 1  # requeued after 30 s
    assert count(registry, "requeue") == 1
    controller.enqueue("a")
    controller.process_one(timeout=0)
    assert count(registry, "success") == 1
    assert (
        registry.get_sample_value(
            "dynamic_scoring_controller_reconcile_duration_seconds_count", {"controller": "c"}
        )
        == 3
    )


def test_process_one_returns_false_after_shutdown() -> None:
    controller, _ = make(lambda key: None)
    controller.queue.shutdown()
    assert controller.process_one() is False
