"""Hive-partitioned Parquet under ``WAREHOUSE_ROOT/parquet``: one file per partition, swapped
in atomically.

Layout: ``parquet/<table>/account=<name>/<column>=<value>/data.parquet`` (``_rejects`` nests
two levels under the account, ``table=<t>/partition=<p>``). Partition values live in the path,
not in the file, except for a table partitioned by month (`TableSchema.month_path`):
``funding_history/account=main/funding_month=2025-03/`` holds the month's rows with their
``funding_date`` column, and its rejects stay a partition per day
(``_rejects/account=main/table=funding_history/partition=2025-03-14``). A partition is always
named with its account first: ``("main", "2025-03")``.

Replacing a partition writes the new file beside the old one (a dot-named ``.tmp`` file in the
same directory, which no ``*.parquet`` glob matches), fsyncs it, and renames it over the stable
file name. A reader therefore sees the old file or the new one, never a mix and never nothing; a
process killed mid-write leaves the old file whole (its temp file is removed by the next write of
that partition). Writers of a table take turns, a partition at a time, under a lock (one per
table, in ``parquet/.locks``), so two runs of one partition at once end with one whole partition
and its own rejects. Rows are sorted by key first, so the same input gives the same file
contents.

On an object store (an ``s3://`` root) a partition is one object written by one PUT to its final
key (the file is built in memory first): a reader sees the old object or the new one, and a
killed run leaves the old one whole. There is no rename there (a move is a copy then a delete).
The lock is a lease object made with conditional writes (`warehouse.lease`), which expires when
its holder dies; a writer that lost its lease stops before its next PUT.

A write replaces exactly the days it covers: a day's file, or the covered days of a month's file
(the file's other days are read and kept, under the lock). The rejects partition of each covered
day is replaced with it (removed when there are no rejects), so a rerun never duplicates rejects
either. The two files are swapped one after the other, data first; a kill between them leaves
the old rejects beside the new data until the next run of that partition.
"""

from __future__ import annotations

import fcntl
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import date, datetime
from typing import BinaryIO, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem
from upath import UPath

from warehouse import lease, schemas
from warehouse.normalize import Batch, has_equal_keys, has_equal_neighbours
from warehouse.schemas import REJECTS, TableSchema
from warehouse.settings import is_local, location, warehouse_root

PARQUET_DIR: Final = "parquet"
#: The one file of a partition; a stable name, so a swap is a single rename.
PARTITION_FILE: Final = "data.parquet"
#: Lock files of the writers (partitions, the catalog), under ``parquet/`` (no view reads it:
#: dot-named).
LOCKS_DIR: Final = ".locks"
COMPRESSION: Final = "zstd"
#: A partition value that may become a path segment: no separators, no leading dot, no "..".
PATH_SEGMENT: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*$")
PATH_SEGMENT_MAX: Final = 128
MONTH: Final = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])$")

PartitionValue = date | str
#: A partition: its account, then its value(s) (``("main", date(2025, 3, 14))``).
Partition = Sequence[PartitionValue]
Root = str | os.PathLike[str] | UPath | None


class InvalidPartitionValue(ValueError):
    """A partition value that would not make a safe, canonical path segment."""


class SchemaMismatch(ValueError):
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


def table_path(root: Root, table_name: str) -> UPath:
    """``<root>/parquet/<table>``: the directory the table's views read."""
    return warehouse_root(root) / _table_dir(_schema(table_name))


def _table_dir(schema: TableSchema) -> str:
    return f"{PARQUET_DIR}/{schema.name}"


def partition_path(root: Root, table_name: str, partition: Partition) -> UPath:
    """The file holding one partition of a table."""
    schema = _schema(table_name)
    # One join of the whole relative path: each join parses the path again.
    return warehouse_root(root) / _relative_path(schema, _partition_text(schema, partition))


def partition_locations(root: Root, table_name: str, partitions: Iterable[Partition]) -> list[str]:
    """The `location` of each partition's file, as `partition_path` would give it: built as
    text, without a path object per partition (each costs a parse of the path, and a backfill's
    checks ask for every day of it)."""
    schema = _schema(table_name)
    base = location(warehouse_root(root))
    return [f"{base}/{_relative_path(schema, _partition_text(schema, p))}" for p in partitions]


