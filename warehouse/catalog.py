"""The DuckDB catalog analysts query: a local ``warehouse.duckdb`` of views only.

It holds one view per table of `warehouse.schemas` over that table's Parquet of every account
(Hive partitioning on, partition column types pinned, union by name, a comment on the view and on
every column; ``account`` first),
and the curated views of ``warehouse/sql/<view>.sql`` (a ``SELECT``; its leading ``--`` lines
are the view's comment; a ``{{NAME}}`` in it is a fact of the declarations, `SPEC_FACTS`, or SQL
made from the histories' flows, `flows.PARTS`).
Views read the files at query time, so a partition replaced after a
refresh is seen by the next query without another refresh. The view ``_catalog`` names the root
the views read, so a connection knows which store to reach and can tell when the files are gone.

Where it is (`Warehouse.catalog_path`): the file the settings name, else ``warehouse.duckdb`` in
the root (a local root) or in this machine's directory for a remote root. With an ``s3://`` root
the views read ``s3://`` paths through an fsspec filesystem (s3fs, made to look a query's files
up once: `warehouse.listed_s3`) that every connection made here registers before it reads:
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

A run refreshes the catalog after it writes only when the catalog shows a table that has files
as empty (or one that has none left as read from files), or was built by another version
(`refresh_if_stale`; the digest of the schemas and the curated SQL, `design`, is in
``_catalog``): a rebuild binds every table's view over its files, and a night writes some twenty
tables per account. The watch job's view checks do the same before they read (on a worker of
many, another machine's run may have written a table first).

Refreshes of one catalog file take turns under a lock file beside it, so that each first removes
the temp files of a refresh that was killed mid-way, never those of one still building.

A table with no Parquet file yet gets a view with its columns and zero rows, so queries work on a
fresh warehouse; it reads files from the next refresh on.
"""

from __future__ import annotations

import contextlib
import functools
import graphlib
import hashlib
import itertools
import os
import re
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

import duckdb
import pyarrow as pa

from pipeline import spec
from warehouse import flows, layout, schemas
from warehouse.errors import WarehouseError
from warehouse.layout import PARQUET_DIR, PARTITION_FILE
from warehouse.locks import file_lock
from warehouse.partitions import tables_with_files
from warehouse.root import Warehouse
from warehouse.schemas import TableSchema
from warehouse.store import Store, StoreError, read_again, said_if_refused

if TYPE_CHECKING:
    import pandas as pd

#: The view naming the root a catalog's views read.
ROOT_VIEW: Final = "_catalog"
#: The package directory holding the curated views.
CURATED_SQL: Final = "sql"


def _codes(codes: Iterable[int]) -> str:
    return ", ".join(str(code) for code in sorted(codes))


def _code_of(labels: Mapping[int, str], label: str) -> str:
    return _codes(code for code, named in labels.items() if named == label)


#: What a curated view names as ``{{NAME}}``, as SQL: codes and names the declarations hold,
#: so that a view never restates one (a status code, the settlement ticker) that could drift.
SPEC_FACTS: Final = {
    "SETTLEMENT_TICKER": "'" + spec.SETTLEMENT_TICKER + "'",
    "PERP_MARKET": "'" + spec.PERP_MARKET + "'",
    "INVESTMENT_ACTIVE": _code_of(spec.INVESTMENT_STATUSES, "active"),
    "DEPOSIT": _code_of(spec.TRANSACTION_METHODS, "deposit"),
}
_FILLED: Final = {**SPEC_FACTS, **flows.PARTS}
#: The macros the curated views call, and an analyst may: ``exact_product(x, y)``, the product
#: of two DECIMAL(38,18) cut toward zero at 18 places, and ``product_cut(x, y)``, whether that
#: cut dropped a digit. By parts, x * int(y) + int(x) * frac(y) + frac(x) * frac(y), the last
#: exact at 36 places: DuckDB types the plain product DECIMAL(38,36), which fails past 99.
MACROS: Final = {
    "frac18": "(x) AS CAST(x - trunc(x) AS DECIMAL(18, 18))",
    "exact_product": "(x, y) AS CAST(\n"
    "    x * trunc(y) + trunc(x) * frac18(y) + trunc(frac18(x) * frac18(y), 18)\n"
    "    AS DECIMAL(38, 18))",
    "product_cut": "(x, y) AS trunc(frac18(x) * frac18(y), 18) <> frac18(x) * frac18(y)",
}
_FACT: Final = re.compile(r"\{\{\s*([A-Z_]+)\s*\}\}")


