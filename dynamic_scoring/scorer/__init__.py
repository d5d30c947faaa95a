"""A small library for writing scoring APIs in Python: write one function, get the whole contract.

It installs with the project's base dependencies only (pydantic, httpx): ``pip install
dynamic-scoring`` brings neither the hub's nor the agent's (docs/scorer-library.md says why it
lives here).  The request and response models are the agent's own, re-exported from
``dynamic_scoring.contract.wire``, so the contract has one definition.

    from dynamic_scoring.scorer import ScorerApp, result, serve

    def score(request):
        return [result(100 - 25 * s.mean(), node=s.label("node")) for s in request.with_points()]

    serve(ScorerApp(score, name="node_load", query="node_load1", range=300, step=30))
"""

from dynamic_scoring.contract.wire import ScorerConfig, ScoreResult, ScoringResponse
from dynamic_scoring.scorer.app import MAX_BODY_BYTES, Response, ScoreFn, ScorerApp
from dynamic_scoring.scorer.auth import BearerToken, TokenError
from dynamic_scoring.scorer.maths import (
    EmptySeriesError,
    Point,
    blended_forecast,
    forecast,
    last,
    linear_fit,
    mean,
    rate,
    recent_weight,
    seasonal_forecast,
    trend,
)
from dynamic_scoring.scorer.matrix import RequestError, ScoringRequest, Series, parse_request
from dynamic_scoring.scorer.results import DIMENSION_LABELS, MAX_SCORE_BYTES, estimated_score_bytes, result
from dynamic_scoring.scorer.serve import ScorerServer, serve

__all__ = [
    "DIMENSION_LABELS",
    "MAX_BODY_BYTES",
    "MAX_SCORE_BYTES",
    "BearerToken",
    "EmptySeriesError",
    "Point",
    "RequestError",
    "Response",
    "ScoreFn",
    "ScoreResult",
    "ScorerApp",
    "ScorerConfig",
    "ScorerServer",
    "ScoringRequest",
    "ScoringResponse",
    "Series",
    "TokenError",
    "blended_forecast",
    "estimated_score_bytes",
    "forecast",
    "last",
    "linear_fit",
    "mean",
    "parse_request",
    "rate",
    "recent_weight",
    "result",
    "seasonal_forecast",
    "serve",
    "trend",
]
