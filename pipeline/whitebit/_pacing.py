"""Request pacing to the exchange's rate budgets, shared by every process of the machine.

The exchange counts requests per budget group in any sliding 10-second span, per API key and per
client address, and refuses (never queues) what is over. A pacer lets a small burst through, then
a steady rate a little under the budget, so that the burst plus the rate times the period stays
below the budget whatever span the exchange looks at: it never causes a 429 itself.

Several runs (one process per account) extract from one machine at once, and the exchange counts
them all against the machine's address: so a pacer for an exchange address keeps its state in a
small file, one per address (and set of budgets), that every process of the machine's user shares.
Runs together share each budget; a run alone has all of it.

The algorithm is GCRA (the generic cell rate algorithm) in its reserving form. Per budget group
the file holds one "theoretical arrival time" (TAT), a `time.monotonic` reading (CLOCK_MONOTONIC
on Linux: one clock for every process of the machine). With the emission interval T = 1 / rate
and the tolerance tau = (burst - 1) * T, a request takes the file's lock, reads the TAT, makes it
at least now, stores TAT + T, lets the lock go and waits until TAT - tau. So `burst` requests pass
at once, then one per T, in the order they asked, whichever process asked. Reserving (rather than
waiting, then trying again) costs one locked read and write per request however many wait, wakes
no waiter that another then beats to the slot, and serves the processes in turn; a waiter that is
cancelled leaves its slot unused, which errs on the safe side.

An operation with a budget of its own besides its group's (`spec.Operation.endpoint_budget`: the
deposit and withdrawal history, 200 per 10 s inside main-account's 1000) spends both, and the
exchange refuses it when either is spent. Its request reserves in both cells under one lock, at
the first moment both allow: ``go = max(now, TAT_group - tau_group, TAT_own - tau_own)``, each
TAT then ``max(TAT, go) + T``. Each budget's cell so sees exactly the requests that spend it, at
the moment they go, as one budget's GCRA would; the group's other operations (the main balance)
keep its room, behind the requests already reserved.

No library fits: pyrate-limiter's SQLite bucket writes (and counts) a row per request, its
multiprocess bucket needs one parent process to hold it, and `limits` shares state only through a
server (Redis, Memcached, MongoDB).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import heapq
import os
import stat
import struct
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pipeline import spec

from ._config import PACING_BURST, PACING_HEADROOM

#: One TAT: a float64 in the machine's byte order, at 8 * the group's place in sorted order.
_TAT = struct.Struct("=d")
#: Changes whenever the file's layout or meaning does, so that an old file is never misread.
_FORMAT = "gcra-1"
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Seconds between looks at whether the file is still in its directory.
_LOOK_AGAIN_S = 1.0
#: Budget periods past which a stored TAT is no waiter's (see `Pacer._cell`).
_STALE_PERIODS = 10


@dataclass(frozen=True, slots=True)
class _Cell:
    """One budget group's place in the file and its GCRA parameters, in seconds."""

    offset: int
    interval: float  # T: one request per this, once the burst is spent
    tolerance: float  # tau: how far ahead of now the TAT may be for a request to pass at once
    stale_after: float  # a TAT further ahead than this is not one this machine's requests made


