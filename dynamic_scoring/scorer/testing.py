"""A pytest helper: run the conformance check against an author's app (or a URL) from a test.

``assert_conformant(app)`` starts the app on a free loopback port in this process, runs every
check of ``dynamic_scoring.scorer.conformance`` against it over real HTTP, stops it, and fails
with every error finding listed.  It needs no pytest import (a failing check raises
``AssertionError``, which pytest reports), so the library keeps its two dependencies.

Because the app runs in this process, ``check_app`` also sees what the score function raised (the
scorer answers only ``500 {"error": "scoring failed: ZeroDivisionError"}``): the report's
``exceptions`` carry each exception's type, message and the innermost frames of the author's own code
(not the library's), under the check that caused it.
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Any

from dynamic_scoring.scorer.app import ScorerApp
from dynamic_scoring.scorer.app import log as app_log
from dynamic_scoring.scorer.conformance import Checker, RaisedError, Report, check
from dynamic_scoring.scorer.serve import ScorerServer

TRACEBACK_FRAMES = 3
"""Frames of a raised exception's traceback kept in the report (the innermost ones)."""


_LIBRARY = Path(__file__).resolve().parent


def _in_library(frame: traceback.FrameSummary) -> bool:
    return Path(frame.filename).resolve().is_relative_to(_LIBRARY)


def author_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The frames of ``exc`` worth showing an author.

    The innermost :data:`TRACEBACK_FRAMES` outside this library (their own code), and the library frame
    that raised, when one did (``mean()`` on an empty series); only library frames when the author's
    code is not on the stack.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [f for f in frames if not _in_library(f)][-TRACEBACK_FRAMES:]
    if not theirs:
        return list(frames[-TRACEBACK_FRAMES:])
    return theirs + ([frames[-1]] if _in_library(frames[-1]) else [])


class _Raised(logging.Handler):
    """Collects the exceptions the app logs (``log.exception``) while a check runs."""

    def __init__(self, checker: Checker) -> None:
        super().__init__(logging.ERROR)
        self.checker = checker

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is None or record.exc_info[1] is None:
            return
        exc = record.exc_info[1]
        frames = traceback.format_list(author_frames(exc))
        kind = type(exc)
        name = (
            kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        )
        checks = self.checker.report.checks
        self.checker.report.exceptions.append(
            RaisedError(checks[-1] if checks else "", name, str(exc), "".join(frames).rstrip())
        )


def check_app(app: ScorerApp, **options: Any) -> Report:
    """The conformance report of ``app`` served on loopback; options as for ``conformance.check``.

    An app that checks a token is sent its own unless ``token=`` says otherwise: the check is about
    the contract, and the author's test has the app, hence the token, at hand. The report's
    ``exceptions`` list what the score function raised (type, message, traceback).
    """
    if app.token is not None and "token" not in options:
        options = {**options, "token": app.token.current()}
    server = ScorerServer(app, "127.0.0.1", 0)
    thread = server.start_in_thread()
    checker = Checker(server.base_url, **options)
    raised = _Raised(checker)
    app_log.addHandler(raised)
    try:
        return checker.run()
    finally:
        app_log.removeHandler(raised)
        server.shutdown()
        thread.join(timeout=10)


def assert_conformant(target: ScorerApp | str, **options: Any) -> Report:
    """Fail (``AssertionError``) unless ``target`` passes with no error finding; returns the report.

    ``target`` is an app (served on loopback for the check) or the base URL of a running scorer.
    A running scorer that checks a token needs ``token=...`` (an app is sent its own);
    ``large=False`` skips the 10,000-series input.
    """
    report = check_app(target, **options) if isinstance(target, ScorerApp) else check(target, **options)
    if not report.ok:
        lines = [f"  [{f.check}] {f.seen} -> {f.fix}" for f in report.errors]
        lines.extend(f"  raised {e}" for e in report.exceptions)
        raise AssertionError("the scorer does not conform:\n" + "\n".join(lines))
    return report


__all__ = ["assert_conformant", "author_frames", "check_app"]
