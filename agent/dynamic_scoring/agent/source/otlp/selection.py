"""Selectors of an OpenTelemetry source, compiled for matching pushed series.

A selector comes from a summary in one of two forms, both documented in ``docs/opentelemetry.md``:
the ``otel.selectors`` objects of a ``sources`` entry, or (for the upstream single-source form
``sourceType: OpenTelemetry``) a PromQL-style vector selector in ``sourceQuery`` such as
``http_server_duration_count{service_name="web",http_route=~"/api/.*"}``, optionally wrapped in
``rate(...)``.  Only that subset of PromQL is accepted: anything else is an error naming the
query, because silently scoring a different series than the one written would be worse.

Metric names are compared after the receiver's translation (``.``, ``-`` and ``/`` become ``_``),
so ``http.server.duration`` and ``http_server_duration`` select the same series.  Regular
expressions match the whole label value, as in PromQL, and use RE2 syntax and matching
(``dynamic_scoring.contract.regex``): they run on label values any pusher chooses, so matching must take
time linear in the value, never a backtracking blow-up that would stall the decoding slot.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from dynamic_scoring.contract.regex import LabelRegex, RegexError, compile_label_regex
from dynamic_scoring.contract.wire import AttributeMatcher, OtelSelector

_NAME = r"[A-Za-z_:][A-Za-z0-9_:.\-/]*"
_LABEL = r"[A-Za-z_][A-Za-z0-9_]*"
_STRING = r'"(?:[^"\\]|\\.)*"'
_MATCHER = re.compile(rf"\s*({_LABEL})\s*(=~|!~|!=|=)\s*({_STRING})\s*(,|$)")
_SELECTOR = re.compile(rf"^\s*({_NAME})\s*(?:\{{(.*)\}})?\s*$", re.DOTALL)
_RATE = re.compile(r"^\s*rate\s*\((.*)\)\s*\Z", re.DOTALL)
_UNSAFE = re.compile(r"[^A-Za-z0-9_:]")


@functools.lru_cache(maxsize=8192)  # the same few attribute keys arrive on every point
def sanitize_name(name: str) -> str:
    """A metric or label name as the receiver stores it, in Prometheus' legacy character set.

    Every character outside ``[A-Za-z0-9_:]`` becomes ``_`` and a leading digit gets a ``_`` prefix,
    as Prometheus' OTLP translation does for label names (and, in its default mode, metric names).
    """
    out = _UNSAFE.sub("_", name)
    if out[:1].isdigit():
        out = "_" + out
    return out


class SelectorError(ValueError):
    """A selector that cannot be used; the message says what is wrong, not the whole query."""


@dataclass(frozen=True)
class Matcher:
    """One compiled attribute matcher."""

    name: str
    op: str
    value: str
    pattern: LabelRegex | None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """PromQL semantics: a missing label has the empty value."""
        have = labels.get(self.name, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        assert self.pattern is not None
        found = self.pattern.matches(have)
        return found if self.op == "=~" else not found


@dataclass(frozen=True)
class Selector:
    """A compiled selector: a translated metric name, matchers, and whether to take rates."""

    metric: str
    matchers: tuple[Matcher, ...] = ()
    rate: bool = False

    def matches(self, name: str, base: str, labels: Mapping[str, str]) -> bool:
        """True when a series named ``name`` (of the metric ``base``) with ``labels`` is selected.

        A histogram's series are named ``<base>_count``, ``<base>_sum`` and ``<base>_bucket``; the
        base name selects all three, a suffixed name only its own.
        """
        if self.metric != name and self.metric != base:
            return False
        return all(m.matches(labels) for m in self.matchers)


def _matcher(name: str, op: str, value: str) -> Matcher:
    pattern = None
    if op in ("=~", "!~"):
        try:
            pattern = compile_label_regex(value)
        except RegexError as exc:
            raise SelectorError(f"matcher {name}: not a valid RE2 regular expression ({exc})") from None
    return Matcher(name, op, value, pattern)


def from_spec(spec: OtelSelector) -> Selector:
    """Compile an ``otel.selectors`` entry (already validated by the wire model)."""
    matchers: list[AttributeMatcher] = spec.matchers or []
    return Selector(
        metric=sanitize_name(spec.metric),
        matchers=tuple(_matcher(m.name, m.op, m.value) for m in matchers),
        rate=spec.rate,
    )


def _unquote(text: str) -> str:
    inner = text[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), inner)


def parse_selector(query: str) -> Selector:
    """Parse ``[rate(]metric{label op "value", ...}[)]`` (the ``sourceQuery`` form).

    Raises:
        SelectorError: the query is not of that form.
    """
    rate = False
    match = _RATE.match(query)
    if match is not None:
        rate = True
        query = match.group(1)
    found = _SELECTOR.match(query)
    if found is None:
        raise SelectorError(
            'expected a vector selector such as metric{label="value"}, optionally inside rate(...)'
        )
    name, body = found.group(1), found.group(2) or ""
    matchers: list[Matcher] = []
    pos = 0
    body = body.strip()
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if m is None:
            raise SelectorError(f'matcher {len(matchers) + 1}: expected label op "value" (op: = != =~ !~)')
        matchers.append(_matcher(m.group(1), m.group(2), _unquote(m.group(3))))
        pos = m.end()
    return Selector(metric=sanitize_name(name), matchers=tuple(matchers), rate=rate)


__all__ = ["Matcher", "Selector", "SelectorError", "from_spec", "parse_selector", "sanitize_name"]
