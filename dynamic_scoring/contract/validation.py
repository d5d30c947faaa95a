"""The one way a pydantic ``ValidationError`` becomes text a user reads.

A CR the hub rejects (status condition), a ``/config`` the probe refuses, a summary or a scoring
answer the agent refuses, a recording the CLI cannot read: each names the field by its path and
says what is wrong, never echoing the input (which may be a secret or a megabyte).  They all format
through here, so the same error reads the same way wherever it is reported.
"""

from __future__ import annotations

from pydantic import ValidationError


def validation_issues(
    exc: ValidationError, *, prefix: str = "", whole: str = "document"
) -> list[tuple[str, str]]:
    """One ``(where, what)`` per error, in pydantic's order.

    ``where`` is the field path under ``prefix`` (``spec.source.params.range`` for prefix ``spec``);
    an error about the value as a whole is named ``prefix``, or ``whole`` when there is no prefix.
    The input is never included (``include_input=False``), nor pydantic's documentation URL.
    """
    issues = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err["loc"])
        issues.append((".".join(p for p in (prefix, loc) if p) or whole, str(err["msg"])))
    return issues


def describe_validation(
    exc: ValidationError, *, prefix: str = "", whole: str = "document", limit: int | None = None
) -> str:
    """Every error on one line, ``; ``-separated; with ``limit``, the first ``limit`` and how many more."""
    lines = [f"{where}: {what}" for where, what in validation_issues(exc, prefix=prefix, whole=whole)]
    if limit is None or len(lines) <= limit:
        return "; ".join(lines)
    return "; ".join(lines[:limit]) + f" (and {len(lines) - limit} more)"


__all__ = ["describe_validation", "validation_issues"]
