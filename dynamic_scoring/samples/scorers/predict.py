"""The prediction sample scorer: scores the load it expects one scoring interval from now.

For each series it fits an ordinary least-squares line to the window's points and evaluates it
``--horizon`` seconds (default: the scoring interval) after the last point
(``Series.forecast`` of the scorer library).  A DynamicScorer may choose per request with the blog's
``scoring.params``: ``horizon`` (seconds, overrides ``--horizon``) and ``model`` (only
``linear_regression`` is implemented; another name is refused with HTTP 400 rather than silently
scored with the wrong model); the forecast load is scored like the simple
scorer's, ``100 * clamp(1 - forecast / capacity, 0, 1)``.  A cluster whose load is climbing
therefore loses points before it is busy, and one that is draining gains them early.  Run it with
``python -m dynamic_scoring.samples.scorers.predict`` or the ``dynamic-scoring-sample-predict`` console
script.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from dynamic_scoring.contract.wire import display_name
from dynamic_scoring.samples.scorers.formulas import headroom_score
from dynamic_scoring.samples.scorers.server import Defaults, build_parser, requested_horizon, run
from dynamic_scoring.scorer import RequestError, ScoreResult, ScoringRequest, Series, result

DEFAULTS = Defaults(
    name="cpu_forecast",
    description="Forecast CPU headroom: least-squares trend of the load, one interval ahead",
    port=8001,
    query="sum(rate(container_cpu_usage_seconds_total[1m]))",
    range=600,
    step=15,
    interval=30,
)


def score_series(series: Series, capacity: float, horizon: float) -> float | None:
    """The headroom score of the forecast load, or ``None`` for a series without points."""
    if not series.points:
        return None
    return headroom_score(series.forecast(horizon), capacity)


MODELS = ("linear_regression",)
"""The ``params.model`` values this sample implements."""


def horizon_for(request: ScoringRequest, default: float) -> float:
    """The request's ``params.horizon`` when it sends one, else ``default``; checks ``params.model``.

    Raises:
        RequestError: ``model`` names a model this sample does not implement, or ``horizon`` is not
            a non-negative finite number of seconds.
    """
    model = request.params.get("model", MODELS[0])
    if model not in MODELS:
        shown = display_name(str(model), 60)
        raise RequestError(f"params.model: {shown!r} is not implemented; use one of {', '.join(MODELS)}")
    return requested_horizon(request, default)


def score(request: ScoringRequest, capacity: float, horizon: float) -> list[ScoreResult]:
    """One result per series with points, its labels passed through for the dimension format."""
    ahead = horizon_for(request, horizon)
    return [result(headroom_score(s.forecast(ahead), capacity), s.labels) for s in request.with_points()]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``dynamic-scoring-sample-predict [--horizon S] ...``."""
    parser = build_parser("dynamic-scoring-sample-predict", DEFAULTS)
    parser.add_argument(
        "--horizon", type=float, default=None, help="seconds ahead to forecast (default: --interval)"
    )
    args = parser.parse_args(argv)
    horizon = float(args.interval) if args.horizon is None else args.horizon
    if not horizon >= 0:
        parser.error("--horizon must be at least 0")
    run(
        args,
        parser,
        DEFAULTS.description,
        functools.partial(score, capacity=args.capacity_cores, horizon=horizon),
    )


if __name__ == "__main__":
    main()
