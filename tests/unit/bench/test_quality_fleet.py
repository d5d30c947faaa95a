"""The benchmark's fleets: real blocks that never overlap, a split by time, seeded capacities, synthetic
samples read by index, and the summary numbers on hand-made series."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from numpy.typing import NDArray

from bench.placement_quality import fleet as fl
from bench.placement_quality.prometheus import rescale
from bench.placement_quality.traces import STEPS_PER_DAY, TraceName, cpu_percent, read_trace

TRACE_ROWS: dict[TraceName, int] = {"alibaba2018": 2243, "google2019": 8064, "azure_v2": 8640}


@pytest.fixture(scope="module")
def columns() -> dict[TraceName, NDArray[np.float64]]:
    return {t: cpu_percent(t, read_trace(t)) for t in fl.FAMILIES}


@pytest.fixture(scope="module")
def fleet3() -> fl.Fleet:
    return fl.real_fleet(3)


# --- real fleet: blocks, copies, split -------------------------------------------------------------------


@pytest.mark.parametrize("days", [1, 2, 3, 7])
def test_blocks_tile_each_trace_from_row_zero_without_overlap(days: int) -> None:
    fleet = fl.real_fleet(days)
    steps = days * STEPS_PER_DAY
    assert fleet.loads.shape == (len(fleet.names), steps)
    for trace in fl.FAMILIES:
        origins = [o for o in fleet.origins if o.family == trace]
        assert len(origins) == TRACE_ROWS[trace] // steps  # as many as fit
        for k, origin in enumerate(origins):
            assert (origin.start, origin.stop) == (k * steps, (k + 1) * steps)
            assert origin.stop <= TRACE_ROWS[trace]
            assert origin.sample is None
        for a, b in itertools.combinations(origins, 2):
            assert a.stop <= b.start  # row ranges disjoint, in time order
            assert not a.overlaps(b)


def test_block_counts_for_the_documented_layouts() -> None:
    counts = {days: [fl.block_count(TRACE_ROWS[t], days) for t in fl.FAMILIES] for days in (1, 2, 3, 4, 7, 8)}
    assert counts == {
        1: [7, 28, 30],
        2: [3, 14, 15],
        3: [2, 9, 10],
        4: [1, 7, 7],
        7: [1, 4, 4],
        8: [0, 3, 3],
    }
    with pytest.raises(ValueError, match="days must be >= 1"):
        fl.block_count(100, 0)
    with pytest.raises(ValueError, match="days must be >= 1"):
        fl.real_fleet(0)
    with pytest.raises(ValueError, match="no block of 8 days"):
        fl.real_fleet(8, families=("alibaba2018",))


def test_no_cluster_is_a_shifted_copy_and_each_is_its_rows(
    fleet3: fl.Fleet, columns: dict[TraceName, NDArray[np.float64]]
) -> None:
    for a, b in itertools.combinations(fleet3.origins, 2):
        assert not a.overlaps(b)
    for name, origin, row in zip(fleet3.names, fleet3.origins, fleet3.loads, strict=True):
        # the provenance is true: the cluster is exactly its rows of the trace, rescaled
        np.testing.assert_allclose(row, rescale(columns[origin.family][origin.start : origin.stop]))
        assert float(row.mean()) == pytest.approx(50.0, abs=0.05)
        assert name.endswith(f"-b{origin.start // (3 * STEPS_PER_DAY)}")
    assert len({row.tobytes() for row in fleet3.loads}) == len(fleet3.names)


def test_overlap_is_detected_for_the_old_shifted_layout() -> None:
    utc = fl.Origin("alibaba2018", 0, 2016)
    plus6h = fl.Origin("alibaba2018", 72, 72 + 2016)
    assert utc.overlaps(plus6h) and plus6h.overlaps(utc)
    assert not utc.overlaps(fl.Origin("alibaba2018", 2016, 4032))  # touching is not overlapping
    assert not utc.overlaps(fl.Origin("google2019", 0, 2016))
    assert not fl.Origin("azure_v2", 0, 288, sample=3).overlaps(fl.Origin("azure_v2", 0, 288, sample=4))
    assert not fl.Origin("azure_v2", 0, 288, sample=3).overlaps(fl.Origin("azure_v2", 0, 288))


def test_split_is_by_time_within_each_trace(fleet3: fl.Fleet) -> None:
    assert fl.split_roles(1) == ("test",)
    assert fl.split_roles(4) == ("train", "train", "test", "test")
    assert fl.split_roles(9).count("train") == 4
    for trace in fl.FAMILIES:
        mine = [(o, r) for o, r in zip(fleet3.origins, fleet3.roles, strict=True) if o.family == trace]
        train = [o for o, r in mine if r == "train"]
        test = [o for o, r in mine if r == "test"]
        assert train and test  # at 3 days every trace is on both sides
        assert max(o.stop for o in train) <= min(o.start for o in test)
    train_fleet, test_fleet = fleet3.select("train"), fleet3.select("test")
    assert set(train_fleet.names).isdisjoint(test_fleet.names)
    assert len(train_fleet.names) + len(test_fleet.names) == len(fleet3.names)
    assert set(train_fleet.roles) == {"train"} and set(test_fleet.roles) == {"test"}
    for sub in (train_fleet, test_fleet):
        for i, name in enumerate(sub.names):
            j = fleet3.names.index(name)
            assert sub.capacities[i] == fleet3.capacities[j]
            np.testing.assert_array_equal(sub.loads[i], fleet3.loads[j])
            assert sub.family[i] == fleet3.family[j]


def test_a_single_block_is_held_out() -> None:
    fleet = fl.real_fleet(7, families=("alibaba2018", "google2019"))
    assert fleet.names == ("alibaba-b0", "google-b0", "google-b1", "google-b2", "google-b3")
    assert fleet.roles == ("test", "train", "train", "test", "test")
    assert not fleet.synthetic


def test_real_fleet_is_deterministic_by_seed() -> None:
    a, b, c = fl.real_fleet(3, seed=5), fl.real_fleet(3, seed=5), fl.real_fleet(3, seed=6)
    assert a.names == b.names and a.origins == b.origins and a.roles == b.roles
    np.testing.assert_array_equal(a.loads, b.loads)
    np.testing.assert_array_equal(a.capacities, b.capacities)
    np.testing.assert_array_equal(a.loads, c.loads)  # the seed draws capacities only
    assert not np.array_equal(a.capacities, c.capacities)


# --- capacities -------------------------------------------------------------------------------------------


def test_capacities_are_in_range_seeded_and_log_uniform() -> None:
    caps = fl.capacities(20_000, seed=1)
    assert caps.shape == (20_000,)
    assert caps.min() >= 50.0 and caps.max() <= 2000.0
    np.testing.assert_array_equal(caps, fl.capacities(20_000, seed=1))
    assert not np.array_equal(caps, fl.capacities(20_000, seed=2))
    # log-uniform: equal counts per equal ratio of sizes, the median at the geometric mean
    counts, _ = np.histogram(np.log(caps), bins=10, range=(math.log(50.0), math.log(2000.0)))
    assert counts.min() > 0.9 * 2000 and counts.max() < 1.1 * 2000
    assert float(np.median(caps)) == pytest.approx(math.sqrt(50.0 * 2000.0), rel=0.05)
    assert fl.capacities(0, seed=1).shape == (0,)
    small = fl.capacities(100, seed=1, low=1.0, high=2.0)
    assert small.min() >= 1.0 and small.max() <= 2.0


def test_capacities_refuse_a_bad_range() -> None:
    with pytest.raises(ValueError, match=r"0 < low < high"):
        fl.capacities(3, seed=0, low=0.0)
    with pytest.raises(ValueError, match=r"0 < low < high"):
        fl.capacities(3, seed=0, low=10.0, high=10.0)
    with pytest.raises(ValueError, match=r"count must be >= 0"):
        fl.capacities(-1, seed=0)


# --- synthetic samples ------------------------------------------------------------------------------------


@pytest.mark.parametrize("trace", fl.FAMILIES)
def test_synthetic_samples_are_indexed_and_read_deterministically(trace: TraceName) -> None:
    assert fl.synthetic_indices(trace) == tuple(range(1000))  # Azure's sample_0_remove_me.csv is not one
    first = fl.synthetic_sample(trace, 7)
    assert first.shape == (fl.SYNTHETIC_STEPS,) == (288,)
    np.testing.assert_array_equal(first, fl.synthetic_sample(trace, 7))
    assert not np.array_equal(first, fl.synthetic_sample(trace, 8))
    assert np.all(np.isfinite(first)) and float(first.min()) > 0.0
    pools = fl.synthetic_pool(trace, "train"), fl.synthetic_pool(trace, "test")
    assert pools == (tuple(range(500)), tuple(range(500, 1000)))


def test_synthetic_sample_reads_the_cpu_column_of_the_file() -> None:
    # sample_0 of Google starts 45.381443 (cpu_util_percent), 34.555897 (mem_util_percent), ...
    assert fl.synthetic_sample("google2019", 0)[0] == pytest.approx(45.381443)
    assert fl.synthetic_sample("azure_v2", 0)[0] == pytest.approx(5898208.5)  # not the "remove_me" day
    with pytest.raises(FileNotFoundError, match="no synthetic sample 1000"):
        fl.synthetic_sample("alibaba2018", 1000)
    with pytest.raises(FileNotFoundError, match="no synthetic sample -1"):
        fl.synthetic_sample("alibaba2018", -1)


def test_synthetic_fleet_is_labelled_seeded_and_free_of_near_copies() -> None:
    fleet = fl.synthetic_fleet(12, seed=3)
    assert fleet.synthetic and set(fleet.roles) == {"train"}
    assert fleet.loads.shape == (12, 288)
    assert [fleet.family.count(t) for t in fl.FAMILIES] == [4, 4, 4]
    for name, origin in zip(fleet.names, fleet.origins, strict=True):
        assert origin.sample is not None and 0 <= origin.sample < 500
        assert (origin.start, origin.stop) == (0, 288)
        assert name == f"{fl.SHORT_NAME[origin.family]}-s{origin.sample:04d}"
    np.testing.assert_allclose(fleet.loads.mean(axis=1), 50.0, atol=0.05)
    corr = np.abs(np.corrcoef(fleet.loads))
    np.fill_diagonal(corr, 0.0)
    assert corr.max() <= fl.MAX_CORRELATION
    again = fl.synthetic_fleet(12, seed=3)
    assert again.names == fleet.names
    np.testing.assert_array_equal(again.loads, fleet.loads)
    np.testing.assert_array_equal(again.capacities, fleet.capacities)
    assert fl.synthetic_fleet(12, seed=4).names != fleet.names
    held_out = fl.synthetic_fleet(12, seed=3, role="test")
    assert set(held_out.roles) == {"test"}
    assert all(o.sample is not None and o.sample >= 500 for o in held_out.origins)
    for a, b in itertools.product(fleet.origins, held_out.origins):
        assert not a.overlaps(b)


def test_synthetic_fleet_refuses_what_it_cannot_fill() -> None:
    # Azure's samples repeat themselves: far fewer than 100 of a pool are distinct at 0.99
    with pytest.raises(ValueError, match=r"azure_v2: only \d+ of the 100 train samples"):
        fl.synthetic_fleet(100, families=("azure_v2",))
    assert len(fl.synthetic_fleet(100, families=("azure_v2",), max_correlation=None).names) == 100
    with pytest.raises(ValueError, match="at least one cluster"):
        fl.synthetic_fleet(0)
    assert fl.per_family(10, fl.FAMILIES) == (4, 3, 3)
    with pytest.raises(ValueError, match="at least one family"):
        fl.per_family(3, ())


# --- the fleet record and its summary ---------------------------------------------------------------------


def square_day(shift_hours: int, days: int = 2) -> NDArray[np.float64]:
    """60 % for twelve hours from ``shift_hours``, 40 % for the other twelve, for ``days`` days."""
    hour = np.arange(days * STEPS_PER_DAY) // 12
    return np.where((hour - shift_hours) % 24 < 12, 60.0, 40.0)


def hand_made() -> fl.Fleet:
    day = square_day(0)
    quarter = square_day(6)  # a quarter period later: uncorrelated with ``day`` over whole days
    return fl.Fleet(
        names=("a0", "a1", "b0"),
        loads=np.vstack([day, day, quarter]),
        capacities=np.array([100.0, 200.0, 50.0]),
        origins=(
            fl.Origin("google2019", 0, 576),
            fl.Origin("google2019", 576, 1152),
            fl.Origin("azure_v2", 0, 576),
        ),
        roles=("train", "train", "test"),
        synthetic=False,
    )


def test_summary_numbers_on_hand_made_series() -> None:
    summary = fl.fleet_summary(hand_made())
    assert summary["clusters"] == 3 and summary["steps"] == 576 and summary["step_seconds"] == 300
    assert summary["roles"] == {"train": 2, "test": 1}
    assert summary["total_cores"] == pytest.approx(350.0)
    assert not summary["synthetic"]
    # eigenvalues of [[1, 1, 0], [1, 1, 0], [0, 0, 1]] are 2, 1, 0: (3)^2 / (4 + 1)
    assert summary["effective_clusters"] == pytest.approx(1.8)
    google, azure = summary["families"]["google2019"], summary["families"]["azure_v2"]
    assert google["clusters"] == 2 and azure["clusters"] == 1
    assert google["effective_clusters"] == pytest.approx(1.0)  # two identical series are one cluster
    assert azure["effective_clusters"] == pytest.approx(1.0)
    assert google["std"] == pytest.approx(10.0) and azure["std"] == pytest.approx(10.0)
    assert google["daily_amplitude"] == pytest.approx(20.0)
    assert azure["daily_amplitude"] == pytest.approx(20.0)
    # 575 step pairs, 3 of them across a switch: corr = 1 - 2 * 3 / 575 up to the end effects
    assert google["lag1_autocorrelation"] == pytest.approx(fl.lag1_autocorrelation(square_day(0)))
    assert google["lag1_autocorrelation"] == pytest.approx(1.0 - 6.0 / 575.0, abs=1e-3)


def test_lag1_and_daily_amplitude_on_known_series() -> None:
    assert fl.lag1_autocorrelation([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(1.0)
    assert fl.lag1_autocorrelation([1.0, -1.0] * 10) == pytest.approx(-1.0)
    assert fl.lag1_autocorrelation([3.0] * 10) is None
    assert fl.lag1_autocorrelation([1.0, 2.0]) is None
    assert fl.daily_amplitude(square_day(3, days=1)) == pytest.approx(20.0)
    assert fl.daily_amplitude(square_day(0)[: STEPS_PER_DAY - 1]) is None  # less than a day
    assert fl.daily_amplitude(np.full(STEPS_PER_DAY, 50.0)) == pytest.approx(0.0)
    # a one-hour spike averaged over two days counts half: the profile is a mean over days
    spike = np.full(2 * STEPS_PER_DAY, 50.0)
    spike[:12] = 70.0
    assert fl.daily_amplitude(spike) == pytest.approx(10.0)


def test_fleet_views_and_validation() -> None:
    fleet = hand_made()
    assert fleet.family == ("google2019", "google2019", "azure_v2")
    free = fleet.free_cores
    assert free.shape == fleet.loads.shape
    assert free[0, 0] == pytest.approx(40.0) and free[1, 0] == pytest.approx(80.0)
    assert free[2, 0] == pytest.approx(30.0)
    loads = fleet.cluster_loads()
    assert loads.names == fleet.names and loads.step_seconds == 300
    np.testing.assert_array_equal(loads.loads, fleet.loads)
    with pytest.raises(ValueError, match=r"loads must be 2 clusters x steps"):
        fl.Fleet(("a", "b"), fleet.loads, fleet.capacities[:2], fleet.origins[:2], ("train", "train"), False)
    with pytest.raises(ValueError, match=r"capacities must have shape \(3,\)"):
        fl.Fleet(fleet.names, fleet.loads, fleet.capacities[:2], fleet.origins, fleet.roles, False)
    with pytest.raises(ValueError, match="one entry per cluster"):
        fl.Fleet(fleet.names, fleet.loads, fleet.capacities, fleet.origins[:2], fleet.roles, False)
    with pytest.raises(ValueError, match="unique"):
        fl.Fleet(("a", "a", "b"), fleet.loads, fleet.capacities, fleet.origins, fleet.roles, False)


def test_summary_of_the_real_fleet_counts_fewer_independent_clusters_than_clusters(
    fleet3: fl.Fleet,
) -> None:
    summary = fl.fleet_summary(fleet3)
    assert summary["clusters"] == 21
    assert summary["roles"] == {"train": 10, "test": 11}
    assert 1.0 < summary["effective_clusters"] < summary["clusters"]
    assert [summary["families"][t]["clusters"] for t in fl.FAMILIES] == [2, 9, 10]
    for family in summary["families"].values():
        assert family["daily_amplitude"] is not None and family["daily_amplitude"] > 0.0
        lag1 = family["lag1_autocorrelation"]
        assert lag1 is not None and 0.5 < lag1 < 1.0
