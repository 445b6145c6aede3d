"""From API walks to warehouse partitions: the work each asset does, without Dagster.

`load_funding` streams a funding walk into daily partitions. Records are normalized in chunks
(vectorized), split by the ``funding_date`` the warehouse gives them, and every day but the
oldest in hand is complete (the walk is newest first), so it is written at once, in a worker
thread while the next pages arrive. Memory holds a chunk and one unfinished day, whatever the
length of the range.

A rewrite never silently loses payments the warehouse already holds: when the exchange lists
fewer of a day's payments than its partition has, the load stops and says which are missing
(`FewerRowsRefused`) unless the caller allows it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.whitebit import AsyncWhiteBIT, FundingEntry, WalkReport
from warehouse import normalize, parquet, schemas
from warehouse.normalize import Batch
from warehouse.parquet import Root

#: Records normalized at once: large enough for vectorized work, small enough to stream.
CHUNK_RECORDS: Final = 5_000
FUNDING: Final = schemas.FUNDING_HISTORY

DayWritten = Callable[[date, int, int], None]


class FewerRowsRefused(RuntimeError):
    """The exchange lists fewer of a day's funding payments than the warehouse holds."""


@dataclass(slots=True)
class Written:
    """What one table's load wrote: rows per partition, and the batches' totals."""

    table: str
    partitions: dict[date, int] = field(default_factory=dict)
    received: int = 0
    rows: int = 0
    rejected: int = 0
    duplicates: int = 0
    rejects_preview: list[str] = field(default_factory=list)

    def received_batch(self, batch: Batch) -> None:
        self.received += batch.received
        self.duplicates += batch.duplicates

    def wrote(self, day: date, rows: pa.Table, rejects: pa.Table) -> None:
        self.partitions[day] = rows.num_rows
        self.rows += rows.num_rows
        self.rejected += rejects.num_rows
        reasons = rejects["reason"].to_pylist()
        self.rejects_preview.extend(reasons[: max(0, 5 - len(self.rejects_preview))])


@dataclass(slots=True)
class FundingLoad:
    """A funding walk written into the warehouse: the walk's report and what was written."""

    report: WalkReport
    written: Written


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


async def load_funding(
    client: AsyncWhiteBIT,
    root: Root,
    *,
    days: Sequence[date],
    extracted_at: datetime,
    markets: Sequence[str] | None = None,
    on_day: DayWritten | None = None,
    allow_fewer_rows: bool = False,
) -> FundingLoad:
    """Walk the funding history over ``days`` and replace each day's partition.

    Every day of ``days`` is replaced, emptied when the exchange holds nothing for it (unless
    the warehouse held payments there: see `FewerRowsRefused`).
    """
    if not days:
        raise ValueError("no day to load")
    days = sorted(days)
    wanted = set(days)
    since = datetime.combine(days[0], time.min, UTC)
    until = datetime.combine(days[-1] + timedelta(days=1), time.min, UTC)
    walk = client.walk_funding(since=since, until=until, markets=list(markets) if markets else None)
    written = Written(FUNDING.name)
    finished: set[date] = set()
    pending: asyncio.Task[None] | None = None

    def write_day(day: date, gathered: _Day) -> None:
        rows, rejects = gathered.tables()
        missing = [] if allow_fewer_rows else _missing_keys(root, day, rows)
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
        parquet.replace_partition(root, FUNDING.name, day, rows, rejects=rejects)
        written.wrote(day, rows, rejects)
        if on_day is not None:
            on_day(day, rows.num_rows, rejects.num_rows)

    async def flush(day: date, gathered: _Day) -> None:
        nonlocal pending
        if day not in wanted:
            raise RuntimeError(
                f"funding history: a record of {day} came with the window {days[0]} .. "
                f"{days[-1]}; its time was read differently from its neighbours'"
            )
        finished.add(day)
        if pending is not None:
            await pending  # one day in the writer at a time
        pending = asyncio.create_task(asyncio.to_thread(write_day, day, gathered))

    held: tuple[date, _Day] | None = None
    current = days[-1]  # unreadable times before any readable one: the range's newest day

    async def take(chunk: list[FundingEntry]) -> None:
        nonlocal held, current
        batch = normalize.normalize_funding_history(
            chunk, extracted_at=extracted_at, partition_for_rejects=current
        )
        written.received_batch(batch)
        parts = _by_day(batch)
        again = finished & set(parts)
        if again:
            raise RuntimeError(
                f"funding history came out of order: {min(again)} began again after it was written"
            )
        if held is not None:
            day, gathered = held
            if day in parts:
                more = parts.pop(day)
                gathered.rows += more.rows
                gathered.rejects += more.rejects
            if parts and max(parts) > day:
                raise RuntimeError(f"funding history came out of order: after {day}, {max(parts)}")
            if parts:  # older days began: the held day is complete
                await flush(day, gathered)
                held = None
        ordered = sorted(parts, reverse=True)
        for day in ordered[:-1]:
            await flush(day, parts[day])
        if ordered:
            held = (ordered[-1], parts[ordered[-1]])
        if held is not None:
            current = held[0]

    chunk: list[FundingEntry] = []
    async for page in walk:
        chunk += page
        if len(chunk) >= CHUNK_RECORDS:
            await take(chunk)
            chunk = []
    if chunk:
        await take(chunk)
    if held is not None:
        await flush(*held)
    if pending is not None:
        await pending
    for day in days:
        if day not in finished:
            finished.add(day)
            await asyncio.to_thread(write_day, day, _Day())
    return FundingLoad(walk.report, written)


def write_snapshot(root: Root, batches: Mapping[str, Batch]) -> dict[str, Written]:
    """Replace the snapshot partition of each table with its batch."""
    out: dict[str, Written] = {}
    for table, batch in batches.items():
        parquet.write_batch(root, batch)
        written = Written(table)
        written.received_batch(batch)
        for day in batch.covers:
            rows = batch.rows.filter(pc.equal(batch.rows[batch.schema.partition_column], day))
            rejects = batch.rejects.filter(pc.equal(batch.rejects["partition"], day.isoformat()))
            written.wrote(day, rows, rejects)
        out[table] = written
    return out
