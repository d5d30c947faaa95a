"""How an OCM Placement weighs AddOnPlacementScores: its prioritizers, their weights, and one score's value.

Two readers need exactly the placement controller's reading of a Placement's prioritizer policy:
`dynamic-scoring why` (the operator CLI, which recomputes a whole decision) and the hub's ordered
MultiKueueConfig controller (which ranks the clusters a Placement decided by the same weighted
scores).  One definition keeps them from drifting apart; everything here is pure.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.timestamps import parse_time

PLACEMENT_LABEL = "cluster.open-cluster-management.io/placement"
"""The label OCM puts on a PlacementDecision: the name of its Placement (same namespace)."""
MAX_SCORE = 100

BALANCE, STEADY = "Balance", "Steady"
RESOURCE_PRIORITIZERS = {"ResourceAllocatableCPU": "cpu", "ResourceAllocatableMemory": "memory"}
# OCM's defaults in Additive mode (and when mode is empty); Exact mode starts from nothing.
DEFAULT_WEIGHTS = ((BALANCE, 1), (STEADY, 1))


class Misconfigured(Exception):  # noqa: N818 - the controller's own name for this status
    """The Placement cannot be scheduled as written; the controller decides nothing."""


@dataclass(frozen=True)
class Coordinate:
    """One prioritizer of the Placement: a built-in name, or an AddOn resource/score pair."""

    builtin: str = ""
    resource: str = ""
    score: str = ""

    @property
    def name(self) -> str:
        """OCM's name for it (the names in the controller's ScoreUpdate Event)."""
        return self.builtin or f"AddOn/{self.resource}/{self.score}"


def prioritizer_weights(placement: JSON) -> list[tuple[Coordinate, int]]:
    """The prioritizers that run and their weights, in OCM's merge semantics.

    `Exact` starts from nothing, `Additive` (or no mode) from Balance 1 and Steady 1; each
    configuration then sets its coordinate's weight.  Built-in coordinates are one map key, so the
    last configuration of a name wins; AddOn coordinates are keyed by pointer in OCM, so two
    configurations naming the same score both count.  Weight 0 disables a prioritizer.
    """
    policy = (placement.get("spec") or {}).get("prioritizerPolicy") or {}
    mode = policy.get("mode") or "Additive"
    if mode not in ("Additive", "Exact"):
        raise Misconfigured(f"incorrect prioritizer policy mode: {mode}")
    builtins: dict[str, int] = dict(DEFAULT_WEIGHTS) if mode == "Additive" else {}
    addons: list[tuple[Coordinate, int]] = []
    for i, config in enumerate(policy.get("configurations") or []):
        coord = config.get("scoreCoordinate")
        if not coord:
            raise Misconfigured(f"configurations[{i}]: scoreCoordinate field is required")
        raw_weight = config.get("weight")
        weight = 1 if raw_weight is None else int(raw_weight)  # the CRD defaults an omitted weight to 1
        if (coord.get("type") or "BuiltIn") == "BuiltIn":
            name = str(coord.get("builtIn", ""))
            if name not in (BALANCE, STEADY, *RESOURCE_PRIORITIZERS):
                raise Misconfigured(f"incorrect builtin prioritizer: {name}")
            builtins[name] = weight
        else:
            addon = coord.get("addOn")
            if not addon:
                raise Misconfigured(f"configurations[{i}]: addOn should not be empty")
            coordinate = Coordinate(
                resource=str(addon.get("resourceName", "")), score=str(addon.get("scoreName", ""))
            )
            addons.append((coordinate, weight))
    weights = [(Coordinate(builtin=name), w) for name, w in builtins.items()] + addons
    return [(c, w) for c, w in weights if w != 0]


def score_value(aps: JSON | None, coordinate: Coordinate, now: dt.datetime) -> tuple[int, str | None]:
    """What an AddOn prioritizer counts for one cluster: `(value, None)`, or `(0, why it counts 0)`.

    As the placement controller reads it: a missing object, an expired `validUntil` and a missing
    score item all count 0 rather than excluding the cluster; the last item of a name wins.
    """
    if aps is None:
        return 0, f"no AddOnPlacementScore {coordinate.resource}: counts 0"
    status = aps.get("status") or {}
    until = parse_time(status.get("validUntil"))
    if until is not None and now > until:
        return 0, f"expired at {status.get('validUntil')}: counts 0"
    value: int | None = None
    for item in status.get("scores") or []:
        if item.get("name") == coordinate.score:
            value = int(item.get("value", 0))
    if value is None:
        return 0, f"no score item {coordinate.score} in {coordinate.resource}: counts 0"
    return value, None


__all__ = [
    "BALANCE",
    "DEFAULT_WEIGHTS",
    "MAX_SCORE",
    "PLACEMENT_LABEL",
    "RESOURCE_PRIORITIZERS",
    "STEADY",
    "Coordinate",
    "Misconfigured",
    "prioritizer_weights",
    "score_value",
]
