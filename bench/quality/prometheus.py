"""Multi-day cluster series from the public traces, and a real Prometheus that serves them.

Why several days.  A replay must skip a warm-up before every scorer has its history (the seasonal
scorer needs a day and an hour), and still judge days after it.  So each cluster here is several
*consecutive* days of one trace at 300 s (:data:`~bench.quality.traces.STEP_SECONDS`), read with
``traces`` (recorded data only, Azure scaled to percent of its own peak):

=====================  ==============  ==========================================================
cluster                trace           rows of the trace's 300 s CPU column (step ``i`` of the
                                       cluster is row ``offset + i``)
=====================  ==============  ==========================================================
``alibaba-utc``        alibaba2018     ``[0, 288 * days)``
``alibaba-plus6h``     alibaba2018     ``[72, 72 + 288 * days)``: the same data center seen from a
                                       region 6 h ahead (72 steps), without wrapping: the 227
                                       steps after the seventh full day cover the shift
``alibaba-plus12h``    alibaba2018     ``[144, 144 + 288 * days)``
``alibaba-plus18h``    alibaba2018     ``[216, 216 + 288 * days)``
``google-w0`` .. w3    google2019      ``[2016 * b, 2016 * b + 288 * days)`` for block ``b``: 28
                                       days cut into four 7-day blocks
``azure-w0`` .. w3     azure_v2        the same 7-day blocks of its 30 days (the last 2 unused)
=====================  ==============  ==========================================================

``days`` is 7 in the full run (12 clusters, 2016 steps each) and 3 in the quick run, which keeps 8 of
them (:data:`QUICK_CLUSTERS`).  The shifted Alibaba copies are correlated by construction (the same
diurnal shape, out of phase), which is what regions in other time zones look like; the Google and
Azure blocks are different weeks of one data center each.

Rescale.  The traces idle at very different levels (Alibaba ~40 %, Google ~47 %, Azure ~79 % of its
peak), so a policy could win by always picking the Alibaba clusters.  Each cluster is multiplied by
``TARGET_MEAN / mean(series)`` so that its mean over its own series is :data:`TARGET_MEAN` (50 %),
then clipped to [0, 100] (the clip can only lower the mean of a series whose peak exceeds twice its
mean: in the full run none does; in a 3-day cut one step of ``alibaba-utc`` is clipped, which leaves
its mean at 49.9985 %).  A multiplicative rescale keeps the shape: a cluster's relative swings
are its own, so decisions depend on the dynamics, not on the level.

Prometheus.  Every cluster becomes one gauge series ``trace_cpu_utilization_percent{cluster="<name>"}``
with a sample every 300 s from :data:`SERIES_START` (a fixed past epoch, so runs are identical,
promtool accepts the blocks and the 10-year retention of ``e2e.prometheus.PrometheusServer`` keeps
them).  Samples sit exactly on the query grid the replay uses, so a ``query_range`` with
``step=300`` ending at a sample time returns the samples themselves, never an interpolation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.quality.traces import (
    STEP_SECONDS,
    STEPS_PER_DAY,
    ClusterLoads,
    TraceName,
    cpu_percent,
    read_trace,
)
from e2e.prometheus import PrometheusServer

METRIC = "trace_cpu_utilization_percent"
"""The gauge every cluster's series is stored as, told apart by its ``cluster`` label."""

SERIES_START = 1_700_006_400
"""Unix time of every series' first sample: 2023-11-15T00:00:00Z, a multiple of 300 s and of a day."""

TARGET_MEAN = 50.0
"""The mean, in percent, each cluster is rescaled to."""

FULL_DAYS = 7
QUICK_DAYS = 3


@dataclass(frozen=True)
class Source:
    """Where one cluster comes from: ``trace`` rows starting at ``offset`` (in 300 s steps)."""

    trace: TraceName
    offset: int


WEEK = 7 * STEPS_PER_DAY

CLUSTERS: dict[str, Source] = {
    "alibaba-utc": Source("alibaba2018", 0),
    "alibaba-plus6h": Source("alibaba2018", 72),
    "alibaba-plus12h": Source("alibaba2018", 144),
    "alibaba-plus18h": Source("alibaba2018", 216),
    **{f"google-w{b}": Source("google2019", WEEK * b) for b in range(4)},
    **{f"azure-w{b}": Source("azure_v2", WEEK * b) for b in range(4)},
}
"""Cluster name -> source, in the order :func:`build_clusters` returns them (the table above)."""

