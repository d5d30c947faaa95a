"""Warning Events recorded once per problem, not once per reconcile.

A reconcile runs on every change to an MCA, and OCM and the klusterlet change its status often;
recording the same Warning each time would turn a standing problem into a stream of Event
writes.  `Notices` remembers, per object key, the last reason and message it recorded and writes
again only when the problem changes, or after the problem was cleared and came back.
"""

from __future__ import annotations

import logging
import threading

from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.writes import Writer

log = logging.getLogger(__name__)


class Notices:
    """Per-key memory of the Warning last recorded through a `Writer`."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._last: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def warn(self, key: str, involved: JSON, reason: str, message: str) -> None:
        """Log the problem and record a Warning Event on `involved`, unless it is the one last recorded."""
        with self._lock:
            if self._last.get(key) == (reason, message):
                return
            self._last[key] = (reason, message)
        log.warning("%s: %s", reason, message, extra={"key": key, "reason": reason})
        self.writer.event(involved, "Warning", reason, message)

    def clear(self, key: str) -> None:
        """The problem of `key` is gone: a recurrence is recorded again."""
        with self._lock:
            self._last.pop(key, None)
