"""OCM v1.2.1's placement scheduling, recomputed from hub objects, with a reason for every number.

`dynamic-scoring why` must answer "why was my cluster (not) picked" the way the placement controller
decided it, so this module follows the controller's pipeline step by step rather than a simplified
reading of the API docs: the differences matter to a user (an expired score counts 0, not "skip";
`Additive` mode quietly adds Balance and Steady; a `NoSelectIfNew` taint spares clusters already
chosen; ties are broken by name).  The controller's order is:

1. candidates: clusters of the cluster sets bound to the Placement's namespace (and named in
   `spec.clusterSets` when it names any), not being deleted;
2. filters, in order: predicates (a cluster passes if *any* predicate's label, claim and CEL
   selectors all match), then taints and tolerations;
3. prioritizers with a non-zero weight, each scoring every remaining cluster; the total is the
   sum of score x weight;
4. sort by total (descending), then name; keep the first `numberOfClusters`;
5. split the kept clusters into decision groups and PlacementDecision pages.

A misconfigured Placement (a bad selector operator, an unknown prioritizer, an invalid toleration)
stops the controller before any decision, so it writes an empty decision; the model says the same.

Everything here is pure: objects in, an `Explanation` out, the clock passed in.  CEL selectors are
not evaluated (OCM evaluates them with its own CEL environment and score functions); a cluster whose
fate depends on one is reported as undetermined instead of guessed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from dynamic_scoring.agent.ports import CONDITION_TYPE, STABILIZED_REASON
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.timestamps import parse_time
from dynamic_scoring.ocm.placement_policy import (
    BALANCE,
    MAX_SCORE,
    PLACEMENT_LABEL,
    RESOURCE_PRIORITIZERS,
    STEADY,
    Coordinate,
    Misconfigured,
    prioritizer_weights,
    score_value,
)

GROUP_NAME_LABEL = "cluster.open-cluster-management.io/decision-group-name"
GROUP_INDEX_LABEL = "cluster.open-cluster-management.io/decision-group-index"
CLUSTER_SET_LABEL = "cluster.open-cluster-management.io/clusterset"


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PrioritizerScore:
    """One prioritizer's contribution to one cluster's total."""

    name: str  # as OCM names it: Balance, Steady, ResourceAllocatableCPU, AddOn/<resource>/<score>
    weight: int
    score: int
    note: str  # where the score came from, in words

    @property
    def weighted(self) -> int:
        """What this prioritizer adds to the total."""
        return self.score * self.weight


@dataclass
class ClusterVerdict:
    """Everything `why` says about one cluster."""

    name: str
    filtered: str = ""  # why it was filtered out ("" if it was not)
    undetermined: str = ""  # why the model cannot tell (a CEL selector)
    scores: list[PrioritizerScore] = field(default_factory=list)
    total: int | None = None
    rank: int | None = None  # 1-based among the clusters that passed the filters
    expected: bool = False  # the model would put it in the decision
    group: tuple[int, str] | None = None  # (index, name) of its expected decision group
    decided: bool = False  # a PlacementDecision names it now
    decided_group: tuple[int, str] | None = None
    candidate: bool = True  # False: not in any of the Placement's cluster sets
    notes: list[str] = field(default_factory=list)  # tolerations in force, soft taints, ...

    @property
    def agrees(self) -> bool:
        """The model and the real decision agree on this cluster (undetermined counts as agreeing)."""
        if self.undetermined:
            return True
        if self.expected != self.decided:
            return False
        return not self.expected or self.group == self.decided_group

    def verdict(self) -> str:
        """One line: the outcome and its main reason."""
        if self.undetermined:
            state = "decided" if self.decided else "not decided"
            return f"{state}; not checked: {self.undetermined}"
        if not self.candidate:
            reason = "not in any of the Placement's effective cluster sets"
        elif self.filtered:
            reason = f"filtered: {self.filtered}"
        elif self.expected:
            reason = f"selected: rank {self.rank}, total {self.total}"
        else:
            reason = f"not selected: rank {self.rank}, total {self.total}, below the numberOfClusters cut"
        if self.agrees:
            return reason
        if self.expected and self.decided:
            return f"DISAGREES: {reason}, expected in group {self.group}, decided in {self.decided_group}"
        said = "is" if self.decided else "is not"
        return f"DISAGREES: {reason}; but the PlacementDecision {said} naming it"


@dataclass
class Explanation:
    """The model's account of one Placement."""

    namespace: str
    name: str
    mode: str
    cluster_sets: list[str]  # effective: bound and (if named) in spec.clusterSets
    weights: list[tuple[str, int]]  # prioritizer name, weight (non-zero only)
    number_of_clusters: int | None
    clusters: list[ClusterVerdict]
    decision_pages: list[str]  # PlacementDecision names read
    misconfigured: str = ""
    warnings: list[str] = field(default_factory=list)
    controller_says: list[str] = field(default_factory=list)  # the Placement's own status conditions

    @property
    def disagreements(self) -> list[ClusterVerdict]:
        """Clusters where our computation and the real decision differ."""
        return [c for c in self.clusters if not c.agrees]

    def cluster(self, name: str) -> ClusterVerdict | None:
        """One cluster's verdict, if the Placement concerns it."""
        return next((c for c in self.clusters if c.name == name), None)


