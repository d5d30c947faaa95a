"""How large an AddOnPlacementScore's scores are, against what the hub can store.

The number of items is not what limits an AddOnPlacementScore; its size is.  The kube-apiserver
stores a custom resource as JSON in etcd, and etcd refuses a request over 1.5 MiB by default
(``--max-request-bytes`` 1,572,864); the apiserver answers such a write with an error, so every
cycle of a scorer whose items do not fit would fail at the write, after all its work.  The agent
measures the items' JSON before it writes and fails the cycle there instead, naming the size and
the limit (``ScorerTooManyResults``).

10,000 items of 40-character names are about 0.66 MB; 4,096 items of 253-character names about
1.1 MB.  ``MAX_SCORE_BYTES`` leaves 150 KiB of the 1.5 MiB for the rest of the object: metadata
(the agent keeps no managedFields, which would otherwise repeat every item name), the condition
(at most 1 KiB of message) and etcd's own framing.  A hub whose etcd accepts more can raise the
agent's limit (``MaxScoreBytes``), and a scorer can lower it for itself (``spec.maxScoreBytes``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

try:  # the agent's extra; the scorer library's base install (pydantic, httpx) has no msgspec
    import msgspec

    _encode: Callable[[object], bytes] = msgspec.json.encode
except ImportError:  # exercised by the base-install test, in a subprocess without msgspec

    def _stdlib_encode(obj: object) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    _encode = _stdlib_encode

ETCD_DEFAULT_REQUEST_BYTES = 1_572_864
"""etcd's default ``--max-request-bytes`` (1.5 MiB): the largest object a default hub can store."""

MAX_SCORE_BYTES = 1_420_000
"""The agent's default limit on the JSON of one AddOnPlacementScore's ``status.scores``."""

MAX_SCORE_BYTES_SETTING = 3 * 1024 * 1024
"""The highest limit that can be set: 3 MiB, the kube-apiserver's own limit on a request body."""
MIN_SCORE_BYTES_SETTING = 1024
"""The lowest limit that can be set: 1 KiB, so a typo (``14``) fails, not a scorer that never publishes."""

_ITEM_FRAME = len('{"name":,"value":}')
"""The bytes of one item's JSON besides its quoted name and its value."""

MIN_ITEM_BYTES = _ITEM_FRAME + len('"x"') + len("0") + 1
"""The smallest item (a one-character name, value 0, and its comma): no answer with more results
than ``limit // MIN_ITEM_BYTES`` can fit, whatever its names."""


_ESCAPED = frozenset('"\\<>&')
"""ASCII characters whose JSON takes more than one byte (Go escapes ``<``, ``>`` and ``&`` too)."""


def _quoted_bytes(name: str) -> int:
    if name.isascii() and name.isprintable() and _ESCAPED.isdisjoint(name):
        return len(name) + 2  # the common case, without encoding
    # Go writes <, >, & as \u003c, \u003e, \u0026 (5 bytes more), and U+2028/U+2029 as \u2028/\u2029
    # (3 more than their UTF-8); Python's JSON does neither.
    extra = sum(5 if c in "<>&" else 3 if c in "\u2028\u2029" else 0 for c in name)
    return len(json.dumps(name, ensure_ascii=False).encode()) + extra


def item_bytes(name: str, value: int) -> int:
    """The JSON size of one item ``{"name":...,"value":...}`` as the apiserver stores it."""
    return _ITEM_FRAME + _quoted_bytes(name) + len(str(value))


_PLAIN = bytes(c for c in range(0x20, 0x7F) if chr(c) not in _ESCAPED)
"""Printable ASCII that JSON writes as itself, in Go's encoding as in msgspec's."""


def scores_bytes(items: Iterable[tuple[str, int]]) -> int:
    """The JSON size of the list ``status.scores`` holding ``items`` (name, value) pairs.

    Checked on every cycle over up to tens of thousands of items.  In the common case, every name
    plain printable ASCII (checked on all names at once), both encoders write the same bytes, so
    the size comes from one compact encoding of the pairs as arrays (``["name",value]``: 3 bytes of
    framing each, against ``_ITEM_FRAME`` as objects): msgspec's, in C, where the agent's
    dependencies are installed, else the standard library's, which writes the same bytes for such
    names (a scorer built on the base install).  Any other name is sized one by one with Go's
    escaping.
    """
    pairs = items if isinstance(items, list | tuple) else list(items)
    count = len(pairs)
    joined = "".join([name for name, _ in pairs])
    if joined.isascii() and not joined.encode("ascii").translate(None, _PLAIN):
        return len(_encode(pairs)) + count * (_ITEM_FRAME - 3)
    total = sum(item_bytes(name, value) for name, value in pairs)
    return 2 + total + max(0, count - 1)


def max_results_for(limit: int) -> int:
    """The most results an answer may hold and still fit in ``limit`` bytes with the shortest names."""
    return max(0, (limit - 2 + 1) // MIN_ITEM_BYTES)


__all__ = [
    "ETCD_DEFAULT_REQUEST_BYTES",
    "MAX_SCORE_BYTES",
    "MAX_SCORE_BYTES_SETTING",
    "MIN_ITEM_BYTES",
    "MIN_SCORE_BYTES_SETTING",
    "item_bytes",
    "max_results_for",
    "scores_bytes",
]
