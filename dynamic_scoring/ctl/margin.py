"""The incumbent margin of a Placement, in its AddOn scores' points and in their scorers' own units.

Why.  ``Steady`` beside an AddOn score keeps a chosen cluster until a challenger leads it by more than
``100 · wSteady / wAddOn`` points of that score.  Points are not what an operator reasons in: a
scorer answers in its own units (percent of free CPU, watts, dollars an hour), and the DynamicScorer's
``scoreNormalization`` stretches those onto the published scale.  The placement-quality benchmark found
the margin that helps is about 3 points of load, and the same 10-point margin means 10 load points on a
plain headroom score but 3 on one normalized from 20..80 onto -100..100.  So ``why`` names the margin in
both: points of the score, and what they are in the scorer's units through the normalization of the
DynamicScorer that publishes it.

The arithmetic.  A challenger with score ``c`` beats an incumbent with ``i`` when
``wa · c > wa · i + 100 · ws`` (``Steady`` gives the incumbent 100), that is when ``c - i > 100 · ws / wa``.
With several AddOn scores each margin is the one that score alone would have to cover.  A linear
normalization from ``[min, max]`` onto ``[targetMin, targetMax]`` makes one point worth
``|max - min| / |targetMax - targetMin|`` of the scorer's units, inside the band (outside it the score
is clamped and differences vanish).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from dynamic_scoring.contract.wire import ScoreNormalization
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm import placement_policy as pp
from dynamic_scoring.ocm.naming import aps_name

STEADY_POINTS = 100
"""What ``Steady`` gives each cluster the Placement has already chosen."""


@dataclass(frozen=True)
class Scale:
    """A DynamicScorer that publishes a score, and the band its ``scoreNormalization`` maps (None: none)."""

    scorer: str  # namespace/name
    band: tuple[float, float, float, float] | None  # min, max, targetMin, targetMax

    @property
    def units_per_point(self) -> float:
        """The scorer's units one published point stands for (1 without a normalization)."""
        return units_per_point(self.band)


Band = tuple[float, float, float, float]
"""A ``scoreNormalization`` as (min, max, targetMin, targetMax)."""


def band_of(spec: ScoreNormalization) -> Band:
    """The wire model's normalization as a :data:`Band`."""
    return (spec.min, spec.max, spec.target_min, spec.target_max)


def units_per_point(band: Band | None) -> float:
    """The scorer's units one published point stands for under ``band`` (1 without one)."""
    if band is None:
        return 1.0
    low, high, target_low, target_high = band
    return abs(high - low) / abs(target_high - target_low)


@dataclass(frozen=True)
class Margin:
    """The lead a challenger needs on one AddOn score, with the scorers that publish it."""

    resource: str
    score: str
    addon_weight: int
    steady_weight: int
    scales: tuple[Scale, ...] = ()
    unreadable: str = ""
    """Why the scorers could not be read (the units are then unknown); empty when they were."""
    balance_weight: int = 0
    """``Balance``'s weight: it counts other Placements' decisions, so it widens or narrows the lead."""

    @property
    def balance_swing(self) -> float:
        """How far ``Balance`` can move the lead, either way, in points of the score.

        ``200 · wBalance / wAddOn``: its scores run from 100 for a cluster no other Placement chose to
        -100 for the most chosen.
        """
        return 2 * STEADY_POINTS * self.balance_weight / self.addon_weight

    @property
    def points(self) -> float:
        """The lead in points of the published score: ``100 · wSteady / wAddOn``."""
        return STEADY_POINTS * self.steady_weight / self.addon_weight

    def describe(self) -> str:
        """One line: the lead in points and in each publishing scorer's units."""
        head = (
            f"incumbent margin: a challenger must lead by more than {self.points:g} points of"
            f" {self.resource}/{self.score} (Steady {self.steady_weight}, AddOn {self.addon_weight})"
        )
        if self.balance_weight > 0:
            head += (
                f", widened or narrowed by up to {self.balance_swing:g} as other Placements' decisions"
                f" move Balance ({self.balance_weight})"
            )
        if self.unreadable:
            return f"{head}; its scorer's units unknown: {self.unreadable}"
        if not self.scales:
            return f"{head}; no DynamicScorer on the hub publishes {self.resource}, so its units are unknown"
        return head + "; " + "; ".join(_in_units(self.points, s) for s in self.scales)


