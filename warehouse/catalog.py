"""The DuckDB catalog analysts query: a local ``warehouse.duckdb`` of views only.

It holds one view per table of `warehouse.schemas` over that table's Parquet of every account
(Hive partitioning on, partition column types pinned, union by name, a comment on the view and on
every column; ``account`` first),
and the curated views of ``warehouse/sql/<view>.sql`` (a ``SELECT``; its leading ``--`` lines
are the view's comment). Views read the files at query time, so a partition replaced after a
refresh is seen by the next query without another refresh. The view ``_catalog`` names the root
the views read, so a connection knows which store to reach and can tell when the files are gone.

Where it is (`warehouse.settings.catalog_path`): ``WAREHOUSE_CATALOG``, else ``warehouse.duckdb``
in the root (a local root) or in this machine's directory for a remote root. With an ``s3://``
root the views read ``s3://`` paths through an fsspec filesystem (s3fs, made to look a query's
files up once: `warehouse.store`) that every connection made here registers before it reads:
DuckDB's httpfs extension is never needed nor downloaded, and the file holds no credential
(they come from the AWS variables or profile, at query time).
`refresh` can also write a catalog elsewhere (``whitebit-etl catalog --root … --out …``): an
analyst's own file over the shared Parquet, or the catalog of a warehouse that was moved.

Why the file is rebuilt beside and renamed over rather than opened read-write in place: DuckDB
lets one process open a database file read-write or any number of processes open it read-only,
never both (a writer gets "Could not set lock on file ... Conflicting lock is held"). An
analyst's read-only connection would block every refresh. So `refresh` writes a new catalog to a
temp file beside the old one and `os.replace`s it over: an open analyst connection keeps reading
the file it opened (the old views, which still read the current Parquet) and sees the new views
when it reconnects. Anything an analyst creates in ``warehouse.duckdb`` itself is lost at the
next refresh; keep personal objects in a database of your own and ``ATTACH`` this one.

Refreshes of one catalog file take turns under a lock file beside it, so that each first removes
the temp files of a refresh that was killed mid-way, never those of one still building.

A table with no Parquet file yet gets a view with its columns and zero rows, so queries work on a
fresh warehouse; it reads files from the next refresh on.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import duckdb
import pyarrow as pa
from upath import UPath

from warehouse import schemas
from warehouse.parquet import (
    PARQUET_DIR,
    PARTITION_FILE,
    Root,
    exclusive_lock,
    table_path,
    tables_with_files,
)
from warehouse.schemas import TableSchema
from warehouse.settings import CATALOG_FILE as CATALOG_FILE
from warehouse.settings import catalog_path as catalog_path
from warehouse.settings import is_local, location, warehouse_root
from warehouse.store import duckdb_filesystem, read_again

if TYPE_CHECKING:
    import pandas as pd

#: The view naming the root a catalog's views read.
ROOT_VIEW: Final = "_catalog"
#: The package directory holding the curated views.
CURATED_SQL: Final = "sql"


@dataclass(frozen=True, slots=True)
class CatalogRefresh:
    """What a refresh built."""

    path: Path
    table_views: tuple[str, ...]
    curated_views: tuple[str, ...]
    #: Tables that had no Parquet file yet: their views are empty until a later refresh.
    empty_tables: tuple[str, ...]


class CatalogError(RuntimeError):
    """A catalog that cannot answer: its Parquet is gone, or it was never built."""


def refresh(root: Root = None, *, out: str | os.PathLike[str] | None = None) -> CatalogRefresh:
    """Rebuild the catalog's views beside it and swap it in; idempotent. ``out``: the file to
    write (default: `catalog_path` of the root)."""
    base = warehouse_root(root)
    target = Path(os.path.abspath(out)) if out is not None else catalog_path(base)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = UPath(str(target.with_name(f".{target.name}.lock")))
    with exclusive_lock(lock):
        for killed in target.parent.glob(f".{target.name}.*.tmp*"):
            killed.unlink(missing_ok=True)
        temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            curated, empty = _build(temp, base)
            os.replace(temp, target)
        finally:
            _remove(temp)
    return CatalogRefresh(target, tuple(schemas.TABLES), curated, empty)


@read_again
def _build(temp: Path, base: UPath) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The catalog's views in the new file ``temp`` (made again from nothing if a write replaced
    a file while its views were bound): the curated views and the tables without files."""
    _remove(temp)
    with duckdb.connect(str(temp)) as con:
        _reach(con, base)
        # The curated views are bound against the table views without their files (same
        # columns, same types): binding a view over files reads every file's footer, and the
        # curated views would bind funding_history's twice more.
        _create_table_views(con, base, files=False)
        curated = _create_curated_views(con)
        empty = _create_table_views(con, base)
        filled = len(empty) < len(schemas.TABLES)
        con.execute(
            f"CREATE VIEW {ROOT_VIEW} AS SELECT {_literal(location(base))} AS root, "
            f"{filled} AS had_files"
        )
        con.execute(
            f"COMMENT ON VIEW {ROOT_VIEW} IS "
            "'The warehouse root the views of this catalog read, and whether it held "
            "files when the catalog was built.'"
        )
    return curated, empty


