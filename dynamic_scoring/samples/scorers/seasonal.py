"""The seasonal sample scorer: scores the load it expects while the placed work stays, from earlier days.

Data-centre load is strongly daily, so the hours ahead look most like the same hours of earlier days.
For each series the scorer forecasts the mean load over the next ``--horizon`` seconds: from the same
times on every earlier day the window holds, shifted by how much the last ``--level`` seconds differ
from the same stretch of that day (``Series.seasonal_forecast`` of the scorer library).  Set the
horizon to how long the placed work stays where it is placed; a request's ``params.horizon`` (the
DynamicScorer's ``spec.scoring.params.horizon``) overrides ``--horizon``.  For horizons of an hour or
less it blends that forecast half and half with the mean of the last ``--level`` seconds, and the
blend fades out by four hours (``Series.blended_forecast``): close ahead, averaging cancels part of
each one's error; far ahead, the recent level is mostly wrong.  ``--no-blend`` scores the seasonal
forecast alone.  The forecast load is scored like the other samples',
``100 * clamp(1 - load / capacity, 0, 1)``.  A cluster whose daily peak is about to come round
therefore loses points before it is busy, even while its load is still falling.

It needs a season of history: the DynamicScorer's range must cover ``--season`` plus ``--level``
seconds (the default 25 h at a 300 s step is 301 points per series), and Prometheus must keep that
much; ``/config`` publishes the range and its description says so.  A longer range averages every
day it holds; on the benchmark's traces three days forecast no better than one
(docs/placement-quality.md), so the default stays at one.  With less than a season it scores the mean
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
    description=(
        "Seasonal CPU headroom: the load expected over params.horizon seconds (default an hour) from the"
        " same hours of earlier days, blended with the last hour for horizons up to an hour;"
        " needs a day and an hour of Prometheus history"
    ),
    port=8002,
    query="sum(rate(container_cpu_usage_seconds_total[5m]))",
    range=DAY + HOUR,
    step=300,
    interval=60,
)


def expected_load(
    series: Series, horizon: float, season: float, level: float, blend: bool, weight: float | None = None
) -> float:
    """The mean load expected over the horizon: blended with the recent level, or seasonal alone.

    ``weight`` is the recent level's weight in the blend (default: the horizon's, ``recent_weight``).
    """
    if blend:
        return series.blended_forecast(horizon, season=season, level=level, weight=weight)
    return series.seasonal_forecast(horizon, season=season, level=level)


def score_series(
    series: Series, capacity: float, horizon: float, season: float, level: float, blend: bool = False
) -> float | None:
    """The headroom score of the load expected over the horizon, or ``None`` for a series without points."""
    if not series.points:
        return None
    return headroom_score(expected_load(series, horizon, season, level, blend), capacity)


def score(
    request: ScoringRequest,
    capacity: float,
    horizon: float,
    season: float,
    level: float,
    blend: bool = True,
    weight: float | None = None,
) -> list[ScoreResult]:
    """One result per series with points, its labels passed through for the dimension format."""
    ahead = requested_horizon(request, horizon)
    return [
        result(headroom_score(expected_load(s, ahead, season, level, blend, weight), capacity), s.labels)
        for s in request.with_points()
    ]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``dynamic-scoring-sample-seasonal [--horizon S] [--season S] [--level S] ...``."""
    parser = build_parser("dynamic-scoring-sample-seasonal", DEFAULTS)
    parser.add_argument(
        "--horizon",
        type=float,
        default=HOUR,
        help="seconds ahead to forecast: how long placed work stays (default: 3600; params.horizon wins)",
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
    parser.add_argument(
        "--no-blend",
        dest="blend",
        action="store_false",
        help="score the seasonal forecast alone, not blended with the last --level seconds",
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
            score,
            capacity=args.capacity_cores,
            horizon=args.horizon,
            season=args.season,
            level=args.level,
            blend=args.blend,
        ),
    )


if __name__ == "__main__":
    main()
