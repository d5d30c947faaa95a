"""The expiry controller's decision: when to wake, when to mark, and that a mark happens once."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.controllers.placement_scores.decision import (
    EXPIRED_ANNOTATION,
    MARGIN_SECONDS,
    Verdict,
    decide,
    parse_valid_until,
)
from dynamic_scoring.addon.controllers.placement_scores.expiry import ScoreExpiry
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.workqueue import WorkQueue
from dynamic_scoring.kube.writes import Writer
from dynamic_scoring.ocm.score_labels import score_labels

T0 = dt.datetime(2026, 11, 22, 7, 0, 0, tzinfo=dt.UTC)
STAMP = "2026-11-22T07:00:00Z"


def aps(valid_until: str | None = STAMP, *, ours: bool = True, marked: str | None = None) -> JSON:
    meta: JSON = {"name": "cpu", "namespace": "cluster1"}
    if ours:
        meta["labels"] = score_labels("dynamic-scoring")
    if marked is not None:
        meta["annotations"] = {EXPIRED_ANNOTATION: marked}
    status: JSON = {"scores": [{"name": "s", "value": 5}]}
    if valid_until is not None:
        status["validUntil"] = valid_until
    return {"metadata": meta, "status": status}


def test_before_expiry_it_wakes_at_valid_until_plus_the_margin() -> None:
    verdict = decide(aps(), T0 - dt.timedelta(seconds=30))
    assert verdict == Verdict(requeue_after=30 + MARGIN_SECONDS)


def test_within_the_margin_it_still_waits_rather_than_write_too_early() -> None:
    verdict = decide(aps(), T0 + dt.timedelta(seconds=MARGIN_SECONDS / 2))
    assert verdict.mark is None and verdict.requeue_after == MARGIN_SECONDS / 2


def test_after_expiry_it_marks_the_valid_until_it_saw() -> None:
    assert decide(aps(), T0 + dt.timedelta(seconds=MARGIN_SECONDS)) == Verdict(mark=STAMP)


def test_an_already_marked_expiry_is_not_marked_again() -> None:
    assert decide(aps(marked=STAMP), T0 + dt.timedelta(hours=1)) == Verdict()


def test_a_newer_score_after_a_mark_is_waited_for_and_then_marked_again() -> None:
    newer = "2026-11-22T07:05:00Z"
    obj = aps(newer, marked=STAMP)  # the agent came back and wrote a fresh score
    assert decide(obj, T0).requeue_after == 300 + MARGIN_SECONDS
    assert decide(obj, T0 + dt.timedelta(minutes=6)) == Verdict(mark=newer)


def test_objects_not_written_by_our_agents_are_left_alone() -> None:
    assert decide(aps(ours=False), T0 + dt.timedelta(hours=1)) == Verdict()


def test_no_or_malformed_valid_until_means_nothing_to_wait_for() -> None:
    assert decide(aps(None), T0) == Verdict()
    assert decide(aps("yesterday"), T0) == Verdict()


def test_fractional_and_offset_timestamps_parse_to_the_same_instant() -> None:
    assert parse_valid_until("2026-11-22T07:00:00.500Z") == T0 + dt.timedelta(milliseconds=500)
    assert parse_valid_until("2026-11-22T09:00:00+02:00") == T0


@given(
    offset=st.floats(min_value=-86400, max_value=86400, allow_nan=False),
    marked=st.booleans(),
)
def test_it_never_writes_before_expiry_plus_margin_and_never_twice(offset: float, marked: bool) -> None:
    now = T0 + dt.timedelta(seconds=offset)
    verdict = decide(aps(marked=STAMP if marked else None), now)
    if offset < MARGIN_SECONDS:
        assert verdict.mark is None and verdict.requeue_after is not None
        assert abs(verdict.requeue_after - (MARGIN_SECONDS - offset)) < 1e-6
    else:
        assert verdict.requeue_after is None
        assert verdict.mark == (None if marked else STAMP)


def test_repeated_events_before_expiry_keep_one_wake_up_in_the_queue() -> None:
    """An agent rewriting the object every interval asks for the wake-up each time; the queue keeps one."""
    obj = aps()
    now = T0 - dt.timedelta(seconds=60)
    writer = Writer(KubeAPI.__new__(KubeAPI), "score-expiry")  # never called before expiry
    expiry = ScoreExpiry(writer, lambda key: obj, CollectorRegistry(), clock=lambda: now)
    mono = [0.0]
    queue = WorkQueue(clock=lambda: mono[0])
    for _ in range(5):
        result = expiry.reconcile("cluster1/cpu")
        assert result is not None and result.requeue_after == 60 + MARGIN_SECONDS
        queue.add_after("cluster1/cpu", result.requeue_after)
    assert queue.delayed == 1
    obj["status"]["validUntil"] = "2026-11-22T07:01:00Z"  # a fresh score: a later wake-up is wanted
    later = expiry.reconcile("cluster1/cpu")
    assert later is not None and later.requeue_after == 120 + MARGIN_SECONDS
    queue.add_after("cluster1/cpu", later.requeue_after)
    assert queue.delayed == 1
    mono[0] = 60 + MARGIN_SECONDS  # the earlier wake-up fires; its reconcile asks for the later one
    assert queue.get(timeout=0) == "cluster1/cpu" and queue.delayed == 0
