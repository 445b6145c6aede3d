"""The months of a history a nightly run reads again, besides the month so far: those whose
rows may still change (a deposit not final yet: `spec.History.unsettled`), and, of a history the
exchange forgets, those with days not archived that it still answers (a night that failed, an
outage of weeks: mended while it can be).
"""

from __future__ import annotations

from datetime import date, timedelta

from pipeline import spec
from warehouse import archive, catalog, partitions, schemas
from warehouse.root import Warehouse


def months_to_reread(wh: Warehouse, history: spec.History, account: str, today: date) -> list[str]:
    """The months (``2026-05``) of the account's ``history`` to read again, oldest first:
    of a history partitioned by month, those holding a row that may still change, and (for one
    the exchange forgets) those with days it still answers that are not archived. The days
    before the account's first archived day are not asked for here: a backfill is a person's
    decision (the horizon check names them)."""
    if not history.monthly:
        return []
    months: set[str] = set()
    if history.unsettled is not None:
        months |= _unsettled(wh, history, account)
    if history.forgotten:
        walked = partitions.coverage(wh.store, history.name, account)
        if walked:
            first = max(min(walked), spec.floor_day(today))
            gaps = archive.horizon(walked, first, today).at_stake
            for gap in gaps:
                day = gap.first
                while day <= gap.last:
                    months.add(schemas.month_of(day))
                    day += timedelta(days=1)
    return sorted(months)


def _unsettled(wh: Warehouse, history: spec.History, account: str) -> set[str]:
    schema = schemas.TABLES[history.name]
    files = partitions.partition_files(wh.store, history.name, account=account)
    if not files:
        return set()
    with wh.store.copied(files) as (here, names), catalog.reader(here) as con:
        listed = ", ".join("'" + n.replace("'", "''") + "'" for n in names)
        found = con.execute(
            f"SELECT DISTINCT strftime({schema.partition_column}, '%Y-%m') "  # noqa: S608
            f"FROM read_parquet([{listed}], union_by_name = true) WHERE {history.unsettled}"
        ).fetchall()
    return {month for (month,) in found}
