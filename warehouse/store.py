"""Where a warehouse's files are: local disk (`LocalStore`) or an object store
(`warehouse.object_store.ObjectStore`), behind one interface (`Store`).

Every file is named by its path relative to the warehouse's root (``parquet/funding_history/
account=main/funding_month=2025-03/data.parquet``). A store writes a file whole or not at all, so
a reader sees the old file or the new one, never a mix and never nothing; it lists the files
under a prefix, reads one, removes one, lets DuckDB read them, and gives the writers of one table
turns (`lock`). Whatever differs between local disk and an object store is decided here, once.

On local disk a file is written beside its target (a dot-named ``.tmp`` file in the same
directory, which no ``*.parquet`` glob matches), fsynced, and renamed over it; a process killed
mid-write leaves the old file whole, and its temp file is removed by the next write of that
file. Writers take turns under a file lock in ``parquet/.locks``. A write the disk refuses (full,
read-only, a file where a directory must be) leaves the old file whole too, and says in one line
which file and why (`said_if_refused`), as a store's refusal does.
"""

from __future__ import annotations

import os
import struct
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from typing import Final

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import tenacity

from warehouse.errors import WarehouseError
from warehouse.locks import file_lock

COMPRESSION: Final = "zstd"
#: Lock files of the writers (a table's partitions), under ``parquet/`` (dot-named: no view
#: reads it).
LOCKS_DIR: Final = "parquet/.locks"


class StoreError(WarehouseError):
    """The store, or the disk under the warehouse's local files (its catalog), could not do what
    was asked (it did not answer in time, refused, or is not there): which store, which file,
    and why, in one line."""


@contextmanager
def said_if_refused(path: str, what: str = "write") -> Iterator[None]:
    """A write of ``path`` (the file, the directories it goes in, its lock; or ``what`` else is
    done to it) that the disk refuses, whatever the reason (full, read-only, not permitted, a
    file where a directory must be, a file too large), raises `StoreError` in one line naming
    the path and the reason: ``cannot write data/parquet/...: no space left on device``, never a
    bare ``OSError``; with the path refused when it is another directory's."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        refused = os.fsdecode(exc.filename) if exc.filename is not None else ""
        elsewhere = refused and os.path.dirname(refused) != os.path.dirname(path)
        at = f" ({refused})" if elsewhere else ""
        raise StoreError(f"cannot {what} {path}: {reason[:1].lower()}{reason[1:]}{at}") from exc


def replace_text(target: str | os.PathLike[str], text: str, *, newline: str | None = None) -> str:
    """Write ``text`` to ``target``, a file of this machine outside any root (a page, an export),
    beside it and then renamed over it: a reader sees the old file or the new one whole, and a
    write refused says why (`said_if_refused`). The file's absolute path."""
    path = os.path.abspath(target)
    directory, name = os.path.split(path)
    temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    with said_if_refused(path):
        os.makedirs(directory, exist_ok=True)
        try:
            with open(temp, "w", encoding="utf-8", newline=newline) as sink:
                sink.write(text)
            os.replace(temp, path)
        finally:
            with suppress(FileNotFoundError):
                os.unlink(temp)
    return path


