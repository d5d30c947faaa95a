"""The seasonal sample scorer: scores the load it expects over the next hour from yesterday's shape.

Data-centre load is strongly daily, so the hour ahead looks most like the same hour of earlier days.
For each series the scorer takes, for the next ``--horizon`` seconds, yesterday's values at those
times (and those of every earlier day the window holds), shifts them by how much the last
``--level`` seconds differ from the same stretch of that day, and averages them
(``Series.seasonal_forecast`` of the scorer library).  The forecast load is scored like the other
samples', ``100 * clamp(1 - load / capacity, 0, 1)``.  A cluster whose daily peak is about to come
round therefore loses points before it is busy, even while its load is still falling.

It needs a season of history: the DynamicScorer's range must cover ``--season`` plus ``--level``
seconds (the default 25 h at a 300 s step is 301 points per series).  With less, it scores the mean
of the last ``--level`` seconds, like the reactive sample, and says so in its log at start.
Run it with ``python -m dynamic_scoring.samples.scorers.seasonal`` or the
``dynamic-scoring-sample-seasonal`` console script.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from dynamic_scoring.samples.scorers.formulas import headroom_score
from dynamic_scoring.samples.scorers.server import Defaults, build_parser, requested_horizon, run
from dynamic_scoring.scorer import ScoreResult, ScoringRequest, Series, result

log = logging.getLogger(__name__)

DAY = 86_400
HOUR = 3_600

DEFAULTS = Defaults(
    name="cpu_seasonal",
    description="Seasonal CPU headroom: the next hour's load from the same hour of earlier days",
    port=8002,
    query="sum(rate(container_cpu_usage_seconds_total[5m]))",
    range=DAY + HOUR,
    step=300,
    interval=60,
)


def score_series(
    series: Series, capacity: float, horizon: float, season: float, level: float
) -> float | None:
    """The headroom score of the load expected over the horizon, or ``None`` for a series without points."""
    if not series.points:
        return None
    return headroom_score(series.seasonal_forecast(horizon, season=season, level=level), capacity)


def score(
    request: ScoringRequest, capacity: float, horizon: float, season: float, level: float
) -> list[ScoreResult]:
    """One result per series with points, its labels passed through for the dimension format."""
    ahead = requested_horizon(request, horizon)
    return [
        result(headroom_score(s.seasonal_forecast(ahead, season=season, level=level), capacity), s.labels)
        for s in request.with_points()
    ]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``dynamic-scoring-sample-seasonal [--horizon S] [--season S] [--level S] ...``."""
    parser = build_parser("dynamic-scoring-sample-seasonal", DEFAULTS)
    parser.add_argument(
        "--horizon", type=float, default=HOUR, help="seconds ahead to forecast (default: 3600)"
    )
    parser.add_argument(
        "--season", type=float, default=DAY, help="seconds after which load repeats (default: a day)"
    )
    parser.add_argument(
        "--level",
        type=float,
        default=HOUR,
        help="seconds of recent load that set today's level (default: 3600)",
    )
    args = parser.parse_args(argv)
    if not args.horizon >= 0 or not args.season > 0 or not args.level > 0:
        parser.error("--horizon must be at least 0, --season and --level positive")
    if args.range < args.season + args.level:
        log.warning(
            "--range %ss holds less than --season plus --level (%ss): every forecast is the recent mean",
            args.range,
            int(args.season + args.level),
        )
    run(
        args,
        parser,
        DEFAULTS.description,
        functools.partial(
            score, capacity=args.capacity_cores, horizon=args.horizon, season=args.season, level=args.level
        ),
    )


if __name__ == "__main__":
    main()
