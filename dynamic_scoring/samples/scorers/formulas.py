"""The headroom rule of both sample scorers; the statistics (mean, fit, forecast) are the scorer library's.

Load is measured in CPU cores.  Both scorers map a load onto a score with the same headroom rule::

    score = 100 * clamp(1 - load / capacity, 0, 1)

so an idle cluster scores 100, a cluster at or above ``capacity`` cores scores 0, and the score
never rises when the load does.  Keeping the rule in [0, 100] (not [-100, 100]) means an overloaded
cluster never *loses* points against a cluster that publishes no score at all, which is what
Placement's Additive mode would otherwise do with a negative value.
"""

from __future__ import annotations

import math

from dynamic_scoring.scorer.maths import Point, forecast, linear_fit, mean


def headroom_score(load: float, capacity: float) -> float:
    """Score in [0, 100] for ``load`` cores out of ``capacity``; 100 when idle, 0 at or past capacity.

    A negative load (a counter reset seen through ``rate``'s extrapolation, or a forecast that
    undershoots) counts as idle rather than as more than idle, so the score stays bounded.
    """
    if not capacity > 0 or not math.isfinite(capacity):
        raise ValueError("capacity must be a positive finite number of cores")
    if math.isnan(load):
        raise ValueError("load must be a number")
    fraction = min(max(load / capacity, 0.0), 1.0)
    return 100.0 * (1.0 - fraction)


mean_load = mean
"""The mean of the values: the load the simple scorer rates (the scorer library's ``mean``)."""


__all__ = ["Point", "forecast", "headroom_score", "linear_fit", "mean_load"]
