"""The ordered MultiKueueConfig of a Placement: its name, its cluster order, and the object itself.

Kueue's incremental MultiKueue dispatcher (Kueue v0.19 and newer) nominates worker clusters in the
order of `MultiKueueConfig.spec.clusters`.  OCM lists a Placement's decided clusters by name, so the
scores that chose them never reach that order.  A Placement that opts in (label `ORDER_LABEL` with
value `ORDER_BY_SCORE`) gets a MultiKueueConfig of its own, written by the hub, listing every
cluster the Placement decided, best-scored first.

Why these rules:
* **A listed cluster stays listed while it is decided.**  Kueue evicts a workload whose worker
  leaves the list ("Admitting remote no longer exists"), so a change of rank only reorders; only
  the Placement dropping a cluster removes it.
* **Past Kueue's 20, the limit picks who enters, never who leaves** (`choose`).  A listed cluster
  keeps its place while the Placement decides it, whatever the scores do: otherwise a cluster's
  admin could raise its own score and have Kueue evict what another decided cluster runs.  A
  freed place goes to the best-scored unlisted cluster.  The listed ones are still ordered by
  score, because reordering evicts nothing: Kueue keys a workload's remotes by cluster name, and
  its incremental dispatcher only appends to the clusters it already nominated.
* **The order is the Placement's own AddOn prioritizers**, weighted as the placement controller
  weighs them (`dynamic_scoring.ocm.placement_policy`): an expired or missing score counts 0.  The
  built-in prioritizers do not take part: `Steady` gives every decided cluster the same 100, and
  `Balance` and `ResourceAllocatable*` rank by something other than the scores.  Ties go by name.
* **Placements of one namespace only, the config named after the Placement.**  The namespace is
  the hub admin's (`--multikueue-namespace`, `kueue-system` by default, where kueue-addon reads its
  Placements too): whoever may write Placements there already steers MultiKueue, and nobody
  elsewhere can make the hub write a MultiKueueConfig.  The name is the Placement's, never chosen
  in a label or annotation, so it cannot be aimed at a config another check names.  It must be a
  DNS label, because that is what an AdmissionCheck's `parameters.name` accepts.

Everything here is pure: objects in, a ranking and a desired object out.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from dynamic_scoring.addon.constants import ADDON_NAME, MANAGED_BY_LABEL
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm.placement_policy import PLACEMENT_LABEL, Coordinate, prioritizer_weights, score_value

ORDER_LABEL: Final = "dynamic-scoring.open-cluster-management.io/multikueue-order"
"""On a Placement: `ORDER_BY_SCORE` asks for its ordered MultiKueueConfig."""
ORDER_BY_SCORE: Final = "score"
PLACEMENT_ANNOTATION: Final = "dynamic-scoring.open-cluster-management.io/placement"
"""On a MultiKueueConfig we wrote: `<namespace>/<name>` of its Placement."""
MANAGED_BY: Final = f"{ADDON_NAME}-addon-manager"
MAX_CLUSTERS: Final = 20
"""Kueue's limit on `MultiKueueConfig.spec.clusters` (the CRD's maxItems)."""
DEFAULT_NAMESPACE: Final = "kueue-system"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


def placement_selector() -> str:
    """The label selector of the Placements that opted in."""
    return f"{ORDER_LABEL}={ORDER_BY_SCORE}"


def config_name(placement_name: str) -> str | None:
    """The MultiKueueConfig name of a Placement: its own, or None when an AdmissionCheck could not name it."""
    return placement_name if _DNS_LABEL.match(placement_name) else None


def placement_of(config: JSON) -> str | None:
    """The `namespace/name` of the Placement a MultiKueueConfig was written for, if we wrote it."""
    meta = config.get("metadata") or {}
    if (meta.get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY:
        return None
    value = (meta.get("annotations") or {}).get(PLACEMENT_ANNOTATION)
    return str(value) if value else None


def decided_clusters(decisions: Iterable[JSON], namespace: str, name: str) -> list[str]:
    """The clusters in every PlacementDecision of Placement `namespace/name`, by name."""
    out: set[str] = set()
    for pd in decisions:
        meta = pd.get("metadata") or {}
        if meta.get("namespace") != namespace or (meta.get("labels") or {}).get(PLACEMENT_LABEL) != name:
            continue
        for decision in (pd.get("status") or {}).get("decisions") or []:
            cluster = decision.get("clusterName")
            if cluster:
                out.add(str(cluster))
    return sorted(out)


@dataclass(frozen=True)
class Ranked:
    """One decided cluster's place: its weighted total and what made it."""

    cluster: str
    total: int
    parts: tuple[str, ...]

    def describe(self) -> str:
        """`cluster (total)`, as Events and logs show it."""
        return f"{self.cluster} ({self.total})"


