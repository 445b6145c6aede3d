"""Locks between writers: a file lock on local disk (`file_lock`), and a lease object on an object
store (`Lease`), for writers on other machines.

On local disk, ``flock`` on a lock file: the second writer waits; the kernel releases the lock when
its holder's file is closed, also when the process is killed.

On an object store, a lease object made and kept with S3 conditional writes.

A writer takes the lease by creating its object with ``If-None-Match: *`` (the store refuses the
second creator with 412), keeps it by rewriting it with ``If-Match: <its ETag>`` every third of
its time to live, and gives it back with a delete under ``If-Match``. A lease whose holder died
(a SIGKILLed run) expires: once the store's own clock (the ``Date`` of a read) is past the
object's ``LastModified`` plus the time to live its holder declared in it (machines may be set
to different times) and the second those times are rounded to, the next writer takes it over
with ``If-Match`` on the ETag it read, so of two writers that see it expired only one gets it.
Both times come from the store: writers' clocks may disagree. The holder counts the lease's life
from before each request, so it knows it lost the lease before another writer can take it.

A holder that cannot renew (the store unreachable for longer than the lease lives) has lost it:
its next `Lease.check` raises before it writes anything more.

Written here because no well-kept library locks with S3 conditional writes.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from email.utils import parsedate_to_datetime
from typing import Any, Final

from fsspec.asyn import sync
from upath import UPath

#: How long a lease outlives its holder's last renewal (seconds).
DEFAULT_LEASE_SECONDS: Final = 30.0
#: A writer waiting longer than this for a lease that is kept alive gives up, naming its holder.
DEFAULT_WAIT_SECONDS: Final = 900.0
#: The resolution of the store's times (``Date``, ``LastModified``): whole seconds.
CLOCK_RESOLUTION_S: Final = 1.0


class LeaseError(RuntimeError):
    """A lease that could not be taken in time, or that was lost while held."""


def _precondition_failed(exc: BaseException) -> bool:
    """Whether the store refused a conditional request (412; s3fs raises it as an OSError)."""
    cause = exc.__cause__
    response = getattr(cause, "response", None)
    if isinstance(response, dict):
        return bool(response.get("Error", {}).get("Code") == "PreconditionFailed")
    return "pre-condition" in str(exc) or "precondition" in str(exc).lower()


def _declared_seconds(body: bytes, default: float) -> float:
    """How long a lease lives, as its holder declared it in its object (it renews every third of
    that): another machine may be set to a shorter time, and must not take a lease still kept.
    ``default`` (the reader's own time) for an object that says nothing readable."""
    try:
        declared = json.loads(body).get("seconds")
    except (ValueError, AttributeError):
        return default
    if isinstance(declared, bool) or not isinstance(declared, int | float) or declared <= 0:
        return default
    return float(declared)


class Lease:
    """The lease of ``path`` (an object in an S3 store), for one holder."""

    def __init__(
        self,
        path: UPath,
        *,
        seconds: float = DEFAULT_LEASE_SECONDS,
        wait_s: float = DEFAULT_WAIT_SECONDS,
    ) -> None:
        self.path = path
        self.seconds = seconds
        self.wait_s = wait_s
        self.holder = f"{socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"
        self._bucket, self._key = path.path.split("/", 1)
        self._etag: str | None = None
        self._lost: str | None = None
        self._renewed_at = 0.0
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.path.fs.call_s3(
            method, Bucket=self._bucket, Key=self._key, **kwargs
        )
        return result

    def _body(self) -> bytes:
        return json.dumps({"holder": self.holder, "seconds": self.seconds}).encode()

    def acquire(self) -> None:
        """Take the lease, waiting while another holder keeps it."""
        started = time.monotonic()
        pause = 0.02
        while True:
            sent = time.monotonic()
            try:
                self._etag = self._call("put_object", Body=self._body(), IfNoneMatch="*")["ETag"]
                break
            except OSError as exc:
                if not _precondition_failed(exc):
                    raise
            sent = time.monotonic()
            if self._take_over_expired():
                break
            waited = time.monotonic() - started
            if waited > self.wait_s:
                raise LeaseError(
                    f"{self.path}: held by {self._holder_now()} for longer than "
                    f"{self.wait_s:.0f} s "
                    "(WAREHOUSE_LEASE_WAIT_SECONDS); a lease of a dead holder expires after "
                    f"{self.seconds:.0f} s, so its holder is alive and still writing"
                )
            time.sleep(pause * (0.5 + random.random()))  # noqa: S311 - jitter, not secrecy
            pause = min(pause * 2, 0.5)
        # Counted from before the request: the store's clock starts the lease no earlier.
        self._lost, self._renewed_at = None, sent
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name="lease-renewal", daemon=True)
        self._renewer.start()

    def _take_over_expired(self) -> bool:
        try:
            held = self._call("get_object")
        except FileNotFoundError:
            return False  # released meanwhile: the next create may win
        try:
            body = sync(self.path.fs.loop, held["Body"].read)  # the object's own version
        finally:
            held["Body"].close()
        now = parsedate_to_datetime(held["ResponseMetadata"]["HTTPHeaders"]["date"])
        age = (now - held["LastModified"]).total_seconds()
        # Both times are whole seconds (HTTP dates): the age read may be up to one too many.
        if age <= _declared_seconds(body, self.seconds) + CLOCK_RESOLUTION_S:
            return False
        try:
            self._etag = self._call("put_object", Body=self._body(), IfMatch=held["ETag"])["ETag"]
        except FileNotFoundError:
            return False  # released meanwhile: the next create may win
        except OSError as exc:
            if _precondition_failed(exc):
                return False  # another writer took it over first
            raise
        return True

    def _holder_now(self) -> str:
        try:
            return str(json.loads(self.path.read_bytes()).get("holder", "an unknown holder"))
        except (OSError, ValueError):
            return "an unknown holder"

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            sent = time.monotonic()
            try:
                renewed = self._call("put_object", Body=self._body(), IfMatch=self._etag)
            except FileNotFoundError:
                self._lost = "its object was deleted"
                return
            except OSError as exc:
                if _precondition_failed(exc):
                    self._lost = "another writer took it over"
                    return
                continue  # still ours until it expires: `check` says when it has
            self._etag, self._renewed_at = renewed["ETag"], sent

    def check(self) -> None:
        """Raise if the lease was lost (taken over, or not renewed for as long as it lives):
        what it guards must not be written any more."""
        if self._lost is None and time.monotonic() - self._renewed_at > self.seconds:
            self._lost = f"not renewed for {self.seconds:.0f} s: the store did not answer"
        if self._lost is not None:
            raise LeaseError(f"{self.path}: lease lost while writing ({self._lost})")

    def release(self) -> None:
        """Give the lease back (unless another writer took it over meanwhile)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        if self._etag is None:
            return
        # Taken over (ours had expired) or gone: nothing of ours to delete.
        with suppress(OSError):
            self._call("delete_object", IfMatch=self._etag)
        self._etag = None


@contextmanager
def held(path: UPath, *, seconds: float, wait_s: float) -> Iterator[Lease]:
    """The lease of ``path``, for the duration of the block."""
    lease = Lease(path, seconds=seconds, wait_s=wait_s)
    lease.acquire()
    try:
        yield lease
    finally:
        lease.release()


#: Lock directories this process made already (they are never removed).
_LOCK_DIRS: set[str] = set()


@contextmanager
def file_lock(path: str) -> Iterator[None]:
    """One holder at a time of the local lock file ``path`` (made with its directory): the
    second waits."""
    directory = os.path.dirname(path)
    if directory not in _LOCK_DIRS:
        os.makedirs(directory, exist_ok=True)
        _LOCK_DIRS.add(directory)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock, also when the process is killed