def _remove(temp: Path) -> None:
    """A catalog file being built, and its write-ahead log."""
    for leftover in (temp, temp.with_name(temp.name + ".wal")):
        leftover.unlink(missing_ok=True)


def connect(
    root: Root = None, *, path: str | os.PathLike[str] | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only analyst connection to the catalog (``path``, default: `catalog_path` of the
    root), showing times in UTC, able to read the root its views name."""
    file = Path(os.path.abspath(path)) if path is not None else catalog_path(root)
    if not file.exists():
        raise CatalogError(
            f"no catalog at {file}: build it with `whitebit-etl catalog --root <the warehouse "
            f"root> --out {file}`"
        )
    con = duckdb.connect(str(file), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        try:
            named = con.execute(f"SELECT root, had_files FROM {ROOT_VIEW}").fetchone()  # noqa: S608
        except duckdb.CatalogException:
            named = None  # built before catalogs named their root
        if named is None:
            if path is not None:
                raise CatalogError(
                    f"the catalog {file} was written by an older version: rebuild it with "
                    f"`whitebit-etl catalog --root <the warehouse root> --out {file}`"
                )
            con.close()
            refresh(root)  # the root's own catalog: rebuilt in place, as every run does
            return connect(root)
        read, had_files = named
        base = warehouse_root(read)
        _reach(con, base)
        if had_files and not (base / PARQUET_DIR).exists():
            raise CatalogError(
                f"the catalog {file} reads the Parquet at {read}, which is not there (moved, "
                f"unmounted or removed?): rebuild it with `whitebit-etl catalog --root <where "
                f"the warehouse is now> --out {file}`"
            )
    except BaseException:
        con.close()
        raise
    return con


def reader(root: Root = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that reads the root's Parquet (checks and previews)."""
    con = duckdb.connect()
    _reach(con, warehouse_root(root))
    return con


#: Files `copied` fetches at once: memory holds their bytes, never a whole backfill's.
FETCHED_AT_ONCE: Final = 64


@contextmanager
def copied(root: Root, files: Sequence[str]) -> Iterator[tuple[UPath, list[str]]]:
    """A local root holding these files of the root (`location`s, as `partition_files` listed
    them a moment ago) and their names there, for the block: the root itself and the same names
    when it is local; for a store, a temporary directory where each file is copied, fetched whole
    (one GET, so one version of it; many at once), under its path relative to the root, so that
    DuckDB reads the same Hive columns from the copy's path and reads it as a local file. DuckDB
    over the store's filesystem would ask about each file at each query, a request each
    (`warehouse.store`): checks that read every partition of a backfill pay one GET per file
    instead. A file gone since it was listed raises `FileNotFoundError`, as DuckDB would."""
    base = warehouse_root(root)
    if is_local(base):
        yield base, list(files)
        return
    prefix = location(base) + "/"
    outside = [f for f in files if not f.startswith(prefix)]
    if outside:
        raise ValueError(f"{outside[0]} is not under the root {location(base)}")
    relative = [f.removeprefix(prefix) for f in files]
    with tempfile.TemporaryDirectory(prefix="fetched-") as scratch:
        for start in range(0, len(relative), FETCHED_AT_ONCE):
            chunk = relative[start : start + FETCHED_AT_ONCE]
            keys = [f"{base.path}/{r}" for r in chunk]
            # One GET each: s3fs would first ask each file's size (a HEAD) to split large ones.
            fetched = base.fs.cat(keys, on_error="raise", max_concurrency=1)
            for key, path in zip(keys, chunk, strict=True):
                name = os.path.join(scratch, path)
                os.makedirs(os.path.dirname(name), exist_ok=True)
                with open(name, "wb") as copy:
                    copy.write(fetched.pop(key))
        yield UPath(scratch), [os.path.join(scratch, r) for r in relative]


def _reach(con: duckdb.DuckDBPyConnection, base: UPath) -> None:
    """Let ``con`` read files under ``base``: nothing to do locally; a store's filesystem is
    registered (never DuckDB's own extensions, which it would download), one that looks each
    file up once per query (`warehouse.store`)."""
    con.execute("SET autoinstall_known_extensions = false")
    if not is_local(base):
        con.register_filesystem(duckdb_filesystem(base))


def query(sql: str, params: Sequence[object] = (), *, root: Root = None) -> pd.DataFrame:
    """The result of ``sql`` over the catalog, as a pandas DataFrame, for notebooks.

    Exact as the warehouse is: ``DECIMAL(38,18)`` columns hold `decimal.Decimal` values (DuckDB's
    own ``.df()`` would turn them into floats), times are UTC. ``params`` fill ``?`` placeholders.
    A fresh warehouse gets its catalog first (views only, cheap to create).
    """
    if not catalog_path(root).exists():
        refresh(root)
    with connect(root) as con:
        # Through Arrow: its decimal128 becomes Decimal in pandas, never float.
        table = con.sql(sql, params=list(params) or None).to_arrow_table()
        return cast("pd.DataFrame", table.to_pandas())


def duckdb_type(arrow_type: pa.DataType) -> str:
    """The DuckDB type a schema's Arrow type is read back as from Parquet."""
    if pa.types.is_decimal(arrow_type):
        return f"DECIMAL({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMP WITH TIME ZONE" if arrow_type.tz is not None else "TIMESTAMP"
    if pa.types.is_list(arrow_type):
        return f"{duckdb_type(arrow_type.value_type)}[]"
    simple = {
        pa.string(): "VARCHAR",
        pa.int64(): "BIGINT",
        pa.bool_(): "BOOLEAN",
        pa.date32(): "DATE",
    }
    if arrow_type in simple:
        return simple[arrow_type]
    raise ValueError(f"no DuckDB type declared for Arrow type {arrow_type}")


def _create_table_views(
    con: duckdb.DuckDBPyConnection, root: Root, *, files: bool = True
) -> tuple[str, ...]:
    """A view per table (replacing one made before): over its files, or typed and empty when
    it has none yet (or ``files`` is false); the tables that had none."""
    empty = []
    with_files = tables_with_files(root) if files else set()
    for schema in schemas.TABLES.values():
        columns = ", ".join(_quoted(c.name) for c in schema.view_columns)
        view = f"CREATE OR REPLACE VIEW {_quoted(schema.name)} AS"
        if schema.name in with_files:
            source = _parquet_source(schema, root)
            # Identifiers come from the schemas, quoted; the path is an escaped literal.
            query = f"SELECT {columns} FROM {source}"  # noqa: S608
            con.execute(f"{view} {query}")
        else:
            empty.append(schema.name)
            typed_nulls = ", ".join(
                f"CAST(NULL AS {duckdb_type(c.type)}) AS {_quoted(c.name)}"
                for c in schema.view_columns
            )
            con.execute(f"{view} SELECT {typed_nulls} WHERE false")
        con.execute(f"COMMENT ON VIEW {_quoted(schema.name)} IS {_literal(schema.description)}")
        for column in schema.view_columns:
            target = f"{_quoted(schema.name)}.{_quoted(column.name)}"
            con.execute(f"COMMENT ON COLUMN {target} IS {_literal(column.description)}")
    return tuple(empty)


def _parquet_source(schema: TableSchema, root: Root) -> str:
    # Exact depth, not "**": no recursive listing per query, and no stray file is picked up.
    depth = "/".join("*" for _ in schema.path_columns)
    files = f"{location(table_path(root, schema.name))}/{depth}/{PARTITION_FILE}"
    hive_types = ", ".join(
        f"{_literal(name)}: {_literal(_path_type(schema, name))}" for name in schema.path_columns
    )
    return (
        f"read_parquet({_literal(files)}, hive_partitioning = true, union_by_name = true, "
        f"hive_types = {{{hive_types}}})"
    )


def _path_type(schema: TableSchema, name: str) -> str:
    # A month path (funding_month=2025-03) is text; the view does not show it.
    if name in (schema.month_path, schemas.ACCOUNT):
        return "VARCHAR"
    return duckdb_type(schema.column(name).type)


def _create_curated_views(con: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
    """The views of ``warehouse/sql``; one that reads another is created after it."""
    pending = {}
    for sql_file in resources.files("warehouse").joinpath(CURATED_SQL).iterdir():
        if sql_file.name.endswith(".sql"):
            pending[sql_file.name.removesuffix(".sql")] = sql_file.read_text(encoding="utf-8")
    names: list[str] = []
    while pending:
        failed: dict[str, duckdb.Error] = {}
        for name, text in sorted(pending.items()):
            leading = itertools.takewhile(lambda line: line.startswith("--"), text.splitlines())
            comment = " ".join(line.removeprefix("--").strip() for line in leading)
            try:
                con.execute(f"CREATE VIEW {_quoted(name)} AS {text}")
            except duckdb.CatalogException as exc:  # it reads a view not created yet
                failed[name] = exc
                continue
            con.execute(f"COMMENT ON VIEW {_quoted(name)} IS {_literal(comment)}")
            names.append(name)
        if len(failed) == len(pending):
            name, error = next(iter(failed.items()))
            raise ValueError(f"curated view {name}: {error}")
        pending = {name: pending[name] for name in failed}
    return tuple(sorted(names))


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