QUICK_CLUSTERS: tuple[str, ...] = (
    "alibaba-utc",
    "alibaba-plus6h",
    "alibaba-plus12h",
    "alibaba-plus18h",
    "google-w0",
    "google-w1",
    "azure-w0",
    "azure-w1",
)
"""The 8 clusters of the quick run (each trace kept, fewer weeks of Google and Azure)."""


def rescale(series: NDArray[np.float64], target_mean: float = TARGET_MEAN) -> NDArray[np.float64]:
    """``series`` times ``target_mean / mean(series)``, clipped to [0, 100] (see the module docstring).

    Raises:
        ValueError: the series is empty or its mean is not positive (nothing to scale).
    """
    values = np.asarray(series, dtype=np.float64)
    if values.size == 0 or not float(values.mean()) > 0.0:
        raise ValueError("a series to rescale needs a positive mean")
    return np.clip(values * (target_mean / float(values.mean())), 0.0, 100.0)


def cut(series: NDArray[np.float64], offset: int, steps: int, name: str) -> NDArray[np.float64]:
    """Rows ``[offset, offset + steps)`` of a trace column, refusing a cut that runs past its end."""
    part = np.asarray(series[offset : offset + steps], dtype=np.float64)
    if offset < 0 or len(part) != steps:
        raise ValueError(f"{name}: rows [{offset}, {offset + steps}) exceed the trace's {len(series)} rows")
    return part


def build_clusters(names: Sequence[str] | None = None, days: int = FULL_DAYS) -> ClusterLoads:
    """``days`` consecutive days per cluster, rescaled to the same mean; all 12 clusters when omitted.

    Raises:
        KeyError: a name is not in :data:`CLUSTERS`.
        ValueError: a cut runs past its trace (``days`` too large for the shifted Alibaba copies).
    """
    chosen = tuple(CLUSTERS) if names is None else tuple(names)
    steps = days * STEPS_PER_DAY
    columns: dict[TraceName, NDArray[np.float64]] = {}
    rows: list[NDArray[np.float64]] = []
    for name in chosen:
        src = CLUSTERS[name]
        if src.trace not in columns:
            frame: Any = read_trace(src.trace)
            columns[src.trace] = cpu_percent(src.trace, frame)
        rows.append(rescale(cut(columns[src.trace], src.offset, steps, name)))
    loads = np.vstack(rows) if rows else np.empty((0, steps), dtype=np.float64)
    return ClusterLoads(names=chosen, step_seconds=STEP_SECONDS, loads=loads)


def step_time(step: int, start: int = SERIES_START, step_seconds: int = STEP_SECONDS) -> int:
    """Unix time of sample ``step``."""
    return start + step * step_seconds


def openmetrics(clusters: ClusterLoads, start: int = SERIES_START) -> str:
    """OpenMetrics text of every cluster as one gauge sample per step (promtool's backfill input).

    Values are written with ``repr`` so Prometheus returns exactly the floats of ``clusters.loads``.
    """
    lines = [f"# TYPE {METRIC} gauge"]
    for name, row in zip(clusters.names, clusters.loads, strict=True):
        prefix = f'{METRIC}{{cluster="{name}"}} '
        lines.extend(
            f"{prefix}{float(v)!r} {step_time(i, start, clusters.step_seconds)}" for i, v in enumerate(row)
        )
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def serve_clusters(workdir: Path, clusters: ClusterLoads, start: int = SERIES_START) -> PrometheusServer:
    """A real Prometheus on 127.0.0.1 holding ``clusters`` (backfilled, then started); stop it after use."""
    server = PrometheusServer(workdir)
    server.backfill(openmetrics(clusters, start))
    return server.start()


__all__ = [
    "CLUSTERS",
    "METRIC",
    "QUICK_CLUSTERS",
    "SERIES_START",
    "TARGET_MEAN",
    "Source",
    "build_clusters",
    "cut",
    "openmetrics",
    "rescale",
    "serve_clusters",
    "step_time",
]