def with_facts(name: str, text: str, reference: str = spec.REFERENCE_CURRENCY) -> str:
    """A curated view's SQL with each ``{{NAME}}`` replaced by its `SPEC_FACTS` or `flows.PARTS`
    value, or ``{{REFERENCE}}`` by the warehouse's reference currency (``reference``), each line
    of it indented as the line it stands on."""
    filled = {**_FILLED, "REFERENCE": _literal(reference)}

    def fact(found: re.Match[str]) -> str:
        if found.group(1) not in filled:
            raise ValueError(f"curated view {name}: no fact {found.group(1)!r} (SPEC_FACTS)")
        line = text[text.rfind("\n", 0, found.start()) + 1 : found.start()]
        indent = line if line.isspace() else ""
        return filled[found.group(1)].replace("\n", "\n" + indent)

    return _FACT.sub(fact, text)


@dataclass(frozen=True, slots=True)
class CatalogRefresh:
    """What a refresh built."""

    path: Path
    table_views: tuple[str, ...]
    curated_views: tuple[str, ...]
    #: Tables that had no Parquet file yet: their views are empty until a later refresh.
    empty_tables: tuple[str, ...]


class CatalogError(WarehouseError):
    """A catalog that cannot answer: its Parquet is gone, or it was never built."""


def refresh(wh: Warehouse, *, out: str | os.PathLike[str] | None = None) -> CatalogRefresh:
    """Rebuild the catalog's views beside it and swap it in; idempotent. ``out``: the file to
    write (default: the warehouse's catalog)."""
    target = Path(os.path.abspath(out)) if out is not None else wh.catalog_path
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with said_if_refused(str(target)):
            target.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(str(target.with_name(f".{target.name}.lock"))):
                for killed in target.parent.glob(f".{target.name}.*.tmp*"):
                    killed.unlink(missing_ok=True)
                try:
                    curated, empty = _build(temp, wh)
                    os.replace(temp, target)
                finally:
                    _remove(temp)
    except duckdb.Error as exc:
        # DuckDB says which of its files it could not write: the one being built, or its log.
        refused = re.search(rf'"{re.escape(str(temp))}[^"]*": (.+)', str(exc))
        if refused is None:
            raise
        reason = refused.group(1)
        raise StoreError(f"cannot write {target}: {reason[:1].lower()}{reason[1:]}") from exc
    return CatalogRefresh(target, tuple(schemas.TABLES), curated, empty)


def refresh_if_stale(wh: Warehouse) -> CatalogRefresh | None:
    """`refresh` the warehouse's catalog unless it is current: built from this version's views
    (`design`), reading every table that has files from them and no other. Views read the files
    at query time, so a write to a table whose view reads its files shows without a rebuild."""
    if _current(wh):
        return None
    return refresh(wh)


def _current(wh: Warehouse) -> bool:
    path = wh.catalog_path
    if not path.exists():
        return False
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            built = con.execute(
                f"SELECT root, design, empty_tables FROM {ROOT_VIEW}"  # noqa: S608
            ).fetchone()
    except duckdb.Error:  # built before catalogs said their design, or being replaced
        return False
    if built is None:
        return False
    root, built_design, empty = built
    if root != wh.location or built_design != design(wh.config.reference):
        return False
    # Both ways: a view over files fails once its table has none left (a clean rerun
    # removes a day's rejects).
    return set(empty) == set(schemas.TABLES) - tables_with_files(wh.store)


@functools.cache
def design(reference: str = spec.REFERENCE_CURRENCY) -> str:
    """A digest of what this version builds the views from: the tables' schemas and the
    curated views' SQL, of the reference currency (a catalog built from another is rebuilt,
    never patched)."""
    digest = hashlib.sha256(repr([list(schemas.TABLES.values()), MACROS]).encode())
    for name, text in sorted(_curated_sql(reference).items()):
        digest.update(f"{name}\0{text}\0".encode())
    return digest.hexdigest()


