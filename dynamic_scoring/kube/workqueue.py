"""client-go's rate-limited work queue, for threads.

Why a queue of keys and not of events: a reconcile reads the current state from the caches, so
ten changes to one object while it waits are one reconcile (level-triggered).  The queue keeps
three promises that make that safe with several workers:

* a key is queued at most once (`dirty`), however often it is added;
* a key is never handed to two workers at once: added while a worker holds it (`processing`),
  it is queued again when that worker calls `done`, so the newest state is always reconciled;
* a key that keeps failing waits longer each time (`add_rate_limited`: base * 2^failures, capped)
  until `forget` says it succeeded.

Delayed keys (`add_after`) sit in a heap that `get` drains when they are due, so no timer thread
is needed.  As in client-go's delaying queue, a key waits at most once: adding it again with a
later due time changes nothing, with an earlier one moves it up.  A controller may therefore ask
for the same wake-up on every event without piling up entries.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable

from dynamic_scoring.runtime.backoff import capped_exponential

#: client-go's ItemExponentialFailureRateLimiter starts at 5 ms; we cap at 5 min rather than
#: 1000 s because the periodic resync (10 min) retries everything anyway.
DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 300.0


class WorkQueue:
    """A deduplicating, rate-limited FIFO of object keys, safe for any number of threads."""

    def __init__(
        self,
        *,
        base_delay: float = DEFAULT_BASE_DELAY,
        max_delay: float = DEFAULT_MAX_DELAY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._waiting: list[tuple[float, int, str]] = []  # (due, tie-breaker, key); may hold stale entries
        self._due: dict[str, float] = {}  # each waiting key's one due time (the heap entry that counts)
        self._seq = itertools.count()
        self._failures: dict[str, int] = {}
        self._shutting_down = False

    def add(self, key: str) -> None:
        """Queue `key` unless it is queued already; a key being processed is queued at `done`."""
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: str) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        """Queue `key` once `delay` seconds have passed (at once when `delay <= 0`).

        A key already waiting keeps the earlier of its two due times.
        """
        with self._cond:
            if self._shutting_down:
                return
            if delay <= 0:
                self._due.pop(key, None)
                self._add_locked(key)
                return
            due = self._clock() + delay
            current = self._due.get(key)
            if current is not None and current <= due:
                return
            self._due[key] = due  # an earlier entry of the key in the heap is now stale
            heapq.heappush(self._waiting, (due, next(self._seq), key))
            self._cond.notify()  # a getter may need to wait less now

    def backoff(self, key: str) -> float:
        """The delay the next `add_rate_limited(key)` would use."""
        with self._cond:
            return self._delay(self._failures.get(key, 0))

    def _delay(self, failures: int) -> float:
        return capped_exponential(self.base_delay, self.max_delay, failures)

    def add_rate_limited(self, key: str) -> None:
        """Queue `key` after its backoff, and double the backoff for the next failure."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        self.add_after(key, self._delay(failures))

    def num_requeues(self, key: str) -> int:
        """How many times `key` was rate-limited since it was last forgotten."""
        with self._cond:
            return self._failures.get(key, 0)

    def forget(self, key: str) -> None:
        """Reset `key`'s backoff (after a success); does not remove it from the queue."""
        with self._cond:
            self._failures.pop(key, None)

    def _promote_due_locked(self) -> float | None:
        """Move due delayed keys into the queue; return seconds until the next one is due."""
        now = self._clock()
        while self._waiting and (self._waiting[0][0] <= now or self._stale(self._waiting[0])):
            entry = heapq.heappop(self._waiting)
            if not self._stale(entry):
                del self._due[entry[2]]
                self._add_locked(entry[2])
        return self._waiting[0][0] - now if self._waiting else None

    def _stale(self, entry: tuple[float, int, str]) -> bool:
        """An entry replaced by an earlier due time of its key (or already handed out)."""
        return self._due.get(entry[2]) != entry[0]

    def get(self, timeout: float | None = None) -> str | None:
        """The next key, which the caller must pass to `done`; None on shutdown or timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shutting_down:
                    return None
                next_due = self._promote_due_locked()
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                wait = next_due
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: str) -> None:
        """Mark `key` processed; if it was added meanwhile, queue it again."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty and not self._shutting_down:
                self._queue.append(key)
                self._cond.notify()

    def __len__(self) -> int:
        """Keys ready to be handed out (not those being processed or waiting for a delay)."""
        with self._cond:
            return len(self._queue)

    def unfinished(self) -> int:
        """Keys added and not yet processed: queued or being processed now (not those delayed).

        Zero means everything added so far (and not delayed) has been through a reconcile, which
        is what a caller waiting for the queue to settle needs; `len` leaves out keys in flight.
        """
        with self._cond:
            return len(self._dirty | self._processing)

    @property
    def delayed(self) -> int:
        """Keys waiting for a delay or a backoff (each counted once)."""
        with self._cond:
            return len(self._due)

    def shutdown(self) -> None:
        """Wake every `get` with None and ignore further adds."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()
