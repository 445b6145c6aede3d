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


#: Partition files one check query reads at once: memory stays a batch of partitions deep
#: however long the range, and DuckDB reads a batch in parallel instead of one query a day.
FILES_PER_QUERY: Final = 256


def _read(files: Sequence[str]) -> str:
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    return f"read_parquet([{listed}], hive_partitioning = true)"


def _files(root: Root, table: str, partitions: Sequence[date | tuple[str, str]]) -> list[str]:
    """The files these partitions of ``table`` have now (a partition may have none)."""
    paths = (parquet.partition_path(root, table, p) for p in partitions)
    return [p.path for p in paths if p.exists()]


def _batches(files: list[str]) -> list[list[str]]:
    return [files[i : i + FILES_PER_QUERY] for i in range(0, len(files), FILES_PER_QUERY)]


def stored_rows(root: Root, table: str, days: Sequence[date]) -> int:
    """Rows the partitions' files hold (DuckDB counts them from the files' footers)."""
    total = 0
    with duckdb.connect() as con:
        for batch in _batches(_files(root, table, days)):
            found = con.execute(f"SELECT count(*) FROM {_read(batch)}").fetchone()  # noqa: S608
            total += int(found[0]) if found else 0
    return total


def unique_keys(root: Root, table: str, days: Sequence[date]) -> dg.AssetCheckResult:
    """Keys held twice, partition by partition (a key is unique within its partition)."""
    schema = schemas.TABLES[table]
    # The partition columns come from the paths; with them, the rest of the key decides.
    key = [*schema.partition_columns, *(k for k in schema.key if k not in schema.partition_columns)]
    columns = ", ".join(f'"{k}"' for k in key)
    files = _files(root, table, days)
    duplicated: list[str] = []
    with duckdb.connect() as con:
        for batch in _batches(files):
            if len(duplicated) >= 5:
                break
            found = con.execute(
                f"SELECT {columns}, count(*) AS count_all FROM {_read(batch)} "  # noqa: S608
                f"GROUP BY ALL HAVING count(*) > 1 ORDER BY ALL LIMIT {5 - len(duplicated)}"
            )
            names = [d[0] for d in found.description or ()]
            for row in found.fetchall():
                held = dict(zip(names, row, strict=True))
                partition = held.pop(schema.partition_columns[0])
                duplicated.append(f"{partition}: {held}")
    return dg.AssetCheckResult(
        check_name=UNIQUE_KEYS,
        asset_key=table,
        passed=not duplicated,
        metadata={
            "key": ", ".join(schema.key),
            "partitions": len(files),
            "duplicated_keys": duplicated,
        },
    )


def no_rejects(root: Root, table: str, days: Sequence[date]) -> dg.AssetCheckResult:
    files = _files(root, schemas.REJECTS, [(table, d.isoformat()) for d in days])
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
