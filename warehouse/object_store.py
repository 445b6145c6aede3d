"""A warehouse on an object store (an ``s3://`` root; MinIO, R2 or any S3-compatible store).

A file is one object written by one PUT to its final key (built in memory first): a reader sees
the old object or the new one, and a killed run leaves the old one whole; there is no rename (a
move is a copy then a delete). The writers of one table take turns under a lease object made with
conditional writes (`warehouse.locks.Lease`), which expires when its holder dies; a writer that
lost its lease stops before its next PUT. DuckDB reads the objects through an fsspec filesystem
registered on its connection (`warehouse.listed_s3`: each query lists its files once), never
through its own extensions, which it would download.

Every request to the store is bounded in time (`REQUEST_TIMEOUT_S`): a store that does not
answer (stopped, partitioned away, an upload left waiting for its ``100 Continue``) fails the
request within the bound, cancelled, naming the store and the object (`StoreError`), rather than
holding the run and its slots; while it waits, it says so every few seconds (a warning of this
module's logger, which the command line shows). Whatever else the store answers (no credentials,
no such bucket, an unreachable endpoint) is a `StoreError` too, in one line.

s3fs (and botocore under it) is imported when an object store is first opened: a run on local
disk never pays for loading it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import struct
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Any, Final, TypeVar

import duckdb
from upath import UPath

from warehouse import locks
from warehouse.locks import Held, PreconditionFailed
from warehouse.store import LOCKS_DIR, LocalStore, Store, StoreError, footer_schema

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The storage options each store is opened with: a listing cached by one write would hide the
#: files another process writes after it.
OPTIONS: Final[dict[str, Any]] = {"use_listings_cache": False}
#: Files `copied` fetches at once: memory holds their bytes, never a whole backfill's.
FETCHED_AT_ONCE: Final = 64
#: Bytes read from a file's end for its footer: most footers fit, a larger one is read again.
FOOTER_READ: Final = 64 * 1024
#: The longest one request to the store may take, its retries included: a month's file is a
#: few megabytes, a PUT of it seconds on any link a warehouse is written over.
REQUEST_TIMEOUT_S: Final = 30.0


class ObjectStore(Store):
    """The objects under ``s3://bucket/prefix``."""

    def __init__(
        self,
        url: str,
        *,
        lease_seconds: float = locks.DEFAULT_LEASE_SECONDS,
        lease_wait_s: float = locks.DEFAULT_WAIT_SECONDS,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self._root = UPath(url.rstrip("/"), **OPTIONS)
        self.location = str(self._root)
        self._bucket = self._root.path.split("/", 1)[0]
        self._lease_seconds, self._lease_wait_s = lease_seconds, lease_wait_s
        self.timeout_s = timeout_s

    @property
    def fs(self) -> Any:
        return self._root.fs

    def key(self, relative: str) -> str:
        """``bucket/prefix/relative``: how s3fs names an object."""
        return f"{self._root.path}/{relative}"

    def _bounded(
        self, what: str, make: Callable[[], Coroutine[Any, Any, T]], *, raw: bool = False
    ) -> T:
        """Run one request on s3fs's loop, cancelled past `timeout_s`; what fails is a
        `StoreError` naming the store and ``what`` (``raw``: only the timeout is: the caller
        reads the store's own answer, a 412 or a missing object)."""
        future = asyncio.run_coroutine_threadsafe(make(), self.fs.loop)
        started = time.monotonic()
        try:
            while True:
                left = self.timeout_s - (time.monotonic() - started)
                try:
                    return future.result(timeout=max(0.0, min(locks.WAIT_SAID_EVERY_S, left)))
                except concurrent.futures.TimeoutError:
                    if left <= locks.WAIT_SAID_EVERY_S:
                        raise
                log.warning(
                    "%s: waiting %.0f s for the store to answer %s (it fails at %.0f s)",
                    self.location,
                    time.monotonic() - started,
                    what,
                    self.timeout_s,
                )
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise StoreError(
                f"{self.location}: the store did not answer {what} within {self.timeout_s:.0f} s"
            ) from None
        except FileNotFoundError:
            raise
        except Exception as exc:
            if raw:
                raise
            raise StoreError(f"{self.location}: {what} failed: {_reason(exc)}") from None

    def check(self) -> None:
        if not self._bounded("a look at the bucket", lambda: self.fs._exists(self._bucket)):
            raise StoreError(f"{self.location}: the bucket {self._bucket} does not exist")

    def exists(self, relative: str) -> bool:
        key = self.key(relative)
        return bool(self._bounded(f"a look at {relative}", lambda: self.fs._exists(key)))

    def has_files(self, prefix: str) -> bool:
        return bool(self._keys_under(self.key(prefix)))

    def files(self, prefix: str) -> list[str]:
        base = self._root.path + "/"
        return sorted(key[len(base) :] for key in self._keys_under(self.key(prefix)))

    def _keys_under(self, prefix: str) -> list[str]:
        """Every key of the store under ``prefix`` (``bucket/…``), in one listing: asked as the
        parent's keys that start with the last name, since s3fs asks an empty prefix again
        whether it is a file (a HEAD and a second listing)."""
        parent, name = prefix.rstrip("/").rsplit("/", 1)
        try:
            keys: list[str] = self._bounded(
                f"the listing of {prefix}", lambda: self.fs._find(parent, prefix=f"{name}/")
            )
        except FileNotFoundError:
            raise StoreError(f"{self.location}: the bucket {self._bucket} does not exist") from None
        return keys

    def read_bytes(self, relative: str) -> bytes | None:
        key = self.key(relative)
        try:
            data: bytes = self._bounded(f"the read of {relative}", lambda: self.fs._cat_file(key))
        except FileNotFoundError:
            return None
        return data

    def read_metadata(self, relative: str) -> Mapping[bytes, bytes] | None:
        key = self.key(relative)
        # The footer only: a month file may be large, its metadata is a few kilobytes.
        try:
            tail: bytes = self._bounded(
                f"the read of {relative}'s footer",
                lambda: self.fs._cat_file(key, start=-FOOTER_READ),
            )
        except FileNotFoundError:
            return None
        (length,) = struct.unpack("<I", tail[-8:-4])
        if length + 8 > len(tail):  # a larger footer than the first read held
            tail = self._bounded(
                f"the read of {relative}'s footer",
                lambda: self.fs._cat_file(key, start=-(length + 8)),
            )
        return dict(footer_schema(tail).metadata or {})

    def write_bytes(self, relative: str, data: bytes) -> None:
        key = self.key(relative)
        try:
            self._bounded(
                f"the write of {relative}", lambda: self.fs._pipe_file(key, data), raw=True
            )
        except FileNotFoundError:
            raise StoreError(f"{self.location}: the bucket {self._bucket} does not exist") from None
        except StoreError:
            raise
        except Exception as exc:  # refused (access denied, a quota): as a disk's refusal says it
            raise StoreError(f"cannot write {self.url(relative)}: {_reason(exc)}") from None

    def delete(self, relative: str, *, prune_to: str = "") -> None:
        # A store has no directories: a prefix is gone with its last object.
        key = self.key(relative)
        try:
            self._bounded(f"the removal of {relative}", lambda: self.fs._rm_file(key))
        except FileNotFoundError:
            return

    @contextmanager
    def lock(self, name: str) -> Iterator[Callable[[], None]]:
        relative = f"{LOCKS_DIR}/{name}.lock"
        with locks.held(
            self,
            self.key(relative),
            self.url(relative),
            seconds=self._lease_seconds,
            wait_s=self._lease_wait_s,
        ) as lease:
            yield lease.check

    # --- The lease's requests (`warehouse.locks.LeaseStore`) ------------------------------

    def _call(self, what: str, method: str, key: str, **kwargs: Any) -> dict[str, Any]:
        bucket, name = key.split("/", 1)

        def call() -> Coroutine[Any, Any, dict[str, Any]]:
            return self.fs._call_s3(method, Bucket=bucket, Key=name, **kwargs)  # type: ignore[no-any-return]

        try:
            return self._bounded(f"{what} {key}", call, raw=True)
        except OSError as exc:
            if _precondition_failed(exc):
                raise PreconditionFailed(key) from None
            raise

    def put_if(self, key: str, body: bytes, *, etag: str | None) -> str:
        condition = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
        written = self._call("the lease write of", "put_object", key, Body=body, **condition)
        return str(written["ETag"])

    def get_held(self, key: str) -> Held | None:
        async def read() -> Held:
            bucket, name = key.split("/", 1)
            held = await self.fs._call_s3("get_object", Bucket=bucket, Key=name)
            try:
                body = await held["Body"].read()  # the object's own version
            finally:
                held["Body"].close()
            now = parsedate_to_datetime(held["ResponseMetadata"]["HTTPHeaders"]["date"])
            return Held(body, held["ETag"], (now - held["LastModified"]).total_seconds())

        try:
            return self._bounded(f"the lease read of {key}", read, raw=True)
        except FileNotFoundError:
            return None

    def delete_if(self, key: str, etag: str) -> None:
        self._call("the lease removal of", "delete_object", key, IfMatch=etag)

    # --- DuckDB and the checks -------------------------------------------------------------

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
                keys = [self.key(relative) for relative in chunk]
                answers = self._bounded(f"the read of {len(chunk)} file(s)", self._cat(keys))
                for key, relative in zip(keys, chunk, strict=True):
                    copy.put_local(relative, answers.pop(key))
            yield copy, [copy.url(relative) for relative in files]

    def _cat(self, keys: list[str]) -> Callable[[], Coroutine[Any, Any, dict[str, bytes]]]:
        # One GET each: s3fs would first ask each file's size (a HEAD) to split them.
        return lambda: self.fs._cat(keys, on_error="raise", max_concurrency=1)


def _precondition_failed(exc: BaseException) -> bool:
    """Whether the store refused a conditional request (412; s3fs raises it as an OSError)."""
    cause = exc.__cause__
    response = getattr(cause, "response", None)
    if isinstance(response, dict):
        return bool(response.get("Error", {}).get("Code") == "PreconditionFailed")
    return "pre-condition" in str(exc) or "precondition" in str(exc).lower()


def _reason(exc: BaseException) -> str:
    """An error of the store's client on one line: its class's name and what it said."""
    text = " ".join(str(exc).split()) or "no reason given"
    return f"{type(exc).__name__}: {text}"
