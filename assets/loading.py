"""From API walks to warehouse partitions: the work each asset does, without Dagster.

`load_funding` streams a funding walk into month partitions: the walk's pages are gathered into
chunks and handed to a `warehouse.writer.FundingWriter`, which normalizes and writes each month in
a process of its own while the walk goes on (see that module for the order, memory, kill and
no-silent-shrinking rules).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

import pyarrow.compute as pc

from pipeline.whitebit import AsyncWhiteBIT, FundingEntry, WalkReport
from warehouse import parquet, schemas
from warehouse.monthly import REASONS_PER_DAY, DayWrite, FewerRowsRefused, Progress
from warehouse.normalize import Batch
from warehouse.parquet import Root
from warehouse.writer import FundingWriter

__all__ = ["CHUNK_RECORDS", "FewerRowsRefused", "FundingLoad", "Written", "load_funding"]

#: Records normalized at once: large enough for vectorized work, small enough to stream.
CHUNK_RECORDS: Final = 5_000
FUNDING: Final = schemas.FUNDING_HISTORY

DayWritten = Callable[[date, int, int], None]


@dataclass(slots=True)
class Written:
    """What one table's load wrote for an account: rows per day replaced, and the batches'
    totals."""

    table: str
    account: str
    days: dict[date, int] = field(default_factory=dict)
    received: int = 0
    rows: int = 0
    rejected: int = 0
    duplicates: int = 0
    rejects_preview: list[str] = field(default_factory=list)

    def took(self, received: int, duplicates: int) -> None:
        self.received += received
        self.duplicates += duplicates

    def wrote(self, write: DayWrite) -> None:
        self.days[write.day] = write.rows
        self.rows += write.rows
        self.rejected += write.rejected
        self.rejects_preview.extend(
            write.reasons[: max(0, REASONS_PER_DAY - len(self.rejects_preview))]
        )


@dataclass(slots=True)
class FundingLoad:
    """A funding walk written into the warehouse: the walk's report and what was written."""

    report: WalkReport
    written: Written


async def load_funding(
    client: AsyncWhiteBIT,
    root: Root,
    *,
    account: str,
    days: Sequence[date],
    extracted_at: datetime,
    markets: Sequence[str] | None = None,
    on_day: DayWritten | None = None,
    allow_fewer_rows: bool = False,
) -> FundingLoad:
    """Walk the funding history over ``days`` and replace each day in its partition.

    Every day of ``days`` is replaced, emptied when the exchange holds nothing for it (unless
    the warehouse held payments there: see `FewerRowsRefused`).
    """
    if not days:
        raise ValueError("no day to load")
    days = sorted(days)
    since = datetime.combine(days[0], time.min, UTC)
    until = datetime.combine(days[-1] + timedelta(days=1), time.min, UTC)
    walk = client.walk_funding(since=since, until=until, markets=list(markets) if markets else None)
    written = Written(FUNDING.name, account)

    def record(replies: list[Progress]) -> None:
        for progress in replies:
            written.took(progress.received, progress.duplicates)
            for day in progress.days:
                written.wrote(day)
                if on_day is not None:
                    on_day(day.day, day.rows, day.rejected)

    writer = FundingWriter(
        root,
        account=account,
        days=days,
        extracted_at=extracted_at,
        allow_fewer_rows=allow_fewer_rows,
    )
    async with writer:
        chunk: list[FundingEntry] = []
        async for page in walk:
            chunk += page
            if len(chunk) >= CHUNK_RECORDS:
                record(await writer.take(chunk))
                chunk = []
        if chunk:
            record(await writer.take(chunk))
        record(await writer.finish())
    return FundingLoad(walk.report, written)


def write_snapshot(root: Root, batches: Mapping[str, Batch], *, account: str) -> dict[str, Written]:
    """Replace the account's snapshot partition of each table with its batch."""
    out: dict[str, Written] = {}
    for table, batch in batches.items():
        parquet.write_batch(root, batch, account=account)
        written = Written(table, account)
        written.took(batch.received, batch.duplicates)
        for day in batch.covers:
            rows = batch.rows.filter(pc.equal(batch.rows[batch.schema.partition_column], day))
            rejects = batch.rejects.filter(pc.equal(batch.rejects["partition"], day.isoformat()))
            written.wrote(DayWrite.of(day, rows, rejects))
        out[table] = written
    return out
