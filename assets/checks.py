"""Asset checks: what a run verifies about the partitions it just wrote, read back from disk.

- ``unique_keys``: no two rows of a written partition share the table's key.
- ``no_rejects`` (blocking): no record of the written partitions was rejected; downstream stops.
- ``reconciles``: every record fetched is a row written, a reject or a counted exact duplicate,
  and the files hold exactly the rows the run wrote.
- ``complete`` (a history read by offset window, blocking): no slice of the window was out of
  reach.
- ``schema_drift`` (warns): the exchange's answers held no field the spec does not name; the
  rows load without such fields, so a new one only warns, naming it with an example value.
- ``nightly_partition_fresh``: the partition the nightly run owes is on disk and was extracted
  after its day ended (a history by month: yesterday; snapshots: today).
- Over the catalog's views, in the daily watch job once the night's tables are written
  (`view_checks`): ``fills_have_orders`` and ``unlisted_values`` (warn), ``orders_match_fills``,
  and ``balances_reconcile`` (blocking).

Each check is a plain function of the warehouse's store and an account's partitions, so tests run
them on data made to break them; ``key`` is the asset key the result belongs to (the account's
table).
"""

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final

import dagster as dg

from pipeline import spec
from warehouse import catalog, layout, partitions, schemas
from warehouse.root import Warehouse
from warehouse.store import Store

from .loading import Written
from .resources import WarehouseResource

UNIQUE_KEYS: Final = "unique_keys"
NO_REJECTS: Final = "no_rejects"
RECONCILES: Final = "reconciles"
COMPLETE: Final = "complete"
FRESH: Final = "nightly_partition_fresh"
SCHEMA_DRIFT: Final = "schema_drift"
#: Reasons of rejected records a failed ``no_rejects`` quotes; `whitebit-etl sql` lists them all.
FIRST_REASONS: Final = 5


def reached(history: spec.History) -> bool:
    """Whether a walk of the history may find records out of the offset's reach (a slice of an
    offset window, a time window of one second): its ``complete`` check says."""
    return isinstance(history.paging, spec.OffsetWindow | spec.TimeWindows)


def specs(asset: dg.AssetKey, history: spec.History) -> list[dg.AssetCheckSpec]:
    """The checks every table asset carries; a history read by offset window also whether every
    record was within the window's reach (blocking). The checks over the catalog's views are
    the watch job's (`view_checks.views_check`)."""
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
        dg.AssetCheckSpec(
            SCHEMA_DRIFT,
            asset=asset,
            description="The exchange's answers held only fields the spec names (warns)",
        ),
    ]
    if reached(history):
        out.append(
            dg.AssetCheckSpec(
                COMPLETE,
                asset=asset,
                blocking=True,
                description="Every record was within reach of the offset window",
            )
        )
    return out


#: Days of partitions one check query reads at once, a month's file counting as its month: the
#: query's hash table holds a batch's rows, not a range's (memory the process's one in-memory
#: database keeps once the query is done), and DuckDB reads a batch in parallel instead of one
#: query a day.
DAYS_PER_QUERY: Final = 256


def _read(files: Sequence[str]) -> str:
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    return f"read_parquet([{listed}], hive_partitioning = true)"


def _files(store: Store, table: str, held: Sequence[layout.Partition]) -> list[str]:
    """The files holding these partitions of ``table`` now (relative names; a partition may have
    none; the days of a month share its file): one listing of each account's files, not a look
    per file (on an object store, a look is a request)."""
    wanted = dict.fromkeys(layout.partition_file(table, p) for p in held)
    there = {
        path
        for account in sorted({str(p[0]) for p in held})
        for path in partitions.partition_files(store, table, account=account)
    }
    return [name for name in wanted if name in there]


def of_days(table: str, days: Sequence[date]) -> tuple[str, list[object]]:
    """A ``WHERE`` clause keeping the rows of ``days`` from the files that hold them, and its
    parameters: none for a table whose file is a day, a list of days for a month's file."""
    schema = schemas.TABLES[table]
    if not schema.month_path:
        return "", []
    return f'WHERE list_contains(?, "{schema.partition_column}")', [list(days)]


def _batches(table: str, files: list[str]) -> list[list[str]]:
    size = DAYS_PER_QUERY // 31 if schemas.TABLES[table].month_path else DAYS_PER_QUERY
    return [files[i : i + size] for i in range(0, len(files), size)]


def _days(account: str, days: Sequence[date]) -> list[layout.Partition]:
    return [(account, day) for day in days]


def _rejects_of(table: str, account: str, days: Sequence[date]) -> list[layout.Partition]:
    return [(account, table, day.isoformat()) for day in days]


def stored_rows(store: Store, table: str, account: str, days: Sequence[date]) -> int:
    """Rows the account's files hold of these days."""
    total = 0
    where, params = of_days(table, days)
    files = _files(store, table, _days(account, days))
    with store.copied(files) as (here, names), catalog.reader(here) as con:
        for batch in _batches(table, names):
            found = con.execute(
                f"SELECT count(*) FROM {_read(batch)} {where}",  # noqa: S608
                params,
            ).fetchone()
            total += int(found[0]) if found else 0
    return total