@read_again
def _build(temp: Path, wh: Warehouse) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The catalog's views in the new file ``temp`` (made again from nothing if a write replaced
    a file while its views were bound): the curated views and the tables without files."""
    _remove(temp)
    temp.write_bytes(_without_files(wh.config.reference))
    with duckdb.connect(str(temp)) as con:
        wh.store.reach(con)
        # What can fail (a view over files) is made on its own; the rest in one transaction, as
        # one commit costs what the statements do.
        empty = _create_table_views(con, wh)
        filled = [name for name in schemas.TABLES if name not in empty]
        empty_list = "[" + ", ".join(_literal(name) for name in empty) + "]::VARCHAR[]"
        with _transaction(con):
            _comment_table_views(con, filled)
            con.execute(
                f"CREATE VIEW {ROOT_VIEW} AS SELECT {_literal(wh.location)} AS root, "
                f"{bool(filled)} AS had_files, {empty_list} AS empty_tables, "
                f"{_literal(design(wh.config.reference))} AS design"
            )
            con.execute(
                f"COMMENT ON VIEW {ROOT_VIEW} IS "
                "'The warehouse root the views of this catalog read, whether it held files "
                "when the catalog was built, the tables that had none, and a digest of the "
                "schemas and curated views it was built from.'"
            )
    return tuple(sorted(_curated_sql(wh.config.reference))), empty


@functools.cache
def _without_files(reference: str) -> bytes:
    """A catalog file's bytes with every table's view typed and empty and the curated views bound
    over them, made once per process: every catalog starts from it, and binding the curated
    views is most of a rebuild's cost (docs/benchmarks.md). Binding a view over files reads
    every file's footer: the curated views would bind funding_history's twice more."""
    with tempfile.TemporaryDirectory(prefix="whitebit-catalog-") as scratch:
        path = Path(scratch) / "views.duckdb"
        with duckdb.connect(str(path)) as con, _transaction(con):
            for schema in schemas.TABLES.values():
                con.execute(f"CREATE VIEW {_quoted(schema.name)} AS {_typed_empty(schema)}")
            _create_curated_views(con, reference)
            _comment_table_views(con, schemas.TABLES)
        return path.read_bytes()


@contextlib.contextmanager
def _transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    con.begin()
    try:
        yield
    except BaseException:
        con.rollback()
        raise
    con.commit()


def _remove(temp: Path) -> None:
    """A catalog file being built, and its write-ahead log."""
    for leftover in (temp, temp.with_name(temp.name + ".wal")):
        leftover.unlink(missing_ok=True)


def connect(
    wh: Warehouse, *, path: str | os.PathLike[str] | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only analyst connection to the catalog, showing times in UTC, able to read the
    root its views name: the warehouse's own (built first when the warehouse has files and no
    catalog yet, or one of an older version), or the catalog file ``path`` (one `refresh` wrote
    with ``out``: an analyst's own over a shared warehouse)."""
    file = Path(os.path.abspath(path)) if path is not None else wh.catalog_path
    if not file.exists():
        if path is not None:
            raise CatalogError(
                f"no catalog at {file}: build it with `whitebit-etl catalog --root <the "
                f"warehouse root> --out {file}`"
            )
        if not wh.store.has_files(PARQUET_DIR):
            raise CatalogError(
                f"no warehouse at {wh.location}: nothing has been extracted there yet "
                "(whitebit-etl demo, or whitebit-etl materialize, fills it)"
            )
        refresh(wh)  # views only, cheap to create
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
            refresh(wh)  # the root's own catalog: rebuilt in place, as every run does
            return connect(wh)
        read, had_files = named
        base = wh if read == wh.location else wh.elsewhere(read)
        base.store.reach(con)
        if had_files and not base.store.has_files(PARQUET_DIR):
            raise CatalogError(
                f"the catalog {file} reads the Parquet at {read}, which is not there (moved, "
                f"unmounted or removed?): rebuild it with `whitebit-etl catalog --root <where "
                f"the warehouse is now> --out {file}`"
            )
    except BaseException:
        con.close()
        raise
    return con


def reader(store: Store) -> duckdb.DuckDBPyConnection:
    """A connection that reads a store's Parquet (checks and previews): a cursor of this
    process's in-memory database, as a new database is what costs in opening one."""
    con = _in_memory(os.getpid()).cursor()
    store.reach(con)
    return con


@functools.cache
def _in_memory(pid: int) -> duckdb.DuckDBPyConnection:
    """This process's in-memory database (``pid``: a forked child makes its own)."""
    return duckdb.connect()


def query(sql: str, params: Sequence[object] = (), *, root: str = "data") -> pd.DataFrame:
    """The result of ``sql`` over the catalog of the warehouse at ``root``, as a pandas
    DataFrame, for notebooks.

    Exact as the warehouse is: ``DECIMAL(38,18)`` columns hold `decimal.Decimal` values (DuckDB's
    own ``.df()`` would turn them into floats), times are UTC. ``params`` fill ``?`` placeholders.
    """
    with connect(Warehouse.open(root)) as con:
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


def _create_table_views(con: duckdb.DuckDBPyConnection, wh: Warehouse) -> tuple[str, ...]:
    """A view over its files for each table that has some, replacing its empty one; the tables
    that had none (their views stay typed and empty)."""
    empty = []
    with_files = tables_with_files(wh.store)
    for schema in schemas.TABLES.values():
        if schema.name not in with_files:
            empty.append(schema.name)
            continue
        view = f"CREATE OR REPLACE VIEW {_quoted(schema.name)} AS"
        source = _parquet_source(schema, wh)
        try:
            con.execute(f"{view} {_select(_columns(schema), source)}")
        except duckdb.BinderException:  # a column no file has yet: added after them
            held = {row[0] for row in con.execute(f"DESCRIBE {_select('*', source)}").fetchall()}
            con.execute(f"{view} {_select(_columns(schema, held), source)}")
    return tuple(empty)


