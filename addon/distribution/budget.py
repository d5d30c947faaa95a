"""Size limits of the config work: what one scorer and one cluster's summaries may take.

Every summary a cluster receives travels in one ConfigMap inside one ManifestWork.  The apiserver
refuses a ConfigMap whose data exceeds 1 MiB, and OCM's work webhook refuses a ManifestWork whose
manifests exceed 500 KiB; addon-framework packs deploy works to 80 % of that (``WORK_SIZE_LIMIT``,
409,600 bytes), and the config work keeps the same margin.  A refused work would leave every agent of
that cluster on its last ConfigMap: no edit, new scorer or withdrawal would reach it, whoever's
scorer caused it.  So the plan is trimmed before it is written:

1. A scorer whose own summary takes more than ``SUMMARY_LIMIT`` goes nowhere (``SummaryTooLarge``).
   The CRD allows 32 queries of 64 KiB, far more than any cluster's work can carry; 128 KiB leaves
   room for one maximal query with heavy quoting, and for several ordinary scorers beside it.
2. Per cluster, while the ConfigMap manifest would exceed ``CONFIG_WORK_LIMIT``, the largest summary
   left is dropped from that cluster (ties: by scorer name), and its scorer says where
   (``WorkTooLarge``).  Ordinary scorers (a few KiB each) therefore always get through.

Sizes are measured as the work measures them: the bytes the summary adds to the ConfigMap's compact
JSON, i.e. after the summary list is escaped into the ``summaries`` string, written as the apiserver
writes it (Go's encoder turns ``<``, ``>`` and ``&`` into six bytes each, and U+2028 and U+2029 too,
so a PromQL comparison costs more there than in Python's JSON).  The result depends only on the
plan, so the same registry always trims the same way and nothing flaps.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Final

from addon.constants import WORK_SIZE_LIMIT
from addon.distribution.configmap import summaries_configmap
from addon.distribution.plan import ClusterInput, Plan, Problem, ScorerOutcome
from dynamic_scoring.wire import ScorerSummary

CONFIGMAP_DATA_LIMIT: Final = 1_048_576
"""The apiserver's limit on a ConfigMap's data (``data`` and ``binaryData`` together)."""
CONFIG_WORK_LIMIT: Final = min(WORK_SIZE_LIMIT, CONFIGMAP_DATA_LIMIT)
"""The most the ConfigMap manifest of one cluster's config work may take (bytes of compact JSON)."""
SUMMARY_LIMIT: Final = 131_072
"""The most one scorer's summary may take in that ConfigMap manifest."""

PieceKey = tuple[str, bool]
"""(scorer name, masked): a summary's identity in the plan (a masked copy encodes differently)."""


def piece(summary: ScorerSummary) -> str:
    """The summary's compact JSON, as it appears in the ``summaries`` list."""
    return json.dumps(summary.to_wire(), separators=(",", ":"), ensure_ascii=False)


def go_size(encoded: str) -> int:
    """The bytes of JSON text ``encoded`` (Python's, ``ensure_ascii=False``) as Go's encoder writes it.

    Go escapes ``<``, ``>`` and ``&`` as six-byte unicode escapes (1 byte -> 6), and U+2028 and
    U+2029 too (3 bytes -> 6); everything else is the same bytes.
    """
    size = len(encoded.encode("utf-8"))
    html = encoded.count("<") + encoded.count(">") + encoded.count("&")
    separators = encoded.count("\u2028") + encoded.count("\u2029")
    return size + 5 * html + 3 * separators


def embedded_size(text: str) -> int:
    """The bytes ``text`` takes once escaped into a JSON string (without the quotes), as Go writes it."""
    return go_size(json.dumps(text, ensure_ascii=False)) - 2


def _key(summary: ScorerSummary) -> PieceKey:
    return (summary.name, bool(summary.masked))


@lru_cache(maxsize=64)
def base_size(namespace: str) -> int:
    """The ConfigMap manifest's size with an empty summary list ``[]``."""
    configmap = summaries_configmap(namespace, (), payload="[]")
    return go_size(json.dumps(configmap, separators=(",", ":"), ensure_ascii=False))


def configmap_size(namespace: str, costs: Sequence[int]) -> int:
    """The ConfigMap manifest's size for summaries whose ``embedded_size`` are ``costs``.

    Escaping is per character, so the list's escaped size is the sum of its pieces' plus the
    commas between them.
    """
    return base_size(namespace) + sum(costs) + max(len(costs) - 1, 0)


