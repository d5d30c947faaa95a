"""What the seasonal sample costs per scoring cycle: ``python -m bench forecast-cost``.

A forecast that reads days of history costs twice: the agent fetches a long ``query_range`` from
Prometheus every cycle, and the scorer computes over every point.  This benchmark measures both on a
real Prometheus holding one cluster of the placement-quality traces (``bench.placement_quality``):
the bytes one series' window takes on the wire and decoded, for one and three days of history, and
the scorer's milliseconds per series with and without the blend at three horizons.  The scoring
time runs the sample's own ``score`` on the window Prometheus returned, so it is the sample's code on
real data, not a model of it.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import httpx

from bench import Row, benchmark
from bench.placement_quality import fleet as fleet_module
from bench.placement_quality import prometheus as prom
from bench.placement_quality.traces import STEP_SECONDS, ClusterLoads
from dynamic_scoring.samples.scorers import seasonal
from dynamic_scoring.scorer import ScoringRequest, Series

NAME = "forecast-cost"
WINDOWS = {"1 day + 1 h": seasonal.DAY + seasonal.HOUR, "3 days + 1 h": 3 * seasonal.DAY + seasonal.HOUR}
HORIZONS = {"1h": 3_600, "4h": 14_400, "12h": 43_200}
REPEATS = 200


def _fetch(url: str, name: str, end: int, window: int) -> tuple[int, int, list[tuple[float, float]]]:
    """One ``query_range`` as the agent sends it: bytes on the wire, bytes decoded, and the points."""
    params = {
        "query": f'{prom.METRIC}{{cluster="{name}"}}',
        "start": str(end - window),
        "end": str(end),
        "step": str(STEP_SECONDS),
    }
    with httpx.Client(timeout=30.0) as client:
        response = client.get(f"{url}/api/v1/query_range", params=params)
        response.raise_for_status()
        (series,) = response.json()["data"]["result"]
        points = [(float(t), float(v)) for t, v in series["values"]]
        return response.num_bytes_downloaded, len(response.content), points


def _ms_per_series(points: list[tuple[float, float]], horizon: int, blend: bool) -> float:
    """The sample's ``score`` on one series, median of :data:`REPEATS` runs, in milliseconds."""
    request = ScoringRequest([Series({"cluster": "c"}, points)], {"horizon": horizon})
    times = []
    for _ in range(REPEATS):
        began = time.perf_counter()
        seasonal.score(
            request,
            capacity=100.0,
            horizon=float(horizon),
            season=float(seasonal.DAY),
            level=float(seasonal.HOUR),
            blend=blend,
        )
        times.append(time.perf_counter() - began)
    return 1000.0 * statistics.median(times)


@benchmark(NAME)
def forecast_cost(workdir: Path) -> list[Row]:
    """Bytes per window and milliseconds per series; see the module docstring."""
    fleet = fleet_module.real_fleet(6)
    first = ClusterLoads(fleet.names[:1], STEP_SECONDS, fleet.loads[:1])
    end = prom.step_time(first.loads.shape[1] - 1)
    server = prom.serve_clusters(workdir / "prometheus", first)
    rows = []
    try:
        for label, window in WINDOWS.items():
            wire, decoded, points = _fetch(server.url, first.names[0], end, window)
            rows.append(
                Row(
                    NAME,
                    f"query_range, {label} at {STEP_SECONDS} s: points / bytes on the wire / decoded",
                    f"{len(points)} / {wire} / {decoded}",
                )
            )
            for horizon_label, horizon in HORIZONS.items():
                alone = _ms_per_series(points, horizon, blend=False)
                blended = _ms_per_series(points, horizon, blend=True)
                rows.append(
                    Row(
                        NAME,
                        f"scorer ms per series, {label}, horizon {horizon_label}: alone / blended",
                        f"{alone:.2f} / {blended:.2f}",
                    )
                )
    finally:
        server.stop()
    return rows
