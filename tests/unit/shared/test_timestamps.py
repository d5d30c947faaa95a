from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.kube.timestamps import format_time, micro_time, parse_time

UTC_SECONDS = st.datetimes(
    min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(9999, 1, 1), timezones=st.just(dt.UTC)
).map(lambda t: t.replace(microsecond=0))


@given(UTC_SECONDS)
def test_what_format_writes_parse_reads_back(t: dt.datetime) -> None:
    assert parse_time(format_time(t)) == t


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T07:00:00Z", dt.datetime(2026, 11, 22, 7, tzinfo=dt.UTC)),
        ("2026-11-22T07:00:00.250000Z", dt.datetime(2026, 11, 22, 7, 0, 0, 250000, tzinfo=dt.UTC)),
        ("2026-11-22T09:00:00+02:00", dt.datetime(2026, 11, 22, 7, tzinfo=dt.UTC)),
        # No offset: UTC, so it compares with an aware "now" instead of raising TypeError.
        ("2026-11-22T07:00:00", dt.datetime(2026, 11, 22, 7, tzinfo=dt.UTC)),
    ],
)
def test_rfc3339_forms_the_apiserver_and_people_write(text: str, expected: dt.datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected
    assert parsed is not None and parsed.tzinfo is not None


@pytest.mark.parametrize("value", [None, "", "yesterday", "2026-13-01T00:00:00Z", 1700000000, ["2026"]])
def test_anything_unreadable_is_none_not_an_exception(value: object) -> None:
    assert parse_time(value) is None


def test_micro_time_keeps_six_fractional_digits_even_when_zero() -> None:
    assert micro_time(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)) == "2026-01-02T03:04:05.000000Z"
    offset = dt.timezone(dt.timedelta(hours=2))
    assert micro_time(dt.datetime(2026, 1, 2, 5, 4, 5, 12, tzinfo=offset)) == "2026-01-02T03:04:05.000012Z"
