"""A real Prometheus that serves the benchmark's cluster series, and the rescale every series gets.

Which clusters, and why no time-shifted copies, is ``bench.placement_quality.fleet``'s business: every
cluster is a distinct block of one public trace.  (An earlier fleet made four clusters out of one Alibaba
series shifted by 6, 12 and 18 hours; one copy's next hour was then another's past, a leak waiting for any
scorer that reads beyond its own cluster.)

Rescale.  The traces idle at very different levels (Alibaba ~40 %, Google ~47 %, Azure ~79 % of its
peak), so a policy could win by always picking the Alibaba clusters.  Each cluster is multiplied by
``TARGET_MEAN / mean(series)`` so that its mean over its own series is :data:`TARGET_MEAN` (50 %),
then clipped to [0, 100] (the clip can only lower the mean of a series whose peak exceeds twice its
mean).  A multiplicative rescale keeps the shape: a cluster's relative swings are its own, so
decisions depend on the dynamics, not on the level.

Prometheus.  Every cluster becomes one gauge series ``trace_cpu_utilization_percent{cluster="<name>"}``
with a sample every 300 s from :data:`SERIES_START` (a fixed past epoch, so runs are identical,
promtool accepts the blocks and the 10-year retention of ``e2e.prometheus.PrometheusServer`` keeps
them).  Samples sit exactly on the query grid the replay uses, so a ``query_range`` with
``step=300`` ending at a sample time returns the samples themselves, never an interpolation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.placement_quality.traces import STEP_SECONDS, ClusterLoads
from e2e.prometheus import PrometheusServer

METRIC = "trace_cpu_utilization_percent"
"""The gauge every cluster's series is stored as, told apart by its ``cluster`` label."""

CAPACITY_METRIC = "trace_cpu_capacity_cores"
"""A cluster's size in cores, a constant gauge per cluster (``bench.placement_quality.fleet.capacities``),
stored only when a run gives capacities: what a free-cores scorer multiplies the utilisation by, as a live
one would read allocatable CPU from kube-state-metrics."""

METRICS = (METRIC, CAPACITY_METRIC)
"""Every metric the benchmark stores: a scorer's query may read only these, each for its own cluster."""

SERIES_START = 1_700_006_400
"""Unix time of every series' first sample: 2023-11-15T00:00:00Z, a multiple of 300 s and of a day."""

TARGET_MEAN = 50.0
"""The mean, in percent, each cluster is rescaled to."""


def rescale(series: NDArray[np.float64], target_mean: float = TARGET_MEAN) -> NDArray[np.float64]:
    """``series`` times ``target_mean / mean(series)``, clipped to [0, 100] (see the module docstring).

    Raises:
        ValueError: the series is empty or its mean is not positive (nothing to scale).
    """
    values = np.asarray(series, dtype=np.float64)
    if values.size == 0 or not float(values.mean()) > 0.0:
        raise ValueError("a series to rescale needs a positive mean")
    return np.clip(values * (target_mean / float(values.mean())), 0.0, 100.0)


def step_time(step: int, start: int = SERIES_START, step_seconds: int = STEP_SECONDS) -> int:
    """Unix time of sample ``step``."""
    return start + step * step_seconds


def openmetrics(
    clusters: ClusterLoads, start: int = SERIES_START, capacities: NDArray[np.float64] | None = None
) -> str:
    """OpenMetrics text of every cluster as one gauge sample per step (promtool's backfill input).

    Values are written with ``repr`` so Prometheus returns exactly the floats of ``clusters.loads``.
    With ``capacities`` (cores, one per cluster) each cluster also gets a :data:`CAPACITY_METRIC`
    sample at every step, so any query window holds it.
    """
    series = [(METRIC, clusters.loads)]
    if capacities is not None:
        if capacities.shape != (len(clusters.names),):
            raise ValueError(f"{capacities.shape} capacities for {len(clusters.names)} clusters")
        series.append((CAPACITY_METRIC, np.repeat(capacities[:, None], clusters.loads.shape[1], axis=1)))
    lines: list[str] = []
    for metric, values in series:
        lines.append(f"# TYPE {metric} gauge")
        for name, row in zip(clusters.names, values, strict=True):
            prefix = f'{metric}{{cluster="{name}"}} '
            times = (step_time(i, start, clusters.step_seconds) for i in range(len(row)))
            lines.extend(f"{prefix}{float(v)!r} {t}" for v, t in zip(row, times, strict=True))
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def serve_clusters(
    workdir: Path,
    clusters: ClusterLoads,
    start: int = SERIES_START,
    capacities: NDArray[np.float64] | None = None,
) -> PrometheusServer:
    """A real Prometheus on 127.0.0.1 holding ``clusters`` (backfilled, then started); stop it after use."""
    server = PrometheusServer(workdir)
    server.backfill(openmetrics(clusters, start, capacities))
    return server.start()


__all__ = [
    "CAPACITY_METRIC",
    "METRIC",
    "METRICS",
    "SERIES_START",
    "TARGET_MEAN",
    "openmetrics",
    "rescale",
    "serve_clusters",
    "step_time",
]
