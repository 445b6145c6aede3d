"""A history's records into month partitions.

`MonthlyLoad` takes the records of a walk of a history partitioned by month (`spec.Monthly`) in
chunks, newest first (the order the API lists them), normalizes each chunk, splits it by the day
the warehouse gives each row (``funding_date``), and replaces the days of a month in its
partition as soon as the month is complete: every month but the oldest in hand is, since the walk
is newest first. Memory holds one unfinished
month and the chunk in hand, whatever the length of the range. It works in any process: no
pipe, no thread (the tests run it in theirs; `warehouse.writer` runs it in a process of its own
beside the walk). What it replaces is one `MonthlyTarget` (the warehouse, the account's history,
the days, the extraction's time), made where the load starts and handed down whole.

A load replaces exactly the days it was given: a month's file keeps the rows of its other days
(`partitions.replace_partition`). Progress is told per day all the same.

A rewrite never silently loses records the warehouse already holds: when the exchange lists fewer
of a day's records than the warehouse has, it stops and says which are missing
(`FewerRowsRefused`, never suggesting to write fewer) unless the caller allows it. Given the
pid of the process the load belongs to, it checks before each partition write that this process
is still its parent, so a writer orphaned by a SIGKILLed run never writes after a rerun began: it
raises `LoadAbandoned`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import spec
from warehouse import layout, normalize, partitions, schemas
from warehouse.errors import WarehouseError
from warehouse.normalize import Batch
from warehouse.root import Warehouse, WarehouseConfig
from warehouse.schemas import TableSchema, month_of

#: Reasons of rejected records reported back per day (the rest are in `_rejects`).
REASONS_PER_DAY: Final = 5


class FewerRowsRefused(WarehouseError):
    """The exchange lists fewer of a day's records than the warehouse holds."""


class DayOrderError(WarehouseError):
    """Records that do not come newest month first, as the walk must deliver them, or that fall
    outside the load's days."""


class LoadAbandoned(WarehouseError):
    """The load was abandoned (its chunks ended before the finish, or the process that started
    it is gone): no partition more is written."""


@dataclass(frozen=True, slots=True)
class MonthlyTarget:
    """What a load replaces: the days of one account's history partitioned by month, in a
    warehouse, as of one extraction. Checked once, where it is made; `as_json` and `of_json`
    carry it to the writer process."""

    wh: Warehouse
    history: spec.History
    account: str
    #: The days replaced, sorted, each once.
    days: Sequence[date]
    extracted_at: datetime
    #: A rewrite may hold fewer of a day's records than the warehouse did (`FewerRowsRefused`).
    allow_fewer_rows: bool = False

    def __post_init__(self) -> None:
        if not self.days:
            raise ValueError("no day to load")
        if not self.history.monthly:
            raise ValueError(f"{self.history.name} is not partitioned by month")
        layout.account_segment(self.account)
        object.__setattr__(self, "days", tuple(sorted(set(self.days))))

    def as_json(self) -> dict[str, Any]:
        return {
            "warehouse": self.wh.config.as_json(),
            "history": self.history.name,
            "account": self.account,
            "days": [day.isoformat() for day in self.days],
            "extracted_at": self.extracted_at.isoformat(),
            "allow_fewer_rows": self.allow_fewer_rows,
        }

    @classmethod
    def of_json(cls, values: Mapping[str, Any]) -> MonthlyTarget:
        return cls(
            Warehouse.of(WarehouseConfig(**values["warehouse"])),
            spec.DECLARED[values["history"]],
            account=values["account"],
            days=[date.fromisoformat(day) for day in values["days"]],
            extracted_at=datetime.fromisoformat(values["extracted_at"]),
            allow_fewer_rows=values["allow_fewer_rows"],
        )


@dataclass(frozen=True, slots=True)
class DayWrite:
    """One day, replaced in its partition."""

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
    """Rows and rejects of one day, gathered across chunks until its month is complete."""

    rows: list[pa.Table] = field(default_factory=list)
    rejects: list[pa.Table] = field(default_factory=list)

    def tables(self, schema: TableSchema) -> tuple[pa.Table, pa.Table]:
        rows = pa.concat_tables(self.rows) if self.rows else schema.arrow_schema.empty_table()
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
        column = batch.rows[batch.schema.partition_column]
        for day in pc.unique(column).to_pylist():
            rows = batch.rows.filter(pc.equal(column, pa.scalar(day, schemas.DAY)))
            days.setdefault(day, _Day()).rows.append(rows)
    if batch.rejects.num_rows:
        column = batch.rejects["partition"]
        for text in pc.unique(column).to_pylist():
            rejects = batch.rejects.filter(pc.equal(column, text))
            days.setdefault(date.fromisoformat(text), _Day()).rejects.append(rejects)
    return days


def _missing_keys(
    wh: Warehouse,
    schema: TableSchema,
    month: layout.Partition,
    days: Sequence[date],
    rows: pa.Table,
) -> list[tuple[date, tuple[object, ...]]]:
    """(day, key) of the records the month's file holds for ``days`` that ``rows`` has not."""
    key = [k for k in schema.key if k not in schema.path_columns]
    day = schema.partition_column
    existing = partitions.read_partition(wh, schema.name, month, columns=[*key, day])
    if existing is None:
        return []
    existing = existing.filter(pc.is_in(existing[day], pa.array(days, schemas.DAY)))
    new = set(zip(*(rows[k].to_pylist() for k in key), strict=True))
    held = zip(
        existing[day].to_pylist(),
        zip(*(existing[k].to_pylist() for k in key), strict=True),
        strict=True,
    )
    return sorted((day, k) for day, k in held if k not in new)