# ----------------------------------------------------------------------------- time and quantities


def quantity(value: object) -> float | None:
    """A Kubernetes quantity (`4`, `3800m`, `16Gi`) as a float, or None if it is not one."""
    try:
        parsed: Decimal = parse_quantity(value)  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, InvalidOperation):
        return None
    return float(parsed)


def _trunc(value: float) -> int:
    """Go's int64(float64): truncation toward zero."""
    return math.trunc(value)


# ----------------------------------------------------------------------------- selectors


def _requirement_failure(req: Mapping[str, Any], values: Mapping[str, str], what: str) -> str:
    """Why `values` fail one matchExpressions requirement ("" when they satisfy it)."""
    key, op, want = str(req.get("key", "")), str(req.get("operator", "")), list(req.get("values") or [])
    have = values.get(key)
    shown = f"{what} {key}" + (f"={have}" if have is not None else " absent")
    if op == "In":
        return "" if have is not None and have in want else f"{shown}, want In {want}"
    if op == "NotIn":
        return "" if have is None or have not in want else f"{shown}, want NotIn {want}"
    if op == "Exists":
        return "" if have is not None else f"{what} {key} absent, want Exists"
    if op == "DoesNotExist":
        return "" if have is None else f"{shown}, want DoesNotExist"
    raise Misconfigured(f"unknown selector operator {op!r} for key {key!r}")


def _validate_requirement(req: Mapping[str, Any]) -> None:
    """The checks `metav1.LabelSelectorAsSelector` makes before it matches anything."""
    op, values = req.get("operator"), list(req.get("values") or [])
    if op in ("In", "NotIn") and not values:
        raise Misconfigured(f"operator {op} for key {req.get('key')!r} needs at least one value")
    if op in ("Exists", "DoesNotExist") and values:
        raise Misconfigured(f"operator {op} for key {req.get('key')!r} takes no values")
    if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
        raise Misconfigured(f"unknown selector operator {op!r} for key {req.get('key')!r}")


def label_selector_failure(selector: Mapping[str, Any] | None, values: Mapping[str, str], what: str) -> str:
    """Why `values` do not match a LabelSelector ("" when they do; an empty selector matches all)."""
    selector = selector or {}
    for req in selector.get("matchExpressions") or []:
        _validate_requirement(req)
    for key, want in sorted((selector.get("matchLabels") or {}).items()):
        have = values.get(key)
        if have != want:
            return f"{what} {key}" + (f"={have}" if have is not None else " absent") + f", want {want}"
    for req in selector.get("matchExpressions") or []:
        failure = _requirement_failure(req, values, what)
        if failure:
            return failure
    return ""


def cluster_claims(cluster: JSON) -> dict[str, str]:
    """`status.clusterClaims` as a name -> value map (what claim selectors match)."""
    claims = (cluster.get("status") or {}).get("clusterClaims") or []
    return {str(c.get("name", "")): str(c.get("value", "")) for c in claims}


def labels_of(obj: JSON) -> dict[str, str]:
    """An object's labels."""
    return dict((obj.get("metadata") or {}).get("labels") or {})


def name_of(obj: JSON) -> str:
    """An object's name."""
    return str((obj.get("metadata") or {}).get("name", ""))


# ----------------------------------------------------------------------------- candidates


