"""The work queue's promises: dedup, one worker per key, rate limiting, delays, shutdown."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.kube.workqueue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def drain(q: WorkQueue) -> list[str]:
    out = []
    while (key := q.get(timeout=0)) is not None:
        out.append(key)
        q.done(key)
    return out


@given(st.lists(st.sampled_from("abcdef"), max_size=40))
def test_each_key_is_queued_once_in_first_add_order(keys: list[str]) -> None:
    q = WorkQueue()
    for key in keys:
        q.add(key)
    assert len(q) == len(set(keys))
    assert drain(q) == list(dict.fromkeys(keys))


def test_a_key_added_while_processing_is_not_handed_out_twice_but_requeued_on_done() -> None:
    q = WorkQueue()
    q.add("a")
    assert q.get(timeout=0) == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0
    assert q.get(timeout=0) is None  # not to a second worker while the first holds it
    q.done("a")
    assert len(q) == 1
    assert q.get(timeout=0) == "a"
    q.done("a")
    assert q.get(timeout=0) is None


def test_rate_limit_doubles_per_failure_up_to_the_cap_and_forget_resets() -> None:
    q = WorkQueue(base_delay=0.01, max_delay=0.1)
    delays = []
    for _ in range(6):
        delays.append(q.backoff("k"))
        q.add_rate_limited("k")
    assert delays == pytest.approx([0.01, 0.02, 0.04, 0.08, 0.1, 0.1])
    assert q.num_requeues("k") == 6
    q.forget("k")
    assert q.num_requeues("k") == 0
    assert q.backoff("k") == pytest.approx(0.01)


def test_rate_limited_key_is_handed_out_only_after_its_delay() -> None:
    clock = FakeClock()
    q = WorkQueue(base_delay=1.0, max_delay=60.0, clock=clock)
    q.add_rate_limited("k")  # 1 s
    q.add_rate_limited("k")  # 2 s: the key already waits for an earlier time, which it keeps
    assert q.get(timeout=0) is None
    assert q.delayed == 1
    clock.now += 1.0
    assert q.get(timeout=0) == "k"
    q.done("k")
    assert q.delayed == 0
    clock.now += 1.0
    assert q.get(timeout=0) is None
    assert q.num_requeues("k") == 2


def test_a_key_waits_once_at_its_earliest_due_time() -> None:
    """client-go's delaying queue: a later add_after is ignored, an earlier one moves the key up."""
    clock = FakeClock()
    q = WorkQueue(clock=clock)
    for _ in range(100):  # a wake-up asked for on every event does not pile up
        q.add_after("k", 10)
    assert q.delayed == 1
    q.add_after("k", 3)  # earlier: moves up
    q.add_after("k", 7)  # later than 3: ignored
    assert q.delayed == 1
    clock.now += 2.9
    assert drain(q) == []
    clock.now += 0.1
    assert drain(q) == ["k"]
    assert q.delayed == 0
    clock.now += 10  # the replaced entries at 7 and 10 hand nothing out
    assert drain(q) == []


def test_a_delayed_key_added_at_once_is_no_longer_waiting() -> None:
    clock = FakeClock()
    q = WorkQueue(clock=clock)
    q.add_after("k", 5)
    q.add_after("k", 0)
    assert drain(q) == ["k"] and q.delayed == 0
    clock.now += 5
    assert drain(q) == []
    q.add_after("k", 1)  # waits again after being handed out
    clock.now += 1
    assert drain(q) == ["k"]


def test_add_after_orders_by_due_time_and_zero_delay_is_immediate() -> None:
    clock = FakeClock()
    q = WorkQueue(clock=clock)
    q.add_after("late", 5)
    q.add_after("early", 1)
    q.add_after("now", 0)
    assert drain(q) == ["now"]
    clock.now += 5
    assert drain(q) == ["early", "late"]


def test_a_blocked_get_wakes_when_a_delayed_key_becomes_due() -> None:
    q = WorkQueue()
    q.add_after("k", 0.05)
    assert q.get(timeout=5) == "k"


def test_shutdown_wakes_blocked_getters_and_ignores_later_adds() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    threads = [threading.Thread(target=lambda: got.append(q.get())) for _ in range(3)]
    for t in threads:
        t.start()
    q.shutdown()
    for t in threads:
        t.join(5)
    assert got == [None, None, None]
    q.add("a")
    q.add_after("b", 0)
    assert len(q) == 0
    assert q.get(timeout=0) is None


def test_get_times_out_with_none() -> None:
    assert WorkQueue().get(timeout=0.01) is None


def test_concurrent_workers_never_hold_the_same_key() -> None:
    q = WorkQueue()
    held: set[str] = set()
    lock = threading.Lock()
    clashes: list[str] = []
    done = threading.Event()

    def worker() -> None:
        while (key := q.get(timeout=0.2)) is not None:
            with lock:
                if key in held:
                    clashes.append(key)
                held.add(key)
            with lock:
                held.discard(key)
            q.done(key)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(2000):
        q.add(f"k{i % 7}")
    done.set()
    for t in threads:
        t.join(10)
    assert clashes == []
    assert len(q) == 0


def test_unfinished_counts_queued_and_in_flight_keys_but_not_delayed_ones() -> None:
    clock = FakeClock()
    q = WorkQueue(clock=clock)
    q.add("a")
    q.add("b")
    q.add_after("later", 10)
    assert q.unfinished() == 2
    key = q.get(timeout=0)
    assert key == "a" and len(q) == 1 and q.unfinished() == 2  # "a" is in flight: len leaves it out
    q.add("a")  # added again while in flight: still one unit of unfinished work for "a"
    assert q.unfinished() == 2
    q.done("a")
    assert drain(q) == ["b", "a"]
    assert q.unfinished() == 0 and q.delayed == 1