#: A month in hand: its days' rows and rejects, gathered across chunks.
_Month = dict[date, _Day]


class MonthlyLoad:
    """Replaces the days of its target in their month partitions from a newest-first stream of
    the history's records (see the module's text). `take` and `finish` write the months they
    complete; every day of the target is replaced once `finish` has run, emptied when the
    exchange held nothing for it (unless the warehouse held records there: see
    `FewerRowsRefused`).

    ``parent``: the pid of the process the load belongs to; once it is gone, writes raise
    `LoadAbandoned`.
    """

    def __init__(self, target: MonthlyTarget, *, parent: int | None = None) -> None:
        self.target = target
        self._schema = schemas.TABLES[target.history.name]
        self._months: dict[str, list[date]] = {}
        for day in target.days:
            self._months.setdefault(month_of(day), []).append(day)
        self._parent = parent
        self._finished: set[str] = set()
        self._held: tuple[str, _Month] | None = None
        # Unreadable times before any readable one go to the range's newest day, later ones to
        # the oldest day seen so far.
        self._current = self.target.days[-1]

    def take(self, records: object) -> Progress:
        """Normalize a chunk of records (the JSON array as parsed) and write every month it
        completes."""
        progress, target = Progress(), self.target
        batch = normalize.normalize(
            target.history, records, extracted_at=target.extracted_at, day=self._current
        )
        progress.received, progress.duplicates = batch.received, batch.duplicates
        by_day = _by_day(batch)
        outside = sorted(set(by_day) - set(target.days))
        if outside:
            raise DayOrderError(
                f"{target.history.name}: a record of {outside[0]} came with the window "
                f"{target.days[0]} .. {target.days[-1]}; its time was read differently from its "
                "neighbours'"
            )
        parts: dict[str, _Month] = {}
        for day, gathered in by_day.items():
            parts.setdefault(month_of(day), {})[day] = gathered
        again = self._finished & set(parts)
        if again:
            raise DayOrderError(
                f"{target.history.name} came out of order: {min(again)} began again after it was "
                "written"
            )
        due: list[tuple[str, _Month]] = []
        if self._held is not None:
            month, gathered_month = self._held
            if month in parts:
                for day, more in parts.pop(month).items():
                    held = gathered_month.setdefault(day, _Day())
                    held.rows += more.rows
                    held.rejects += more.rejects
            if parts and max(parts) > month:
                raise DayOrderError(
                    f"{target.history.name} came out of order: after {month}, {max(parts)}"
                )
            if parts:  # older months began: the held month is complete
                due.append((month, gathered_month))
                self._held = None
        ordered = sorted(parts, reverse=True)
        due += [(month, parts[month]) for month in ordered[:-1]]
        if ordered:
            self._held = (ordered[-1], parts[ordered[-1]])
        if by_day:
            self._current = min(self._current, min(by_day))
        for month, gathered_month in due:
            self._write_month(month, gathered_month, progress)
        return progress

    def finish(self) -> Progress:
        """Write the month in hand, and empty every day of the range the walk had nothing for."""
        progress = Progress()
        if self._held is not None:
            self._write_month(*self._held, progress)
            self._held = None
        for month in self._months:
            if month not in self._finished:
                self._write_month(month, {}, progress)
        return progress

    def _write_month(self, month: str, gathered: _Month, progress: Progress) -> None:
        target = self.target
        self._finished.add(month)
        days = self._months[month]
        tables = {day: gathered.get(day, _Day()).tables(self._schema) for day in days}
        rows = pa.concat_tables([day_rows for day_rows, _ in tables.values()])
        rejects = pa.concat_tables([day_rejects for _, day_rejects in tables.values()])
        missing = (
            []
            if target.allow_fewer_rows
            else _missing_keys(target.wh, self._schema, (target.account, month), days, rows)
        )
        if missing:
            day = missing[0][0]
            of_day = [k for d, k in missing if d == day]
            day_rejects = tables[day][1]
            # A payment listed in a shape the warehouse refuses is missing from the rows too.
            rejected = (
                f" {day_rejects.num_rows} record(s) of that day were rejected (first: "
                f"{day_rejects['reason'][0].as_py()}): the missing ones may be among them."
                if day_rejects.num_rows
                else ""
            )
            others = len(missing) - len(of_day)
            raise FewerRowsRefused(
                f"{target.history.name} of {target.account}, {day}: the exchange did not list "
                f"{len(of_day)} record(s) the warehouse holds for that day (first: {of_day[0]})"
                + (f", and {others} of later days of {month}" if others else "")
                + f"; the partition {month} is left as it was.{rejected}"
            )
        if self._parent is not None and os.getppid() != self._parent:
            # Orphaned: the run that started it is gone, and a rerun may be writing.
            raise LoadAbandoned(
                f"{target.history.name} {month}: not written, the load's process is gone"
            )
        partitions.replace_partition(
            target.wh,
            target.history.name,
            (target.account, month),
            rows,
            rejects=rejects,
            covers=days,
            walked_at=target.extracted_at,
        )
        progress.days += [DayWrite.of(day, *tables[day]) for day in days]
