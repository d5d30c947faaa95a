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
2. Per cluster, when the ConfigMap manifest would exceed ``CONFIG_WORK_LIMIT``, the summaries are
   taken in order of seniority: oldest scorer first by ``metadata.creationTimestamp``, equal times by
   scorer name, and a scorer without a time (the apiserver always sets one) last.  Each summary is
   kept if it still fits beside those kept before it, and left out of that cluster otherwise; its
   scorer says where and why (``WorkTooLarge``).  Ordinary scorers (a few KiB each) therefore
   always get through.

   Why seniority and not size: the rule used to drop the largest summary first.  Then anyone who
   may write a DynamicScorer could add one or more scorers just under ``SUMMARY_LIMIT`` and so evict
   another team's larger, established scorer from every cluster.  Under seniority a scorer's place
   depends only on the scorers older than it, so adding scorers can never take an established
   scorer off a cluster: the newest arrival that does not fit is the one left out.

   Why first fit and not "stop at the first that does not fit": a large newcomer that does not fit
   should not also take down every smaller scorer after it.  A later summary that fits in the room
   left is kept.  It takes only room the older scorers do not use, so this is no less safe.

Sizes are measured as the work measures them: the bytes the summary adds to the ConfigMap's compact
JSON, i.e. after the summary list is escaped into the ``summaries`` string, written as the apiserver
writes it (Go's encoder turns ``<``, ``>`` and ``&`` into six bytes each, and U+2028 and U+2029 too,
so a PromQL comparison costs more there than in Python's JSON).  The result depends only on the
plan (its summaries and creation times), never on the order of the inputs, so the same registry
always trims the same way and nothing flaps.  Seniority needs no history of earlier plans, so it
does not ask who changed last: an established scorer that grows by an edit keeps its place, and the
newer scorers make room.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from dynamic_scoring.addon.distribution.configmap import summaries_configmap
from dynamic_scoring.addon.distribution.plan import ClusterInput, Plan, ScorerOutcome
from dynamic_scoring.addon.errors import FieldProblem
from dynamic_scoring.addon.registry.summary_size import (
    CONFIG_WORK_LIMIT,
    CONFIGMAP_DATA_LIMIT,
    SUMMARY_LIMIT,
    embedded_size,
    go_size,
    piece,
    too_large_message,
)
from dynamic_scoring.contract.wire import ScorerSummary

PieceKey = tuple[str, bool]
"""(scorer name, masked): a summary's identity in the plan (a masked copy encodes differently)."""


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


def seniority(created: str, name: str) -> tuple[bool, str, str]:
    """The sort key of a scorer's claim to a cluster's work: oldest first, equal times by name.

    ``created`` is RFC 3339 as the apiserver writes it (``2026-01-01T00:00:00Z``), so it sorts as
    text.  A scorer without a time ranks after every timed one: an unknown age must not outrank a
    known one (the apiserver always sets the time; only hand-made objects lack it).
    """
    return (not created, created, name)


def _left_out(
    items: Sequence[ScorerSummary],
    costs: dict[PieceKey, int],
    created: dict[str, str],
    base: int,
    work_limit: int,
) -> frozenset[str]:
    """The scorers to leave out so that a ConfigMap of ``base`` bytes plus ``items`` fits ``work_limit``.

    First fit in seniority order: each summary is kept if it fits beside those kept before it.  A
    scorer's fate therefore depends only on the scorers older than it, never on newer ones.
    """
    gone: set[str] = set()
    total, kept = base, 0
    for s in sorted(items, key=lambda s: seniority(created.get(s.name, ""), s.name)):
        grown = total + costs[_key(s)] + (1 if kept else 0)  # and one comma after the first
        if grown <= work_limit:
            total, kept = grown, kept + 1
        else:
            gone.add(s.name)
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
                costs_here = [costs[k] for k in memo[1]]
                if configmap_size(namespace, costs_here) <= work_limit:
                    gone = frozenset()
                else:
                    gone = _left_out(items, costs, result.created, base_size(namespace), work_limit)
                decided[memo] = gone
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
        message = too_large_message(size, summary_limit, work_limit)
        outcomes[name] = ScorerOutcome("SummaryTooLarge", message)
        problems.append(FieldProblem(f"DynamicScorer {name}", message))
    for name, where in sorted(dropped.items()):
        old = outcomes[name]
        excluded = set(where)
        sent = tuple(c for c in old.clusters if c not in excluded)
        size = largest[name]
        message = (
            f"left out on {len(where)} of the {len(old.clusters)} cluster(s) it is meant for "
            f"({_listing(sorted(where))}): its summary takes {size:,} bytes, and beside the "
            "summaries of the older scorers kept there that cluster's ConfigMap would exceed "
            f"{work_limit:,} bytes, the most one config ManifestWork carries (older scorers keep "
            "their place, by metadata.creationTimestamp, so it is the newest to arrive that is "
            f"left out); sent to {len(sent)} cluster(s); shrink the queries of this scorer, or "
            "narrow spec.clusterSelector"
        )
        outcomes[name] = replace(old, reason="WorkTooLarge", message=message, clusters=sent)
        problems.append(FieldProblem(f"DynamicScorer {name}", message))
    return Plan(kept, dict(sorted(outcomes.items())), tuple(problems), result.created)


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
    "seniority",
]