def _relative_path(schema: TableSchema, values: tuple[str, ...]) -> str:
    segments = [f"{c}={v}" for c, v in zip(schema.path_columns, values, strict=True)]
    return "/".join((_table_dir(schema), *segments, PARTITION_FILE))


def replace_partition(
    root: Root,
    table_name: str,
    partition: Partition,
    rows: pa.Table,
    *,
    rejects: pa.Table | None = None,
    covers: Iterable[date] | None = None,
) -> PartitionWrite:
    """Replace one partition with ``rows`` (an empty table leaves an empty partition).

    ``rows`` has the table's schema (partition columns may be present and must then hold the
    partition's value). For a data table, ``rejects`` are the `_rejects` rows of this very
    partition; they replace its rejects partition, and none (or an empty table) removes it.

    A month partition (given as ``(account, "2025-03")`` or with any day of the month) replaces
    the days in ``covers``
    (default: the whole month): its file keeps the rows of its other days, and the rejects of
    each covered day are replaced.
    """
    schema = _schema(table_name)
    values = _partition_text(schema, partition)
    target = partition_path(root, table_name, partition)
    if schema.name == REJECTS and rejects is not None:
        raise ValueError("rejects of the _rejects table make no sense")
    days = _covered_days(schema, values, covers)
    rejected = 0
    # The partition and its rejects are written under one lock: a concurrent writer of the same
    # partition never pairs its data with another's rejects, nor keeps days another replaced.
    with exclusive_lock(lock_path(root, schema.name)) as still_held:
        if schema.month_path:
            rows = _with_kept_days(schema, target, rows, days)
        file_rows = _file_rows(schema, values, rows)
        still_held()
        _write_atomically(target, file_rows)
        if schema.name != REJECTS:
            covered = [d.isoformat() for d in days] if schema.month_path else [values[1]]
            still_held()
            rejected = _replace_rejects(root, values[0], schema.name, covered, rejects)
    return PartitionWrite(schema.name, values, str(target), file_rows.num_rows, rejected)


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
    schema: TableSchema, target: UPath, rows: pa.Table, days: list[date]
) -> pa.Table:
    """``rows`` of the covered ``days``, and the rows the month's file holds of its other days."""
    column = schema.partition_column
    covered = pa.array(days, schemas.DAY)
    outside = rows[column].filter(pc.invert(pc.is_in(rows[column], value_set=covered)))
    if len(outside):
        raise SchemaMismatch(
            f"{schema.name}: rows of {outside[0]} given to a write of "
            f"{schemas.month_of(days[0])} that covers {days[0]} .. {days[-1]}"
        )
    first, following = schemas.month_days(schemas.month_of(days[0]))
    if len(days) == following.toordinal() - first.toordinal() or not target.exists():
        return rows
    with target.open("rb") as source:
        held = pq.read_table(source)
    kept = held.filter(pc.invert(pc.is_in(held[column], value_set=covered)))
    return pa.concat_tables([kept, rows.select(kept.column_names).cast(kept.schema)])


