"""The power sample scorer: power headroom under a cap, now or forecast, from Kepler's energy counters.

Kepler exports each node's energy as counters in joules; their rate is power in watts.  Kepler 0.10
and later export ``kepler_node_cpu_joules_total`` per RAPL zone (labels ``zone``, ``node_name``);
earlier releases ``kepler_node_platform_joules_total`` (the whole node, labels ``instance``,
``source``).  The default query sums the newer one's ``package`` zone over the cluster, and labels the
series with the cluster's name (the agent fills in ``${cluster}``) so that each cluster can have its
own cap::

    score = 100 * clamp(1 - watts / cap, 0, 1)

``cap`` is ``params.capWatts``: a number of watts, or an object of cluster name (``"*"`` for the
others) to watts, the power the site may draw for this cluster (a rack's feed, a power budget, an
AI-RAN cell site's allowance).  The watts are the window's mean, or with ``params.horizon`` the mean
expected over that many seconds ahead (``Series.blended_forecast``, the seasonal sample's forecast:
give the DynamicScorer a day and an hour of history), so work placed now goes where power will be
free while it runs.  Run it with ``python -m dynamic_scoring.samples.scorers.power`` or
``dynamic-scoring-sample-power``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from dynamic_scoring.samples.scorers.server import Defaults, build_parser, is_number, requested_horizon, run
from dynamic_scoring.scorer import RequestError, ScoreResult, ScoringRequest, Series, result

DEFAULT = "*"
DEFAULTS = Defaults(
    name="power_headroom",
    description=(
        "Power headroom under params.capWatts (a number, or cluster to watts with '*'), from Kepler's"
        " energy counters; with params.horizon, the power expected while placed work runs"
    ),
    port=8005,
    query=(
        'label_replace(sum(rate(kepler_node_cpu_joules_total{zone="package"}[5m])),'
        ' "cluster", "${cluster}", "", "")'
    ),
    range=300,
    step=30,
    interval=60,
    capacity_option=False,
)


def _positive(value: Any) -> bool:
    return is_number(value) and value > 0


def cap_for(caps: Any, cluster: str) -> float:
    """The cap of ``cluster`` from ``params.capWatts``; ``RequestError`` naming what is wrong."""
    if _positive(caps):
        return float(caps)
    if not isinstance(caps, Mapping) or not caps:
        raise RequestError(
            "params.capWatts: expected watts above 0, or an object of cluster name (or '*') to watts"
        )
    bad = sorted(str(k) for k, v in caps.items() if not _positive(v))
    if bad:
        raise RequestError(f"params.capWatts: {', '.join(bad)}: expected watts above 0")
    found = caps.get(cluster, caps.get(DEFAULT))
    if found is None:
        hint = '; the query must label its series cluster="${cluster}" (label_replace)' if not cluster else ""
        raise RequestError(f"params.capWatts: no cap for cluster {cluster!r} and no '*'{hint}")
    return float(found)


def watts(series: Series, horizon: float | None) -> float:
    """The window's mean power, or the mean expected over ``horizon`` seconds ahead."""
    return series.mean() if horizon is None else series.blended_forecast(horizon)


def score(request: ScoringRequest, cap: float | None = None) -> list[ScoreResult]:
    """One result per series with points, its labels passed through."""
    caps = request.params.get("capWatts", cap)
    if caps is None:
        raise RequestError(
            "params.capWatts: give the power cap in watts (or start the scorer with --cap-watts)"
        )
    horizon = requested_horizon(request, 0.0) if "horizon" in request.params else None
    out = []
    for s in request.with_points():
        limit = cap_for(caps, s.label("cluster"))
        out.append(result(100.0 * min(max(1.0 - watts(s, horizon) / limit, 0.0), 1.0), s.labels))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``dynamic-scoring-sample-power [--cap-watts W] ...``."""
    parser = build_parser("dynamic-scoring-sample-power", DEFAULTS)
    parser.add_argument("--cap-watts", type=float, help="power cap in watts when a request sends no capWatts")
    args = parser.parse_args(argv)
    if args.cap_watts is not None and not _positive(args.cap_watts):
        parser.error("--cap-watts must be above 0")
    run(args, parser, DEFAULTS.description, functools.partial(score, cap=args.cap_watts))


if __name__ == "__main__":
    main()
