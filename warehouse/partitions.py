"""Hive-partitioned Parquet: one file per partition (`warehouse.layout`), replaced whole.

A write replaces exactly the days it covers: a day's file, or the covered days of a month's file
(the file's other days are read and kept, under the lock). The rejects partition of each covered
day is replaced with it (removed when there are no rejects), so a rerun never duplicates rejects
either. The two files are replaced one after the other, data first; a kill between them leaves the
old rejects beside the new data until the next run of that partition. Writers of a table take
turns, a partition at a time, under the table's lock (`Store.lock`), so two runs of one partition
at once end with one whole partition and its own rejects. Rows are sorted by key first, so the
same input gives the same file contents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

import pyarrow as pa
import pyarrow.compute as pc

from warehouse import archive, layout, schemas
from warehouse.errors import WarehouseError
from warehouse.layout import PARQUET_DIR, PARTITION_FILE, InvalidPartitionValue, Partition
from warehouse.normalize import Batch, has_equal_keys, has_equal_neighbours
from warehouse.root import Warehouse
from warehouse.schemas import REJECTS, TableSchema
from warehouse.store import Store


class SchemaMismatch(WarehouseError):
    """Rows that do not have the shape the table's schema declares."""


@dataclass(frozen=True, slots=True)
class PartitionWrite:
    """What one partition replacement wrote."""

    table: str
    #: Partition values as they appear in the path, in partition-column order.
    partition: tuple[str, ...]
    path: str
    rows: int
    rejects: int


def replace_partition(
    wh: Warehouse,
    table_name: str,
    partition: Partition,
    rows: pa.Table,
    *,
    rejects: pa.Table | None = None,
    covers: Iterable[date] | None = None,
    walked_at: datetime | None = None,
) -> PartitionWrite:
    """Replace one partition with ``rows`` (an empty table leaves an empty partition).

    ``rows`` has the table's schema (partition columns may be present and must then hold the
    partition's value). For a data table, ``rejects`` are the `_rejects` rows of this very
    partition; they replace its rejects partition, and none (or an empty table) removes it.

    A month partition (given as ``(account, "2025-03")`` or with any day of the month) replaces
    the days in ``covers`` (default: the whole month): its file keeps the rows of its other
    days, and the rejects of each covered day are replaced. With ``walked_at`` (when the walk
    that read them began), the file's footer records those days as walked then
    (`warehouse.archive`), beside the days it recorded before.
    """
    schema = layout.table(table_name)
    values = layout.partition_text(schema, partition)
    target = layout.relative_path(schema, values)
    if schema.name == REJECTS and rejects is not None:
        raise ValueError("rejects of the _rejects table make no sense")
    days = _covered_days(schema, values, covers)
    rejected = 0
    # The partition and its rejects are written under one lock: a concurrent writer of the same
    # partition never pairs its data with another's rejects, nor keeps days another replaced.
    with wh.store.lock(schema.name) as still_held:
        held: Mapping[date, datetime] = {}
        if schema.month_path:
            rows, held = _with_kept_days(wh, schema, target, rows, days)
        file_rows, order = _file_rows(schema, values, rows)
        if schema.month_path:
            file_rows = archive.with_coverage(file_rows, held, days, walked_at)
        still_held()
        wh.store.write_table(target, file_rows, order)
        if schema.name != REJECTS:
            covered = [d.isoformat() for d in days] if schema.month_path else [values[1]]
            still_held()
            rejected = _replace_rejects(wh, values[0], schema.name, covered, rejects)
    return PartitionWrite(schema.name, values, wh.store.url(target), file_rows.num_rows, rejected)


def _covered_days(
    schema: TableSchema, values: tuple[str, ...], covers: Iterable[date] | None
) -> list[date]:
    if not schema.month_path:
        if covers is not None:
            raise ValueError(f"{schema.name}: a partition of one day covers that day only")
        return []
    first, following = schemas.month_days(values[1])
    if covers is None:
        return [date.fromordinal(n) for n in range(first.toordinal(), following.toordinal())]
    days = sorted(set(covers))
    if not days:
        raise ValueError(f"{schema.name} {values[1]}: a write that covers no day")
    outside = [d for d in days if not first <= d < following]
    if outside:
        raise InvalidPartitionValue(f"{schema.name}: {outside[0]} is not in {values[1]}")
    return days