def set_members(cluster_set: JSON, clusters: Iterable[JSON]) -> list[JSON]:
    """The clusters a ManagedClusterSet selects (sdk-go's GetClustersFromClusterSet)."""
    selector = (cluster_set.get("spec") or {}).get("clusterSelector") or {}
    kind = selector.get("selectorType") or "ExclusiveClusterSetLabel"
    set_name = name_of(cluster_set)
    if kind in ("ExclusiveClusterSetLabel", "LegacyClusterSetLabel"):
        return [c for c in clusters if labels_of(c).get(CLUSTER_SET_LABEL) == set_name]
    if kind == "LabelSelector":
        try:
            return [
                c
                for c in clusters
                if not label_selector_failure(selector.get("labelSelector"), labels_of(c), "label")
            ]
        except Misconfigured:
            return []  # the controller cannot list the set's clusters; the set contributes none
    return []


def effective_cluster_sets(
    placement: JSON, bindings: Iterable[JSON], cluster_sets: Iterable[JSON]
) -> list[str]:
    """Bound sets that exist, intersected with `spec.clusterSets` when the Placement names any."""
    existing = {name_of(s) for s in cluster_sets}
    bound = {name_of(b) for b in bindings if name_of(b) in existing}
    wanted = (placement.get("spec") or {}).get("clusterSets") or []
    return sorted(bound & set(wanted)) if wanted else sorted(bound)


# ----------------------------------------------------------------------------- filters


def predicate_failure(predicates: Sequence[JSON], cluster: JSON) -> tuple[str, bool]:
    """Why no predicate matches the cluster ("" when one does), and whether CEL left it open.

    A cluster passes when any one predicate's label selector, claim selector and CEL expressions
    all match it.  When the only predicates that could still match carry CEL expressions, the
    answer is open: `(reason, True)`.
    """
    if not predicates:
        return "", False
    failures: list[str] = []
    open_by_cel = False
    for i, predicate in enumerate(predicates):
        selector = predicate.get("requiredClusterSelector") or {}
        failure = label_selector_failure(selector.get("labelSelector"), labels_of(cluster), "label")
        if not failure:
            claim = {"matchExpressions": (selector.get("claimSelector") or {}).get("matchExpressions")}
            failure = label_selector_failure(claim, cluster_claims(cluster), "claim")
        if not failure and (selector.get("celSelector") or {}).get("celExpressions"):
            open_by_cel = True
            failures.append(f"predicate {i}: CEL expressions not evaluated")
            continue
        if not failure:
            return "", False
        failures.append(f"predicate {i}: {failure}")
    return "; ".join(failures), open_by_cel


def validate_tolerations(tolerations: Sequence[JSON]) -> None:
    """The two checks the TaintToleration filter makes before filtering anything."""
    for t in tolerations:
        if not t.get("key") and t.get("operator") != "Exists":
            raise Misconfigured("TaintToleration: if the key is empty, operator must be Exists")
        if t.get("operator") == "Exists" and t.get("value"):
            raise Misconfigured("TaintToleration: if the operator is Exists, the value should be empty")


def _describe_taint(taint: JSON) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def taint_failure(
    cluster: JSON, tolerations: Sequence[JSON], in_decision: bool, now: dt.datetime
) -> tuple[str, list[str]]:
    """Why the cluster's taints filter it out ("" when tolerated), and notes on what let it pass.

    PreferNoSelect never filters; NoSelectIfNew spares a cluster the Placement already chose; any
    other taint needs a toleration matching its effect (if set), key (if set) and value (operator
    Equal) or any value (Exists), whose `tolerationSeconds`, counted from the taint's `timeAdded`,
    have not run out.
    """
    notes: list[str] = []
    for taint in (cluster.get("spec") or {}).get("taints") or []:
        shown = _describe_taint(taint)
        effect = taint.get("effect")
        if effect == "PreferNoSelect":
            notes.append(f"taint {shown} only prefers not to select: ignored by the filter")
            continue
        if effect == "NoSelectIfNew" and in_decision:
            notes.append(f"taint {shown} spares clusters already decided")
            continue
        tolerated, expired_by = False, ""
        for i, toleration in enumerate(tolerations):
            if toleration.get("effect") and toleration.get("effect") != effect:
                continue
            if toleration.get("key") and toleration.get("key") != taint.get("key"):
                continue
            op = toleration.get("operator") or "Equal"
            if op == "Equal" and (toleration.get("value") or "") != (taint.get("value") or ""):
                continue
            if op not in ("Equal", "Exists"):
                continue
            seconds = toleration.get("tolerationSeconds")
            if seconds is None:
                tolerated = True
                notes.append(f"taint {shown} tolerated by toleration {i}")
                break
            added = parse_time(taint.get("timeAdded")) or dt.datetime(1, 1, 1, tzinfo=dt.UTC)
            until = added + dt.timedelta(seconds=int(seconds))
            if now < until:
                tolerated = True
                notes.append(f"taint {shown} tolerated by toleration {i} until {until:%Y-%m-%dT%H:%M:%SZ}")
                break
            expired_by = (
                f" (toleration {i} ran out at {until:%Y-%m-%dT%H:%M:%SZ}, {int(seconds)}s after it was added)"
            )
        if not tolerated:
            return f"taint {shown} not tolerated{expired_by}", notes
    return "", notes


