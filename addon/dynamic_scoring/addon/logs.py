"""JSON log lines that name the object they are about.

Every reconcile runs with the controller's name and the object's key in context variables, and a
filter copies them onto each record logged from that thread meanwhile, so a line deep in a
helper (a Writer retrying on 409, an Event that could not be recorded) still says which cluster
it concerns: `grep '"key": "cluster2/dynamic-scoring"'` follows one cluster through the log.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any, TextIO, TypeVar

_controller: contextvars.ContextVar[str | None] = contextvars.ContextVar("controller", default=None)
_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("key", default=None)

# Attributes every LogRecord has; anything else on a record came from `extra=` and is emitted.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}

R = TypeVar("R")


def keyed(controller: str, reconcile: Callable[[str], R]) -> Callable[[str], R]:
    """Wrap a reconcile so that every line it logs carries `controller` and the key."""

    def run(key: str) -> R:
        c_token, k_token = _controller.set(controller), _key.set(key)
        try:
            return reconcile(key)
        finally:
            _key.reset(k_token)
            _controller.reset(c_token)

    return run


class ContextFilter(logging.Filter):
    """Adds the current reconcile's controller and key to records that do not name their own."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Annotate; never drops a record."""
        controller, key = _controller.get(), _key.get()
        if controller is not None and not hasattr(record, "controller"):
            record.controller = controller
        if key is not None and not hasattr(record, "key"):
            record.key = key
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then controller, key and other extras."""

    def format(self, record: logging.LogRecord) -> str:
        """Render `record`; values that are not JSON become their `str`."""
        doc: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in record.__dict__.items():
            if name not in _STANDARD and not name.startswith("_"):
                doc[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            doc["error"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return json.dumps(doc, default=str, ensure_ascii=False)


def configure(level: str = "info", stream: TextIO | None = None) -> None:
    """Send every logger's records to `stream` (stderr) as JSON lines, at `level` and above."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("urllib3").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("kubernetes").setLevel(max(logging.WARNING, root.level))
