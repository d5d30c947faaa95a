"""A pytest helper: run the conformance check against an author's app (or a URL) from a test.

``assert_conformant(app)`` starts the app on a free loopback port in this process, runs every
check of ``dynamic_scoring.scorer.conformance`` against it over real HTTP, stops it, and fails
with every error finding listed.  It needs no pytest import (a failing check raises
``AssertionError``, which pytest reports), so the library keeps its two dependencies.
"""

from __future__ import annotations

from typing import Any

from dynamic_scoring.scorer.app import ScorerApp
from dynamic_scoring.scorer.conformance import Report, check
from dynamic_scoring.scorer.serve import ScorerServer


def check_app(app: ScorerApp, **options: Any) -> Report:
    """The conformance report of ``app`` served on loopback; options as for ``conformance.check``."""
    server = ScorerServer(app, "127.0.0.1", 0)
    thread = server.start_in_thread()
    try:
        token = options.pop("token", None)
        return check(server.base_url, token=token, **options)
    finally:
        server.shutdown()
        thread.join(timeout=10)


def assert_conformant(target: ScorerApp | str, **options: Any) -> Report:
    """Fail (``AssertionError``) unless ``target`` passes with no error finding; returns the report.

    ``target`` is an app (served on loopback for the check) or the base URL of a running scorer.
    Pass ``token=...`` when the app checks one, ``large=False`` to skip the 10,000-series input.
    """
    report = check_app(target, **options) if isinstance(target, ScorerApp) else check(target, **options)
    if not report.ok:
        lines = [f"  [{f.check}] {f.seen} -> {f.fix}" for f in report.errors]
        raise AssertionError("the scorer does not conform:\n" + "\n".join(lines))
    return report


__all__ = ["assert_conformant", "check_app"]
