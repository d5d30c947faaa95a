"""Split the upstream ``;``-joined ``sourceQuery`` into separate PromQL queries.

Upstream split on every ``;``, which broke any query with a ``;`` inside a string or a regex matcher
and sent empty segments as (failing) queries.  This splitter reads just enough PromQL to know where
a ``;`` is a separator: not inside a double-, single- or backtick-quoted string (backslash escapes
apply in the first two, as in PromQL) and not inside a ``{...}`` label-matcher block.  Segments are
trimmed and empty ones dropped.  A ``;`` is never valid PromQL anywhere else, so no valid query is
cut in two.  A ``#`` comment does not hide a ``;``: upstream split there too, and in a one-line
field the ``;`` was surely meant as a separator.
"""

from __future__ import annotations


def split_queries(text: str) -> list[str]:
    """Return the queries of a ``;``-joined query string, trimmed, without empty ones."""
    segments: list[str] = []
    start = 0
    quote = ""  # the open quote character, or "" outside strings
    escaped = False
    depth = 0  # nesting of {...}
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote != "`":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif ch == ";" and depth == 0:
            segments.append(text[start:i])
            start = i + 1
    segments.append(text[start:])
    return [s.strip() for s in segments if s.strip()]


__all__ = ["split_queries"]
