"""The scoring API's answer, decoded the fast way when it is well formed.

`dynamic_scoring.contract.wire.ScoringResponse` (pydantic) is the schema of the answer and the source of every
error message about it.  Validating 10,000 results with it took about 55 ms of the agent's cycle
(one Python call per result for the label coercion), when the whole write of the
AddOnPlacementScore that follows takes about as long as upstream's entire cycle.  So an answer is
first decoded by msgspec into plain structs, which accepts a strict subset of what the schema
accepts: an object whose ``results`` is a list (or null) of objects with string label values and a
JSON number as the score.  Only when that fails (a numeric label value the schema turns into text,
a null ``metric``, a bad type, a non-finite score) does the schema validate the body, which either
accepts it as before or raises the `pydantic.ValidationError` the caller turns into
``ScorerResponseInvalid``.  Both paths give the same results for the same body
(tests/unit/agent/test_answer.py checks them against each other).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from dynamic_scoring.contract.wire import ScoringResponse


class ScoredSeries(Protocol):
    """One scored series, whichever path decoded it: its labels and its (finite) score."""

    @property
    def metric(self) -> Mapping[str, str]:
        """The series' labels, as the scorer returned them."""
        ...

    @property
    def score(self) -> float:
        """The raw score, before normalisation, clamping and rounding."""
        ...


class _Result(msgspec.Struct):
    metric: dict[str, str] = msgspec.field(default_factory=dict)
    score: float = 0.0


class _Answer(msgspec.Struct):
    results: list[_Result] | None = None


_DECODER = msgspec.json.Decoder(_Answer)


@dataclass(frozen=True)
class ScoringAnswer:
    """A validated answer of the scoring API."""

    results: Sequence[ScoredSeries]


def decode_answer(body: bytes | bytearray) -> ScoringAnswer:
    """Decode and validate an answer body.

    Raises:
        pydantic.ValidationError: the body is not a valid scoring response (from the schema).
    """
    try:
        fast = _DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    else:
        results = fast.results or []
        if all(map(math.isfinite, [r.score for r in results])):
            return ScoringAnswer(results)
    return ScoringAnswer(ScoringResponse.model_validate_json(body).results)


__all__ = ["ScoredSeries", "ScoringAnswer", "decode_answer"]
