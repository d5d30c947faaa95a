"""Label-value regular expressions with RE2 semantics, matched against the whole value.

OpenTelemetry selectors (``=~``, ``!~``) are written by scorer publishers and run by the agent on
label values that any pusher chooses.  Python's ``re`` backtracks: ``(a+)+$`` against a few dozen
characters already takes seconds and doubles with each one, and the agent decodes one push at a
time, so one such pattern would stall every OpenTelemetry source of the cluster.  RE2 matches in
time linear in the input and refuses the features that need backtracking (backreferences,
lookahead and lookbehind), which is also what Prometheus accepts (Go's ``regexp`` is RE2), so a
selector that works in PromQL works here and one that does not is refused where it is validated.

Matching is anchored at both ends, as PromQL does (``=~"api"`` does not match ``"api-v2"``).

``google-re2`` is a dependency of the ``agent`` and ``hub`` extras, not of the base install: a
scorer (``pip install dynamic-scoring``) never compiles selectors, so it is imported on first use.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol


class RegexError(ValueError):
    """A pattern RE2 cannot compile; the message says why, in RE2's words."""


class LabelRegex(Protocol):
    """A compiled pattern: ``matches`` is true when the whole value matches."""

    pattern: str

    def matches(self, value: str) -> bool:
        """True when ``value`` as a whole matches the pattern."""
        ...


class _Re2Regex:
    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self._compiled = compiled

    def matches(self, value: str) -> bool:
        return self._compiled.fullmatch(value) is not None

    def __repr__(self) -> str:
        return f"LabelRegex({self.pattern!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Re2Regex) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)


@functools.cache
def _re2() -> tuple[Any, Any]:
    try:
        import re2
    except ImportError:  # pragma: no cover - the agent and hub extras install it
        raise RegexError(
            "regular expressions need the google-re2 package (pip install 'dynamic-scoring[agent]')"
        ) from None
    options = re2.Options()
    options.log_errors = False  # the error comes back as an exception; no stderr line per bad pattern
    return re2, options


_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def _reason(exc: Exception) -> str:
    arg = exc.args[0] if exc.args else exc
    text = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
    if any(f"invalid perl operator: {op}" in text for op in _LOOKAROUND):
        text += " (lookahead and lookbehind are not supported: RE2 syntax, as in PromQL)"
    elif "invalid escape sequence: \\" in text and text.rstrip()[-1:].isdigit():
        text += " (backreferences are not supported: RE2 syntax, as in PromQL)"
    return text


@functools.lru_cache(maxsize=1024)  # the same few patterns are compiled on every summary change
def compile_label_regex(pattern: str) -> LabelRegex:
    """Compile ``pattern`` with RE2 for whole-value matching.

    Raises:
        RegexError: the pattern is not valid RE2 syntax (or is too large for RE2's memory bound);
            the message is RE2's reason, with a hint for the Perl-only features.
    """
    re2, options = _re2()
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        raise RegexError(_reason(exc)) from None
    return _Re2Regex(pattern, compiled)


__all__ = ["LabelRegex", "RegexError", "compile_label_regex"]
