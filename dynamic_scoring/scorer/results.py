"""Building results the agent can name: a finite score and the ``dimension`` labels it maps.

The agent names each AddOnPlacementScore item by rendering the DynamicScorer's
``scoreDimensionFormat``; the only labels it substitutes are ``DIMENSION_LABELS`` (plus
``${cluster}`` and ``${scoreName}``, which it knows itself).  A result with none of them is named
by the format alone, so with the default ``${scoreName}`` every result of an answer gets the same
name, and the agent fails the cycle (``ItemNameCollision``).  ``result`` makes these mistakes fail
where the author sees them, in the scorer's own traceback, rather than as a rejected answer on a hub
they may not read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dynamic_scoring.contract.score_size import MAX_SCORE_BYTES, scores_bytes
from dynamic_scoring.contract.wire import ScoreResult

DIMENSION_LABELS: tuple[str, ...] = ("node", "namespace", "pod", "container", "device", "app", "meta")
"""The result labels the agent substitutes into ``scoreDimensionFormat``
(agent/dynamic_scoring/agent/items/dimensions.py)."""


MAX_ITEM_NAME_LENGTH = 253
"""An item name, and so any one label that fills it, must be at most this long."""


def result(score: float, labels: dict[str, str] | None = None, **dimensions: str) -> ScoreResult:
    """One result: ``score`` with ``labels`` (passed through) and the named ``dimensions``.

    ``dimensions`` must be among ``DIMENSION_LABELS`` (a misspelt ``namepsace=`` would otherwise
    silently name nothing); ``labels`` may carry anything, for the scorer's own use.  The score must
    be finite; it is sent as is, and the agent clamps it to [-100, 100] and rounds it.
    """
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise TypeError(f"score must be a number, got {type(score).__name__}")
    if not math.isfinite(score):
        raise ValueError(f"score must be finite, got {score!r} (the agent rejects the whole answer)")
    unknown = sorted(set(dimensions) - set(DIMENSION_LABELS))
    if unknown:
        raise ValueError(
            f"unknown dimension label(s) {', '.join(unknown)}; "
            f"the agent maps only {', '.join(DIMENSION_LABELS)}"
        )
    metric = dict(labels or {})
    for name, value in dimensions.items():
        if not isinstance(value, str):
            raise TypeError(f"dimension {name} must be a string, got {type(value).__name__}")
        if len(value) > MAX_ITEM_NAME_LENGTH:
            raise ValueError(f"dimension {name} is longer than {MAX_ITEM_NAME_LENGTH} characters")
        metric[name] = value
    return ScoreResult(metric=metric, score=float(score))


def estimated_score_bytes(results: Sequence[ScoreResult]) -> int:
    """About how large these results' AddOnPlacementScore would be, named by their dimension labels.

    The agent's limit is on the JSON of the items it writes (``MAX_SCORE_BYTES`` by default; more
    fails the cycle with ``ScorerTooManyResults``).  Item names come from the DynamicScorer's
    ``scoreDimensionFormat``, which a scorer does not see, so each name is estimated as its
    dimension label values joined by ``-`` (what ``${node}-${pod}`` style formats produce).
    """
    return scores_bytes(
        ("-".join(r.metric[d] for d in DIMENSION_LABELS if r.metric.get(d)) or "x", -100) for r in results
    )


__all__ = [
    "DIMENSION_LABELS",
    "MAX_ITEM_NAME_LENGTH",
    "MAX_SCORE_BYTES",
    "estimated_score_bytes",
    "result",
]
