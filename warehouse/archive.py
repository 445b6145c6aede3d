"""What the warehouse has archived of a history the exchange forgets, and what is at stake.

The exchange answers some histories (fills, orders, conversions) for its last six months only
(`spec.floor_day`): the warehouse is their archive. Each month file of a history records, in its
own footer (so that it is replaced with the rows, atomically), which of its days a walk covered
and when (`COVERED`): a day is *archived* once a walk covered it after it ended. `horizon` tells
the days that are not, between a first day and yesterday: *at stake* while the exchange still
answers them, *lost* once it does not; lost days are said once, then recorded as said
(`record_lost`: the record is made at the first look, empty if nothing is lost, so that a day
lost later is told from one the exchange had forgotten before the warehouse first looked).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

import pyarrow as pa

from pipeline import spec
from warehouse.store import Store

#: The footer key of a month file's coverage: ``{"2026-05-01": "<when it was walked>", ...}``.
COVERED: Final = b"whitebit.covered"
#: Where the days found lost are recorded once said, per table and account (a dot-named
#: directory: no view reads it).
LOST_RECORDS: Final = "parquet/.archive"


def covered(metadata: Mapping[bytes, bytes] | None) -> dict[date, datetime]:
    """The days a month file's footer says were walked, and when each was last."""
    text = (metadata or {}).get(COVERED)
    if not text:
        return {}
    return {date.fromisoformat(d): datetime.fromisoformat(t) for d, t in json.loads(text).items()}


def with_coverage(
    table: pa.Table,
    held: Mapping[date, datetime],
    days: Iterable[date],
    walked_at: datetime | None,
) -> pa.Table:
    """``table`` carrying the coverage ``held`` updated: ``days`` walked at ``walked_at``, or
    (rewritten by no walk) no longer said to be walked."""
    days = list(days)
    merged = {d: t for d, t in held.items() if d not in days}
    if walked_at is not None:
        merged |= dict.fromkeys(days, walked_at)
    text = json.dumps({d.isoformat(): t.isoformat() for d, t in sorted(merged.items())})
    return table.replace_schema_metadata({**(table.schema.metadata or {}), COVERED: text.encode()})


def archived(day: date, walked_at: datetime | None) -> bool:
    """Whether a walk covered ``day`` after it ended (one during the day missed its end)."""
    end = datetime.combine(day + timedelta(days=1), time.min, UTC)
    return walked_at is not None and walked_at >= end


@dataclass(frozen=True, slots=True)
class Gap:
    """Days in a row not archived, and the day the first of them is lost (the others follow,
    a day at a time)."""

    first: date
    last: date
    lost_on: date

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    def __str__(self) -> str:
        span = str(self.first) if self.first == self.last else f"{self.first} .. {self.last}"
        return f"{span} ({self.days} day{'s' if self.days > 1 else ''}), lost from {self.lost_on}"


@dataclass(frozen=True, slots=True)
class Horizon:
    """A history's days not archived: those the exchange still answers, and those it no
    longer does."""

    at_stake: tuple[Gap, ...]
    lost: tuple[Gap, ...]

    def due_within(self, today: date, days: int) -> tuple[Gap, ...]:
        """The gaps whose first day is lost within ``days`` of ``today``."""
        return tuple(g for g in self.at_stake if (g.lost_on - today).days <= days)


def horizon(walked: Mapping[date, datetime], first: date, today: date) -> Horizon:
    """The days from ``first`` to yesterday that are not archived, in gaps."""
    missing = [
        first + timedelta(days=n)
        for n in range((today - first).days)
        if not archived(first + timedelta(days=n), walked.get(first + timedelta(days=n)))
    ]
    floor = spec.floor_day(today)
    reachable = _gaps([d for d in missing if d >= floor])
    gone = _gaps([d for d in missing if d < floor])
    return Horizon(reachable, gone)


def _lost_record(table: str, account: str) -> str:
    return f"{LOST_RECORDS}/{table}/{account}.json"


def reported_lost(store: Store, table: str, account: str) -> set[date] | None:
    """The days of the account's table already said to be lost; None when the horizon was
    never looked at (no record, not even an empty one)."""
    data = store.read_bytes(_lost_record(table, account))
    return None if data is None else {date.fromisoformat(d) for d in json.loads(data)}


def record_lost(store: Store, table: str, account: str, days: Iterable[date]) -> None:
    """Record these days as said to be lost, beside those recorded before."""
    known = (reported_lost(store, table, account) or set()) | set(days)
    text = json.dumps(sorted(d.isoformat() for d in known))
    store.write_bytes(_lost_record(table, account), text.encode())


def gaps(days: Iterable[date]) -> tuple[Gap, ...]:
    """Days in gaps of days in a row."""
    return _gaps(sorted(days))


def _gaps(days: Sequence[date]) -> tuple[Gap, ...]:
    gaps: list[Gap] = []
    for day in days:
        if gaps and gaps[-1].last + timedelta(days=1) == day:
            gaps[-1] = Gap(gaps[-1].first, day, gaps[-1].lost_on)
        else:
            gaps.append(Gap(day, day, spec.lost_on(day)))
    return tuple(gaps)