# ----------------------------------------------------------------------------- prioritizers


def balance_scores(names: Iterable[str], other_decisions: Iterable[JSON]) -> dict[str, tuple[int, str]]:
    """Balance: 100 for a cluster no other Placement chose, down to -100 for the most chosen."""
    count: dict[str, int] = {}
    for pd in other_decisions:
        for d in (pd.get("status") or {}).get("decisions") or []:
            name = str(d.get("clusterName"))
            count[name] = count.get(name, 0) + 1
    most = max(count.values(), default=0)
    out: dict[str, tuple[int, str]] = {}
    for name in names:
        if name not in count:
            out[name] = (MAX_SCORE, "chosen by no other Placement")
            continue
        usage = count[name] / most
        out[name] = (
            2 * _trunc(MAX_SCORE * (0.5 - usage)),
            f"chosen by {count[name]} other decision(s), most is {most}",
        )
    return out


def steady_scores(names: Iterable[str], own_decided: set[str]) -> dict[str, tuple[int, str]]:
    """Steady: 100 for a cluster this Placement already chose, else 0."""
    return {n: (MAX_SCORE, "already decided") if n in own_decided else (0, "not decided now") for n in names}


def resource_scores(clusters: Sequence[JSON], resource: str) -> dict[str, tuple[int, str]]:
    """ResourceAllocatable*: allocatable scaled to [-100, 100] between the feasible clusters' min and max.

    A cluster reporting no allocatable or no capacity for the resource adds nothing (score 0).
    """
    found: dict[str, float] = {}
    for cluster in clusters:
        status = cluster.get("status") or {}
        alloc = quantity((status.get("allocatable") or {}).get(resource))
        cap = quantity((status.get("capacity") or {}).get(resource))
        if alloc is not None and cap is not None:
            found[name_of(cluster)] = alloc
    out: dict[str, tuple[int, str]] = {}
    low, high = min(found.values(), default=0.0), max(found.values(), default=0.0)
    for cluster in clusters:
        name = name_of(cluster)
        if name not in found:
            out[name] = (0, f"no allocatable/capacity {resource} reported")
        elif high == low:
            out[name] = (MAX_SCORE, f"allocatable {resource} {found[name]:g}, same on every cluster")
        else:
            ratio = (found[name] - low) / (high - low)
            score = _trunc((ratio - 0.5) * 2.0 * 100.0)
            out[name] = (score, f"allocatable {resource} {found[name]:g} in [{low:g}, {high:g}]")
    return out


def addon_score(aps: JSON | None, coordinate: Coordinate, now: dt.datetime) -> tuple[int, str]:
    """An AddOn prioritizer's score for one cluster: the item's value, or 0 saying why."""
    value, not_counted = score_value(aps, coordinate, now)
    if aps is None or not_counted is not None:
        return value, not_counted or ""
    status = aps.get("status") or {}
    held = any(
        c.get("type") == CONDITION_TYPE and c.get("status") == "True" and c.get("reason") == STABILIZED_REASON
        for c in status.get("conditions") or []
    )
    return value, f"{coordinate.resource}/{coordinate.score} = {value}" + (
        f", valid until {status.get('validUntil')}"
        if parse_time(status.get("validUntil"))
        else ", no validUntil"
    ) + (
        ", some published values held back by stabilization (the score's condition says which)"
        if held
        else ""
    )


# ----------------------------------------------------------------------------- decision groups