def _listing(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _over(
    items: Sequence[ScorerSummary], costs: dict[PieceKey, int], total: int, work_limit: int
) -> frozenset[str]:
    """The scorers to leave out so that a ConfigMap of ``total`` bytes fits in ``work_limit``.

    Largest first, then by name, so that the same registry always loses the same summaries.
    """
    gone: set[str] = set()
    left = len(items)
    for victim in sorted(items, key=lambda s: (-costs[_key(s)], s.name)):
        if total <= work_limit:
            break
        gone.add(victim.name)
        left -= 1
        total -= costs[_key(victim)] + (1 if left > 0 else 0)  # and one comma while any remain
    return frozenset(gone)


def fit(
    result: Plan,
    clusters: Sequence[ClusterInput],
    *,
    summary_limit: int = SUMMARY_LIMIT,
    work_limit: int = CONFIG_WORK_LIMIT,
) -> Plan:
    """``result`` with every summary list cut to what one config work can carry (see the module).

    Clusters without an install namespace get no work, so they are not measured.  Returns
    ``result`` itself when nothing is over a limit.
    """
    costs: dict[PieceKey, int] = {}
    for summaries in result.clusters.values():
        for s in summaries:
            if _key(s) not in costs:
                costs[_key(s)] = embedded_size(piece(s))
    largest: dict[str, int] = defaultdict(int)
    for (name, _masked), cost in costs.items():
        largest[name] = max(largest[name], cost)
    too_large = {name: size for name, size in largest.items() if size > summary_limit}

    namespaces = {c.name: c.namespace for c in clusters}
    kept: dict[str, tuple[ScorerSummary, ...]] = {}
    dropped: dict[str, list[str]] = defaultdict(list)
    # most clusters receive the same list: decide each distinct (namespace, list) once
    decided: dict[tuple[str, tuple[PieceKey, ...]], frozenset[str]] = {}
    for cluster in sorted(result.clusters):
        items = [s for s in result.clusters[cluster] if s.name not in too_large]
        namespace = namespaces.get(cluster, "")
        if namespace:
            memo = (namespace, tuple(_key(s) for s in items))
            gone = decided.get(memo)
            if gone is None:
                gone = decided[memo] = _over(
                    items, costs, configmap_size(namespace, [costs[k] for k in memo[1]]), work_limit
                )
            if gone:
                for name in sorted(gone):
                    dropped[name].append(cluster)
                items = [s for s in items if s.name not in gone]
        kept[cluster] = tuple(items)
    if not too_large and not dropped:
        return result

    outcomes = dict(result.scorers)
    problems = list(result.problems)
    for name, size in sorted(too_large.items()):
        message = (
            f"the summary takes {size:,} bytes in the agent's ConfigMap; one DynamicScorer may take at "
            f"most {summary_limit:,} (a cluster's ConfigMap holds every scorer's summary in "
            f"{work_limit:,}): shorten spec.source.params.query(ies) or split the scorer"
        )
        outcomes[name] = ScorerOutcome("SummaryTooLarge", message)
        problems.append(Problem(f"DynamicScorer {name}", message))
    for name, where in sorted(dropped.items()):
        old = outcomes[name]
        excluded = set(where)
        sent = tuple(c for c in old.clusters if c not in excluded)
        size = largest[name]
        message = (
            f"left out on {len(where)} of the {len(old.clusters)} cluster(s) it is meant for "
            f"({_listing(sorted(where))}): its summary takes {size:,} bytes, and with it that "
            f"cluster's ConfigMap would exceed {work_limit:,} bytes, the most one config "
            "ManifestWork carries (the largest summaries are left out first); sent to "
            f"{len(sent)} cluster(s); shrink the queries of this or other scorers, or narrow "
            "spec.clusterSelector"
        )
        outcomes[name] = replace(old, reason="WorkTooLarge", message=message, clusters=sent)
        problems.append(Problem(f"DynamicScorer {name}", message))
    return Plan(kept, dict(sorted(outcomes.items())), tuple(problems))


__all__ = [
    "CONFIGMAP_DATA_LIMIT",
    "CONFIG_WORK_LIMIT",
    "SUMMARY_LIMIT",
    "base_size",
    "configmap_size",
    "embedded_size",
    "fit",
    "go_size",
    "piece",
]
