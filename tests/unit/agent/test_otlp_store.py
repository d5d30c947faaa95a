"""The OTLP store's mapping to the matrix (gauges, counters with resets, deltas) and its bounds."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.agent.source.otlp.fetching import OtlpReceiverDisabled, OtlpResultTooLarge, read_selected
from dynamic_scoring.agent.source.otlp.selection import Selector, parse_selector
from dynamic_scoring.agent.source.otlp.store import LOOKBACK_SECONDS, LabelLimits, SeriesStore, format_value
from dynamic_scoring.agent.source.otlp.translation import Flattened, Kind, Point
from dynamic_scoring.agent.source.prometheus import RangeWindow

NOW = 1_800_000_000.0


def points(name: str, kind: Kind, samples: list[tuple[float, float]], **labels: str) -> Flattened:
    lab = tuple(sorted(labels.items()))
    return Flattened([Point(name, name, lab, t, v, kind) for t, v in samples])


def store(query: str, *, range_: int = 600, step: int = 60, **kw: Any) -> SeriesStore:
    s = SeriesStore(clock=lambda: NOW, **kw)
    s.configure([parse_selector(query)], range_, step)
    return s


def render(s: SeriesStore, query: str, start: int, end: int, step: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(s.render(parse_selector(query), RangeWindow(start, end, step)))
    return out


def test_gauge_value_per_step_is_the_latest_point_within_the_lookback() -> None:
    s = store("load")
    s.ingest(points("load", "gauge", [(NOW - 130, 1.0), (NOW - 70, 2.5), (NOW - 5, 4.0)], pod="p"))
    end = int(NOW)
    [series] = render(s, "load", end - 180, end, 60)
    assert series["metric"] == {"__name__": "load", "pod": "p"}
    # stamps end-180 (nothing yet), end-120 (1.0), end-60 (2.5), end (4.0)
    assert series["values"] == [[end - 120, "1"], [end - 60, "2.5"], [end, "4"]]
    # Past the lookback a series disappears, as in Prometheus.
    late = render(s, "load", end + LOOKBACK_SECONDS, end + LOOKBACK_SECONDS, 60)
    assert late == []


def test_counter_rate_is_per_second_and_survives_a_reset() -> None:
    s = store("rate(requests_total)", step=30)
    # +60 over 30 s, then a restart (value 10: the 10 after the reset count), then +30.
    samples = [(NOW - 90, 100.0), (NOW - 60, 160.0), (NOW - 30, 10.0), (NOW, 40.0)]
    s.ingest(points("requests_total", "counter", samples, job="api"))
    end = int(NOW)
    [series] = render(s, "rate(requests_total)", end - 60, end, 30)
    assert "__name__" not in series["metric"]  # rate drops the name, as PromQL does
    assert series["values"] == [[end - 60, "2"], [end - 30, format_value(10 / 30)], [end, "1"]]
    # Without rate the counter is passed as it is.
    [raw] = render(s, "requests_total", end, end, 30)
    assert raw["values"] == [[end, "40"]]


def test_delta_sums_become_the_steps_total_per_second_with_rate_else_the_latest_delta() -> None:
    s = store("rate(bytes)", step=10)
    s.ingest(points("bytes", "delta", [(NOW - 18, 30.0), (NOW - 12, 50.0), (NOW - 4, 20.0)]))
    end = int(NOW)
    [rated] = render(s, "rate(bytes)", end - 10, end, 10)
    assert rated["values"] == [[end - 10, "8"], [end, "2"]]  # (30 + 50) / 10, then 20 / 10
    [raw] = render(s, "bytes", end, end, 10)
    assert raw["values"] == [[end, "20"]]


def test_gauges_are_never_rated() -> None:
    s = store("rate(temp)")
    s.ingest(points("temp", "gauge", [(NOW - 1, 21.5)]))
    [series] = render(s, "rate(temp)", int(NOW), int(NOW), 60)
    assert series["values"] == [[int(NOW), "21.5"]]


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=2, max_size=40))
def test_rate_over_one_step_is_the_sum_of_increments_divided_by_the_span(increments: list[int]) -> None:
    # A counter that restarts whenever the increment is 0 (value drops to 0) and otherwise grows.
    values, value, expected = [], 0.0, 0.0
    for i, inc in enumerate(increments):
        if i and inc == 0:
            value = 0.0  # a reset: the new value (0) is the increase
        else:
            value += inc
            expected += inc if i else 0
        values.append(value)
    n = len(values)
    samples = [(NOW - (n - 1 - i), v) for i, v in enumerate(values)]
    s = store("rate(c)", range_=0, step=1)  # points 1 s apart, none merged
    s.ingest(points("c", "counter", samples))
    [series] = render(s, "rate(c)", int(NOW), int(NOW), n)
    assert float(series["values"][0][1]) == pytest.approx(expected / (n - 1))


def test_only_selected_series_are_kept_and_a_new_selection_drops_the_rest() -> None:
    s = store('load{pod=~"web-.*"}')
    s.ingest(points("load", "gauge", [(NOW, 1.0)], pod="web-1"))
    s.ingest(points("load", "gauge", [(NOW, 1.0)], pod="db-1"))
    s.ingest(points("other", "gauge", [(NOW, 1.0)], pod="web-1"))
    assert s.series_held == 1
    s.configure([parse_selector('load{pod="db-1"}')], 600, 60)
    assert s.series_held == 0
    s.configure([], 0, 1)
    result = s.ingest(points("load", "gauge", [(NOW, 1.0)], pod="web-1"))
    assert s.series_held == 0 and result.rejected == 0  # unselected points are not "rejected"


def test_series_beyond_the_limit_are_dropped_counted_once_and_reported() -> None:
    s = store("load", max_series=3)
    for round_ in range(2):
        result = s.ingest(points("load", "gauge", [(NOW + round_, 1.0)], pod="a"))
        result = s.ingest(
            Flattened(
                [Point("load", "load", (("pod", f"p{i}"),), NOW + round_, 1.0, "gauge") for i in range(5)]
            )
        )
    assert s.series_held == 3
    assert result.rejected == 3 and "limit of 3 series" in result.message
    assert s.stats.series_dropped == 3  # p2..p4, once each, though their points came twice
    assert s.stats.points_dropped["series_limit"] == 6


def test_points_per_series_follow_range_and_step_and_close_points_merge() -> None:
    s = store("c", range_=600, step=60, max_points_per_series=10_000)
    assert s.points_cap == (600 + LOOKBACK_SECONDS) // 30 + 2
    # A point every second for 1,000 s: merged to one per 30 s slot, and old ones expire.
    s.ingest(points("c", "counter", [(NOW - 1000 + i, float(i)) for i in range(1000)]))
    [series] = render(s, "c", int(NOW) - 60, int(NOW), 60)
    assert series["values"][-1] == [int(NOW), "999"]
    held = s._series[("c", ())]
    assert len(held.times) <= s.points_cap
    capped = store("c", range_=600, step=60, max_points_per_series=5)
    assert capped.points_cap == 5


def test_old_and_out_of_order_points_are_dropped_and_counted() -> None:
    s = store("g", range_=60, step=10)
    s.ingest(points("g", "gauge", [(NOW - 10_000, 1.0), (NOW, 2.0), (NOW - 30, 3.0)]))
    assert s.stats.points_dropped["too_old"] == 1
    assert s.stats.points_dropped["out_of_order"] == 1
    assert s.stats.points_stored == 1


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (0.25, "0.25"),
        (1e20, "100000000000000000000"),
        (1e-7, "0.0000001"),
        (float("nan"), "NaN"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
        (-3.0, "-3"),
    ],
)
def test_values_are_written_as_prometheus_writes_them(value: float, text: str) -> None:
    assert format_value(value) == text


def test_decoding_waits_while_a_cycle_renders_and_resumes_when_it_ends() -> None:
    s = store("g")
    entered, release = threading.Event(), threading.Event()
    original = s._render

    def held(selector: Selector, window: RangeWindow) -> bytes:
        entered.set()
        release.wait(10)
        return original(selector, window)

    s._render = held  # type: ignore[method-assign]
    renderer = threading.Thread(target=s.render, args=(parse_selector("g"), RangeWindow(0, 60, 60)))
    renderer.start()
    assert entered.wait(10)
    waiter = threading.Thread(target=s.wait_for_renders, args=(10,))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()  # the receiver holds back while the render runs
    release.set()
    waiter.join(10)
    renderer.join(10)
    assert not waiter.is_alive()
    s.wait_for_renders(0)  # and nothing waits once no render runs


def test_a_cycle_reads_within_its_byte_budget_and_names_a_missing_receiver() -> None:
    s = store("g")
    s.ingest(points("g", "gauge", [(NOW, 1.0)], pod="p"))
    window = RangeWindow(int(NOW) - 60, int(NOW), 60)
    [raw] = asyncio.run(read_selected(s, [parse_selector("g")], window, max_bytes=1_000))
    assert json.loads(raw)[0]["values"] == [[int(NOW), "1"]]
    with pytest.raises(OtlpResultTooLarge, match="more than the 10 left"):
        asyncio.run(read_selected(s, [parse_selector("g")], window, max_bytes=10))
    with pytest.raises(OtlpReceiverDisabled, match="OtlpReceiverPort"):
        asyncio.run(read_selected(None, [parse_selector("g")], window, max_bytes=1_000))


@pytest.mark.parametrize(
    ("labels", "why"),
    [
        ({f"l{i}": "v" for i in range(5)}, "5 labels, more than the limit of 4"),
        ({"n" * 11: "v"}, "a label name of 11 characters, limit 10"),
        ({"pod": "x" * 21}, "label pod: a value of 21 characters, limit 20"),
        ({"a": "x" * 20, "b": "y" * 20}, "42 characters of labels, limit 30"),
    ],
)
def test_a_selected_series_over_a_label_cap_is_refused_reported_and_counted(
    labels: dict[str, str], why: str
) -> None:
    limits = LabelLimits(max_labels=4, max_name_length=10, max_value_length=20, max_total_chars=30)
    s = store("load", label_limits=limits)
    result = s.ingest(
        Flattened(
            [
                Point("load", "load", tuple(sorted(labels.items())), NOW, 1.0, "gauge"),
                Point("load", "load", (("pod", "ok"),), NOW, 2.0, "gauge"),
                Point("other", "other", tuple(sorted(labels.items())), NOW, 3.0, "gauge"),  # not selected
            ]
        )
    )
    assert (result.accepted, result.rejected) == (2, 1)
    assert result.message == f"1 point(s) refused: a series of load has {why}"
    assert s.series_held == 1
    assert s.stats.points_dropped["label_limit"] == 1
