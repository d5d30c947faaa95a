"""The ConfigMap the agent follows: ``dynamic-scoring-config``, key ``summaries``.

The value is ``dynamic_scoring.wire.dump_summaries`` of the cluster's sorted list: compact JSON, every
upstream key present, extensions only when set.  Equal inputs give equal bytes, which is what lets the
controller compare and write nothing when nothing changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from dynamic_scoring.wire import ScorerSummary, dump_summaries

CONFIGMAP_NAME: Final = "dynamic-scoring-config"
SUMMARIES_KEY: Final = "summaries"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "dynamic-scoring"


def summaries_configmap(namespace: str, summaries: Sequence[ScorerSummary]) -> dict[str, Any]:
    """The v1 ConfigMap for one cluster's agent, in its install ``namespace``, as a JSON dict."""
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
        "data": {SUMMARIES_KEY: dump_summaries(summaries)},
    }


__all__ = ["CONFIGMAP_NAME", "MANAGED_BY", "MANAGED_BY_LABEL", "SUMMARIES_KEY", "summaries_configmap"]
