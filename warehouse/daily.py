"""Funding records into daily partitions.

`DailyFunding` takes the records of a funding walk in chunks, newest first (the order the API
lists them), normalizes each chunk, splits it by the ``funding_date`` the warehouse gives each
row, and replaces a day's partition as soon as the day is complete: every day but the oldest in
hand is, since the walk is newest first. Memory holds one unfinished day and the chunk in hand,
whatever the length of the range. It works in any process: no pipe, no thread (the tests run it
in theirs; `warehouse.writer` runs it in a process of its own beside the walk).

A rewrite never silently loses payments the warehouse already holds: when the exchange lists
fewer of a day's payments than its partition has, it stops and says which are missing
(`FewerRowsRefused`) unless the caller allows it. Given the pid of the process the load belongs
to, it checks before each partition write that this process is still its parent, so a writer
orphaned by a SIGKILLed run never writes after a rerun began: it raises `LoadAbandoned`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from warehouse import normalize, parquet, schemas
from warehouse.normalize import Batch
from warehouse.parquet import Root
from warehouse.settings import warehouse_root

FUNDING: Final = schemas.FUNDING_HISTORY
#: Reasons of rejected records reported back per day (the rest are in `_rejects`).
REASONS_PER_DAY: Final = 5


class FewerRowsRefused(RuntimeError):
    """The exchange lists fewer of a day's funding payments than the warehouse holds."""


class DayOrderError(RuntimeError):
    """Funding records that do not come newest day first, as the walk must deliver them."""


class LoadAbandoned(RuntimeError):
    """The load was abandoned (its chunks ended before the finish, or the process that started
    it is gone): no partition more is written."""


@dataclass(frozen=True, slots=True)
class DayWrite:
    """One day's partition, replaced."""

    day: date
    rows: int
    rejected: int
    #: The first reasons of the day's rejects (at most `REASONS_PER_DAY`).
    reasons: tuple[str, ...] = ()

    @classmethod
    def of(cls, day: date, rows: pa.Table, rejects: pa.Table) -> DayWrite:
        reasons = rejects["reason"].slice(0, REASONS_PER_DAY).to_pylist()
        return cls(day, rows.num_rows, rejects.num_rows, tuple(reasons))


@dataclass(slots=True)
class Progress:
    """What one chunk (or the end of the walk) did: records taken, days written."""

    received: int = 0
    duplicates: int = 0
    days: list[DayWrite] = field(default_factory=list)


@dataclass(slots=True)
class _Day:
    """Rows and rejects of one day, gathered across chunks until the day is complete."""

    rows: list[pa.Table] = field(default_factory=list)
    rejects: list[pa.Table] = field(default_factory=list)

    def tables(self) -> tuple[pa.Table, pa.Table]:
        rows = pa.concat_tables(self.rows) if self.rows else FUNDING.arrow_schema.empty_table()
        rejects = (
            pa.concat_tables(self.rejects)
            if self.rejects
            else schemas.REJECTS_TABLE.arrow_schema.empty_table()
        )
        return rows, rejects


def _by_day(batch: Batch) -> dict[date, _Day]:
    """A batch's rows and rejects, by the day each belongs to."""
    days: dict[date, _Day] = {}
    if batch.rows.num_rows:
        column = batch.rows["funding_date"]
        for day in pc.unique(column).to_pylist():
            rows = batch.rows.filter(pc.equal(column, pa.scalar(day, schemas.DAY)))
            days.setdefault(day, _Day()).rows.append(rows)
    if batch.rejects.num_rows:
        column = batch.rejects["partition"]
        for text in pc.unique(column).to_pylist():
            rejects = batch.rejects.filter(pc.equal(column, text))
            days.setdefault(date.fromisoformat(text), _Day()).rejects.append(rejects)
    return days


def _missing_keys(root: Root, day: date, rows: pa.Table) -> list[tuple[object, ...]]:
    """Keys the day's partition holds now that ``rows`` no longer has."""
    key = [k for k in FUNDING.key if k not in FUNDING.partition_columns]
    existing = parquet.read_partition(root, FUNDING.name, day, columns=key)
    if existing is None or existing.num_rows == 0:
        return []
    new = set(zip(*(rows[k].to_pylist() for k in key), strict=True))
    held = zip(*(existing[k].to_pylist() for k in key), strict=True)
    return [k for k in held if k not in new]


