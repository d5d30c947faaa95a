"""The GPU sample scorer: free GPU capacity, from the NVIDIA DCGM exporter's metrics.

The DCGM exporter (NVIDIA's GPU Operator installs it) exports one series per GPU and metric, labelled
``Hostname`` (the node), ``gpu`` (its index), ``UUID``, ``device`` (``nvidia0``) and ``modelName``,
plus ``namespace``/``pod``/``container`` of the pod using it when pod mapping is on (so one GPU's
series change labels as pods come and go).  This scorer asks for three of them in one query,
``DCGM_FI_DEV_GPU_UTIL`` (percent busy), ``DCGM_FI_DEV_FB_USED`` and ``DCGM_FI_DEV_FB_FREE`` (frame
buffer MiB), and rates each GPU by the scarcer of its two resources::

    free(gpu) = min(1 - util / 100, fb_free / (fb_used + fb_free))

so a GPU whose memory is full counts as taken even while its cores idle.  A group of GPUs (the
cluster, a node, or one GPU: ``params.per``) has ``F = Σ free`` GPUs free, and scores
``100 * min(1, F / gpus)``, where ``gpus`` (``params.gpus``) is how many free GPUs your largest
workload needs: a cluster that can take it scores 100, one that cannot ranks by what it has free.
Each value is the window's mean, or with ``params.horizon`` the load expected over that many seconds
(``Series.blended_forecast``, the seasonal sample's forecast; give it a day and an hour of history).

A cluster without GPUs has none of these series, so the agent never calls the scorer: give the
DynamicScorer ``missingData: {score: -100}`` and such a cluster ranks below every cluster with GPUs.
Run it with ``python -m dynamic_scoring.samples.scorers.gpu`` or ``dynamic-scoring-sample-gpu``.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence

from dynamic_scoring.samples.scorers.server import (
    Defaults,
    build_parser,
    is_number,
    named_series,
    requested_horizon,
    run,
)
from dynamic_scoring.scorer import (
    Point,
    RequestError,
    ScoreResult,
    ScoringRequest,
    blended_forecast,
    mean,
    result,
)

UTIL, FB_USED, FB_FREE = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"
PER = ("cluster", "node", "gpu")
MAX_GPUS = 100_000

DEFAULTS = Defaults(
    name="gpu_free",
    description=(
        "Free GPU capacity from the DCGM exporter: 100 once params.gpus (default 1) GPUs are free,"
        " a GPU counting free by the scarcer of idle cores and free memory; per cluster, node or GPU"
    ),
    port=8003,
    # A plain selector keeps each series' metric name, which tells the three apart.
    query=f'{{__name__=~"{UTIL}|{FB_USED}|{FB_FREE}"}}',
    range=300,
    step=30,
    interval=30,
    capacity_option=False,
)


def _node(labels: dict[str, str]) -> str:
    return labels.get("Hostname") or labels.get("node") or labels.get("instance", "")


def _merged(series: list[list[Point]]) -> list[Point]:
    """One GPU's points of one metric from all its series (pod labels change), one value per time."""
    at: dict[float, list[float]] = defaultdict(list)
    for points in series:
        for t, v in points:
            at[t].append(v)
    return [(t, sum(vs) / len(vs)) for t, vs in sorted(at.items())]


def _expected(points: list[Point], horizon: float | None) -> float:
    return mean(points) if horizon is None else blended_forecast(points, horizon)


def gpu_free(metrics: dict[str, list[Point]], horizon: float | None = None) -> float | None:
    """How much of one GPU is free, 0 to 1, from its metrics' points; ``None`` when it has none."""
    parts: list[float] = []
    if metrics.get(UTIL):
        parts.append(1.0 - min(max(_expected(metrics[UTIL], horizon) / 100.0, 0.0), 1.0))
    if metrics.get(FB_USED) and metrics.get(FB_FREE):
        used, free = _expected(metrics[FB_USED], horizon), _expected(metrics[FB_FREE], horizon)
        if used + free > 0:
            parts.append(min(max(free / (used + free), 0.0), 1.0))
    return min(parts) if parts else None


def score(request: ScoringRequest, gpus: float = 1.0, per: str = "cluster") -> list[ScoreResult]:
    """One result per cluster, node or GPU (``params.per``) that has GPU series with points."""
    gpus = request.params.get("gpus", gpus)
    if not is_number(gpus) or not 0 < gpus <= MAX_GPUS:
        raise RequestError(f"params.gpus: expected a number of GPUs above 0 and at most {MAX_GPUS}")
    per = request.params.get("per", per)
    if per not in PER:
        raise RequestError(f"params.per: expected one of {', '.join(PER)}")
    horizon = requested_horizon(request, 0.0) if "horizon" in request.params else None
    # (node, GPU id) -> metric -> the points of each of its series
    found: dict[tuple[str, str], dict[str, list[list[Point]]]] = defaultdict(lambda: defaultdict(list))
    devices: dict[tuple[str, str], str] = {}
    for s in named_series(request, (UTIL, FB_USED, FB_FREE), "DCGM exporter"):
        key = (_node(s.labels), s.label("UUID") or s.label("gpu"))
        found[key][s.label("__name__")].append(s.points)
        devices[key] = s.label("device") or f"gpu{s.label('gpu')}"
    groups: dict[tuple[str, ...], float] = defaultdict(float)
    for key, metrics in found.items():
        free = gpu_free({m: _merged(p) for m, p in metrics.items()}, horizon)
        if free is not None:
            groups[_group(per, key[0], devices[key])] += free
    return [_result(100.0 * min(1.0, f / gpus), group) for group, f in groups.items()]


def _group(per: str, node: str, device: str) -> tuple[str, ...]:
    return {"cluster": (), "node": (node,), "gpu": (node, device)}[per]


def _result(score: float, group: tuple[str, ...]) -> ScoreResult:
    """The group's result, named by ``node`` (and ``device``) for a node's or a GPU's score."""
    if len(group) == 2:
        return result(score, node=group[0], device=group[1])
    return result(score, node=group[0]) if group else result(score)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``dynamic-scoring-sample-gpu [--gpus N] [--per cluster|node|gpu] ...``."""
    parser = build_parser("dynamic-scoring-sample-gpu", DEFAULTS)
    parser.add_argument(
        "--gpus", type=float, default=1.0, help="free GPUs that score 100 (default: 1; params.gpus wins)"
    )
    parser.add_argument(
        "--per", choices=PER, default="cluster", help="one score per cluster, node or GPU (params.per wins)"
    )
    args = parser.parse_args(argv)
    if not 0 < args.gpus <= MAX_GPUS:
        parser.error(f"--gpus must be above 0 and at most {MAX_GPUS}")
    run(args, parser, DEFAULTS.description, functools.partial(score, gpus=args.gpus, per=args.per))


if __name__ == "__main__":
    main()
