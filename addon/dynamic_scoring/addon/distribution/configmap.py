"""The ConfigMap the agent follows: ``dynamic-scoring-config``, key ``summaries``.

The value is ``dynamic_scoring.contract.wire.dump_summaries`` of the cluster's sorted list: compact JSON,
every upstream key present, extensions only when set.  Equal inputs give equal bytes, which is what lets the
controller compare and write nothing when nothing changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from dynamic_scoring.addon.constants import ADDON_NAME, MANAGED_BY_LABEL
from dynamic_scoring.addon.constants import SUMMARY_CONFIGMAP as CONFIGMAP_NAME
from dynamic_scoring.addon.distribution.plan import Plan
from dynamic_scoring.contract.wire import ScorerSummary, dump_summaries

SUMMARIES_KEY: Final = "summaries"
MANAGED_BY: Final = ADDON_NAME


def payloads(result: Plan) -> dict[str, str]:
    """Every cluster's ``summaries`` value, byte-identical to ``dump_summaries`` of its list.

    Each summary is encoded once and the clusters' lists are joined from those pieces: with 1,000
    clusters and 20 scorers this takes a few milliseconds instead of re-encoding 20,000 summaries
    (measured in docs/scorer-registry.md).
    """
    pieces: dict[tuple[str, bool], str] = {}
    out: dict[str, str] = {}
    for cluster, summaries in result.clusters.items():
        parts = []
        for s in summaries:
            # a masked copy (maskPolicy: Score) encodes differently from the scorer's other clusters
            key = (s.name, bool(s.masked))
            piece = pieces.get(key)
            if piece is None:
                piece = pieces[key] = json.dumps(s.to_wire(), separators=(",", ":"), ensure_ascii=False)
            parts.append(piece)
        out[cluster] = "[" + ",".join(parts) + "]"
    return out


def summaries_configmap(
    namespace: str, summaries: Sequence[ScorerSummary], *, payload: str | None = None
) -> dict[str, Any]:
    """The v1 ConfigMap for one cluster's agent, in its install ``namespace``, as a JSON dict.

    ``payload`` is the pre-encoded value from ``payloads`` (it must encode ``summaries``).
    """
    if not namespace:
        raise ValueError("the agent install namespace must not be empty")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP_NAME,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
        },
        "data": {SUMMARIES_KEY: payload if payload is not None else dump_summaries(summaries)},
    }


__all__ = [
    "CONFIGMAP_NAME",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "SUMMARIES_KEY",
    "payloads",
    "summaries_configmap",
]
