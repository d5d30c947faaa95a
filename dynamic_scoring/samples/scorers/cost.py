"""The cost sample scorer: cheap clusters win while they have room, by a time-of-use price schedule.

Each cluster pays a price that changes with the time of day (``prices``: a schedule per cluster,
see ``dynamic_scoring.samples.scorers.prices``).  The scorer reads the cluster's CPU utilisation (a
ratio, 0 to 1) and its name, which the default query attaches as a ``cluster`` label with
``label_replace`` and the agent's ``${cluster}``.  It scores in two bands::

    headroom h = 1 - utilisation            room r = params.room (default 0.2)
    cheapness c = (p_max - p) / (p_max - p_min)   over every price in the table
    score = 50 + 50 * c      when h >= r     (room: the cheaper, the higher)
          = 50 * h / r       when h <  r     (no room: below every cluster that has some)

so a cluster with room always outranks one without, and among those with room the cheapest wins.
``p`` is the price at the newest point's time, or with ``params.horizon`` the mean price over that
many seconds ahead (work placed now runs into the next tariff).  The table comes from ``--prices
FILE`` (JSON; a mounted ConfigMap, re-read when it changes) or a request's ``params.prices``, which
wins.  Run it with ``python -m dynamic_scoring.samples.scorers.cost`` or ``dynamic-scoring-sample-cost``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from dynamic_scoring.samples.scorers.prices import PriceError, PriceFile, PriceTable, at, parse_table
from dynamic_scoring.samples.scorers.server import Defaults, build_parser, is_number, requested_horizon, run
from dynamic_scoring.scorer import RequestError, ScoreResult, ScoringRequest, Series, result

DEFAULTS = Defaults(
    name="cost",
    description=(
        "Cost by time of day: 50-100 by cheapness for clusters with params.room (default 20 %) of CPU"
        " free, 0-50 by headroom for those without; prices from --prices or params.prices"
    ),
    port=8004,
    # The cluster's CPU utilisation, labelled with its name (the agent fills in ${cluster}).
    query=(
        'label_replace(sum(rate(container_cpu_usage_seconds_total{container!=""}[5m]))'
        ' / sum(machine_cpu_cores), "cluster", "${cluster}", "", "")'
    ),
    range=300,
    step=30,
    interval=60,
    capacity_option=False,
)


def band_score(headroom: float, cheapness: float, room: float) -> float:
    """The two-band score: 50 to 100 by cheapness with room, 0 to 50 by headroom without."""
    h = min(max(headroom, 0.0), 1.0)
    if h >= room:
        return 50.0 + 50.0 * min(max(cheapness, 0.0), 1.0)
    return 50.0 * h / room


def _table(request: ScoringRequest, prices: PriceFile | None) -> PriceTable:
    if "prices" in request.params:
        try:
            return parse_table(request.params["prices"], "params.prices")
        except PriceError as exc:
            raise RequestError(str(exc)) from None
    if prices is None:
        raise RequestError("no price schedule: give params.prices or start the scorer with --prices FILE")
    try:
        return prices.table()
    except PriceError as exc:
        raise RequestError(f"--prices {exc}") from None


def series_score(
    series: Series, table: PriceTable, bounds: tuple[float, float], room: float, horizon: float
) -> float:
    """One cluster's score from its utilisation series and the table (``PriceError`` for no schedule).

    ``bounds`` is ``table.bounds()``, taken once per request rather than once per series.
    """
    low, high = bounds
    when = at(series.points[-1][0])
    price = table.mean_price(series.label("cluster"), when, horizon)
    cheapness = (high - price) / (high - low) if high > low else 1.0
    return band_score(1.0 - series.mean(), cheapness, room)


def score(request: ScoringRequest, prices: PriceFile | None = None, room: float = 0.2) -> list[ScoreResult]:
    """One result per series with points, its labels passed through."""
    room = request.params.get("room", room)
    if not is_number(room) or not 0 < room <= 1:
        raise RequestError("params.room: expected the share of CPU that must be free, above 0 and at most 1")
    horizon = requested_horizon(request, 0.0)
    series = list(request.with_points())
    if not series:
        return []
    table = _table(request, prices)
    bounds = table.bounds()
    try:
        return [result(series_score(s, table, bounds, room, horizon), s.labels) for s in series]
    except PriceError as exc:
        unnamed = any(not s.label("cluster") for s in series)
        hint = '; the query must label its series cluster="${cluster}" (label_replace)' if unnamed else ""
        raise RequestError(f"{exc}{hint}") from None


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``dynamic-scoring-sample-cost --prices FILE [--room R] ...``."""
    parser = build_parser("dynamic-scoring-sample-cost", DEFAULTS)
    parser.add_argument("--prices", help="JSON price table, cluster (or '*') to schedule; params.prices wins")
    parser.add_argument(
        "--room", type=float, default=0.2, help="share of CPU that must be free to compete on price (0.2)"
    )
    args = parser.parse_args(argv)
    if not 0 < args.room <= 1:
        parser.error("--room must be above 0 and at most 1")
    try:
        prices = PriceFile(args.prices) if args.prices else None
    except PriceError as exc:
        parser.error(f"--prices {exc}")
    run(args, parser, DEFAULTS.description, functools.partial(score, prices=prices, room=args.room))


if __name__ == "__main__":
    main()