def unique_keys(
    store: Store, table: str, account: str, days: Sequence[date], *, key: dg.AssetKey
) -> dg.AssetCheckResult:
    """Keys held twice, partition by partition (a key is unique within its partition)."""
    schema = schemas.TABLES[table]
    # The partition columns come from the paths; with them, the rest of the key decides.
    by = [*schema.partition_columns, *(k for k in schema.key if k not in schema.partition_columns)]
    columns = ", ".join(f'"{k}"' for k in by)
    files = _files(store, table, _days(account, days))
    duplicated: list[str] = []
    with store.copied(files) as (here, names), catalog.reader(here) as con:
        for batch in _batches(table, names):
            if len(duplicated) >= 5:
                break
            found = con.execute(
                f"SELECT {columns}, count(*) AS count_all FROM {_read(batch)} "  # noqa: S608
                f"GROUP BY ALL HAVING count(*) > 1 ORDER BY ALL LIMIT {5 - len(duplicated)}"
            )
            columns_found = [d[0] for d in found.description or ()]
            for row in found.fetchall():
                held = dict(zip(columns_found, row, strict=True))
                partition = held.pop(schema.partition_columns[0])
                duplicated.append(f"{partition}: {held}")
    return dg.AssetCheckResult(
        check_name=UNIQUE_KEYS,
        asset_key=key,
        passed=not duplicated,
        description=None
        if not duplicated
        else f"keys held more than once ({', '.join(schema.key)}), first: " + "; ".join(duplicated),
        metadata={
            "key": ", ".join(schema.key),
            "partitions": len(files),
            "duplicated_keys": duplicated,
        },
    )


def rejects_query(table: str, account: str, partitions: Sequence[str]) -> str:
    """The `whitebit-etl sql` line that lists the rejects of these partitions of an account's
    ``table``.

    Columns are qualified (``r.table``) rather than quoted, so the query holds no double quote
    and the line pastes into a shell as it is."""
    first, last = min(partitions), max(partitions)
    # A run replaces a contiguous range of partitions: everything between two of them is its own.
    where = (
        f"r.partition = '{first}'"
        if first == last
        else f"r.partition BETWEEN '{first}' AND '{last}'"
    )
    query = (
        "SELECT r.partition, r.record_index, r.reason, r.raw_json FROM _rejects r "  # noqa: S608
        f"WHERE r.account = '{account}' AND r.table = '{table}' AND {where} "
        "ORDER BY r.partition, r.record_index"
    )
    return f'whitebit-etl sql "{query}"'


def no_rejects(
    store: Store, table: str, account: str, days: Sequence[date], *, key: dg.AssetKey
) -> dg.AssetCheckResult:
    """Rejects in the written partitions; when there are, the description says how many, where,
    the first reasons and the command that lists them (the terminal prints it as it is)."""
    files = _files(store, schemas.REJECTS, _rejects_of(table, account, days))
    per_partition: dict[str, int] = {}
    reasons: list[str] = []
    if files:
        with store.copied(files) as (here, names), catalog.reader(here) as con:
            rejects = _read(names)
            # Hive partitioning may read a day-like value as a DATE: text, as the view has it.
            per_partition = dict(
                con.execute(
                    f"SELECT CAST(partition AS VARCHAR) AS p, count(*) FROM {rejects} "  # noqa: S608
                    "GROUP BY p ORDER BY p"
                ).fetchall()
            )
            reasons = [
                f"{partition} record {index}: {reason}"
                for partition, index, reason in con.execute(
                    f"SELECT CAST(partition AS VARCHAR) AS p, record_index, reason "  # noqa: S608
                    f"FROM {rejects} ORDER BY p, record_index LIMIT {FIRST_REASONS}"
                ).fetchall()
            ]
    rejected = sum(per_partition.values())
    metadata: dict[str, Any] = {
        "rejected": rejected,
        "partitions": dg.MetadataValue.json(per_partition),
        "first_reasons": reasons,
    }
    description = None
    if rejected:
        command = rejects_query(table, account, list(per_partition))
        metadata["list_them"] = dg.MetadataValue.text(command)
        where = ", ".join(f"{p} ({n})" for p, n in list(per_partition.items())[:FIRST_REASONS])
        more = len(per_partition) - FIRST_REASONS
        description = "\n".join(
            [
                f"{rejected} record(s) of {key.to_user_string()} rejected, in {len(per_partition)} "
                f"partition(s): {where}" + (f" and {more} more" if more > 0 else ""),
                "first reasons:",
                *(f"  {reason}" for reason in reasons),
                f"list them: {command}",
            ]
        )
    return dg.AssetCheckResult(
        check_name=NO_REJECTS,
        asset_key=key,
        passed=rejected == 0,
        description=description,
        metadata=metadata,
    )


