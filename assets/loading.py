"""From API walks to warehouse partitions: the work each asset does, without Dagster.

`load_funding` streams a funding walk day by day: the walk yields newest first, so a day is
complete as soon as an older day begins; that day is normalized and its partition replaced (in a
worker thread, while the next pages arrive), and memory holds one day at a time whatever the
length of the range. Snapshots are small: fetched, normalized and written in one go.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from pipeline.whitebit import AsyncWhiteBIT, FundingEntry, WalkReport
from warehouse import normalize, parquet
from warehouse.normalize import Batch
from warehouse.parquet import Root

#: Unix seconds at or above this are milliseconds: the warehouse's own rule, applied here only
#: to tell which day a record belongs to.
_MILLISECONDS_FROM: Final = normalize.MILLISECONDS_FROM

DayWritten = Callable[[date, Batch], None]


@dataclass(slots=True)
class Written:
    """What one table's load wrote: counts per partition, and the batches' totals."""

    table: str
    partitions: dict[date, int] = field(default_factory=dict)
    received: int = 0
    rows: int = 0
    rejected: int = 0
    duplicates: int = 0
    rejects_preview: list[str] = field(default_factory=list)

    def add(self, batch: Batch, days: Sequence[date]) -> None:
        self.received += batch.received
        self.rows += batch.normalized
        self.rejected += batch.rejected
        self.duplicates += batch.duplicates
        for day in days:
            self.partitions.setdefault(day, 0)
        if batch.rows.num_rows:
            column = batch.schema.partition_column
            for day, count in _counts(batch.rows[column].to_pylist()).items():
                self.partitions[day] = self.partitions.get(day, 0) + count
        reasons = batch.rejects["reason"].to_pylist()
        self.rejects_preview.extend(reasons[: max(0, 5 - len(self.rejects_preview))])


def _counts(values: list[Any]) -> dict[Any, int]:
    counts: dict[Any, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _record_day(record: FundingEntry) -> date | None:
    """The UTC day of a record's funding time, or None when it cannot be read."""
    text = record.get("fundingTime")
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 18:
        return None
    seconds = int(text)
    if seconds >= _MILLISECONDS_FROM:
        seconds //= 1000
    return datetime.fromtimestamp(seconds, UTC).date()


@dataclass(slots=True)
class FundingLoad:
    """A funding walk written into the warehouse: the walk's report and what was written."""

    report: WalkReport
    written: Written


async def load_funding(
    client: AsyncWhiteBIT,
    root: Root,
    *,
    days: Sequence[date],
    extracted_at: datetime,
    markets: Sequence[str] | None = None,
    on_day: DayWritten | None = None,
) -> FundingLoad:
    """Walk the funding history over ``days`` and replace each day's partition.

    Every day of ``days`` is replaced, emptied when the exchange holds nothing for it. A record
    whose time cannot be read stays in its place in the stream, so it is rejected into the day
    being read when it arrived (the day of its newer neighbours) and reappears there on a rerun.
    """
    if not days:
        raise ValueError("no day to load")
    days = sorted(days)
    since = datetime.combine(days[0], datetime.min.time(), UTC)
    until = datetime.combine(days[-1] + timedelta(days=1), datetime.min.time(), UTC)
    walk = client.walk_funding(since=since, until=until, markets=list(markets) if markets else None)
    written = Written("funding_history")
    pending: asyncio.Task[None] | None = None
    finished: set[date] = set()

    def write_day(day: date, records: list[FundingEntry]) -> None:
        batch = normalize.normalize_funding_history(
            records, extracted_at=extracted_at, partition_for_rejects=day
        )
        parquet.write_batch(root, batch)
        written.add(batch, [day])
        if on_day is not None:
            on_day(day, batch)

    async def flush(day: date, records: list[FundingEntry]) -> None:
        nonlocal pending
        if day in finished:
            raise RuntimeError(
                f"funding history came out of order: day {day} began again after it was written"
            )
        finished.add(day)
        if pending is not None:
            await pending  # one day in the writer at a time: memory stays one day deep
        pending = asyncio.create_task(asyncio.to_thread(write_day, day, records))

    current: date | None = None
    buffer: list[FundingEntry] = []
    async for page in walk:
        first, last = _record_day(page[0]), _record_day(page[-1])
        if first is not None and first == last and (current is None or first == current):
            current = first  # the whole page is one day: no per-record work
            buffer.extend(page)
            continue
        for record in page:
            day = _record_day(record)
            if day is not None and day != current:
                if current is not None:
                    await flush(current, buffer)
                    buffer = []
                current = day
            buffer.append(record)
    if buffer:
        # Records whose time is unreadable and that came before any readable one belong to
        # the newest day of the range.
        await flush(current if current is not None else days[-1], buffer)
    if pending is not None:
        await pending
    for day in days:
        if day not in finished:
            await asyncio.to_thread(write_day, day, [])
    return FundingLoad(walk.report, written)


def write_snapshot(root: Root, batches: Mapping[str, Batch]) -> dict[str, Written]:
    """Replace the snapshot partition of each table with its batch."""
    out: dict[str, Written] = {}
    for table, batch in batches.items():
        parquet.write_batch(root, batch)
        written = Written(table)
        written.add(batch, batch.covers)
        out[table] = written
    return out
