"""What the placement-stability run sets up: its scorers, Placements, clusters and compressed clock.

The run (``live``) and its plot (``plot``) both read these, so they live below both: the plot never
imports the run.
"""

from __future__ import annotations

INTERVAL = 5
"""The scoring interval of the run, in seconds."""
COMPRESSION = 30 / INTERVAL
"""How much faster than production (30 s interval) the run goes."""
STABILIZATION = {"tolerance": 3, "riseWindowSeconds": 50, "fallWindowSeconds": 0}
"""The stabilized scorer's settings: production's 300 s rise window, compressed."""
WIDE_TOLERANCE = 6
"""A second stabilized scorer's tolerance: twice the noise's sigma instead of once."""
VALID_FOR = 100
"""Every scorer's ``validForSeconds`` (production's 600 s, compressed): the agent refreshes an
unchanged score when half of it is left, so this bounds how rarely a quiet score is written."""
MARGIN_WEIGHTS = (10, 1)
"""AddOn and Steady weights of the margin policies: a margin of 100 x 1 / 10 = 10 points."""
SIGMA = 3.0
"""The noise on each cluster's published raw score, in points (one standard deviation)."""
SIGMA_AT_LOAD = 3.3
"""The noise the driver adds to the load, in score points: a little more than ``SIGMA`` because a
cycle whose two irate points straddle a noise change reads a blend of two values (about 2 cycles in 5,
a blend's variance is 2/3 of one value's on average: a spread 0.93 times the driver's).  The run
measures and reports the published spread."""
RAW, STABLE, WIDE = "bench_raw", "bench_stable", "bench_stable_wide"
SCORERS: dict[str, dict[str, int]] = {
    RAW: {},
    STABLE: STABILIZATION,
    WIDE: {**STABILIZATION, "tolerance": WIDE_TOLERANCE},
}
"""Score name -> its DynamicScorer's ``stabilization`` (empty: none)."""
POLICIES = {
    "raw": (RAW, False),
    "stabilization": (STABLE, False),
    "margin": (RAW, True),
    "both": (STABLE, True),
    "stabilization-tol6": (WIDE, False),
    "both-tol6": (WIDE, True),
}
"""Placement name -> (the score it reads, whether it adds the Steady margin)."""
NAMESPACE = "bench-stability"
CLUSTERS = ("cluster1", "cluster2")
QUERY_RANGE = 1
"""The scorer averages two irate points one second apart (the shortest range the CRD allows): the
load over the last two scrapes, so a load change shows within about three seconds (the exporter's
file poll and two scrapes)."""