def _in_units(points: float, scale: Scale) -> str:
    if scale.band is None:
        return f"= {points:g} in the units of {scale.scorer} (no scoreNormalization)"
    low, high, target_low, target_high = scale.band
    return (
        f"= {points * scale.units_per_point:.3g} in the units of {scale.scorer}"
        f" (scoreNormalization {low:g}..{high:g} onto {target_low:g}..{target_high:g})"
    )


def margins(placement: JSON) -> list[Margin]:
    """Each AddOn score's margin, when ``Steady`` runs with a positive weight (none otherwise).

    An AddOn score with a weight of 0 or below gets none: 0 does not run, and a negative weight ranks
    lower scores higher, so "lead" would mean the opposite.
    """
    try:
        weights = pp.prioritizer_weights(placement)
    except pp.Misconfigured:
        return []
    steady = sum(w for c, w in weights if c.builtin == pp.STEADY)
    balance = max(0, sum(w for c, w in weights if c.builtin == pp.BALANCE))
    if steady <= 0:
        return []
    return [
        Margin(c.resource, c.score, w, steady, balance_weight=balance)
        for c, w in weights
        if not c.builtin and w > 0
    ]


def scales(scorers: Sequence[JSON]) -> dict[str, tuple[Scale, ...]]:
    """AddOnPlacementScore name -> the DynamicScorers publishing it, by their status' ``scoreName``.

    A scorer the hub has not resolved yet (no ``status.scoreName``) publishes nothing and is left out.
    """
    out: dict[str, list[Scale]] = {}
    for obj in scorers:
        meta, spec, status = (obj.get(k) or {} for k in ("metadata", "spec", "status"))
        name = status.get("scoreName")
        if not name or (spec.get("scoreDestination") or "AddOnPlacementScore") != "AddOnPlacementScore":
            continue
        out.setdefault(aps_name(str(name)), []).append(
            Scale(
                f"{meta.get('namespace', '')}/{meta.get('name', '')}", _band(spec.get("scoreNormalization"))
            )
        )
    return {k: tuple(sorted(v, key=lambda s: s.scorer)) for k, v in out.items()}


def _band(raw: object) -> Band | None:
    """A ``scoreNormalization`` read by the wire model the agent uses (its defaults and checks).

    None when absent or unusable: an unusable one also keeps the scorer from resolving.
    """
    if not isinstance(raw, Mapping):
        return None
    try:
        return band_of(ScoreNormalization.model_validate(raw))
    except ValidationError:
        return None


def with_scales(found: Sequence[Margin], by_resource: Mapping[str, tuple[Scale, ...]]) -> list[Margin]:
    """``found`` with the scorers publishing each score."""
    return [
        Margin(
            m.resource,
            m.score,
            m.addon_weight,
            m.steady_weight,
            by_resource.get(m.resource, ()),
            balance_weight=m.balance_weight,
        )
        for m in found
    ]


def unreadable(found: Sequence[Margin], reason: str) -> list[Margin]:
    """``found`` marked: the scorers could not be read, for ``reason``."""
    return [
        Margin(m.resource, m.score, m.addon_weight, m.steady_weight, (), reason, m.balance_weight)
        for m in found
    ]


__all__ = [
    "STEADY_POINTS",
    "Band",
    "Margin",
    "Scale",
    "band_of",
    "margins",
    "scales",
    "units_per_point",
    "unreadable",
    "with_scales",
]