class Store(ABC):
    """The files of one warehouse root."""

    #: The root as DuckDB reads it and messages name it: a local path, or the store's URL.
    location: str

    def url(self, relative: str) -> str:
        """A file's `location`."""
        return f"{self.location}/{relative}"

    @abstractmethod
    def check(self) -> None:
        """Raise `StoreError` when the root cannot be used at all (an object store's bucket
        that does not exist, no credentials), before a run finds it out file by file."""

    @abstractmethod
    def exists(self, relative: str) -> bool: ...

    @abstractmethod
    def has_files(self, prefix: str) -> bool:
        """Whether any file lies under ``prefix``."""

    @abstractmethod
    def files(self, prefix: str) -> list[str]:
        """Every file under ``prefix`` (relative names, sorted), in one listing where the store
        can (on an object store, a request per 1,000 keys)."""

    @abstractmethod
    def read_bytes(self, relative: str) -> bytes | None:
        """A file's bytes, or None when it is not there."""

    @abstractmethod
    def write_bytes(self, relative: str, data: bytes) -> None:
        """Replace a file whole, atomically."""

    @abstractmethod
    def delete(self, relative: str, *, prune_to: str = "") -> None:
        """Remove a file if it is there (and, on disk, the directories it leaves empty, up to
        ``prune_to``)."""

    @abstractmethod
    def lock(self, name: str) -> AbstractContextManager[Callable[[], None]]:
        """One writer at a time of what ``name`` stands for (a table's partitions: a rerun from
        the UI while the schedule runs): the second waits, then replaces the first's files whole.
        Yields a check to call before each write: it raises once the lock is lost (an object
        store's lease that could not be renewed; a local lock is never lost)."""

    @abstractmethod
    def reach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Let ``con`` read this store's files."""

    @abstractmethod
    def copied(self, files: Sequence[str]) -> AbstractContextManager[tuple[Store, list[str]]]:
        """A local store holding these files (relative names) under the same names, and their
        locations there, for the block: this store itself when it is on disk; else a temporary
        copy, each file fetched whole (one GET, so one version of it), so that DuckDB reads the
        same Hive columns from the copy's path and reads each as a local file. A file gone since
        it was listed raises `FileNotFoundError`, as DuckDB would."""

    def read_table(self, relative: str, columns: Sequence[str] | None = None) -> pa.Table | None:
        """A Parquet file's rows (these columns), or None when it is not there."""
        data = self.read_bytes(relative)
        if data is None:
            return None
        chosen = list(columns) if columns is not None else None
        return pq.read_table(pa.BufferReader(data), columns=chosen)

    def read_metadata(self, relative: str) -> Mapping[bytes, bytes] | None:
        """A Parquet file's key-value metadata (its footer only), or None when it is not
        there."""
        data = self.read_bytes(relative)
        return None if data is None else _metadata(pq.read_schema(pa.BufferReader(data)))

    def write_table(self, relative: str, table: pa.Table, order: pa.Array | None = None) -> None:
        """Replace a Parquet file with ``table``'s rows (its schema's metadata kept in the file),
        atomically: in the order of the row indices ``order``, else as they are."""
        sink = pa.BufferOutputStream()
        write_parquet(table, sink, order)
        self.write_bytes(relative, sink.getvalue().to_pybytes())


def _metadata(schema: pa.Schema) -> Mapping[bytes, bytes]:
    return dict(schema.metadata or {})


def footer_schema(tail: bytes) -> pa.Schema:
    """The schema in a Parquet file's footer, from the file's last bytes (at least the footer,
    its length and the closing magic)."""
    (length,) = struct.unpack("<I", tail[-8:-4])
    # The reader wants a file: the footer alone, framed by the magic, is one to it.
    return pq.read_schema(pa.BufferReader(PARQUET_MAGIC + tail[-(length + 8) :]))


#: The four bytes a Parquet file starts and ends with.
PARQUET_MAGIC: Final = b"PAR1"


#: Rows of a file's row group at most. A file is written a row group at a time, each taken in
#: the file's order as it is written, so a write holds the rows given and one row group, never
#: a second, sorted copy of them all.
ROW_GROUP_ROWS: Final = 65_536


def write_parquet(table: pa.Table, sink: object, order: pa.Array | None = None) -> None:
    """``table``'s rows into ``sink`` as a Parquet file, in the order of the row indices
    ``order`` (else as they are), `ROW_GROUP_ROWS` at a time."""
    # Dictionary encoding only where values repeat (text); on decimals it costs time and bytes.
    text = [f.name for f in table.schema if pa.types.is_string(f.type)]
    with pq.ParquetWriter(sink, table.schema, compression=COMPRESSION, use_dictionary=text) as file:
        # An empty table still makes one (empty) row group, as pyarrow's write_table does.
        for start in range(0, max(table.num_rows, 1), ROW_GROUP_ROWS):
            rows = (
                table.slice(start, ROW_GROUP_ROWS)
                if order is None
                else table.take(order.slice(start, ROW_GROUP_ROWS))
            )
            file.write_table(rows, row_group_size=ROW_GROUP_ROWS)


