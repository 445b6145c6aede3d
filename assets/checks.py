"""Asset checks: what a run verifies about the partitions it just wrote, read back from disk.

- ``unique_keys``: no two rows of a written partition share the table's key.
- ``no_rejects`` (blocking): no record of the written partitions was rejected; downstream stops.
- ``reconciles``: every record fetched is a row written, a reject or a counted exact duplicate,
  and the files hold exactly the rows the run wrote.
- ``complete`` (investments, blocking): no slice of the offset window was out of reach.
- ``nightly_partition_fresh``: the partition the nightly run owes is on disk and was extracted
  after its day ended (funding: yesterday; snapshots: today).

Each check is a plain function of the warehouse root and the partitions, so tests run them on
data made to break them.
"""

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

import dagster as dg
import duckdb
import pyarrow.compute as pc

from warehouse import parquet, schemas
from warehouse.parquet import Root

from .loading import Written
from .resources import WarehouseResource

UNIQUE_KEYS: Final = "unique_keys"
NO_REJECTS: Final = "no_rejects"
RECONCILES: Final = "reconciles"
COMPLETE: Final = "complete"
FRESH: Final = "nightly_partition_fresh"
_REJECTS_QUERY: Final = """SELECT * FROM _rejects WHERE "table" = '<table>'"""


def specs(asset: str, *, blocking_complete: bool = False) -> list[dg.AssetCheckSpec]:
    """The checks every table asset carries."""
    out = [
        dg.AssetCheckSpec(UNIQUE_KEYS, asset=asset, description="No two rows share the key"),
        dg.AssetCheckSpec(
            NO_REJECTS,
            asset=asset,
            blocking=True,
            description="No record of the written partitions was rejected (see _rejects)",
        ),
        dg.AssetCheckSpec(
            RECONCILES,
            asset=asset,
            description="Fetched = written + rejected + exact duplicates; files hold the rows",
        ),
    ]
    if blocking_complete:
        out.append(
            dg.AssetCheckSpec(
                COMPLETE,
                asset=asset,
                blocking=True,
                description="Every investment was within reach of the offset window",
            )
        )
    return out


def _read(files: list[str]) -> str:
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    return f"read_parquet([{listed}], hive_partitioning = true)"


def stored_rows(root: Root, table: str, days: Sequence[date]) -> int:
    """Rows the partitions' files hold, from their footers."""
    return sum(parquet.partition_rows(root, table, day) or 0 for day in days)


def unique_keys(root: Root, table: str, days: Sequence[date]) -> dg.AssetCheckResult:
    """Partition by partition, so memory stays one partition deep however long the range."""
    schema = schemas.TABLES[table]
    # Within a partition the partition columns are constant: the rest of the key decides.
    key = [k for k in schema.key if k not in schema.partition_columns]
    duplicated: list[str] = []
    read = 0
    for day in days:
        rows = parquet.read_partition(root, table, day, columns=key)
        if rows is None:
            continue
        read += 1
        if not key:  # the key is the partition itself: one row at most
            if rows.num_rows > 1:
                duplicated.append(f"{day}: {rows.num_rows} rows")
            continue
        counts = rows.group_by(key).aggregate([([], "count_all")])
        twice = counts.filter(pc.greater(counts["count_all"], 1))
        duplicated += [f"{day}: {row}" for row in twice.to_pylist()[: 5 - len(duplicated)]]
    return dg.AssetCheckResult(
        check_name=UNIQUE_KEYS,
        asset_key=table,
        passed=not duplicated,
        metadata={
            "key": ", ".join(schema.key),
            "partitions": read,
            "duplicated_keys": duplicated[:5],
        },
    )


def no_rejects(root: Root, table: str, days: Sequence[date]) -> dg.AssetCheckResult:
    files = [
        p.path
        for p in (
            parquet.partition_path(root, schemas.REJECTS, (table, d.isoformat())) for d in days
        )
        if p.exists()
    ]
    rejected, reasons = 0, []
    if files:
        with duckdb.connect() as con:
            rows = con.execute(
                f"SELECT reason FROM {_read(files)} ORDER BY partition, record_index"  # noqa: S608
            ).fetchall()
        rejected, reasons = len(rows), [r[0] for r in rows[:5]]
    return dg.AssetCheckResult(
        check_name=NO_REJECTS,
        asset_key=table,
        passed=rejected == 0,
        description=None if rejected == 0 else f"{rejected} records rejected; see {_REJECTS_QUERY}",
        metadata={"rejected": rejected, "first_reasons": reasons},
    )


def reconciles(root: Root, written: Written, fetched: int) -> dg.AssetCheckResult:
    """Fetched records all accounted for, and the files hold what was written."""
    stored = stored_rows(root, written.table, list(written.partitions))
    accounted = written.rows + written.rejected + written.duplicates
    return dg.AssetCheckResult(
        check_name=RECONCILES,
        asset_key=written.table,
        passed=fetched == written.received == accounted and stored == written.rows,
        metadata={
            "fetched": fetched,
            "received_by_warehouse": written.received,
            "rows_written": written.rows,
            "rejected": written.rejected,
            "exact_duplicates": written.duplicates,
            "rows_in_files": stored,
        },
    )


def complete(table: str, incomplete: Sequence[str]) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=COMPLETE,
        asset_key=table,
        passed=not incomplete,
        description=None
        if not incomplete
        else "Some investments were beyond the API's offset window: " + "; ".join(incomplete),
        metadata={"slices_out_of_reach": list(incomplete)},
    )


def for_written(root: Root, written: Written, fetched: int) -> list[dg.AssetCheckResult]:
    days = list(written.partitions)
    return [
        unique_keys(root, written.table, days),
        no_rejects(root, written.table, days),
        reconciles(root, written, fetched),
    ]


def fresh(root: Root, table: str, day: date, *, complete_day: bool) -> dg.AssetCheckResult:
    """The partition of ``day`` exists; with ``complete_day``, it was extracted after the day."""
    path = parquet.partition_path(root, table, day)
    extracted: datetime | None = None
    if path.exists():
        with duckdb.connect() as con:
            found = con.execute(
                "SELECT min(extracted_at) FROM read_parquet(?)", [path.path]
            ).fetchone()
        extracted = found[0] if found else None
    day_end = datetime.combine(day + timedelta(days=1), time.min, UTC)
    if not path.exists():
        problem: str | None = f"no {table} partition for {day}"
    elif complete_day and extracted is not None and extracted < day_end:
        problem = f"{table} {day} was extracted at {extracted}, before the day ended"
    else:
        problem = None
    return dg.AssetCheckResult(
        check_name=FRESH,
        asset_key=table,
        passed=problem is None,
        description=problem,
        metadata={"partition": day.isoformat(), "extracted_at": str(extracted)},
    )


def freshness_check(
    table: str, owed: Callable[[date], date], *, complete_day: bool
) -> dg.AssetChecksDefinition:
    """A check of the partition the nightly run owes ``table`` today (``owed(today)``)."""

    @dg.asset_check(
        asset=table,
        name=FRESH,
        description=f"The nightly {table} partition is on disk"
        + (" and was extracted after its day ended" if complete_day else ""),
    )
    def check(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        return fresh(
            warehouse.path, table, owed(datetime.now(UTC).date()), complete_day=complete_day
        )

    return check
