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
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, Protocol

from warehouse.errors import WarehouseError

log = logging.getLogger(__name__)

#: How long a lease outlives its holder's last renewal (seconds).
DEFAULT_LEASE_SECONDS: Final = 30.0
#: A writer waiting longer than this for a lease that is kept alive gives up, naming its holder.
DEFAULT_WAIT_SECONDS: Final = 900.0
#: The resolution of the store's times (``Date``, ``LastModified``): whole seconds.
CLOCK_RESOLUTION_S: Final = 1.0


class LeaseError(WarehouseError):
    """A lease that could not be taken in time, or that was lost while held."""


class PreconditionFailed(WarehouseError):
    """The store refused a conditional write: the object is not the one the writer read (412)."""


@dataclass(frozen=True, slots=True)
class Held:
    """A lease object as the store holds it."""

    body: bytes
    etag: str
    #: Seconds since it was last written, by the store's own clock (whole seconds).
    age_s: float


class LeaseStore(Protocol):
    """What a lease needs of an object store: conditional writes of one object, each bounded in
    time (`warehouse.object_store.ObjectStore` gives them)."""

    def put_if(self, key: str, body: bytes, *, etag: str | None) -> str:
        """Write the object (only if it does not exist: ``etag`` None; else only if it still
        has that ETag); its new ETag. `PreconditionFailed` when refused, `FileNotFoundError`
        when a conditional rewrite finds it gone."""

    def get_held(self, key: str) -> Held | None: ...

    def delete_if(self, key: str, etag: str) -> None: ...


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


#: While a writer waits for a lease another keeps, it says so this often.
WAIT_SAID_EVERY_S: Final = 5.0


class Lease:
    """The lease of the object ``key`` of a store (``name``: how messages call it), for one
    holder."""

    def __init__(
        self,
        store: LeaseStore,
        key: str,
        name: str,
        *,
        seconds: float = DEFAULT_LEASE_SECONDS,
        wait_s: float = DEFAULT_WAIT_SECONDS,
    ) -> None:
        self.store, self.key, self.name = store, key, name
        self.seconds = seconds
        self.wait_s = wait_s
        self.holder = f"{socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"
        self._etag: str | None = None
        self._lost: str | None = None
        self._renewed_at = 0.0
        #: The store did not answer the last renewal.
        self._unanswered = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _body(self) -> bytes:
        return json.dumps({"holder": self.holder, "seconds": self.seconds}).encode()

    def acquire(self) -> None:
        """Take the lease, waiting while another holder keeps it (and saying so every
        `WAIT_SAID_EVERY_S`)."""
        started = said = time.monotonic()
        pause = 0.02
        while True:
            sent = time.monotonic()
            try:
                self._etag = self.store.put_if(self.key, self._body(), etag=None)
                break
            except PreconditionFailed:
                pass
            sent = time.monotonic()
            if self._take_over_expired():
                break
            waited = time.monotonic() - started
            if waited > self.wait_s:
                raise LeaseError(
                    f"{self.name}: held by {self._holder_now()} for longer than "
                    f"{self.wait_s:.0f} s "
                    "(WAREHOUSE_LEASE_WAIT_SECONDS); a lease of a dead holder expires after "
                    f"{self.seconds:.0f} s, so its holder is alive and still writing"
                )
            if time.monotonic() - said >= WAIT_SAID_EVERY_S:
                said = time.monotonic()
                log.warning(
                    "waiting %.0f s for the lease %s, held by %s (it expires %.0f s after its "
                    "holder's last renewal)",
                    waited,
                    self.name,
                    self._holder_now(),
                    self.seconds,
                )
            time.sleep(pause * (0.5 + random.random()))  # noqa: S311 - jitter, not secrecy
            pause = min(pause * 2, 0.5)
        # Counted from before the request: the store's clock starts the lease no earlier.
        self._lost, self._renewed_at, self._unanswered = None, sent, False
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name="lease-renewal", daemon=True)
        self._renewer.start()

    def _take_over_expired(self) -> bool:
        held = self.store.get_held(self.key)
        if held is None:
            return False  # released meanwhile: the next create may win
        # Both times are whole seconds (HTTP dates): the age read may be up to one too many.
        if held.age_s <= _declared_seconds(held.body, self.seconds) + CLOCK_RESOLUTION_S:
            return False
        try:
            self._etag = self.store.put_if(self.key, self._body(), etag=held.etag)
        except (FileNotFoundError, PreconditionFailed):
            return False  # released meanwhile, or another writer took it over first
        return True

    def _holder_now(self) -> str:
        try:
            held = self.store.get_held(self.key)
            found = json.loads(held.body).get("holder") if held else None
        except (OSError, ValueError, AttributeError):
            found = None
        return str(found or "an unknown holder")

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            sent = time.monotonic()
            try:
                renewed = self.store.put_if(self.key, self._body(), etag=self._etag)
            except FileNotFoundError:
                self._lost = "its object was deleted"
                return
            except PreconditionFailed:
                self._lost = "another writer took it over"
                return
            except Exception:
                # Any other failure to renew (the store unreachable, or not answering within
                # its bound) leaves it ours until it expires: `check` says when it has.
                self._unanswered = True
                continue
            self._etag, self._renewed_at = renewed, sent
            self._unanswered = False

    def check(self) -> None:
        """Raise if the lease was lost (taken over, or not renewed for as long as it lives):
        what it guards must not be written any more."""
        if self._lost is None and time.monotonic() - self._renewed_at > self.seconds:
            self._lost = f"not renewed for {self.seconds:.0f} s: the store did not answer"
        if self._lost is not None:
            raise LeaseError(f"{self.name}: lease lost while writing ({self._lost})")

    def release(self) -> None:
        """Give the lease back (unless another writer took it over meanwhile)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        if self._etag is None:
            return
        etag, self._etag = self._etag, None
        if self._unanswered:
            # The store did not answer the last renewal: a removal would wait out its bound
            # too, after the block's own error. The lease expires by itself.
            log.warning(
                "%s: not given back (the store did not answer its renewal); it expires %.0f s "
                "after its last renewal",
                self.name,
                self.seconds,
            )
            return
        # Taken over (ours had expired) or gone: nothing of ours to delete. Any other failure
        # (the store unreachable) must not hide what the block raised: the lease expires.
        try:
            self.store.delete_if(self.key, etag)
        except (PreconditionFailed, FileNotFoundError):
            pass
        except Exception as exc:
            log.warning("%s: not given back (%s); it expires by itself", self.name, exc)


@contextmanager
def held(
    store: LeaseStore, key: str, name: str, *, seconds: float, wait_s: float
) -> Iterator[Lease]:
    """The lease of the object ``key``, for the duration of the block."""
    lease = Lease(store, key, name, seconds=seconds, wait_s=wait_s)
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
