r"""``${cluster}`` in a PromQL query: where it may stand, and how it is filled in safely.

One central Prometheus-compatible store (Thanos, VictoriaMetrics, a hub Prometheus fed by remote
write) holds every cluster's series, told apart by a label.  A scorer then writes one query for all
clusters, ``sum by (node) (load{cluster="${cluster}"})``, and each agent fills in its own cluster name.

Text from a ConfigMap must never become PromQL syntax, so a placeholder is only accepted *inside a
quoted PromQL string* (``"..."`` or ``'...'``), where the substituted value is escaped for that
string: backslash and the quote character get a backslash, line breaks and tabs become ``\n``,
``\r`` and ``\t``.  A placeholder anywhere else (bare in the expression, inside a backtick raw
string, which has no escapes) makes the summary invalid with a message naming the query.  The
cluster name is also required to be a DNS label (what OCM's cluster namespaces already are), so it
cannot carry a regex metacharacter either when it lands in a ``=~"..."`` matcher.

Only the placeholders in ``PLACEHOLDERS`` are replaced.  Every other ``${...}`` is left as written:
PromQL's own ``label_replace`` uses ``${1}`` and ``${name}`` for capture groups.  Text after ``#``
outside a string is a PromQL comment and is neither checked nor changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

PLACEHOLDERS: tuple[str, ...] = ("cluster",)
"""The placeholders a query may contain; each names a value the agent knows."""

_PATTERN = re.compile(r"\$\{(" + "|".join(re.escape(p) for p in PLACEHOLDERS) + r")\}")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


class PlaceholderError(ValueError):
    """A placeholder stands where it cannot be substituted safely, or its value is unusable."""


@dataclass(frozen=True)
class _Segment:
    text: str
    quote: str
    """``"`` or ``'`` for the inside of such a string, a backtick for a raw string, ``#`` for a
    comment, ``""`` for plain expression text."""


def _segments(query: str) -> Iterator[_Segment]:
    """Cut ``query`` into expression text, string insides (quotes excluded) and comments."""
    i, start, n = 0, 0, len(query)
    while i < n:
        ch = query[i]
        if ch in "\"'`":
            if i > start:
                yield _Segment(query[start:i], "")
            yield _Segment(ch, "")
            j = i + 1
            while j < n and query[j] != ch:
                j += 2 if (query[j] == "\\" and ch != "`") else 1
            j = min(j, n)
            yield _Segment(query[i + 1 : j], ch)
            if j < n:
                yield _Segment(ch, "")
            i = start = j + 1
        elif ch == "#":
            if i > start:
                yield _Segment(query[start:i], "")
            end = query.find("\n", i)
            end = n if end < 0 else end
            yield _Segment(query[i:end], "#")
            i = start = end
        else:
            i += 1
    if start < n:
        yield _Segment(query[start:], "")


def check_query(query: str) -> None:
    """Raise ``PlaceholderError`` when a placeholder stands outside a ``"..."`` or ``'...'`` string."""
    for seg in _segments(query):
        if seg.quote in ('"', "'", "#"):
            continue
        found = _PATTERN.search(seg.text)
        if found is not None:
            where = "a backtick raw string (it has no escapes)" if seg.quote == "`" else "the expression"
            raise PlaceholderError(
                f"${{{found.group(1)}}} stands in {where}; it may only stand inside a double- or "
                'single-quoted PromQL string, e.g. {cluster="${cluster}"}'
            )


def _escape(value: str, quote: str) -> str:
    out = value.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def substitute(query: str, values: Mapping[str, str]) -> str:
    """``query`` with every placeholder inside a quoted string replaced by its escaped value.

    Raises:
        PlaceholderError: a placeholder stands outside a quoted string (see ``check_query``), or
            ``values`` has no value for one that is used.
    """
    check_query(query)
    if "${" not in query:
        return query
    parts: list[str] = []
    for seg in _segments(query):
        if seg.quote in ('"', "'"):

            def fill(match: re.Match[str], quote: str = seg.quote) -> str:
                name = match.group(1)
                if name not in values:
                    raise PlaceholderError(f"no value for ${{{name}}}")
                return _escape(values[name], quote)

            parts.append(_PATTERN.sub(fill, seg.text))
        else:
            parts.append(seg.text)
    return "".join(parts)


def cluster_value(cluster_name: str) -> str:
    """The agent's cluster name as ``${cluster}``'s value, after checking it is a DNS label."""
    if not _DNS_LABEL.match(cluster_name):
        raise PlaceholderError(
            "the agent's cluster name is not a DNS label (lowercase letters, digits and '-', at most "
            "63 characters), so it is not substituted into a query"
        )
    return cluster_name


def uses_placeholders(query: str) -> bool:
    """Whether ``query`` contains one of ``PLACEHOLDERS`` anywhere (checked or not)."""
    return _PATTERN.search(query) is not None


def expand_queries(queries: Sequence[str], cluster_name: str) -> list[str]:
    """Every query of one source with its placeholders filled, as the agent sends them.

    The cluster name is checked only when some query uses a placeholder, so an agent whose name is
    not a DNS label still runs scorers that do not need it.  The worker and ``explain`` both call
    this, so what explain shows is what the agent queries.

    Raises:
        PlaceholderError: the cluster name cannot be substituted, or query ``#N`` cannot be filled.
    """
    values: dict[str, str] = {}
    if any(uses_placeholders(q) for q in queries):
        values["cluster"] = cluster_value(cluster_name)
    expanded = []
    for index, query in enumerate(queries):
        try:
            expanded.append(substitute(query, values))
        except PlaceholderError as exc:
            raise PlaceholderError(f"query #{index + 1}: {exc}") from exc
    return expanded


__all__ = [
    "PLACEHOLDERS",
    "PlaceholderError",
    "check_query",
    "cluster_value",
    "expand_queries",
    "substitute",
    "uses_placeholders",
]
