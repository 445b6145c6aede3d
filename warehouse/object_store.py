"""A warehouse on an object store (an ``s3://`` root; MinIO, R2 or any S3-compatible store).

A file is one object written by one PUT to its final key (built in memory first): a reader sees
the old object or the new one, and a killed run leaves the old one whole; there is no rename (a
move is a copy then a delete). The writers of one table take turns under a lease object made with
conditional writes (`warehouse.locks.Lease`), which expires when its holder dies; a writer that
lost its lease stops before its next PUT. DuckDB reads the objects through an fsspec filesystem
registered on its connection (`warehouse.listed_s3`: each query lists its files once), never
through its own extensions, which it would download.

s3fs (and botocore under it) is imported when an object store is first opened: a run on local
disk never pays for loading it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import duckdb
from upath import UPath

from warehouse import locks
from warehouse.store import LOCKS_DIR, LocalStore, Store

#: The storage options each store is opened with: a listing cached by one write would hide the
#: files another process writes after it.
OPTIONS: Final[dict[str, Any]] = {"use_listings_cache": False}
#: Files `copied` fetches at once: memory holds their bytes, never a whole backfill's.
FETCHED_AT_ONCE: Final = 64


class ObjectStore(Store):
    """The objects under ``s3://bucket/prefix``."""

    def __init__(
        self,
        url: str,
        *,
        lease_seconds: float = locks.DEFAULT_LEASE_SECONDS,
        lease_wait_s: float = locks.DEFAULT_WAIT_SECONDS,
    ) -> None:
        self._root = UPath(url.rstrip("/"), **OPTIONS)
        self.location = str(self._root)
        self._lease_seconds, self._lease_wait_s = lease_seconds, lease_wait_s

    @property
    def fs(self) -> Any:
        return self._root.fs

    def _key(self, relative: str) -> str:
        """``bucket/prefix/relative``: how s3fs names an object."""
        return f"{self._root.path}/{relative}"

    def exists(self, relative: str) -> bool:
        return bool(self.fs.exists(self._key(relative)))

    def has_files(self, prefix: str) -> bool:
        return bool(self._keys_under(self._key(prefix)))

    def files(self, prefix: str) -> list[str]:
        base = self._root.path + "/"
        return sorted(key[len(base) :] for key in self._keys_under(self._key(prefix)))

    def _keys_under(self, prefix: str) -> list[str]:
        """Every key of the store under ``prefix`` (``bucket/…``), in one listing: asked as the
        parent's keys that start with the last name, since s3fs asks an empty prefix again
        whether it is a file (a HEAD and a second listing)."""
        parent, name = prefix.rstrip("/").rsplit("/", 1)
        keys: list[str] = self.fs.find(parent, prefix=f"{name}/")
        return keys

    def read_bytes(self, relative: str) -> bytes | None:
        try:
            data: bytes = self.fs.cat_file(self._key(relative))
        except FileNotFoundError:
            return None
        return data

    def write_bytes(self, relative: str, data: bytes) -> None:
        self.fs.pipe_file(self._key(relative), data)

    def delete(self, relative: str, *, prune_to: str = "") -> None:
        # A store has no directories: a prefix is gone with its last object.
        try:
            self.fs.rm_file(self._key(relative))
        except FileNotFoundError:
            return

    @contextmanager
    def lock(self, name: str) -> Iterator[Callable[[], None]]:
        path = self._root / f"{LOCKS_DIR}/{name}.lock"
        with locks.held(path, seconds=self._lease_seconds, wait_s=self._lease_wait_s) as lease:
            yield lease.check

    def reach(self, con: duckdb.DuckDBPyConnection) -> None:
        from warehouse.listed_s3 import ListedS3FileSystem

        con.execute("SET autoinstall_known_extensions = false")
        # One per storage options in a process (fsspec's instance cache), as the root's own is.
        con.register_filesystem(ListedS3FileSystem(**self.fs.storage_options))

    @contextmanager
    def copied(self, files: Sequence[str]) -> Iterator[tuple[Store, list[str]]]:
        with tempfile.TemporaryDirectory(prefix="fetched-") as scratch:
            copy = LocalStore(scratch)
            for start in range(0, len(files), FETCHED_AT_ONCE):
                chunk = files[start : start + FETCHED_AT_ONCE]
                keys = [self._key(relative) for relative in chunk]
                # One GET each: s3fs would first ask each file's size (a HEAD) to split them.
                answers = self.fs.cat(keys, on_error="raise", max_concurrency=1)
                for key, relative in zip(keys, chunk, strict=True):
                    copy.put_local(relative, answers.pop(key))
            yield copy, [copy.url(relative) for relative in files]
