"""Spread forms for the closed loop: each workload its own Placement, and what keeps them off one cluster.

Why.  A pick-1 Placement followed by many consumers, or many Placements reading the same scores, send
every new workload to the cluster that looks best until the metrics show the work placed there (the
herd of :mod:`bench.placement_quality.closed_loop`).  Two answers OCM users can deploy are modelled
here: OCM's own ``Balance`` prioritizer beside the score, which counts every Placement's decisions, and
a hub-side account of the placements made in the last few minutes, published as a score of its own
(what Karmada does with in-flight workloads).  Both use ``Balance``'s formula, so their weight means
the same.  This module holds the pure parts; the loop applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

SPREAD_ADDON_WEIGHT = 10
"""The AddOn weight of a spread form's score (the margin recipe's), beside the spread prioritizer."""


@dataclass(frozen=True)
class Spread:
    """A spread form: each workload is its own Placement, deciding on arrival (pick 1), in turn.

    Its total is ``10 x score + weight x spread`` where ``spread`` is OCM's ``Balance`` formula over a
    count of decisions per cluster: 100 for a cluster with none, else ``2 * trunc(100 * (0.5 - n /
    max n))``, so the most used cluster gets -100.  ``window`` is None for ``Balance`` itself (every
    live workload's Placement holds a decision), or the steps a decision counts for: a hub-side account
    of placements the metrics may not show yet, published as a score of its own.  Each decision counts
    at once, so the next workload of the same step already sees it.

    ``steady`` 0: a placed workload stays where it was placed (no Placement re-decides).  ``steady`` s > 0
    (``Balance`` only): every live workload's Placement decides again at every step, as OCM re-schedules
    a Placement whenever its scores change, with ``Steady`` at weight s for the cluster it holds and
    ``Balance`` counting every decision but its own; a changed decision moves the workload, its load
    included, for the rest of its life.  The workloads placed before the judged steps do not move.
    """

    weight: int
    window: int | None
    steady: int = 0

    def __post_init__(self) -> None:
        if self.steady and self.window is not None:
            raise ValueError("Steady is modelled with Balance only, not with an in-flight window")

    @property
    def form(self) -> str:
        """The setup's ``form``: ``balance-<weight>[-steady<s>]`` or ``inflight-<window>-<weight>``."""
        if self.window is not None:
            return f"inflight-{self.window}-{self.weight}"
        return f"balance-{self.weight}" + (f"-steady{self.steady}" if self.steady else "")

    @classmethod
    def parse(cls, form: str) -> Spread | None:
        """The spread form ``form`` names, or None for ``exact``, ``margin`` or ``-``."""
        kind, *fields = form.split("-")
        steady = 0
        if fields and fields[-1].startswith("steady"):
            steady = int(fields.pop()[len("steady") :])
        if kind == "balance" and len(fields) == 1:
            return cls(int(fields[0]), None, steady)
        if kind == "inflight" and len(fields) == 2:
            return cls(int(fields[1]), int(fields[0]), steady)
        return None


def setup_label(policy: str, variant: str, form: str) -> str:
    """A setup's label from its record's fields: ``policy/variant``, ``+form`` for a spread form, or the
    baseline's name (``variant`` ``-``)."""
    if variant == "-":
        return policy
    spread = Spread.parse(form)
    return f"{policy}/{variant}" + ("" if spread is None else f"+{spread.form}")


def balance_scores(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """OCM's ``Balance`` prioritizer's scores for decision ``counts`` per cluster (100 with none)."""
    top = int(counts.max()) if counts.size else 0
    if top == 0:
        return np.full(counts.shape, 100, dtype=np.int64)
    usage = counts.astype(np.float64) / top
    scores = 2 * np.trunc(100.0 * (0.5 - usage)).astype(np.int64)
    return np.where(counts > 0, scores, 100).astype(np.int64)


__all__ = ["SPREAD_ADDON_WEIGHT", "Spread", "balance_scores", "setup_label"]
