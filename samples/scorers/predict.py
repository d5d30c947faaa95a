"""The prediction sample scorer: scores the load it expects one scoring interval from now.

For each series it fits an ordinary least-squares line to the window's points and evaluates it
``--horizon`` seconds (default: the scoring interval) after the last point
(``samples.scorers.formulas.forecast``); the forecast load is scored like the simple scorer's,
``100 * clamp(1 - forecast / capacity, 0, 1)``.  A cluster whose load is climbing therefore loses
points before it is busy, and one that is draining gains them early.  Run it with
``python -m samples.scorers.predict`` or the ``dynamic-scoring-sample-predict`` console script.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from samples.scorers.formulas import forecast, headroom_score
from samples.scorers.series import Series
from samples.scorers.server import Defaults, build_parser, run

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
    return headroom_score(forecast(series.points, horizon), capacity)


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
    score = functools.partial(score_series, capacity=args.capacity_cores, horizon=horizon)
    run(args, parser, DEFAULTS.description, score)


if __name__ == "__main__":
    main()