def _group_length(per_group: object, total: int) -> int:
    length = total
    if isinstance(per_group, bool):
        pass
    elif isinstance(per_group, int):
        length = per_group
    elif isinstance(per_group, str) and per_group:
        if not per_group.endswith("%"):
            raise Misconfigured(f"clustersPerDecisionGroup {per_group!r} is not a percentage")
        try:
            length = math.ceil(float(per_group[:-1]) / 100 * total)
        except ValueError as exc:
            raise Misconfigured(f"clustersPerDecisionGroup {per_group!r} is not a percentage") from exc
    return total if length <= 0 or length > total else length


def decision_groups(placement: JSON, chosen: Sequence[JSON]) -> list[tuple[str, list[str]]]:
    """The decision groups the controller makes of the chosen clusters, in index order."""
    strategy = ((placement.get("spec") or {}).get("decisionStrategy") or {}).get("groupStrategy") or {}
    length = _group_length(strategy.get("clustersPerDecisionGroup"), len(chosen))
    left = {name_of(c) for c in chosen}
    groups: list[tuple[str, list[str]]] = []

    def divide(name: str, members: list[str]) -> None:
        members = sorted(members)
        while members:
            groups.append((name, members[:length]))
            members = members[length:]

    for group in strategy.get("decisionGroups") or []:
        selector = group.get("groupClusterSelector") or {}
        matched = []
        for cluster in chosen:
            cname = name_of(cluster)
            if cname not in left:
                continue
            if label_selector_failure(selector.get("labelSelector"), labels_of(cluster), "label"):
                continue
            claim = {"matchExpressions": (selector.get("claimSelector") or {}).get("matchExpressions")}
            if label_selector_failure(claim, cluster_claims(cluster), "claim"):
                continue
            matched.append(cname)
            left.discard(cname)
        divide(str(group.get("groupName", "")), matched)
    divide("", list(left))
    return groups or [("", [])]


# ----------------------------------------------------------------------------- the whole pipeline


@dataclass
class HubState:
    """What the model reads from the hub: the Placement and everything its decision depends on."""

    placement: JSON
    clusters: list[JSON]  # every ManagedCluster
    cluster_sets: list[JSON]  # every ManagedClusterSet
    bindings: list[JSON]  # ManagedClusterSetBindings in the Placement's namespace
    scores: dict[tuple[str, str], JSON]  # (cluster namespace, name) -> AddOnPlacementScore
    decisions: list[JSON]  # every PlacementDecision on the hub (Balance counts other Placements')


def _own(pd: JSON, namespace: str, name: str) -> bool:
    meta = pd.get("metadata") or {}
    return bool(meta.get("namespace") == namespace and labels_of(pd).get(PLACEMENT_LABEL) == name)


def _decided_groups(own: Iterable[JSON]) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for pd in own:
        labels = labels_of(pd)
        try:
            index = int(labels.get(GROUP_INDEX_LABEL, "0"))
        except ValueError:
            index = -1
        for d in (pd.get("status") or {}).get("decisions") or []:
            out[str(d.get("clusterName"))] = (index, labels.get(GROUP_NAME_LABEL, ""))
    return out


def explain(state: HubState, now: dt.datetime) -> Explanation:
    """Recompute the Placement's decision and compare it with its PlacementDecisions."""
    placement = state.placement
    meta, spec = placement.get("metadata") or {}, placement.get("spec") or {}
    namespace, pname = str(meta.get("namespace", "")), str(meta.get("name", ""))
    own = sorted((pd for pd in state.decisions if _own(pd, namespace, pname)), key=name_of)
    others = [pd for pd in state.decisions if not _own(pd, namespace, pname)]
    decided_now = _decided_groups(own)
    sets = effective_cluster_sets(placement, state.bindings, state.cluster_sets)
    members: dict[str, JSON] = {}
    for cluster_set in state.cluster_sets:
        if name_of(cluster_set) in sets:
            for c in set_members(cluster_set, state.clusters):
                if not (c.get("metadata") or {}).get("deletionTimestamp"):
                    members[name_of(c)] = c
    number = spec.get("numberOfClusters")
    policy = spec.get("prioritizerPolicy") or {}
    result = Explanation(
        namespace=namespace,
        name=pname,
        mode=str(policy.get("mode") or "Additive"),
        cluster_sets=sets,
        weights=[],
        number_of_clusters=int(number) if number is not None else None,
        clusters=[],
        decision_pages=[name_of(pd) for pd in own],
        controller_says=[
            f"{c.get('type')}={c.get('status')} ({c.get('reason', '')}): {c.get('message', '')}"
            for c in (placement.get("status") or {}).get("conditions") or []
        ],
    )
    verdicts = {name: ClusterVerdict(name=name) for name in sorted(members)}
    for name in sorted(set(decided_now) - set(members)):  # decided, but no longer a candidate
        verdicts[name] = ClusterVerdict(name=name, candidate=False)
    for name, verdict in verdicts.items():
        verdict.decided = name in decided_now
        verdict.decided_group = decided_now.get(name)
    result.clusters = sorted(verdicts.values(), key=lambda v: v.name)
    if (meta.get("annotations") or {}).get(
        "cluster.open-cluster-management.io/experimental-scheduling-disable"
    ) == "true":
        result.warnings.append(
            "scheduling is disabled by annotation: the controller leaves the PlacementDecisions as they "
            "are, so they may no longer match what it would compute"
        )
    try:
        _schedule(state, spec, members, verdicts, set(decided_now), others, result, now)
    except Misconfigured as exc:
        result.misconfigured = str(exc)
        for v in result.clusters:
            v.expected, v.group = False, None
    return result