def reconciles(
    store: Store, written: Written, fetched: int, *, key: dg.AssetKey
) -> dg.AssetCheckResult:
    """Fetched records all accounted for, and the files hold what was written."""
    stored = stored_rows(store, written.table, written.account, list(written.days))
    accounted = written.rows + written.rejected + written.duplicates
    passed = fetched == written.received == accounted and stored == written.rows
    return dg.AssetCheckResult(
        check_name=RECONCILES,
        asset_key=key,
        passed=passed,
        description=None
        if passed
        else f"fetched {fetched}, the warehouse received {written.received}, accounted "
        f"{accounted} ({written.rows} written, {written.rejected} rejected, "
        f"{written.duplicates} exact duplicates); the files hold {stored} rows",
        metadata={
            "fetched": fetched,
            "received_by_warehouse": written.received,
            "rows_written": written.rows,
            "rejected": written.rejected,
            "exact_duplicates": written.duplicates,
            "rows_in_files": stored,
        },
    )


def complete(key: dg.AssetKey, incomplete: Sequence[str]) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=COMPLETE,
        asset_key=key,
        passed=not incomplete,
        description=None
        if not incomplete
        else "Some records were beyond the API's offset reach: " + "; ".join(incomplete),
        metadata={"slices_out_of_reach": list(incomplete)},
    )


def schema_drift(key: dg.AssetKey, unknown_fields: Mapping[str, str]) -> dg.AssetCheckResult:
    """Warns while the exchange's answers carry fields the spec does not name (each with one
    example value): the rows loaded without them, but the contract has moved."""
    fields = dict(sorted(unknown_fields.items()))
    return dg.AssetCheckResult(
        check_name=SCHEMA_DRIFT,
        asset_key=key,
        passed=not fields,
        severity=dg.AssetCheckSeverity.WARN,
        description=None
        if not fields
        else f"the exchange's answers for {key.path[-1]} carry {len(fields)} field(s) the spec "
        "does not name (rows loaded without them): "
        + "; ".join(f"{path} (e.g. {example})" for path, example in fields.items()),
        metadata={"unknown_fields": dg.MetadataValue.json(fields)},
    )


def for_written(
    wh: Warehouse,
    written: Written,
    fetched: int,
    unknown_fields: Mapping[str, str],
    *,
    key: dg.AssetKey,
    out_of_reach: Sequence[str] = (),
) -> list[dg.AssetCheckResult]:
    """The checks of what a run wrote of a table; of a history a walk may find out of reach,
    whether nothing was (``out_of_reach``: the slices or windows that were)."""
    days = list(written.days)
    history = schemas.TABLES[written.table].history
    # The checks of an object store's partitions read local copies (`Store.copied`), fetched
    # once for all of them: the written partitions and their rejects.
    store = wh.store
    files = _files(store, written.table, _days(written.account, days))
    files += _files(store, schemas.REJECTS, _rejects_of(written.table, written.account, days))
    with store.copied(files) as (here, _):
        found = [
            unique_keys(here, written.table, written.account, days, key=key),
            no_rejects(here, written.table, written.account, days, key=key),
            reconciles(here, written, fetched, key=key),
            schema_drift(key, unknown_fields),
        ]
    if history is not None and reached(history):
        found.append(complete(key, out_of_reach))
    return found


def fresh(
    store: Store, table: str, account: str, day: date, *, complete_day: bool, key: dg.AssetKey
) -> dg.AssetCheckResult:
    """The account's partition of ``day`` exists; with ``complete_day``, the day's rows were
    extracted after it ended."""
    path = layout.partition_file(table, (account, day))
    extracted: datetime | None = None
    exists = store.exists(path)
    if exists:
        where, params = of_days(table, [day])
        with store.copied([path]) as (here, names), catalog.reader(here) as con:
            found = con.execute(
                f"SELECT min(extracted_at) FROM {_read(names)} {where}",  # noqa: S608
                params,
            ).fetchone()
        extracted = found[0] if found else None
    day_end = datetime.combine(day + timedelta(days=1), time.min, UTC)
    if not exists:
        problem: str | None = f"no {table} partition of {account} for {day}"
    elif complete_day and extracted is not None and extracted < day_end:
        problem = f"{table} of {account}, {day}, was extracted at {extracted}, before the day ended"
    else:
        problem = None
    return dg.AssetCheckResult(
        check_name=FRESH,
        asset_key=key,
        passed=problem is None,
        description=problem,
        metadata={"partition": day.isoformat(), "extracted_at": str(extracted)},
    )


def freshness_check(
    key: dg.AssetKey,
    account: str,
    owed: Callable[[date], date],
    clock: spec.Clock,
    *,
    complete_day: bool,
) -> dg.AssetChecksDefinition:
    """A check of the partition the nightly run owes the account's table (the asset ``key``)
    today by ``clock`` (``owed(today)``)."""
    table = key.path[-1]

    @dg.asset_check(
        asset=key,
        name=FRESH,
        description=f"The nightly {table} partition of {account} is on disk"
        + (" and was extracted after its day ended" if complete_day else ""),
    )
    def check(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        return fresh(
            warehouse.warehouse.store,
            table,
            account,
            owed(clock.today()),
            complete_day=complete_day,
            key=key,
        )

    return check