class LocalStore(Store):
    """A directory on local disk (an absolute path: the DuckDB views store the paths they read)."""

    def __init__(self, root: str) -> None:
        self.location = os.path.abspath(root)

    def _path(self, relative: str) -> str:
        return os.path.join(self.location, relative)

    def check(self) -> None:
        """A directory on disk is made by the first write: nothing to check."""

    def exists(self, relative: str) -> bool:
        return os.path.exists(self._path(relative))

    def has_files(self, prefix: str) -> bool:
        return any(files for _, _, files in os.walk(self._path(prefix)))

    def files(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        found = [
            os.path.relpath(os.path.join(directory, name), self.location)
            for directory, _, names in os.walk(base)
            for name in names
            if not name.startswith(".")
        ]
        return sorted(found)

    def read_bytes(self, relative: str) -> bytes | None:
        path = self._path(relative)
        with said_if_refused(path, "read"):
            try:
                with open(path, "rb") as source:
                    return source.read()
            except FileNotFoundError:
                return None

    def read_table(self, relative: str, columns: Sequence[str] | None = None) -> pa.Table | None:
        path = self._path(relative)
        if not os.path.exists(path):
            return None
        return pq.read_table(path, columns=list(columns) if columns is not None else None)

    def read_metadata(self, relative: str) -> Mapping[bytes, bytes] | None:
        path = self._path(relative)
        if not os.path.exists(path):
            return None
        return _metadata(pq.read_schema(path))

    def write_table(self, relative: str, table: pa.Table, order: pa.Array | None = None) -> None:
        self._replace(relative, lambda sink: write_parquet(table, sink, order))

    def write_bytes(self, relative: str, data: bytes) -> None:
        self._replace(relative, lambda sink: sink.write(data))

    def _replace(self, relative: str, write: Callable[..., object]) -> None:
        """Write beside the file, make that durable, then rename it over; a write refused leaves
        the file as it was, and says why (`said_if_refused`)."""
        path = self._path(relative)
        directory, name = os.path.split(path)
        temp_path = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
        with said_if_refused(path):
            os.makedirs(directory, exist_ok=True)
            try:
                with open(temp_path, "wb") as sink:
                    write(sink)
                    sink.flush()
                    os.fsync(sink.fileno())
                os.replace(temp_path, path)
                # The rename itself is durable only once the directory entry is.
                handle = os.open(directory, os.O_RDONLY)
                try:
                    os.fsync(handle)
                finally:
                    os.close(handle)
            except BaseException:
                with suppress(FileNotFoundError):
                    os.unlink(temp_path)
                raise
        # Temp files a killed writer left beside this file.
        prefix = f".{name}."
        for entry in os.scandir(directory):
            if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
                with suppress(FileNotFoundError):
                    os.unlink(entry.path)

    def delete(self, relative: str, *, prune_to: str = "") -> None:
        path = self._path(relative)
        with said_if_refused(path, "remove"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                return
        stop = self._path(prune_to) if prune_to else self.location
        directory = os.path.dirname(path)
        while directory != stop and directory.startswith(stop):
            try:
                os.rmdir(directory)  # only when empty
            except OSError:
                break
            directory = os.path.dirname(directory)

    @contextmanager
    def lock(self, name: str) -> Iterator[Callable[[], None]]:
        path = self._path(f"{LOCKS_DIR}/{name}.lock")
        with ExitStack() as held:
            # Only the lock's own making is its write: what the block raises is the block's.
            with said_if_refused(path):
                held.enter_context(file_lock(path))
            yield _held_locally

    def reach(self, con: duckdb.DuckDBPyConnection) -> None:
        con.execute("SET autoinstall_known_extensions = false")

    @contextmanager
    def copied(self, files: Sequence[str]) -> Iterator[tuple[Store, list[str]]]:
        yield self, [self.url(f) for f in files]

    def put_local(self, relative: str, data: bytes) -> None:
        """Write a file plainly (a scratch copy: nobody reads it while it is written)."""
        path = self._path(relative)
        with said_if_refused(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as copy:
                copy.write(data)


def _held_locally() -> None:
    """A local lock is held until its file is closed."""


def replaced_while_read(error: BaseException) -> bool:
    """An object replaced between a query's glob and its read (another account's run wrote its
    partition meanwhile): s3fs refuses the read, its ETag changed, and DuckDB passes the error on
    as text."""
    if "FileExpired" not in type(error).__name__ and not isinstance(error, duckdb.Error):
        return False
    from s3fs.core import FileExpired

    return isinstance(error, FileExpired) or (
        isinstance(error, duckdb.Error) and FileExpired.__name__ in str(error)
    )


#: Reads across accounts (a catalog refresh, the report) run again when a write replaced a file
#: under them: a partition is replaced by one PUT, so the next glob finds the new object whole.
read_again = tenacity.retry(
    retry=tenacity.retry_if_exception(replaced_while_read),
    stop=tenacity.stop_after_attempt(5),
    wait=tenacity.wait_fixed(0.2),
    reraise=True,
)
