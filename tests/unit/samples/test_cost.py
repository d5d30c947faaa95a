"""The cost sample in process: price schedules (time zones, overnight rates, files) and the two bands."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.samples.scorers import cost
from dynamic_scoring.samples.scorers.prices import PriceError, PriceFile, parse_table
from dynamic_scoring.samples.scorers.server import build_parser, config_document
from dynamic_scoring.scorer import RequestError, ScoringRequest, Series

PEAK = {"from": "07:00", "price": 0.32}
TABLE: dict[str, Any] = {
    "paris": {"timezone": "Europe/Paris", "rates": [{"from": "22:00", "price": 0.18}, PEAK]},
    "*": {"rates": [{"from": "00:00", "price": 0.25}]},
}


def unix(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def utilisation(cluster: str, value: float, when: str) -> Series:
    t = unix(when)
    return Series({"cluster": cluster}, [(t - 60, value), (t, value)])


def scores(*series: Series, **params: Any) -> list[float]:
    params.setdefault("prices", TABLE)
    return [r.score for r in cost.score(ScoringRequest(list(series), params))]


def test_a_schedule_follows_local_time_daylight_saving_and_wraps_overnight() -> None:
    paris = parse_table(TABLE, "t").schedule("paris")
    # 06:30 UTC is 07:30 in Paris in winter (peak) and 08:30 in summer (peak); 05:30 UTC in winter is
    # 06:30 there, before the first rate of the day: the overnight rate from 22:00 still applies.
    assert paris.price_at(datetime(2026, 1, 15, 6, 30, tzinfo=UTC)) == 0.32
    assert paris.price_at(datetime(2026, 1, 15, 5, 30, tzinfo=UTC)) == 0.18
    assert paris.price_at(datetime(2026, 7, 15, 5, 30, tzinfo=UTC)) == 0.32  # 07:30 CEST
    assert paris.price_at(datetime(2026, 1, 15, 21, 30, tzinfo=UTC)) == 0.18  # 22:30 CET


def test_clusters_not_named_take_the_default_and_bounds_span_the_table() -> None:
    table = parse_table(TABLE, "t")
    assert table.schedule("anywhere").rates[0].price == 0.25
    assert table.bounds() == (0.18, 0.32)
    with pytest.raises(PriceError, match=r"no price schedule for cluster 'x' and no '\*' default"):
        parse_table({"paris": TABLE["paris"]}, "t").schedule("x")


def test_with_room_the_cheapest_cluster_wins_and_without_room_every_cluster_ranks_below() -> None:
    night, day = "2026-01-15T23:00:00", "2026-01-15T12:00:00"  # 00:00 and 13:00 in Paris
    assert scores(utilisation("paris", 0.5, night)) == [100.0]  # cheapest price, room
    assert scores(utilisation("paris", 0.5, day)) == [50.0]  # dearest price, room
    assert scores(utilisation("other", 0.5, day)) == [pytest.approx(50 + 50 * 0.07 / 0.14)]
    # 90 % busy: 10 % free of the 20 % asked for, half of the lower band, however cheap
    assert scores(utilisation("paris", 0.9, night)) == [pytest.approx(25.0)]
    assert scores(utilisation("paris", 0.85, night), room=0.1) == [100.0]  # 15 % free is room enough
    assert scores(utilisation("paris", 1.4, night)) == [0.0]  # more than the cores: no room at all


def test_a_horizon_averages_the_prices_the_placed_work_will_pay() -> None:
    # 20:00 UTC is 21:00 in Paris: an hour of peak, then the night rate. Four hours ahead: 1 x 0.32, 3 x 0.18.
    evening = utilisation("paris", 0.0, "2026-01-15T20:00:00")
    assert scores(evening) == [50.0]
    expected_price = (0.32 + 3 * 0.18) / 4
    assert scores(evening, horizon=14_400) == [pytest.approx(50 + 50 * (0.32 - expected_price) / 0.14)]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"prices": {"paris": {"rates": [{"from": "7:00", "price": 1}]}}},
            r"params.prices: .*paris.rates.0.from",
        ),
        (
            {"prices": {"paris": {"timezone": "Mars/Olympus", "rates": [PEAK]}}},
            "unknown time zone 'Mars/Olympus'",
        ),
        ({"prices": {"paris": {"rates": [PEAK, PEAK]}}}, "two rates start at the same time"),
        ({"prices": {"paris": {"rates": [{"from": "07:00", "price": -1}]}}}, "price"),
        ({"prices": {"paris": {"rates": [PEAK], "currency": "EUR"}}}, "currency"),
        ({"prices": []}, "expected an object of cluster name"),
        ({"room": 0}, "params.room"),
        ({"room": 1.5}, "params.room"),
    ],
)
def test_bad_tables_and_params_are_named(params: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        cost.score(ScoringRequest([utilisation("paris", 0.5, "2026-01-15T12:00:00")], params))


def test_a_series_without_a_cluster_label_says_how_to_add_one() -> None:
    bare = Series({}, [(unix("2026-01-15T12:00:00"), 0.5)])
    with pytest.raises(
        RequestError, match=r'no price schedule for cluster .*label its series cluster="\$\{cluster\}"'
    ):
        cost.score(ScoringRequest([bare], {"prices": {"paris": TABLE["paris"]}}))
    assert scores(bare) == [pytest.approx(50 + 50 * 0.07 / 0.14)]  # the '*' default covers it


def test_no_table_anywhere_is_a_named_error_and_no_series_needs_none() -> None:
    series = utilisation("paris", 0.5, "2026-01-15T12:00:00")
    with pytest.raises(RequestError, match=r"give params\.prices or start the scorer with --prices FILE"):
        cost.score(ScoringRequest([series]))
    assert cost.score(ScoringRequest([])) == []


def test_a_price_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(TABLE))
    prices = PriceFile(str(path))
    series = utilisation("paris", 0.5, "2026-01-15T12:00:00")
    assert [r.score for r in cost.score(ScoringRequest([series]), prices=prices)] == [50.0]
    path.write_text(json.dumps({"*": {"rates": [{"from": "00:00", "price": 0.1}]}}))
    os.utime(path, (1, 1))  # a new mtime even within the filesystem's timestamp resolution
    assert [r.score for r in cost.score(ScoringRequest([series]), prices=prices)] == [100.0]
    path.write_text("{not json")
    os.utime(path, (2, 2))
    with pytest.raises(RequestError, match=r"--prices .*not readable JSON"):
        cost.score(ScoringRequest([series]), prices=prices)
    # params.prices wins over the file
    assert [r.score for r in cost.score(ScoringRequest([series], {"prices": TABLE}), prices=prices)] == [50.0]


def test_a_bad_price_file_stops_the_scorer_at_start(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"paris": {"rates": []}}))
    with pytest.raises(SystemExit) as stopped:
        cost.main(["--prices", str(path)])
    assert stopped.value.code == 2
    with pytest.raises(SystemExit):
        cost.main(["--prices", str(tmp_path / "missing.json")])


def test_config_names_the_utilisation_query_with_the_cluster_label() -> None:
    args = build_parser("cost", cost.DEFAULTS).parse_args([])
    config = config_document(args, cost.DEFAULTS.description)
    assert config.name == "cost"
    assert '"cluster", "${cluster}"' in config.source.params.query
    assert "/ sum(machine_cpu_cores)" in config.source.params.query