def _with_kept_days(
    wh: Warehouse, schema: TableSchema, target: str, rows: pa.Table, days: list[date]
) -> tuple[pa.Table, Mapping[date, datetime]]:
    """``rows`` of the covered ``days``, and the rows the month's file holds of its other days;
    and the coverage its footer records."""
    column = schema.partition_column
    covered = pa.array(days, schemas.DAY)
    outside = rows[column].filter(pc.invert(pc.is_in(rows[column], value_set=covered)))
    if len(outside):
        raise SchemaMismatch(
            f"{schema.name}: rows of {outside[0]} given to a write of "
            f"{schemas.month_of(days[0])} that covers {days[0]} .. {days[-1]}"
        )
    first, following = schemas.month_days(schemas.month_of(days[0]))
    if len(days) == following.toordinal() - first.toordinal():
        return rows, {}
    held = wh.store.read_table(target)
    if held is None:
        return rows, {}
    kept = held.filter(pc.invert(pc.is_in(held[column], value_set=covered)))
    walked = archive.covered(held.schema.metadata)
    return pa.concat_tables([kept, rows.select(kept.column_names).cast(kept.schema)]), walked


def write_partitions(
    wh: Warehouse,
    table_name: str,
    rows: pa.Table,
    rejects: pa.Table | None = None,
    *,
    account: str,
    replace: Iterable[date] = (),
) -> list[PartitionWrite]:
    """Split one account's rows and rejects by day and replace each day they touch, in its
    partition.

    Every day in ``replace`` is replaced too, emptied when no row belongs to it: pass the whole
    window a run extracted, so that a day that lost all its records is emptied.
    """
    schema = layout.table(table_name)
    column = schema.partition_column
    if rejects is None:
        rejects = schemas.REJECTS_TABLE.arrow_schema.empty_table()
    foreign = pc.unique(rejects["table"].filter(pc.not_equal(rejects["table"], schema.name)))
    if len(foreign):
        raise ValueError(f"rejects of {foreign.to_pylist()} given to write {schema.name}")
    days = set(replace)
    days |= set(pc.unique(rows[column]).to_pylist()) if rows.num_rows else set()
    days |= {date.fromisoformat(p) for p in pc.unique(rejects["partition"]).to_pylist()}
    parts: dict[layout.PartitionValue, list[date]] = {}
    for day in sorted(days):
        parts.setdefault(schemas.month_of(day) if schema.month_path else day, []).append(day)
    writes = []
    for partition, covered in parts.items():
        part_rows = rows.filter(pc.is_in(rows[column], pa.array(covered, schemas.DAY)))
        in_part = pa.array([d.isoformat() for d in covered], pa.string())
        part_rejects = rejects.filter(pc.is_in(rejects["partition"], in_part))
        writes.append(
            replace_partition(
                wh,
                schema.name,
                (account, partition),
                part_rows,
                rejects=part_rejects,
                covers=covered if schema.month_path else None,
            )
        )
    return writes


def write_batch(
    wh: Warehouse, batch: Batch, *, account: str, replace: Iterable[date] = ()
) -> list[PartitionWrite]:
    """Write an account's normalized batch: its rows, its rejects, every partition it covers."""
    return write_partitions(
        wh,
        batch.table,
        batch.rows,
        batch.rejects,
        account=account,
        replace=(*batch.covers, *replace),
    )


