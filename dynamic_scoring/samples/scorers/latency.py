"""The latency sample scorer: clusters close to their users win, from blackbox-exporter probes.

A Prometheus blackbox exporter in each cluster probes the endpoints your users come from (or stand
for them: a regional load balancer, a point of presence) and exports, per target ``instance``,
``probe_duration_seconds`` and ``probe_success`` (1 or 0).  This scorer asks for both (a plain
selector, so the series keep their names) and rates the cluster::

    latency(target) = mean duration, a failed probe counting as maxLatencyMs
    L = Σ weight(target) * latency(target) / Σ weight       score = 100 * clamp(1 - L / maxLatencyMs, 0, 1)

``params.weights`` (target to share of traffic) says where the users are; without it every target
probed weighs the same, and a weighted target this cluster does not probe counts as unreachable.
``params.maxLatencyMs`` (default 200) is the latency that scores 0.  Run it with ``python -m
dynamic_scoring.samples.scorers.latency`` or ``dynamic-scoring-sample-latency``.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from dynamic_scoring.samples.scorers.server import Defaults, build_parser, is_number, named_series, run
from dynamic_scoring.scorer import RequestError, ScoreResult, ScoringRequest, Series, result

DURATION, SUCCESS = "probe_duration_seconds", "probe_success"
DEFAULTS = Defaults(
    name="user_latency",
    description=(
        "Latency to users from blackbox-exporter probes: 100 at 0 ms, 0 at params.maxLatencyMs (200),"
        " targets weighted by params.weights, a failed probe counting as the maximum"
    ),
    port=8006,
    query=f'{{__name__=~"{DURATION}|{SUCCESS}"}}',
    range=300,
    step=30,
    interval=60,
    capacity_option=False,
)


def _share(value: Any) -> bool:
    return is_number(value) and value >= 0


def _params(request: ScoringRequest, max_ms: float) -> tuple[float, dict[str, float] | None]:
    limit = request.params.get("maxLatencyMs", max_ms)
    if not is_number(limit) or limit <= 0:
        raise RequestError("params.maxLatencyMs: expected milliseconds above 0")
    weights = request.params.get("weights")
    if weights is None:
        return float(limit), None
    if not isinstance(weights, Mapping) or not weights or not all(_share(w) for w in weights.values()):
        raise RequestError("params.weights: expected an object of probe target to a share of 0 or more")
    if sum(weights.values()) <= 0:
        raise RequestError("params.weights: at least one share must be above 0")
    return float(limit), {str(k): float(v) for k, v in weights.items()}


def user_latency_ms(probes: list[Series], max_ms: float, weights: dict[str, float] | None) -> float | None:
    """The traffic-weighted latency in ms, or ``None`` when no target was probed and none is weighted."""
    durations: dict[str, list[float]] = defaultdict(list)
    successes: dict[str, list[float]] = defaultdict(list)
    for s in probes:
        into = durations if s.label("__name__") == DURATION else successes
        into[s.label("instance")].extend(s.values)
    probed = set(durations) | set(successes)
    if weights is None:
        if not probed:
            return None
        weights = dict.fromkeys(probed, 1.0)
    total = 0.0
    for target, weight in weights.items():
        if not durations.get(target):
            total += weight * max_ms  # never answered (or not probed from here): as far as it gets
            continue
        ok = sum(successes[target]) / len(successes[target]) if successes.get(target) else 1.0
        ms = 1000.0 * sum(durations[target]) / len(durations[target])
        total += weight * (ok * min(ms, max_ms) + (1.0 - ok) * max_ms)
    return total / sum(weights.values())


def score(request: ScoringRequest, max_ms: float = 200.0) -> list[ScoreResult]:
    """One result for the cluster, or none when it probed nothing and no target is weighted."""
    limit, weights = _params(request, max_ms)
    probes = named_series(request, (DURATION, SUCCESS), "blackbox exporter")
    latency = user_latency_ms(probes, limit, weights)
    if latency is None:
        return []
    return [result(100.0 * min(max(1.0 - latency / limit, 0.0), 1.0))]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``dynamic-scoring-sample-latency [--max-latency-ms MS] ...``."""
    parser = build_parser("dynamic-scoring-sample-latency", DEFAULTS)
    parser.add_argument(
        "--max-latency-ms", type=float, default=200.0, help="latency that scores 0 (params.maxLatencyMs wins)"
    )
    args = parser.parse_args(argv)
    if not args.max_latency_ms > 0:
        parser.error("--max-latency-ms must be above 0")
    run(args, parser, DEFAULTS.description, functools.partial(score, max_ms=args.max_latency_ms))


if __name__ == "__main__":
    main()
