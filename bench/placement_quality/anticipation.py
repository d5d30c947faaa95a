"""Anticipation that can fail: do a policy's live placements avoid a cluster just before it ramps up?

The promise of a forecasting scorer is pre-emption: steer new work away from a cluster *before* its
load climbs.  An earlier measure ("did the decisions leave a cluster before it crossed its threshold")
could not fail: a policy that never went near a cluster "left" it, most crossings were single 5-minute
blips, and by it the reactive scorer looked the most pre-emptive.  This one compares each policy with
itself:

* **A ramp** (:class:`Ramp`, :func:`ramp_events`) is a sustained climb out of a quiet spell, judged in
  hindsight on one cluster's own load: at step ``e`` the load crosses above the cluster's own
  ``above``-th percentile and stays above it for ``sustain_steps`` steps (30 minutes), while every step
  from ``quiet_from`` to ``quiet_to`` steps before ``e`` (30 to 60 minutes before) was below its
  ``quiet``-th percentile.  So a blip is not a ramp, and neither is a cluster that was already busy.
* **Live placements** on the ramping cluster at ``e`` are the policy's decisions whose workload is
  alive at ``e`` (placed at one of the ``life`` steps up to and including ``e``).  Every one of them was
  decided before sample ``e`` could be seen (the replay's causal alignment), so a policy that places
  less on a cluster about to ramp than it usually does is anticipating the ramp.
* **The base rate** is the share of all the policy's decisions that put work on that cluster.  The
  measure per ramp is the live share minus the base rate (:func:`shares`): negative when the policy
  keeps away from clusters about to ramp, positive when it is drawn to them (a reactive score is:
  a cluster is quietest just before it ramps).  Its mean over ramps gets a bootstrap interval over
  ramps, and a sentence is written only when that interval excludes 0 and there are at least
  :data:`MIN_EVENTS` ramps.

Two definitions are measured (:data:`RAMPS`): ``sustained`` (above the 90th percentile for 30 min
after 30 to 60 min below the median), the one the benchmark was asked for, and ``loose`` (above the
80th for 30 min after being below the 75th 30 min before), which counts more ramps of a milder kind.
The shipped traces hold few of either: the real fleet's 3-day blocks about 5 sustained ramps in all,
the synthetic one-day samples none (their days rise smoothly, so a cluster 30 minutes from its peak is
never below its median); so the output reports the count beside every number and calls fewer than
:data:`MIN_EVENTS` ramps "too few".

Pure numpy, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import ArrayLike, NDArray

MIN_EVENTS = 200
"""Ramps below which a difference is reported but not called a finding."""


@dataclass(frozen=True)
class Ramp:
    """A ramp's definition, percentiles of each cluster's own judged load and steps of 300 s."""

    above: float
    quiet: float
    sustain_steps: int = 6
    quiet_from: int = 12
    quiet_to: int = 6

    def __post_init__(self) -> None:
        if not 0.0 <= self.quiet <= self.above <= 100.0:
            raise ValueError(f"need 0 <= quiet <= above <= 100, got {self.quiet} and {self.above}")
        if self.sustain_steps < 1 or not 1 <= self.quiet_to <= self.quiet_from:
            raise ValueError(
                f"need sustain_steps >= 1 and 1 <= quiet_to <= quiet_from, got {self.sustain_steps},"
                f" {self.quiet_to} and {self.quiet_from}"
            )


RAMPS: dict[str, Ramp] = {
    "sustained": Ramp(above=90.0, quiet=50.0),
    "loose": Ramp(above=80.0, quiet=75.0, quiet_from=6, quiet_to=6),
}
"""The definitions every run measures, by the name the output uses."""


def ramp_events(loads: ArrayLike, ramp: Ramp) -> NDArray[np.int64]:
    """Every ramp of ``loads`` (clusters x steps) as rows ``(cluster, step)``, by cluster then step.

    ``step`` is the first step above the cluster's ``ramp.above`` percentile.  A ramp needs its whole
    quiet window and its whole sustained run inside the series.
    """
    x = np.asarray(loads, dtype=np.float64)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"loads must be 2-D [cluster][step] and finite, got shape {x.shape}")
    steps = x.shape[1]
    first, last = ramp.quiet_from, steps - ramp.sustain_steps  # candidate steps e in [first, last]
    if last < first:
        return np.zeros((0, 2), dtype=np.int64)
    above = np.percentile(x, ramp.above, axis=1)[:, None]
    quiet = np.percentile(x, ramp.quiet, axis=1)[:, None]
    hot = x > above
    calm = x < quiet
    e = np.arange(first, last + 1)
    crossing = hot[:, e] & ~hot[:, e - 1]
    # held[c, s]: steps s .. s + sustain - 1 all hot; still[c, s]: steps s .. s + width - 1 all calm.
    held: NDArray[np.bool_] = np.all(sliding_window_view(hot, ramp.sustain_steps, axis=1), axis=-1)
    width = ramp.quiet_from - ramp.quiet_to + 1
    still: NDArray[np.bool_] = np.all(sliding_window_view(calm, width, axis=1), axis=-1)
    found = crossing & held[:, e] & still[:, e - ramp.quiet_from]
    clusters, at = np.nonzero(found)
    return np.stack([clusters, e[at]], axis=1).astype(np.int64)


def shares(
    picks: NDArray[np.int64], events: NDArray[np.int64], life_steps: int, clusters: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per ramp: the share of live decisions on the ramping cluster, and the policy's base rate there.

    ``picks`` is every step's decision (steps x k cluster indices, as the experiment decides them);
    the decision at step ``t`` places a workload alive over ``[t, t + life_steps)``.  A ramp at step
    ``e`` on cluster ``c`` sees the decisions at ``max(0, e - life_steps + 1) .. e``; the live share is
    the fraction of them that include ``c``, the base rate the fraction of all ``picks`` that do.
    """
    if life_steps < 1:
        raise ValueError(f"life_steps must be at least 1, got {life_steps}")
    if events.size and int(events[:, 1].max()) >= picks.shape[0]:
        raise ValueError(f"a ramp at step {int(events[:, 1].max())} is past the {picks.shape[0]} decisions")
    on = np.zeros((picks.shape[0], clusters), dtype=np.int64)
    np.put_along_axis(on, picks, 1, axis=1)
    running = np.vstack([np.zeros((1, clusters), dtype=np.int64), np.cumsum(on, axis=0)])
    c, e = events[:, 0], events[:, 1]
    start = np.maximum(0, e - life_steps + 1)
    live = (running[e + 1, c] - running[start, c]) / (e + 1 - start)
    base = on.mean(axis=0)[c]
    return live.astype(np.float64), np.asarray(base, dtype=np.float64)


__all__ = ["MIN_EVENTS", "RAMPS", "Ramp", "ramp_events", "shares"]