def _file_rows(
    schema: TableSchema, values: tuple[str, ...], rows: pa.Table
) -> tuple[pa.Table, pa.Array | None]:
    """Check rows against the schema and the partition; drop the partition columns. The rows as
    given and the order to write them in (indices sorted by key; None: as given): the file's
    writer takes them in that order a row group at a time, never sorting a copy of them all."""
    expected = schema.arrow_schema
    given = {f.name: f.type for f in rows.schema}
    problems = [
        f"{f.name}: expected {f.type}, got {given[f.name]}"
        for f in expected
        if f.name in given and given[f.name] != f.type
    ]
    missing = [f.name for f in schema.file_schema if f.name not in given]
    unknown = [name for name in given if name not in expected.names]
    if problems or missing or unknown:
        raise SchemaMismatch(
            f"{schema.name}: rows do not match the schema: "
            f"wrong types {problems}, missing {missing}, unknown {unknown}"
        )
    for column, value in zip(schema.path_columns, values, strict=True):
        if column in given:
            outside = pc.not_equal(pc.cast(rows[column], pa.string()), value)
            if pc.any(outside).as_py():
                raise SchemaMismatch(f"{schema.name}: rows outside {column}={value} given")
    stored = rows.select(schema.file_schema.names)
    nulls = [
        c.name
        for c in schema.columns
        if not c.nullable and c.name in given and rows[c.name].null_count
    ]
    if nulls:
        raise SchemaMismatch(f"{schema.name}: nulls in non-nullable columns {nulls}")
    key = [k for k in schema.key if k not in schema.path_columns]
    by = ["record_index", "reason"] if schema.name == REJECTS else key
    order = pc.sort_indices(stored, [(name, "ascending") for name in by]) if by else None
    # A key made of partition columns alone (hedge_mode) allows one row per partition. Rows
    # sorted by the key show a shared key in neighbours: no second sort.
    if schema.key and stored.num_rows > 1:
        keys = stored.select(key)
        shared = not key or (
            has_equal_neighbours(keys.take(order))
            if by == key and order is not None
            else has_equal_keys(keys)
        )
        if shared:
            raise SchemaMismatch(
                f"{schema.name}: two rows share a key {list(schema.key)} in {values}"
            )
    return stored.cast(schema.file_schema), order


def _replace_rejects(
    wh: Warehouse,
    account: str,
    table_name: str,
    partitions: Sequence[str],
    rejects: pa.Table | None,
) -> int:
    """Replace the rejects of each of these partitions of a table: ``rejects`` are all of them."""
    if rejects is None:
        rejects = schemas.REJECTS_TABLE.arrow_schema.empty_table()
    elsewhere = pc.or_(
        pc.not_equal(rejects["table"], table_name),
        pc.invert(pc.is_in(rejects["partition"], pa.array(partitions, pa.string()))),
    )
    if pc.any(elsewhere).as_py():
        raise ValueError(f"rejects given for {table_name} {', '.join(partitions)} belong elsewhere")
    held: set[str] | None = None
    for partition in partitions:
        key = (account, table_name, partition)
        target = layout.partition_file(REJECTS, key)
        mine = rejects.filter(pc.equal(rejects["partition"], partition))
        if mine.num_rows:
            wh.store.write_table(target, *_file_rows(schemas.REJECTS_TABLE, key, mine))
            continue
        if held is None:  # the table's rejects listed once, not asked for day by day
            held = set(wh.store.files(f"{layout.account_dir(REJECTS, account)}/table={table_name}"))
        if target in held:
            wh.store.delete(target, prune_to=layout.table_dir(REJECTS))
    return int(rejects.num_rows)


def read_partition(
    wh: Warehouse, table_name: str, partition: Partition, columns: Sequence[str] | None = None
) -> pa.Table | None:
    """The rows a partition holds now (its file's columns), or None when it has no file."""
    return wh.store.read_table(layout.partition_file(table_name, partition), columns)


def coverage(store: Store, table_name: str, account: str) -> dict[date, datetime]:
    """Every day the account's month files of a table record as walked, and when
    (`warehouse.archive`): read from their footers only."""
    found: dict[date, datetime] = {}
    for path in partition_files(store, table_name, account=account):
        found |= archive.covered(store.read_metadata(path))
    return found


def partition_files(store: Store, table_name: str, *, account: str | None = None) -> list[str]:
    """The partition files a table has now (relative names): of every account, or of one."""
    schema = layout.table(table_name)
    base = layout.table_dir(table_name)
    if account is not None:
        base = layout.account_dir(table_name, account)
    depth = len(schema.path_columns) + 3  # parquet/<table>/<path columns>/data.parquet
    return [p for p in store.files(base) if _is_partition_file(p, depth)]


def tables_with_files(store: Store) -> set[str]:
    """The tables that have a partition file now, of any account: from one listing of every
    table's files."""
    held = set()
    for path in store.files(PARQUET_DIR):
        schema = schemas.TABLES.get(path.split("/")[1]) if path.count("/") > 1 else None
        if schema and _is_partition_file(path, len(schema.path_columns) + 3):
            held.add(schema.name)
    return held


def _is_partition_file(path: str, depth: int) -> bool:
    parts = path.split("/")
    return len(parts) == depth and parts[-1] == PARTITION_FILE