def _schedule(
    state: HubState,
    spec: JSON,
    members: dict[str, JSON],
    verdicts: dict[str, ClusterVerdict],
    own_decided: set[str],
    other_decisions: list[JSON],
    result: Explanation,
    now: dt.datetime,
) -> None:
    predicates = spec.get("predicates") or []
    tolerations = spec.get("tolerations") or []
    if members:  # OCM validates selectors only when there is a cluster to match
        for predicate in predicates:
            selector = predicate.get("requiredClusterSelector") or {}
            claims = (selector.get("claimSelector") or {}).get("matchExpressions")
            label_selector_failure(selector.get("labelSelector"), {}, "label")
            label_selector_failure({"matchExpressions": claims}, {}, "claim")
    feasible: list[JSON] = []
    undetermined = False
    for name in sorted(members):
        failure, open_by_cel = predicate_failure(predicates, members[name])
        if open_by_cel:
            # Take the real decision as the CEL verdict, so the others' ranks stay right.
            verdicts[name].undetermined = "a CEL selector decides it; `why` does not evaluate CEL"
            undetermined = True
            if name not in own_decided:
                verdicts[name].filtered = "assumed filtered by its CEL selector (not decided)"
        elif failure:
            verdicts[name].filtered = f"no predicate matches ({failure})"
    if any(not v.filtered for n, v in verdicts.items() if n in members):
        validate_tolerations(tolerations)
    for name in sorted(members):
        verdict = verdicts[name]
        if verdict.filtered:
            continue
        failure, notes = taint_failure(members[name], tolerations, name in own_decided, now)
        verdict.notes.extend(notes)
        if failure:
            verdict.filtered = failure
        else:
            feasible.append(members[name])
    weights = prioritizer_weights(state.placement)
    result.weights = [(c.name, w) for c, w in weights]
    names = [name_of(c) for c in feasible]
    totals = dict.fromkeys(names, 0)
    for coordinate, weight in weights:
        if coordinate.builtin == BALANCE:
            table = balance_scores(names, other_decisions)
        elif coordinate.builtin == STEADY:
            table = steady_scores(names, own_decided)
        elif coordinate.builtin in RESOURCE_PRIORITIZERS:
            table = resource_scores(feasible, RESOURCE_PRIORITIZERS[coordinate.builtin])
        else:
            table = {
                n: addon_score(state.scores.get((n, coordinate.resource)), coordinate, now) for n in names
            }
        for n in names:
            score, note = table[n]
            verdicts[n].scores.append(PrioritizerScore(coordinate.name, weight, score, note))
            totals[n] += score * weight
    ranked = sorted(names, key=lambda n: (-totals[n], n))
    keep = len(ranked) if result.number_of_clusters is None else max(0, result.number_of_clusters)
    chosen = ranked[:keep]
    for rank, n in enumerate(ranked, start=1):
        verdicts[n].total, verdicts[n].rank, verdicts[n].expected = totals[n], rank, n in chosen
    for index, (group, members_of_group) in enumerate(
        decision_groups(state.placement, [members[n] for n in chosen])
    ):
        for n in members_of_group:
            verdicts[n].group = (index, group)
    if undetermined:
        result.warnings.append(
            "CEL selectors are not evaluated: the clusters they decide are taken as the "
            "PlacementDecision has them and shown as not checked"
        )
