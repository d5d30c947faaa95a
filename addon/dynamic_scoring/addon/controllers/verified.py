"""Which keys' objects were last seen to match their inputs: the "nothing to do" memo of a controller.

An MCA changes half a dozen times during a cluster's cold start (conditions written by us, OCM and
the klusterlet), and every change wakes the controllers keyed by it.  Rendering the desired objects
and comparing them with the cache each time would find nothing to write.  A controller therefore
remembers, per key, a digest of what the objects are built from and the ``resourceVersion`` of each
object as it was when it last matched.  While both are unchanged, the objects still match; an edit
or a deletion changes a version, so it is still seen and reverted.

One memo serves every controller that renders and compares, so that the rule (inputs and versions
both, never one alone) and its locking are written once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Versions = tuple[tuple[str, ...], ...]
"""The written objects as tuples ending in their ``resourceVersion``, e.g. ``(kind, key, version)``."""


class Verified:
    """Per key: the inputs' digest and the objects' versions when they last matched. Thread-safe."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[bytes, Versions]] = {}
        self._lock = threading.Lock()

    def holds(self, key: str, inputs: bytes, current: Callable[[Versions], Versions]) -> bool:
        """True while `inputs` and the objects' versions are what they were when they last matched.

        `current` gets the versions remembered for `key` and returns the versions the cache shows
        now: for objects known by key, the same tuples with the cache's versions; for a set that may
        grow (numbered works), every object of the set.
        """
        with self._lock:
            known = self._known.get(key)
        if known is None or known[0] != inputs:
            return False
        return current(known[1]) == known[1]

    def remember(self, key: str, inputs: bytes, versions: Versions) -> None:
        """The objects of `key`, built from `inputs`, match at `versions`."""
        with self._lock:
            self._known[key] = (inputs, versions)

    def forget(self, key: str) -> None:
        """The key's object is gone: the next one of that key starts afresh."""
        with self._lock:
            self._known.pop(key, None)

    def __len__(self) -> int:
        """How many keys are remembered: a deleted key must not stay (the memo would only grow)."""
        with self._lock:
            return len(self._known)