def _typed_empty(schema: TableSchema) -> str:
    """A table's columns, typed, and no row: a view of a table that has no file yet."""
    typed_nulls = ", ".join(
        f"CAST(NULL AS {duckdb_type(c.type)}) AS {_quoted(c.name)}" for c in schema.view_columns
    )
    return f"SELECT {typed_nulls} WHERE false"


@dataclass(frozen=True, slots=True)
class CuratedView:
    """A curated view as the catalog makes it: its comment, and its columns with their types."""

    name: str
    comment: str
    columns: tuple[tuple[str, str], ...]


@functools.cache
def curated_views() -> tuple[CuratedView, ...]:
    """Every curated view, read back from DuckDB (``duckdb_views()``, ``duckdb_columns()``)
    after it was made, as in a catalog, over the tables' typed views without files: what a
    catalog holds, with no warehouse needed."""
    with duckdb.connect() as con:
        for schema in schemas.TABLES.values():
            con.execute(f"CREATE VIEW {_quoted(schema.name)} AS {_typed_empty(schema)}")
        names = list(_create_curated_views(con))
        comments = dict(
            con.execute(
                "SELECT view_name, comment FROM duckdb_views() WHERE view_name IN ?", [names]
            ).fetchall()
        )
        columns: dict[str, list[tuple[str, str]]] = {name: [] for name in names}
        for view, column, kind in con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE table_name IN ? ORDER BY table_name, column_index",
            [names],
        ).fetchall():
            columns[view].append((column, kind))
    return tuple(
        CuratedView(name, comments.get(name) or "", tuple(columns[name])) for name in names
    )


def _comment_table_views(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> None:
    """The comments of the tables' views ``names`` and of their columns (a replaced view loses
    them)."""
    for name in names:
        schema = schemas.TABLES[name]
        con.execute(f"COMMENT ON VIEW {_quoted(name)} IS {_literal(schema.description)}")
        for column in schema.view_columns:
            target = f"{_quoted(name)}.{_quoted(column.name)}"
            con.execute(f"COMMENT ON COLUMN {target} IS {_literal(column.description)}")


def _select(columns: str, source: str) -> str:
    # Identifiers come from the schemas, quoted; the path is an escaped literal.
    return f"SELECT {columns} FROM {source}"  # noqa: S608


def _columns(schema: TableSchema, held: set[str] | None = None) -> str:
    """The view's columns; one the files do not hold (``held``: those they do) as a typed null."""
    return ", ".join(
        _quoted(c.name)
        if held is None or c.name in held
        else f"CAST(NULL AS {duckdb_type(c.type)}) AS {_quoted(c.name)}"
        for c in schema.view_columns
    )


def _parquet_source(schema: TableSchema, wh: Warehouse) -> str:
    # Exact depth, not "**": no recursive listing per query, and no stray file is picked up.
    depth = "/".join("*" for _ in schema.path_columns)
    files = wh.store.url(f"{layout.table_dir(schema.name)}/{depth}/{PARTITION_FILE}")
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


def _create_curated_views(
    con: duckdb.DuckDBPyConnection, reference: str = spec.REFERENCE_CURRENCY
) -> tuple[str, ...]:
    """The views of ``warehouse/sql`` (prices in ``reference``), after the `MACROS` they call;
    one that names another is created after it."""
    for macro, text in MACROS.items():
        con.execute(f"CREATE MACRO {macro}{text}")
    texts = _curated_sql(reference)
    named = {name: re.compile(rf"\b{re.escape(name)}\b") for name in texts}
    after = {
        name: [other for other in texts if other != name and named[other].search(text)]
        for name, text in texts.items()
    }
    try:
        order = list(graphlib.TopologicalSorter(after).static_order())
    except graphlib.CycleError as exc:
        raise ValueError(f"curated views name each other in a circle: {exc.args[1]}") from exc
    for name in order:
        text = texts[name]
        leading = itertools.takewhile(lambda line: line.startswith("--"), text.splitlines())
        comment = " ".join(line.removeprefix("--").strip() for line in leading)
        try:
            con.execute(f"CREATE VIEW {_quoted(name)} AS {text}")
        except duckdb.Error as exc:
            raise ValueError(f"curated view {name}: {exc}") from exc
        con.execute(f"COMMENT ON VIEW {_quoted(name)} IS {_literal(comment)}")
    return tuple(sorted(texts))


def _curated_sql(reference: str = spec.REFERENCE_CURRENCY) -> dict[str, str]:
    """Each curated view's SQL, facts filled in (prices in ``reference``), by name."""
    return {
        sql_file.name.removesuffix(".sql"): with_facts(
            sql_file.name.removesuffix(".sql"), sql_file.read_text(encoding="utf-8"), reference
        )
        for sql_file in resources.files("warehouse").joinpath(CURATED_SQL).iterdir()
        if sql_file.name.endswith(".sql")
    }


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
