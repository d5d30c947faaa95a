"""`dynamic-scoring why PLACEMENT`: why each cluster is, or is not, in a Placement's decision.

The command only reads the hub and prints; the computation is `dynamic_scoring.ctl.placement_model`.  It reads
exactly what OCM's placement controller reads: the Placement, the ManagedClusterSetBindings of its
namespace, the ManagedClusterSets and ManagedClusters, the AddOnPlacementScores its AddOn
prioritizers name, and the PlacementDecisions (every page of this Placement; every Placement's
when Balance counts, since Balance weighs the other Placements' choices).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from dynamic_scoring.ctl import margin
from dynamic_scoring.ctl import placement_model as pm
from dynamic_scoring.ctl.hub import (
    MANAGED_CLUSTER_SET_BINDINGS,
    MANAGED_CLUSTER_SETS,
    hub_api,
    kubeconfig_option,
    list_all,
    unreachable,
)
from dynamic_scoring.ctl.output import ExitCode, echo_lines, emit_json, fail, output_option
from dynamic_scoring.kube.api import KubeAPI, KubeError, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import (
    ADDON_PLACEMENT_SCORES,
    DYNAMIC_SCORERS,
    MANAGED_CLUSTERS,
    PLACEMENT_DECISIONS,
    PLACEMENTS,
)
from dynamic_scoring.ocm import placement_policy as pp


def load_placement(api: KubeAPI, namespace: str, name: str) -> JSON:
    """The Placement; raises `NotFound` when it does not exist, `KubeError` when the hub cannot say."""
    return api.request("GET", PLACEMENTS.path(namespace, name))


def read_state(api: KubeAPI, placement: JSON) -> pm.HubState:
    """Everything the placement controller would read for this Placement, from the hub now.

    Raises `KubeError`, so a live view (the demo's) can show the failure and carry on; the
    command turns it into exit 3.
    """
    meta = placement.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    try:
        weights = pp.prioritizer_weights(placement)
    except pp.Misconfigured:
        weights = []
    resources = sorted({c.resource for c, _ in weights if not c.builtin})
    scores: dict[tuple[str, str], JSON] = {}
    for resource in resources:
        for aps in list_all(api, ADDON_PLACEMENT_SCORES, fieldSelector=f"metadata.name={resource}"):
            aps_meta = aps.get("metadata") or {}
            scores[(str(aps_meta.get("namespace")), str(aps_meta.get("name")))] = aps
    if any(c.builtin == pp.BALANCE for c, _ in weights):
        decisions = list_all(api, PLACEMENT_DECISIONS)
    else:
        decisions = list_all(
            api, PLACEMENT_DECISIONS, namespace, labelSelector=f"{pp.PLACEMENT_LABEL}={name}"
        )
    return pm.HubState(
        placement=placement,
        clusters=list_all(api, MANAGED_CLUSTERS),
        cluster_sets=list_all(api, MANAGED_CLUSTER_SETS),
        bindings=list_all(api, MANAGED_CLUSTER_SET_BINDINGS, namespace),
        scores=scores,
        decisions=decisions,
    )


def read_margins(api: KubeAPI, placement: JSON) -> list[margin.Margin]:
    """The Placement's incumbent margins, each with the DynamicScorers publishing its score.

    Reading the scorers is an extra the decision does not depend on, so a hub that refuses it (no
    ``list dynamicscorers``, or the CRD not installed) leaves the units unknown and says why, instead
    of failing the command.
    """
    found = margin.margins(placement)
    if not found:
        return []
    try:
        scorers = list_all(api, DYNAMIC_SCORERS)
    except KubeError as exc:
        return margin.unreadable(found, f"could not list DynamicScorers ({exc})")
    return margin.with_scales(found, margin.scales(scorers))


# ----------------------------------------------------------------------------- rendering


def _result(v: pm.ClusterVerdict) -> str:
    if not v.candidate:
        return "not-candidate"
    if v.filtered and not v.undetermined:
        return "filtered"
    if v.undetermined:
        return "unchecked"
    return "selected" if v.expected else "cut"


def _header(e: pm.Explanation, found: Sequence[margin.Margin] = ()) -> list[str]:
    number = "all" if e.number_of_clusters is None else str(e.number_of_clusters)
    weights = ", ".join(f"{n} ({w})" for n, w in e.weights) or "none"
    pages = ", ".join(e.decision_pages) or "none"
    lines = [
        f"Placement {e.namespace}/{e.name}   mode {e.mode}   numberOfClusters {number}",
        f"  cluster sets: {', '.join(e.cluster_sets) or 'none bound'}",
        f"  prioritizers (weight): {weights}",
        f"  PlacementDecisions read: {pages}",
    ]
    lines += [f"  {m.describe()}" for m in found]
    lines += [f"  controller: {c}" for c in e.controller_says]
    if e.misconfigured:
        lines.append(f"  MISCONFIGURED: {e.misconfigured} (the controller decides no cluster)")
    lines += [f"  note: {w}" for w in e.warnings]
    return lines


def render_table(e: pm.Explanation, found: Sequence[margin.Margin] = ()) -> str:
    """All clusters: a table, then one verdict line per cluster, then the overall verdict.

    ``found`` are the incumbent margins the header names.
    """
    names = [n for n, _ in e.weights]
    head = ["CLUSTER", "RESULT", "RANK", "TOTAL", *names, "DECIDED"]
    rows = [head]
    for v in e.clusters:
        by_name = {s.name: s for s in v.scores}
        cells = [f"{by_name[n].score}*{by_name[n].weight}" if n in by_name else "-" for n in names]
        rows.append(
            [
                v.name,
                _result(v),
                "-" if v.rank is None else str(v.rank),
                "-" if v.total is None else str(v.total),
                *cells,
                "yes" if v.decided else "no",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    table = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    verdicts = [f"{v.name}: {v.verdict()}" for v in e.clusters]
    return "\n".join([*_header(e, found), "", *table, "", *verdicts, "", overall(e)])


def render_cluster(e: pm.Explanation, v: pm.ClusterVerdict, found: Sequence[margin.Margin] = ()) -> str:
    """One cluster in full: filters, every prioritizer with its source, total, rank and decision."""
    lines = [*_header(e, found), "", f"cluster {v.name}"]
    if not v.candidate:
        lines.append("  candidate: no (not in the Placement's effective cluster sets)")
    else:
        lines.append("  candidate: yes")
        lines.append(f"  filters: {'filtered out: ' + v.filtered if v.filtered else 'passed'}")
    lines += [f"  {n}" for n in v.notes]
    for s in v.scores:
        lines.append(f"  {s.name}: {s.score} x {s.weight} = {s.weighted}   ({s.note})")
    if v.total is not None:
        lines.append(f"  total {v.total}, rank {v.rank}")
    if v.group is not None:
        lines.append(f"  expected in decision group {v.group[0]} {v.group[1]!r}")
    decided = f"yes (group {v.decided_group[0]} {v.decided_group[1]!r})" if v.decided_group else "no"
    lines.append(f"  in the PlacementDecisions: {decided}")
    lines.append(f"  verdict: {v.verdict()}")
    return "\n".join(lines)


def overall(e: pm.Explanation) -> str:
    """The last line: agreement, or which clusters disagree."""
    wrong = e.disagreements
    if wrong:
        return "verdict: DISAGREES with the PlacementDecisions on " + ", ".join(v.name for v in wrong)
    decided = sum(v.decided for v in e.clusters)
    return f"verdict: agrees with the PlacementDecisions ({decided} cluster(s) decided)"


def to_json(
    e: pm.Explanation, only: pm.ClusterVerdict | None = None, found: Sequence[margin.Margin] = ()
) -> dict[str, Any]:
    """The explanation as one JSON document (``found``: the incumbent margins)."""
    clusters = [only] if only is not None else e.clusters
    return {
        "placement": {"namespace": e.namespace, "name": e.name},
        "mode": e.mode,
        "numberOfClusters": e.number_of_clusters,
        "clusterSets": e.cluster_sets,
        "prioritizers": [{"name": n, "weight": w} for n, w in e.weights],
        "margins": [
            {
                "resourceName": m.resource,
                "scoreName": m.score,
                "points": m.points,
                "balanceSwing": m.balance_swing or None,
                "scorers": [
                    {
                        "scorer": s.scorer,
                        "units": m.points * s.units_per_point,
                        "normalized": s.band is not None,
                    }
                    for s in m.scales
                ],
                "unreadable": m.unreadable or None,
            }
            for m in found
        ],
        "decisionPages": e.decision_pages,
        "misconfigured": e.misconfigured or None,
        "controllerConditions": e.controller_says,
        "warnings": e.warnings,
        "agrees": not e.disagreements,
        "disagreements": [v.name for v in e.disagreements],
        "clusters": [
            {
                "name": v.name,
                "candidate": v.candidate,
                "filtered": v.filtered or None,
                "undetermined": v.undetermined or None,
                "notes": v.notes,
                "scores": [
                    {
                        "name": s.name,
                        "weight": s.weight,
                        "score": s.score,
                        "weighted": s.weighted,
                        "note": s.note,
                    }
                    for s in v.scores
                ],
                "total": v.total,
                "rank": v.rank,
                "expected": v.expected,
                "expectedGroup": list(v.group) if v.group else None,
                "decided": v.decided,
                "decidedGroup": list(v.decided_group) if v.decided_group else None,
                "agrees": v.agrees,
                "verdict": v.verdict(),
            }
            for v in clusters
        ],
    }


@click.command("why")
@click.argument("placement")
@click.option("-n", "--namespace", default="default", show_default=True, help="The Placement's namespace.")
@click.option("--cluster", default=None, help="Explain this one cluster in full.")
@kubeconfig_option
@output_option
def why(placement: str, namespace: str, cluster: str | None, kubeconfig: Path | None, output: str) -> None:
    """Explain a Placement's decision as OCM's placement controller computes it.

    For every cluster of the Placement's cluster sets: the predicate or taint that filtered it, or
    its score per prioritizer (AddOnPlacementScore values, 0 when missing or expired), its total
    and rank, and whether the PlacementDecisions name it.  Exit 1 when our computation disagrees
    with the decision (or the Placement is misconfigured), 3 when the hub cannot be read.
    """
    api = hub_api(kubeconfig)
    try:
        obj = load_placement(api, namespace, placement)
    except NotFound:
        fail(
            f"Placement {namespace}/{placement} not found",
            hint=f"kubectl get placements -n {namespace}",
            code=ExitCode.USAGE,
        )
    except KubeError as exc:
        unreachable(exc, f"read Placement {namespace}/{placement}")
    try:
        state = read_state(api, obj)
    except KubeError as exc:
        unreachable(exc, f"read what Placement {namespace}/{placement} depends on")
    explanation = pm.explain(state, dt.datetime.now(dt.UTC))
    found = read_margins(api, obj)
    only = None
    if cluster is not None:
        only = explanation.cluster(cluster)
        if only is None:
            known = ", ".join(v.name for v in explanation.clusters) or "none"
            fail(
                f"cluster {cluster} is neither a candidate of {namespace}/{placement} nor decided by it",
                hint=f"its candidates: {known}",
                code=ExitCode.USAGE,
            )
    if output == "json":
        emit_json(to_json(explanation, only, found))
    elif only is not None:
        echo_lines(render_cluster(explanation, only, found))
    else:
        echo_lines(render_table(explanation, found))
    wrong = explanation.disagreements if only is None else [v for v in [only] if not v.agrees]
    if wrong or explanation.misconfigured:
        raise SystemExit(int(ExitCode.FINDINGS))
