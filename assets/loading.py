"""From API walks to warehouse partitions: the work each asset does, without Dagster.

`load_monthly` streams the walk of a history partitioned by month into its month partitions: the
walk's pages are gathered into chunks and handed to a `warehouse.writer.HistoryWriter`, which
normalizes and writes each month in a process of its own while the walk goes on (see that module
for the order, memory, kill and no-silent-shrinking rules). `write_snapshot` writes the batches
of a snapshot. Each records the account's source (`warehouse.sources.record`) before its first
write, so that no row lands without it, and a run that failed before (a wrong or dead address)
recorded nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final

import pyarrow.compute as pc

from pipeline.whitebit import AsyncWhiteBIT, RecordsLeftOut, WalkStats
from warehouse import Warehouse, partitions, sources
from warehouse.monthly import REASONS_PER_DAY, DayWrite, FewerRowsRefused, MonthlyTarget, Progress
from warehouse.normalize import Batch
from warehouse.writer import HistoryWriter

__all__ = ["CHUNK_RECORDS", "FewerRowsRefused", "Load", "Written", "load_monthly"]

#: Records normalized at once: large enough for vectorized work, small enough to stream.
CHUNK_RECORDS: Final = 5_000

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


class Chunk:
    """Pages gathered for the writer: lists of records, or records by owner (a walk of records
    grouped by market yields ``{market: [record, ...]}``), kept in the form they came in."""

    def __init__(self) -> None:
        self._listed: list[Any] = []
        self._owned: dict[str, list[Any]] = {}
        self._count = 0

    def add(self, page: list[Any] | dict[str, list[Any]]) -> None:
        if isinstance(page, dict):
            for owner, records in page.items():
                self._owned.setdefault(owner, []).extend(records)
                self._count += len(records)
        else:
            self._listed.extend(page)
            self._count += len(page)

    def __len__(self) -> int:
        return self._count

    def records(self) -> list[Any] | dict[str, list[Any]]:
        return self._owned if self._owned else self._listed


@dataclass(slots=True)
class Load:
    """A walk written into the warehouse: the walk's stats and what was written."""

    stats: WalkStats
    written: Written


async def load_monthly(
    client: AsyncWhiteBIT,
    target: MonthlyTarget,
    *,
    source: sources.Source,
    environ: Mapping[str, str],
    values: Mapping[str, Sequence[str]] | None = None,
    on_day: DayWritten | None = None,
) -> Load:
    """Walk the target's history over its days and replace each day in its partition (the
    writer process gets ``environ``, which holds no credential). ``values`` are the account's
    settings by name, for the walk to take those its history's paging names.

    Every day of the target is replaced, emptied when the exchange holds nothing for it (unless
    the warehouse held records there: see `FewerRowsRefused`, whose message says whether an
    answer of the walk left records out). An answer that left records out (`RecordsLeftOut`) is
    raised once every other record is written.
    """
    since = datetime.combine(target.days[0], time.min, UTC)
    until = datetime.combine(target.days[-1] + timedelta(days=1), time.min, UTC)
    # Out of reach is said by the ``complete`` check, after every reachable record is written.
    walk = client.walk(
        target.history, since=since, until=until, values=values, on_window_exceeded="report"
    )
    written = Written(target.history.name, target.account)

    def record(replies: list[Progress]) -> None:
        for progress in replies:
            written.took(progress.received, progress.duplicates)
            for day in progress.days:
                written.wrote(day)
                if on_day is not None:
                    on_day(day.day, day.rows, day.rejected)

    writer = HistoryWriter(target, environ=environ)
    left_out: RecordsLeftOut | None = None
    landed = False

    def land() -> None:
        """Record the account's source once, before the load's first write: a walk refused
        before its first page records nothing."""
        nonlocal landed
        if not landed:
            sources.record(target.wh, target.account, source)
            landed = True

    async with writer:
        try:
            chunk = Chunk()
            try:
                async for page in walk:
                    chunk.add(page)
                    if len(chunk) >= CHUNK_RECORDS:
                        land()
                        record(await writer.take(chunk.records()))
                        chunk = Chunk()
            except RecordsLeftOut as missing:
                left_out = missing  # raised once every other record is in hand: written first
            land()
            if len(chunk):
                record(await writer.take(chunk.records()))
            record(await writer.finish())
        except FewerRowsRefused as refused:
            raise FewerRowsRefused(f"{refused} {_why_fewer(walk.stats)}") from None
    if left_out is not None:
        raise left_out
    return Load(walk.stats, written)


def _why_fewer(stats: WalkStats) -> str:
    """Why a walk listed fewer records than the warehouse holds: an answer it found leaving
    records out, or none, so the exchange no longer lists them."""
    if stats.left_out:
        first = stats.left_out[0]
        return (
            f"They are missing from one answer, not forgotten by the exchange: {first.slice} "
            f"left records out of {first.days} (UTC), again when asked once more; the next run "
            "asks again."
        )
    return (
        "No answer of this walk left a record out (each short page ended its window, each "
        "total was met): the exchange no longer lists them as the warehouse can read them; the "
        "warehouse keeps them."
    )


def write_snapshot(
    wh: Warehouse, batches: Mapping[str, Batch], *, account: str, source: sources.Source
) -> dict[str, Written]:
    """Replace the account's snapshot partition of each table with its batch."""
    sources.record(wh, account, source)
    out: dict[str, Written] = {}
    for table, batch in batches.items():
        partitions.write_batch(wh, batch, account=account)
        written = Written(table, account)
        written.took(batch.received, batch.duplicates)
        for day in batch.covers:
            rows = batch.rows.filter(pc.equal(batch.rows[batch.schema.partition_column], day))
            rejects = batch.rejects.filter(pc.equal(batch.rejects["partition"], day.isoformat()))
            written.wrote(DayWrite.of(day, rows, rejects))
        out[table] = written
    return out
