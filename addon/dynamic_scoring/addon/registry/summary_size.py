"""How many bytes one scorer's summary takes in a cluster's config work, and how many it may.

Every summary a cluster receives travels in one ConfigMap inside one ManifestWork (see
``dynamic_scoring.addon.distribution.budget`` for the per-cluster limit).  One scorer's share is bounded on
its own so that an oversized scorer is reported where its author looks (``Valid`` and ``Distributed`` on
the DynamicScorer) and never crowds out the others.  Both controllers measure with these functions,
so they agree.
"""

from __future__ import annotations

import json
from typing import Final

from dynamic_scoring.addon.constants import WORK_SIZE_LIMIT
from dynamic_scoring.contract.wire import ScorerSummary

CONFIGMAP_DATA_LIMIT: Final = 1_048_576
"""The apiserver's limit on a ConfigMap's data (``data`` and ``binaryData`` together)."""
CONFIG_WORK_LIMIT: Final = min(WORK_SIZE_LIMIT, CONFIGMAP_DATA_LIMIT)
"""The most the ConfigMap manifest of one cluster's config work may take (bytes of compact JSON):
the deploy work's limit (80 % of the 500 KiB OCM's work webhook accepts), under the ConfigMap's."""
SUMMARY_LIMIT: Final = 131_072
"""The most one scorer's summary may take in a cluster's ConfigMap manifest (128 KiB).

The CRD allows 32 queries of 64 KiB, far more than one work can carry; 128 KiB leaves room for one
maximal query with heavy quoting, and for several ordinary scorers beside it."""


def piece(summary: ScorerSummary) -> str:
    """The summary's compact JSON, as it appears in the ``summaries`` list."""
    return json.dumps(summary.to_wire(), separators=(",", ":"), ensure_ascii=False)


def go_size(encoded: str) -> int:
    """The bytes of JSON text ``encoded`` (Python's, ``ensure_ascii=False``) as Go's encoder writes it.

    Go escapes ``<``, ``>`` and ``&`` as six-byte unicode escapes (1 byte -> 6), and U+2028 and
    U+2029 too (3 bytes -> 6); everything else is the same bytes.  The apiserver writes objects
    with Go's encoder, and OCM and etcd measure what it wrote.
    """
    size = len(encoded.encode("utf-8"))
    html = encoded.count("<") + encoded.count(">") + encoded.count("&")
    separators = encoded.count("\u2028") + encoded.count("\u2029")
    return size + 5 * html + 3 * separators


def embedded_size(text: str) -> int:
    """The bytes ``text`` takes once escaped into a JSON string (without the quotes), as Go writes it."""
    return go_size(json.dumps(text, ensure_ascii=False)) - 2


def summary_size(summary: ScorerSummary) -> int:
    """The bytes ``summary`` adds to the ConfigMap manifest of a cluster's config work."""
    return embedded_size(piece(summary))


def too_large_message(size: int, limit: int = SUMMARY_LIMIT, work_limit: int = CONFIG_WORK_LIMIT) -> str:
    """The condition message for a summary over ``limit`` (names the size and both limits)."""
    return (
        f"the summary takes {size:,} bytes in the agent's ConfigMap; one DynamicScorer may take at "
        f"most {limit:,} (a cluster's ConfigMap holds every scorer's summary in "
        f"{work_limit:,}): shorten spec.source.params.query(ies) or split the scorer"
    )


__all__ = [
    "CONFIGMAP_DATA_LIMIT",
    "CONFIG_WORK_LIMIT",
    "SUMMARY_LIMIT",
    "embedded_size",
    "go_size",
    "piece",
    "summary_size",
    "too_large_message",
]