class Pacer:
    """Paces requests to each budget group of `spec` (or the budgets given instead).

    All clients that share a pacer share its budgets. A pacer made with an ``origin`` (an exchange
    address) shares them with every pacer of the machine's user for the same origin and the same
    budgets, headroom and burst, in any process, through a file in ``directory`` (by default
    ``$WHITEBIT_PACING_DIR``, else ``whitebit-pacing-<uid>`` in the system's temporary directory);
    without one, the pacer is its own. `Pacer.shared` is the one every client of an address uses.
    """

    def __init__(
        self,
        budgets: Iterable[spec.RateBudget] = (),
        *,
        headroom: float = PACING_HEADROOM,
        burst: int = PACING_BURST,
        origin: str | None = None,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        if not 0 < headroom <= 1:
            raise ValueError(f"pacing headroom must be within (0, 1], not {headroom}")
        if burst < 1:
            raise ValueError(f"pacing burst must be at least 1, not {burst}")
        self._budgets = {op.budget.group: op.budget for op in spec.OPERATIONS}
        self._budgets.update(
            {
                op.endpoint_budget.group: op.endpoint_budget
                for op in spec.OPERATIONS
                if op.endpoint_budget
            }
        )
        self._budgets.update({b.group: b for b in budgets})
        self.headroom = headroom
        self.burst = burst
        self._cells = {
            group: self._cell(place, self._budgets[group])
            for place, group in enumerate(sorted(self._budgets))
        }
        #: The exchange address whose budgets this pacer shares, as ``scheme://host:port``.
        self.origin = None if origin is None else canonical_origin(origin)
        #: The file that holds the shared state; None for a pacer of its own.
        self.path: Path | None = None
        self._named_directory = directory is not None
        if self.origin is not None:
            self.path = pacing_directory(directory) / self._file_name(self.origin)
        self._lock = threading.Lock()  # the file lock is the process's: threads need their own
        self._fd = -1
        self._forks = -1  # `_forks` when the file was opened: a forked child opens its own
        self._look_again_at = 0.0  # when to see whether the file is still the directory's
        self._closer: weakref.finalize[[int], Pacer] | None = None
        #: Per set of groups an operation spends, the moments cancelled waiters of this process
        #: gave back (a heap of times).
        self._returned: dict[tuple[str, ...], list[float]] = {}

    def budget(self, operation: spec.Operation) -> spec.RateBudget:
        """The group's budget this pacer holds the operation to."""
        return self._budgets[operation.budget.group]

    def budgets(self, operation: spec.Operation) -> tuple[spec.RateBudget, ...]:
        """Every budget the operation spends: its group's, then its own if it has one."""
        return tuple(self._budgets[group] for group in _groups(operation))

    def burst_of(self, operation: spec.Operation) -> int:
        """The burst, smaller for a small budget: at most half of what the headroom leaves (of
        the smaller, for an operation that spends two)."""
        return min(self._burst(b) for b in self.budgets(operation))

    def rate(self, operation: spec.Operation) -> float:
        """Requests per second once the burst is spent: the headroom's share of what the burst
        leaves, so that burst + rate * period stays under the budget with room for requests
        that arrive later than they left (the slower, for an operation that spends two)."""
        return min(self._rate(b) for b in self.budgets(operation))

    async def acquire(self, operation: spec.Operation) -> None:
        """Wait until every budget the operation spends allows one more request.

        A waiter cancelled before its turn (a walk drops the pages it fetched ahead once a
        slice ends) hands its moment to the process's next waiter of the same budgets, so that
        prefetching costs no budget: without it, an investments walk used 80% of its budget, not
        97%."""
        groups = _groups(operation)
        cells = [self._cells[group] for group in groups]
        go = self._given_back(groups, min(cell.tolerance for cell in cells))
        if go is None:
            go = self._reserve(cells)
        wait = go - time.monotonic()
        if wait > 0:
            try:
                await asyncio.sleep(wait)
            except asyncio.CancelledError:
                with self._lock:
                    heapq.heappush(self._returned.setdefault(groups, []), go)
                raise

    def _given_back(self, groups: tuple[str, ...], tolerance: float) -> float | None:
        """The earliest moment a cancelled waiter gave back that is still ahead (within the
        burst's tolerance); None without one. One further past is dropped: taking it now would
        crowd the present."""
        now = time.monotonic()
        with self._lock:
            returned = self._returned.get(groups)
            while returned:
                go = heapq.heappop(returned)
                if go + tolerance >= now:
                    return go
        return None

    def __repr__(self) -> str:
        return (
            f"Pacer(origin={self.origin!r}, headroom={self.headroom}, burst={self.burst}, "
            f"groups={sorted(self._budgets)})"
        )

    @classmethod
    def shared(cls, origin: str, *, directory: str | os.PathLike[str] | None = None) -> Pacer:
        """The pacer for one exchange address, with the spec's budgets: one per process (and
        pacing directory), and its budgets shared with every process of the machine."""
        key = (origin, os.fspath(directory) if directory is not None else "")
        pacer = _SHARED.get(key)
        if pacer is None:
            pacer = _SHARED[key] = cls(origin=origin, directory=directory)
        return pacer

    # --- the budgets' arithmetic -------------------------------------------------------------

    def _burst(self, budget: spec.RateBudget) -> int:
        spare = budget.requests * (1 - self.headroom) / 2
        return max(1, min(self.burst, int(spare)))

    def _rate(self, budget: spec.RateBudget) -> float:
        return self.headroom * max(budget.requests - self._burst(budget), 1) / budget.period_s

    def _cell(self, place: int, budget: spec.RateBudget) -> _Cell:
        interval = 1 / self._rate(budget)
        tolerance = (self._burst(budget) - 1) * interval
        # Only more waiters than ten budgets' worth could reserve further ahead (a machine's runs,
        # 32 requests in flight each, can reach a small budget's worth): such a TAT was stored
        # before the machine restarted (the clock starts again) or is not one.
        stale_after = tolerance + interval + _STALE_PERIODS * budget.period_s
        return _Cell(_TAT.size * place, interval, tolerance, stale_after)

    def _file_name(self, origin: str) -> str:
        """The origin's hash, then the budgets': pacers of other budgets never share a file."""
        budgets = ";".join(
            f"{b.group}={b.requests}/{b.period_s!r}" for _, b in sorted(self._budgets.items())
        )
        terms = f"{_FORMAT}|{origin}|{self.headroom!r}|{self.burst}|{budgets}"
        return f"{_digest(origin)[:16]}-{_digest(terms)[:12]}.pacing"

    # --- the shared state --------------------------------------------------------------------

    def _reserve(self, cells: list[_Cell]) -> float:
        """Take the next slot of every one of the cells' groups at once: the first moment
        (``time.monotonic``) all of them allow, at which the request may go."""
        with self._lock:
            fd = self._fd
            if self._forks != _forks or time.monotonic() >= self._look_again_at:
                fd = self._current_file()
            # Held for a few microseconds (a read and a write per cell), so a blocking lock is
            # fine even in async code: the event loop waits no longer than for any system call.
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = time.monotonic()
                tats = []
                for cell in cells:
                    stored = os.pread(fd, _TAT.size, cell.offset)
                    tat = _TAT.unpack(stored)[0] if len(stored) == _TAT.size else now
                    if not now <= tat <= now + cell.stale_after:  # behind, stale, or not a number
                        tat = now
                    tats.append(tat)
                go = max(
                    now, *(tat - cell.tolerance for tat, cell in zip(tats, cells, strict=True))
                )
                for tat, cell in zip(tats, cells, strict=True):
                    os.pwrite(fd, _TAT.pack(max(tat, go) + cell.interval), cell.offset)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        return go

    def _current_file(self) -> int:
        """The file, opened again when this process was forked from the one that opened it (the
        child's copy shares the parent's lock), or when it is no longer in its directory (the
        temporary directory's cleaner took it, or a person did): the other processes have moved
        on to a new one."""
        self._look_again_at = time.monotonic() + _LOOK_AGAIN_S
        if self._forks == _forks and (self.path is None or os.fstat(self._fd).st_nlink > 0):
            return self._fd
        return self._open()

    def _open(self) -> int:
        if self._closer is not None:
            self._closer()  # the parent's, or a file no longer there (one of its own: afresh)
        if self.path is None:
            fd, name = tempfile.mkstemp(prefix="whitebit-pacing-")
            os.unlink(name)
        else:
            _make_directory(self.path.parent, check_owner=not self._named_directory)
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.path, flags, 0o600)
        self._fd, self._forks = fd, _forks
        self._closer = weakref.finalize(self, os.close, fd)
        return fd


