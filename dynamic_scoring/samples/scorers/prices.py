"""Time-of-use price schedules for the cost sample: which price a cluster pays at a given moment.

A schedule is a list of rates, each from a time of day until the next one's (the last one runs
overnight into the first), in an IANA time zone (tariffs follow local time, daylight saving included)::

    {"timezone": "Europe/Paris",
     "rates": [{"from": "07:00", "price": 0.32}, {"from": "22:00", "price": 0.18}]}

A price table maps cluster names to schedules, ``"*"`` standing for every cluster not named.  The
units are the user's (per core-hour, per kWh): only their order and spread matter to the score.
Tables come from a file (a mounted ConfigMap, re-read when it changes) or a request's
``params.prices``; both are checked by the same pydantic models, so a typo is an error naming the
field, never a silently free cluster.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, field_validator

from dynamic_scoring.contract.validation import describe_validation

DEFAULT = "*"
HHMM = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"


class PriceError(ValueError):
    """A price table that cannot be used; the message names the field or the cluster."""


class Rate(BaseModel):
    """One price from a time of day (``HH:MM``, local) until the next rate's."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    start: str = Field(alias="from", pattern=HHMM)
    price: float = Field(ge=0, allow_inf_nan=False)

    @property
    def minute(self) -> int:
        """Minutes after local midnight at which the rate starts."""
        hours, minutes = self.start.split(":")
        return int(hours) * 60 + int(minutes)


class Schedule(BaseModel):
    """A day of rates in one time zone."""

    model_config = ConfigDict(extra="forbid")
    timezone: str = "UTC"
    rates: list[Rate] = Field(min_length=1, max_length=96)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {value!r} (an IANA name such as Europe/Paris, or UTC)"
            ) from None
        return value

    @field_validator("rates")
    @classmethod
    def _distinct_starts(cls, rates: list[Rate]) -> list[Rate]:
        starts = [r.start for r in rates]
        if len(set(starts)) != len(starts):
            raise ValueError("two rates start at the same time")
        return sorted(rates, key=lambda r: r.minute)

    def price_at(self, when: datetime) -> float:
        """The price in force at ``when``: the last rate started by then, else the day's last (overnight)."""
        local = when.astimezone(ZoneInfo(self.timezone))
        minute = local.hour * 60 + local.minute
        started = [r for r in self.rates if r.minute <= minute]
        return (started[-1] if started else self.rates[-1]).price


class PriceTable(RootModel[dict[str, Schedule]]):
    """Cluster name (or ``"*"``) to schedule."""

    def schedule(self, cluster: str) -> Schedule:
        """The cluster's schedule, else the default's; ``PriceError`` when neither exists."""
        found = self.root.get(cluster) or self.root.get(DEFAULT)
        if found is None:
            named = ", ".join(sorted(self.root)) or "none"
            raise PriceError(
                f"no price schedule for cluster {cluster!r} and no '*' default (schedules: {named})"
            )
        return found

    def bounds(self) -> tuple[float, float]:
        """The lowest and highest price anywhere in the table: the fleet's spread."""
        prices = [r.price for s in self.root.values() for r in s.rates]
        return min(prices), max(prices)

    def mean_price(self, cluster: str, start: datetime, seconds: float) -> float:
        """The cluster's mean price over ``seconds`` from ``start``, sampled every five minutes."""
        schedule = self.schedule(cluster)
        samples = max(1, int(seconds // 300))
        step = timedelta(seconds=seconds / samples) if seconds > 0 else timedelta(0)
        return sum(schedule.price_at(start + i * step) for i in range(samples)) / samples


def parse_table(document: object, where: str) -> PriceTable:
    """A price table from decoded JSON; ``PriceError`` naming ``where`` and the field otherwise."""
    if not isinstance(document, dict) or not document:
        raise PriceError(f"{where}: expected an object of cluster name (or '*') to schedule")
    try:
        return PriceTable.model_validate(document)
    except ValidationError as exc:
        raise PriceError(f"{where}: {describe_validation(exc, whole='price table')}") from None


class PriceFile:
    """A price table in a JSON file (a mounted ConfigMap), read again whenever the file changes."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._seen: tuple[float, int] | None = None
        self._table: PriceTable | None = None
        self.table()  # a bad file stops the scorer at start

    def table(self) -> PriceTable:
        """The current table; ``PriceError`` when the file is unreadable or wrong, so the agent shows why."""
        try:
            stat = os.stat(self.path)
        except OSError as exc:
            raise PriceError(f"{self.path}: {exc.strerror}") from None
        seen = (stat.st_mtime, stat.st_size)
        if self._table is None or seen != self._seen:
            try:
                document = json.loads(self.path.read_text())
            except (OSError, ValueError) as exc:
                raise PriceError(f"{self.path}: not readable JSON ({exc})") from None
            self._table, self._seen = parse_table(document, str(self.path)), seen
        return self._table


def at(unix_seconds: float) -> datetime:
    """A point's time as an aware datetime."""
    return datetime.fromtimestamp(unix_seconds, tz=UTC)


__all__ = ["DEFAULT", "PriceError", "PriceFile", "PriceTable", "Rate", "Schedule", "at", "parse_table"]