def write_partitions(
    root: Root,
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
    schema = _schema(table_name)
    column = schema.partition_column
    if rejects is None:
        rejects = schemas.REJECTS_TABLE.arrow_schema.empty_table()
    foreign = pc.unique(rejects["table"].filter(pc.not_equal(rejects["table"], schema.name)))
    if len(foreign):
        raise ValueError(f"rejects of {foreign.to_pylist()} given to write {schema.name}")
    days = set(replace)
    days |= set(pc.unique(rows[column]).to_pylist()) if rows.num_rows else set()
    days |= {date.fromisoformat(p) for p in pc.unique(rejects["partition"]).to_pylist()}
    parts: dict[PartitionValue, list[date]] = {}
    for day in sorted(days):
        parts.setdefault(schemas.month_of(day) if schema.month_path else day, []).append(day)
    writes = []
    for partition, covered in parts.items():
        part_rows = rows.filter(pc.is_in(rows[column], pa.array(covered, schemas.DAY)))
        in_part = pa.array([d.isoformat() for d in covered], pa.string())
        part_rejects = rejects.filter(pc.is_in(rejects["partition"], in_part))
        writes.append(
            replace_partition(
                root,
                schema.name,
                (account, partition),
                part_rows,
                rejects=part_rejects,
                covers=covered if schema.month_path else None,
            )
        )
    return writes


def write_batch(
    root: Root, batch: Batch, *, account: str, replace: Iterable[date] = ()
) -> list[PartitionWrite]:
    """Write an account's normalized batch: its rows, its rejects, every partition it covers."""
    return write_partitions(
        root,
        batch.table,
        batch.rows,
        batch.rejects,
        account=account,
        replace=(*batch.covers, *replace),
    )


# --- Partition values ---------------------------------------------------------------------------


def _schema(table_name: str) -> TableSchema:
    try:
        return schemas.TABLES[table_name]
    except KeyError:
        raise ValueError(
            f"unknown table {table_name!r}; tables: {', '.join(schemas.TABLES)}"
        ) from None


def _partition_text(schema: TableSchema, partition: Partition) -> tuple[str, ...]:
    """Partition values as validated path text, one per path column."""
    values = (partition,) if isinstance(partition, date | str) else tuple(partition)
    if len(values) != len(schema.path_columns):
        raise InvalidPartitionValue(
            f"{schema.name} is partitioned by {list(schema.path_columns)}; got {partition!r}"
        )
    account = account_segment(values[0], where=f"{schema.name}.{schemas.ACCOUNT}")
    if schema.month_path:
        return (account, _month(schema, values[1]))
    return (
        account,
        *(
            _segment(schema, schema.column(name), value)
            for name, value in zip(schema.partition_columns, values[1:], strict=True)
        ),
    )


def account_segment(value: object, *, where: str = schemas.ACCOUNT) -> str:
    """An account's name, checked to be one (`schemas.ACCOUNT_NAME`): it becomes a path."""
    if not isinstance(value, str) or not schemas.ACCOUNT_NAME.match(value):
        raise InvalidPartitionValue(
            f"{where}: {value!r} is not an account name (lower-case letters, digits and '_', "
            "starting with a letter, at most 40)"
        )
    return value


def _segment(schema: TableSchema, column: schemas.Column, value: PartitionValue) -> str:
    where = f"{schema.name}.{column.name}"
    if column.type == schemas.DAY:
        if isinstance(value, datetime) or not isinstance(value, date):
            raise InvalidPartitionValue(f"{where}: expected a date, got {value!r}")
        return value.isoformat()
    if not isinstance(value, str) or len(value) > PATH_SEGMENT_MAX or not PATH_SEGMENT.match(value):
        raise InvalidPartitionValue(
            f"{where}: {value!r} is not a safe path segment (letters, digits, '_', '-', inner '.')"
        )
    if (
        schema.name == REJECTS
        and column.name == "table"
        and (value not in schemas.TABLES or value == REJECTS)
    ):
        raise InvalidPartitionValue(f"{where}: {value!r} is not a data table")
    return value


def _month(schema: TableSchema, value: PartitionValue) -> str:
    """A month partition's text (``2025-03``), from the month or from any day of it."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return schemas.month_of(value)
    if isinstance(value, str) and MONTH.match(value):
        return value
    raise InvalidPartitionValue(
        f"{schema.name}.{schema.month_path}: expected a month like 2025-03 or a day, got {value!r}"
    )


# --- Rows -> file -------------------------------------------------------------------------------


def _file_rows(schema: TableSchema, values: tuple[str, ...], rows: pa.Table) -> pa.Table:
    """Check rows against the schema and the partition; sort them; drop the partition columns."""
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
    order = ["record_index", "reason"] if schema.name == REJECTS else key
    if order:
        stored = stored.sort_by([(name, "ascending") for name in order])
    # A key made of partition columns alone (hedge_mode) allows one row per partition. Rows
    # sorted by the key show a shared key in neighbours: no second sort.
    if schema.key and stored.num_rows > 1:
        shared = not key or (has_equal_neighbours if order == key else has_equal_keys)(
            stored.select(key)
        )
        if shared:
            raise SchemaMismatch(
                f"{schema.name}: two rows share a key {list(schema.key)} in {values}"
            )
    return stored.cast(schema.file_schema)


def lock_path(root: Root, name: str) -> UPath:
    """Where the writers of a table (or of the catalog) take turns: beside the tables, not
    inside them. One lock per table, not per partition: a partition write takes milliseconds,
    and a lock file per partition would cost a file creation per partition of a backfill."""
    return warehouse_root(root) / f"{PARQUET_DIR}/{LOCKS_DIR}/{name}.lock"


#: Lock directories this process made already (they are never removed).
_LOCK_DIRS: set[str] = set()


@contextmanager
def exclusive_lock(lock: UPath) -> Iterator[Callable[[], None]]:
    """One writer at a time of what ``lock`` stands for (a table's partitions: a rerun from the
    UI while the schedule runs; a local catalog): the second waits, then replaces the first's
    file whole. Yields a check to call before each write: it raises once the lock is lost (an
    object store's lease that could not be renewed; a local lock is never lost)."""
    if not is_local(lock):
        with lease.held(lock) as held:
            yield held.check
        return
    path = lock.path
    directory = os.path.dirname(path)
    if directory not in _LOCK_DIRS:
        os.makedirs(directory, exist_ok=True)
        _LOCK_DIRS.add(directory)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield _held_locally
    finally:
        os.close(fd)  # closing releases the lock, also when the process is killed


def _held_locally() -> None:
    """A local lock is held until its file is closed."""


def _write_atomically(target: UPath, table: pa.Table) -> None:
    """Replace ``target`` whole: on a store, one PUT of the whole file to its key; locally,
    write beside it, make that durable, then rename it over."""
    if not is_local(target):
        sink = pa.BufferOutputStream()
        _write_table(table, sink)
        target.fs.pipe_file(target.path, sink.getvalue().to_pybytes())
        return
    # Local: plain os calls (UPath's path objects cost more than the write of a small partition).
    path = target.path
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    temp_path = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temp_path, "wb") as sink:
            _write_table(table, sink)
            sink.flush()
            os.fsync(sink.fileno())
        _rename_over(temp_path, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp_path)
        raise
    # Temp files a killed writer left beside this partition's file.
    prefix = f".{name}."
    for entry in os.scandir(directory):
        if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
            with suppress(FileNotFoundError):
                os.unlink(entry.path)


def _write_table(table: pa.Table, sink: BinaryIO | pa.NativeFile) -> None:
    # Dictionary encoding only where values repeat (text); on decimals it costs time and bytes.
    text = [f.name for f in table.schema if pa.types.is_string(f.type)]
    pq.write_table(table, sink, compression=COMPRESSION, use_dictionary=text)


def _rename_over(source: str, target: str) -> None:
    os.replace(source, target)
    # The rename itself is durable only once the directory entry is.
    directory = os.open(os.path.dirname(target), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _replace_rejects(
    root: Root, account: str, table_name: str, partitions: Sequence[str], rejects: pa.Table | None
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
        target = partition_path(root, REJECTS, key)
        mine = rejects.filter(pc.equal(rejects["partition"], partition))
        if mine.num_rows:
            _write_atomically(target, _file_rows(schemas.REJECTS_TABLE, key, mine))
            continue
        if is_local(target):
            if target.exists():
                target.unlink()
                _remove_empty_directories(target.parent, stop=table_path(root, REJECTS))
            continue
        if held is None:  # a store: the table's rejects listed once, not asked for day by day
            held = {str(p) for p in _files_under(target.parent.parent, 1)}
        if str(target) in held:
            target.unlink()
    return int(rejects.num_rows)


def _remove_empty_directories(directory: UPath, *, stop: UPath) -> None:
    if not is_local(directory):
        return  # a store has no directories: a prefix is gone with its last object
    while directory != stop and directory.exists() and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent


def read_partition(
    root: Root,
    table_name: str,
    partition: Partition,
    columns: Sequence[str] | None = None,
) -> pa.Table | None:
    """The rows a partition holds now (its file's columns), or None when it has no file."""
    path = partition_path(root, table_name, partition)
    if not path.exists():
        return None
    with path.open("rb") as source:
        return pq.read_table(source, columns=list(columns) if columns is not None else None)


def partition_files(root: Root, table_name: str, *, account: str | None = None) -> list[UPath]:
    """The partition files a table has now: of every account, or of one."""
    base = table_path(root, table_name)
    depth = len(_schema(table_name).path_columns)
    if account is not None:
        base, depth = base / f"{schemas.ACCOUNT}={account_segment(account)}", depth - 1
    return _files_under(base, depth)


def _files_under(base: UPath, depth: int) -> list[UPath]:
    """The partition files ``depth`` directories under ``base``."""
    if is_local(base):
        pattern = "/".join(("*",) * depth + (PARTITION_FILE,))
        return sorted(base.glob(pattern)) if base.exists() else []
    # A store: one listing of the prefix (a request per 1,000 keys); a glob would list each
    # partition's "directory" on its own.
    prefix = base.path.rstrip("/") + "/"
    found = []
    for key in _keys_under(base.fs, prefix):
        parts = key[len(prefix) :].split("/")
        if len(parts) == depth + 1 and parts[-1] == PARTITION_FILE:
            found.append(base / "/".join(parts))
    return sorted(found, key=str)


def tables_with_files(root: Root) -> set[str]:
    """The tables that have a partition file now, of any account: on a store, from one listing
    of every table's files (a request per 1,000 keys) rather than one per table."""
    base = warehouse_root(root)
    if is_local(base):
        return {name for name in schemas.TABLES if partition_files(base, name)}
    prefix = f"{base.path}/{PARQUET_DIR}/"
    held = set()
    for key in _keys_under(base.fs, prefix):
        parts = key[len(prefix) :].split("/")
        schema = schemas.TABLES.get(parts[0])
        if schema and len(parts) == len(schema.path_columns) + 2 and parts[-1] == PARTITION_FILE:
            held.add(schema.name)
    return held


def _keys_under(fs: AbstractFileSystem, prefix: str) -> list[str]:
    """Every key of a store that starts with ``prefix`` (``bucket/…/``), in one listing: asked
    as the parent's keys that start with the last name, since s3fs asks an empty prefix again
    whether it is a file (a HEAD and a second listing)."""
    parent, name = prefix.rstrip("/").rsplit("/", 1)
    keys: list[str] = fs.find(parent, prefix=f"{name}/")
    return keys


def adopt_unaccounted(root: Root, account: str) -> list[str]:
    """Move the partitions of a warehouse written before accounts (``parquet/<table>/<p>=…``)
    under ``account=<account>/``, each table under its writers' lock; the tables they are moved
    from. A file of ``watcher_links`` is rewritten, its ``account`` column (the mining-pool
    account) renamed ``mining_account``: the account is now the path's. Cheap when there is
    nothing to move: a listing of each table's directory."""
    account = account_segment(account)
    moved = []
    for schema in schemas.TABLES.values():
        base = table_path(root, schema.name)
        if not base.exists():
            continue
        first = schema.path_columns[1]
        legacy = [p for p in base.iterdir() if p.name.startswith(f"{first}=")]
        if not legacy:
            continue
        with exclusive_lock(lock_path(root, schema.name)):
            for old in legacy:
                if old.exists():
                    _adopt(schema, old, base / f"{schemas.ACCOUNT}={account}" / old.name)
        moved.append(schema.name)
    return moved


def _adopt(schema: TableSchema, old: UPath, new: UPath) -> None:
    if new.exists():
        raise FileExistsError(
            f"{schema.name}: {old} (written before accounts) and {new} both exist; keep the one "
            "you want and remove the other"
        )
    if schema is schemas.WATCHER_LINKS and (old / PARTITION_FILE).exists():
        with (old / PARTITION_FILE).open("rb") as source:
            held = pq.read_table(source)
        names = ["mining_account" if n == "account" else n for n in held.column_names]
        _write_atomically(new / PARTITION_FILE, held.rename_columns(names))
        (old / PARTITION_FILE).unlink()
        _remove_empty_directories(old, stop=old.parent)
        return
    new.parent.mkdir(parents=True, exist_ok=True)
    old.fs.mv(old.path, new.path, recursive=True)