def _groups(operation: spec.Operation) -> tuple[str, ...]:
    """The budget groups a request of the operation spends: its group's, and its own."""
    own = operation.endpoint_budget
    return (operation.budget.group,) if own is None else (operation.budget.group, own.group)


def pacing_directory(directory: str | os.PathLike[str] | None = None) -> Path:
    """Where shared pacers keep their files: ``directory`` (the settings' pacing directory),
    else ``whitebit-pacing-<uid>`` in the system's temporary directory (one per user, so that no
    user paces, or can stall, another's)."""
    if directory is not None:
        return Path(directory)
    return Path(tempfile.gettempdir()) / f"whitebit-pacing-{os.getuid()}"


def canonical_origin(origin: str) -> str:
    """``scheme://host:port`` of an address, the port spelled out: one file per exchange."""
    parts = urlsplit(origin)
    scheme, host = parts.scheme.lower(), parts.hostname
    if not scheme or not host:
        raise ValueError(f"not an exchange address (scheme://host[:port]): {origin!r}")
    port = parts.port or _DEFAULT_PORTS.get(scheme)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}"


def _make_directory(directory: Path, *, check_owner: bool) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if check_owner:
        # In a temporary directory anyone may have made it first, to stall or misdirect us.
        status = os.lstat(directory)
        if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid():
            raise PermissionError(
                f"{directory} is not a directory of this user's; "
                "set WHITEBIT_PACING_DIR to one that is"
            )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)

_SHARED: dict[tuple[str, str], Pacer] = {}