class DailyFunding:
    """Replaces the funding partition of each day of ``days`` from a newest-first stream of
    records (see the module's text). `take` and `finish` write the days they complete; every
    day of ``days`` is replaced once `finish` has run, emptied when the exchange held nothing
    for it (unless the warehouse held payments there: see `FewerRowsRefused`).

    ``parent``: the pid of the process the load belongs to; once it is gone, writes raise
    `LoadAbandoned`.
    """

    def __init__(
        self,
        root: Root,
        *,
        days: Sequence[date],
        extracted_at: datetime,
        allow_fewer_rows: bool = False,
        parent: int | None = None,
    ) -> None:
        if not days:
            raise ValueError("no day to load")
        self._root = warehouse_root(root)
        self._days = sorted(days)
        self._wanted = set(self._days)
        self._extracted_at = extracted_at
        self._allow_fewer_rows = allow_fewer_rows
        self._parent = parent
        self._finished: set[date] = set()
        self._held: tuple[date, _Day] | None = None
        # Unreadable times before any readable one go to the range's newest day.
        self._current = self._days[-1]

    def take(self, records: object) -> Progress:
        """Normalize a chunk of records (the JSON array as parsed) and write every day it
        completes."""
        progress, due = Progress(), list[tuple[date, _Day]]()
        batch = normalize.normalize_funding_history(
            records, extracted_at=self._extracted_at, partition_for_rejects=self._current
        )
        progress.received, progress.duplicates = batch.received, batch.duplicates
        parts = _by_day(batch)
        again = self._finished & set(parts)
        if again:
            raise DayOrderError(
                f"funding history came out of order: {min(again)} began again after it was written"
            )
        if self._held is not None:
            day, gathered = self._held
            if day in parts:
                more = parts.pop(day)
                gathered.rows += more.rows
                gathered.rejects += more.rejects
            if parts and max(parts) > day:
                raise DayOrderError(f"funding history came out of order: after {day}, {max(parts)}")
            if parts:  # older days began: the held day is complete
                due.append(self._complete(day, gathered))
                self._held = None
        ordered = sorted(parts, reverse=True)
        due += [self._complete(day, parts[day]) for day in ordered[:-1]]
        if ordered:
            self._held = (ordered[-1], parts[ordered[-1]])
        if self._held is not None:
            self._current = self._held[0]
        return self._write(due, progress)

    def finish(self) -> Progress:
        """Write the day in hand, and empty every day of the range the walk had nothing for."""
        due = []
        if self._held is not None:
            due.append(self._complete(*self._held))
            self._held = None
        due += [self._complete(day, _Day()) for day in self._days if day not in self._finished]
        return self._write(due, Progress())

    def _complete(self, day: date, gathered: _Day) -> tuple[date, _Day]:
        if day not in self._wanted:
            raise DayOrderError(
                f"funding history: a record of {day} came with the window {self._days[0]} .. "
                f"{self._days[-1]}; its time was read differently from its neighbours'"
            )
        self._finished.add(day)
        return day, gathered

    def _write(self, due: list[tuple[date, _Day]], progress: Progress) -> Progress:
        for day, gathered in due:
            self._write_day(day, gathered, progress)
        return progress

    def _write_day(self, day: date, gathered: _Day, progress: Progress) -> None:
        rows, rejects = gathered.tables()
        missing = [] if self._allow_fewer_rows else _missing_keys(self._root, day, rows)
        if missing:
            # A payment listed in a shape the warehouse refuses is missing from the rows too.
            rejected = (
                f" {rejects.num_rows} record(s) of that day were rejected (first: "
                f"{rejects['reason'][0].as_py()}): the missing ones may be among them."
                if rejects.num_rows
                else ""
            )
            raise FewerRowsRefused(
                f"funding_history {day}: the exchange no longer lists {len(missing)} payment(s) "
                f"the warehouse holds for that day (first: {missing[0]}); the partition is left "
                f"as it was.{rejected} If the exchange really removed them, rerun with "
                "allow_fewer_rows."
            )
        if self._parent is not None and os.getppid() != self._parent:
            # Orphaned: the run that started it is gone, and a rerun may be writing.
            raise LoadAbandoned(f"funding_history {day}: not written, the load's process is gone")
        parquet.replace_partition(self._root, FUNDING.name, day, rows, rejects=rejects)
        progress.days.append(DayWrite.of(day, rows, rejects))
