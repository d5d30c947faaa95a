"""The simple sample scorer: the more CPU headroom, the higher the score.

For each series it receives (by default one per cluster: the cluster's total CPU use in cores),
it averages the points of the window and scores ``100 * clamp(1 - load / capacity, 0, 1)``
(``dynamic_scoring.samples.scorers.formulas.headroom_score``).  Run it with ``python -m
dynamic_scoring.samples.scorers.cpu`` or
the ``dynamic-scoring-sample-cpu`` console script.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from dynamic_scoring.samples.scorers.formulas import headroom_score
from dynamic_scoring.samples.scorers.server import Defaults, build_parser, run
from dynamic_scoring.scorer import ScoreResult, ScoringRequest, Series, result

DEFAULTS = Defaults(
    name="cpu_headroom",
    description="CPU headroom: 100 when idle, 0 at --capacity-cores, from the window's mean load",
    port=8000,
    # Matches the local control plane's load exporter and any cAdvisor/kubelet scrape; one series per
    # cluster, so the DynamicScorer's scoreDimensionFormat "${scoreName}" names one item per cluster.
    query="sum(rate(container_cpu_usage_seconds_total[1m]))",
    range=300,
    step=15,
    interval=30,
)


def score_series(series: Series, capacity: float) -> float | None:
    """The headroom score of the window's mean load, or ``None`` for a series without points."""
    if not series.points:
        return None
    return headroom_score(series.mean(), capacity)


def score(request: ScoringRequest, capacity: float) -> list[ScoreResult]:
    """One result per series with points, its labels passed through for the dimension format."""
    return [result(headroom_score(s.mean(), capacity), s.labels) for s in request.with_points()]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``dynamic-scoring-sample-cpu [--host H] [--port P] ...``."""
    parser = build_parser("dynamic-scoring-sample-cpu", DEFAULTS)
    args = parser.parse_args(argv)
    run(args, parser, DEFAULTS.description, functools.partial(score, capacity=args.capacity_cores))


if __name__ == "__main__":
    main()