ScoreLookup = Callable[[str, str], JSON | None]
"""(cluster, AddOnPlacementScore name) -> the object, or None."""


def rank(placement: JSON, clusters: Iterable[str], lookup: ScoreLookup, now: dt.datetime) -> list[Ranked]:
    """The clusters, best first: by the Placement's weighted AddOn scores, then by name.

    Raises `placement_policy.Misconfigured` for a prioritizer policy the placement controller
    refuses too (it then decides nothing, so nothing is lost by not ordering).
    """
    weights: list[tuple[Coordinate, int]] = [
        (c, w) for c, w in prioritizer_weights(placement) if not c.builtin
    ]
    ranked = []
    for cluster in clusters:
        total, parts = 0, []
        for coordinate, weight in weights:
            value, why = score_value(lookup(cluster, coordinate.resource), coordinate, now)
            total += value * weight
            parts.append(f"{coordinate.name} x{weight} = {why or value}")
        ranked.append(Ranked(cluster, total, tuple(parts)))
    return sorted(ranked, key=lambda r: (-r.total, r.cluster))


def choose(
    ranked: Sequence[Ranked], now_listed: Sequence[str], limit: int = MAX_CLUSTERS
) -> tuple[list[Ranked], list[Ranked]]:
    """(the clusters to list, those left out), each best first, from `rank`'s order.

    `now_listed` is the config's current `spec.clusters`.  Those of them still in `ranked` (still
    decided) stay, whatever their score: leaving the list would evict their work, so a score
    change must not push them off.  Only the places left go to the others, best first.  Under
    the limit that is everyone, in score order.  Should the listed still-decided ones ever be
    more than `limit` (only if the limit shrinks: Kueue refuses a longer list), their best stay.
    """
    listed_now = set(now_listed)
    keep = [r for r in ranked if r.cluster in listed_now][:limit]
    enter = [r for r in ranked if r.cluster not in listed_now][: limit - len(keep)]
    chosen = {r.cluster for r in keep} | {r.cluster for r in enter}
    return [r for r in ranked if r.cluster in chosen], [r for r in ranked if r.cluster not in chosen]


def desired_config(name: str, placement_key: str, clusters: list[str]) -> JSON:
    """The MultiKueueConfig `name` listing `clusters` in order, marked as ours for `placement_key`."""
    return {
        "metadata": {
            "name": name,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "annotations": {PLACEMENT_ANNOTATION: placement_key},
        },
        "spec": {"clusters": clusters},
    }


def listed(config: JSON | None) -> list[str]:
    """`spec.clusters` of a MultiKueueConfig, in order ([] for none)."""
    if config is None:
        return []
    return [str(c) for c in (config.get("spec") or {}).get("clusters") or []]


def order_message(ranked: list[Ranked], before: list[str], dropped: Mapping[str, int]) -> str:
    """The Event text of a new order: each cluster with its total, and the order it replaces."""
    text = "order " + ", ".join(r.describe() for r in ranked)
    if before:
        text += "; was " + ", ".join(before)
    if dropped:
        text += "; not listed (Kueue allows 20): " + ", ".join(f"{c} ({t})" for c, t in dropped.items())
    return text


__all__ = [
    "DEFAULT_NAMESPACE",
    "MANAGED_BY",
    "MAX_CLUSTERS",
    "ORDER_BY_SCORE",
    "ORDER_LABEL",
    "PLACEMENT_ANNOTATION",
    "Ranked",
    "ScoreLookup",
    "choose",
    "config_name",
    "decided_clusters",
    "desired_config",
    "listed",
    "order_message",
    "placement_of",
    "placement_selector",
    "rank",
]
