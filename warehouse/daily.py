"""Funding records into daily partitions, in a process of its own beside the walk.

`DailyFunding` takes the records of a funding walk in chunks, newest first (the order the API
lists them), normalizes each chunk (vectorized), splits it by the ``funding_date`` the warehouse
gives each row, and replaces a day's partition as soon as the day is complete: every day but the
oldest in hand is, since the walk is newest first. Memory holds the chunks in flight (at most
`CHUNKS_IN_FLIGHT`) and one unfinished day, whatever the length of the range.

A rewrite never silently loses payments the warehouse already holds: when the exchange lists
fewer of a day's payments than its partition has, it stops and says which are missing
(`FewerRowsRefused`) unless the caller allows it.

`FundingWriter` runs a `DailyFunding` in a child process (``python -m warehouse.daily``), so that
normalizing and writing use a core of their own while the walk keeps the HTTP connections busy,
instead of sharing one GIL with it. Measured on a throttled 1M-row backfill: ~60% of the budget in
one process; ~80-86% with the writer fed through `multiprocessing.connection`; 88-97% as now
(96% in the last `make bench`; the rest of the spread is this noisy VM).
- Chunks go down the pipe as Arrow (IPC) when Arrow holds them exactly (every record exactly the
  funding fields, all strings: `normalize.funding_strings`), else as JSON. The writer reads Arrow
  for nothing: it normalized 1M records in ~2 s from Arrow, ~5.3 s from JSON (parsed back into
  Python objects first). Building the struct costs the walk's process ~0.85 s more than orjson.
- They go through an asyncio pipe transport, so the walk never waits for the writer to read one
  (the writer takes ~0.5-1 s to start); it waits only when `CHUNKS_IN_FLIGHT` are unanswered.
- Each comes back (pickled, through `multiprocessing.connection`) as a `Progress`, or as the error
  the writer raised.
- In the writer, one thread normalizes a chunk while another writes the days of the one before
  (end to end ~25% faster: pyarrow's encoding and the fsyncs leave the GIL).
- The writer runs at a lower priority than the walk: when both want a core, the paced walk keeps
  its pace and the writer catches up from the chunks in hand.
- The writer never holds an API credential: it sees records, not requests.

Kills: a partition is replaced atomically (`parquet`), so a kill of either process leaves each day
old or new. The writer exits when its parent's end of the pipe closes, and checks before each
partition write that its parent is still alive, so a writer orphaned by a SIGKILLed run never
writes after a rerun began (at most the write it was in finishes). A writer that dies makes the
load fail with `WriterDied`, naming how it ended.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import partial
from multiprocessing.connection import Connection
from typing import Any, BinaryIO, Final

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from warehouse import normalize, parquet, schemas
from warehouse.normalize import Batch
from warehouse.parquet import Root
from warehouse.settings import warehouse_root

FUNDING: Final = schemas.FUNDING_HISTORY
#: Chunks sent to the writer and not yet answered: enough that the walk goes on at its pace while
#: the writer starts (~0.5-1 s) or lags, few enough to keep memory flat (~1 MB of JSON each).
CHUNKS_IN_FLIGHT: Final = 16
#: How the writer process is started (the kill tests start it through their own hooks).
WRITER_COMMAND: list[str] = [sys.executable, "-m", "warehouse.daily"]
#: Environment variables the writer is not given (``WHITEBIT_API_KEY``, ``WHITEBIT_API_SECRET``).
WITHHELD_ENV_PREFIX: Final = "WHITEBIT_API_"
#: Reasons of rejected records reported back per day (the rest are in `_rejects`).
REASONS_PER_DAY: Final = 5
#: Seconds a writer gets to finish the chunk in hand after the load ends, before it is killed.
WRITER_EXIT_TIMEOUT_S: Final = 120.0
#: How much lower the writer's scheduling priority is than the walk's (see `main`).
WRITER_NICENESS: Final = 5
#: A message down the pipe: its kind (one byte) and its body's length, then the body. Framed by
#: hand: `multiprocessing.connection` would block the event loop, and asyncio has no framing.
_HEADER: Final = "!cQ"
_START, _TAKE, _FINISH = b"s", b"t", b"f"


class FewerRowsRefused(RuntimeError):
    """The exchange lists fewer of a day's funding payments than the warehouse holds."""


class DayOrderError(RuntimeError):
    """Funding records that do not come newest day first, as the walk must deliver them."""


class WriterDied(RuntimeError):
    """The writer process ended without saying why (killed, or out of memory)."""


@dataclass(frozen=True, slots=True)
class DayWrite:
    """One day's partition, replaced."""

    day: date
    rows: int
    rejected: int
    #: The first reasons of the day's rejects (at most `REASONS_PER_DAY`).
    reasons: tuple[str, ...] = ()

    @classmethod
    def of(cls, day: date, rows: pa.Table, rejects: pa.Table) -> DayWrite:
        reasons = rejects["reason"].slice(0, REASONS_PER_DAY).to_pylist()
        return cls(day, rows.num_rows, rejects.num_rows, tuple(reasons))


@dataclass(slots=True)
class Progress:
    """What one chunk (or the end of the walk) did: records taken, days written."""

    received: int = 0
    duplicates: int = 0
    days: list[DayWrite] = field(default_factory=list)


@dataclass(slots=True)
class _Day:
    """Rows and rejects of one day, gathered across chunks until the day is complete."""

    rows: list[pa.Table] = field(default_factory=list)
    rejects: list[pa.Table] = field(default_factory=list)

    def tables(self) -> tuple[pa.Table, pa.Table]:
        rows = pa.concat_tables(self.rows) if self.rows else FUNDING.arrow_schema.empty_table()
        rejects = (
            pa.concat_tables(self.rejects)
            if self.rejects
            else schemas.REJECTS_TABLE.arrow_schema.empty_table()
        )
        return rows, rejects


def _by_day(batch: Batch) -> dict[date, _Day]:
    """A batch's rows and rejects, by the day each belongs to."""
    days: dict[date, _Day] = {}
    if batch.rows.num_rows:
        column = batch.rows["funding_date"]
        for day in pc.unique(column).to_pylist():
            rows = batch.rows.filter(pc.equal(column, pa.scalar(day, schemas.DAY)))
            days.setdefault(day, _Day()).rows.append(rows)
    if batch.rejects.num_rows:
        column = batch.rejects["partition"]
        for text in pc.unique(column).to_pylist():
            rejects = batch.rejects.filter(pc.equal(column, text))
            days.setdefault(date.fromisoformat(text), _Day()).rejects.append(rejects)
    return days


def _missing_keys(root: Root, day: date, rows: pa.Table) -> list[tuple[object, ...]]:
    """Keys the day's partition holds now that ``rows`` no longer has."""
    key = [k for k in FUNDING.key if k not in FUNDING.partition_columns]
    existing = parquet.read_partition(root, FUNDING.name, day, columns=key)
    if existing is None or existing.num_rows == 0:
        return []
    new = set(zip(*(rows[k].to_pylist() for k in key), strict=True))
    held = zip(*(existing[k].to_pylist() for k in key), strict=True)
    return [k for k in held if k not in new]


class DailyFunding:
    """Replaces the funding partition of each day of ``days`` from a newest-first stream of
    records (see the module's text). `take` and `finish` normalize and check at once, and
    return what writes the days they completed; every day of ``days`` is replaced once all of
    those have run, emptied when the exchange held nothing for it (unless the warehouse held
    payments there: see `FewerRowsRefused`)."""

    def __init__(
        self,
        root: Root,
        *,
        days: Sequence[date],
        extracted_at: datetime,
        allow_fewer_rows: bool = False,
        parent: int | None = None,
    ) -> None:
        if not days:
            raise ValueError("no day to load")
        self._root = warehouse_root(root)
        self._days = sorted(days)
        self._wanted = set(self._days)
        self._extracted_at = extracted_at
        self._allow_fewer_rows = allow_fewer_rows
        self._parent = parent
        self._finished: set[date] = set()
        self._held: tuple[date, _Day] | None = None
        # Unreadable times before any readable one go to the range's newest day.
        self._current = self._days[-1]
        self._stopped = threading.Event()

    def take(self, records: list[Any]) -> Callable[[], Progress]:
        """Normalize a chunk of records; what writes every day it completes (call it: the writer
        process calls it on its partition thread, while it normalizes the next chunk)."""
        progress, due = Progress(), list[tuple[date, _Day]]()
        batch = normalize.normalize_funding_history(
            records, extracted_at=self._extracted_at, partition_for_rejects=self._current
        )
        progress.received, progress.duplicates = batch.received, batch.duplicates
        parts = _by_day(batch)
        again = self._finished & set(parts)
        if again:
            raise DayOrderError(
                f"funding history came out of order: {min(again)} began again after it was written"
            )
        if self._held is not None:
            day, gathered = self._held
            if day in parts:
                more = parts.pop(day)
                gathered.rows += more.rows
                gathered.rejects += more.rejects
            if parts and max(parts) > day:
                raise DayOrderError(f"funding history came out of order: after {day}, {max(parts)}")
            if parts:  # older days began: the held day is complete
                due.append(self._complete(day, gathered))
                self._held = None
        ordered = sorted(parts, reverse=True)
        due += [self._complete(day, parts[day]) for day in ordered[:-1]]
        if ordered:
            self._held = (ordered[-1], parts[ordered[-1]])
        if self._held is not None:
            self._current = self._held[0]
        return partial(self._write, due, progress)

    def finish(self) -> Callable[[], Progress]:
        """What writes the day in hand, and empties every day of the range the walk had nothing
        for."""
        due = []
        if self._held is not None:
            due.append(self._complete(*self._held))
            self._held = None
        due += [self._complete(day, _Day()) for day in self._days if day not in self._finished]
        return partial(self._write, due, Progress())

    def _complete(self, day: date, gathered: _Day) -> tuple[date, _Day]:
        if day not in self._wanted:
            raise DayOrderError(
                f"funding history: a record of {day} came with the window {self._days[0]} .. "
                f"{self._days[-1]}; its time was read differently from its neighbours'"
            )
        self._finished.add(day)
        return day, gathered

    def stop(self) -> None:
        """Write no partition more (the load was abandoned): the one being written finishes."""
        self._stopped.set()

    def _write(self, due: list[tuple[date, _Day]], progress: Progress) -> Progress:
        for day, gathered in due:
            self._write_day(day, gathered, progress)
        return progress

    def _write_day(self, day: date, gathered: _Day, progress: Progress) -> None:
        rows, rejects = gathered.tables()
        missing = [] if self._allow_fewer_rows else _missing_keys(self._root, day, rows)
        if missing:
            # A payment listed in a shape the warehouse refuses is missing from the rows too.
            rejected = (
                f" {rejects.num_rows} record(s) of that day were rejected (first: "
                f"{rejects['reason'][0].as_py()}): the missing ones may be among them."
                if rejects.num_rows
                else ""
            )
            raise FewerRowsRefused(
                f"funding_history {day}: the exchange no longer lists {len(missing)} payment(s) "
                f"the warehouse holds for that day (first: {missing[0]}); the partition is left "
                f"as it was.{rejected} If the exchange really removed them, rerun with "
                "allow_fewer_rows."
            )
        if self._stopped.is_set() or (self._parent is not None and os.getppid() != self._parent):
            os._exit(3)  # abandoned or orphaned: the run that started it is gone; write no more
        parquet.replace_partition(self._root, FUNDING.name, day, rows, rejects=rejects)
        progress.days.append(DayWrite.of(day, rows, rejects))


# --- The writer process ---------------------------------------------------------------------


class FundingWriter:
    """A `DailyFunding` in a child process, fed from an event loop without blocking it.

    Use as an async context manager; `take` each chunk, then `finish`. Each returns the
    `Progress` replies that arrived meanwhile, in order. Chunks go down through an asyncio pipe
    transport, so the walk never waits for the writer to read one (it waits only when
    `CHUNKS_IN_FLIGHT` are unanswered). Leaving the context closes the pipe (on an error,
    dropping chunks the writer has not read) and waits for the writer to end, so nothing is
    written after it.
    """

    def __init__(
        self,
        root: Root,
        *,
        days: Sequence[date],
        extracted_at: datetime,
        allow_fewer_rows: bool = False,
    ) -> None:
        self._start = {
            "root": str(warehouse_root(root)),
            "days": list(days),
            "extracted_at": extracted_at,
            "allow_fewer_rows": allow_fewer_rows,
            "parent": os.getpid(),
        }
        self._process: subprocess.Popen[bytes] | None = None
        self._down: asyncio.WriteTransport | None = None
        self._up: Connection | None = None
        self._in_flight = 0

    async def __aenter__(self) -> FundingWriter:
        down_w = await asyncio.to_thread(self._spawn)
        try:
            transport, _ = await asyncio.get_running_loop().connect_write_pipe(
                asyncio.Protocol, os.fdopen(down_w, "wb", buffering=0)
            )
        except BaseException:
            os.close(down_w)
            await asyncio.to_thread(self._close)
            raise
        assert isinstance(transport, asyncio.WriteTransport)
        self._down = transport
        self._post(_START, orjson.dumps(self._start))
        return self

    def _spawn(self) -> int:
        """Start the writer; the write end of the pipe down to it."""
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        try:
            self._process = subprocess.Popen(  # noqa: S603 - our interpreter and module
                [*WRITER_COMMAND, str(down_r), str(up_w)],
                pass_fds=(down_r, up_w),
                # It writes records; it has no use for the exchange's credentials.
                env={k: v for k, v in os.environ.items() if not k.startswith(WITHHELD_ENV_PREFIX)},
            )
        except BaseException:
            os.close(down_w)
            os.close(up_r)
            raise
        finally:
            os.close(down_r)
            os.close(up_w)
        self._up = Connection(up_r, writable=False)
        return down_w

    async def __aexit__(self, error: type[BaseException] | None, *_: object) -> None:
        # A pipe the writer closed (it ended) is closed on this side already.
        if self._down is not None and not self._down.is_closing():
            if error is None:
                self._down.close()  # all is answered: nothing is left to send
            else:
                self._down.abort()  # chunks the writer has not read are dropped
        await asyncio.to_thread(self._close)

    async def take(self, records: list[Any]) -> list[Progress]:
        replies = await self._replies(until=CHUNKS_IN_FLIGHT - 1)
        self._post(_TAKE, orjson.dumps(records))
        return replies

    async def finish(self) -> list[Progress]:
        self._post(_FINISH, b"")
        return await self._replies(until=0)

    def _post(self, kind: bytes, body: bytes) -> None:
        """Queue one message (kind, length, body); the event loop writes it as the pipe drains."""
        assert self._down is not None
        self._down.writelines([struct.pack(_HEADER, kind, len(body)), body])
        if kind != _START:
            self._in_flight += 1

    async def _replies(self, *, until: int) -> list[Progress]:
        """Replies already in the pipe, and more until at most ``until`` chunks are unanswered."""
        assert self._up is not None
        replies = []
        # A poll that finds the pipe ready finds a reply, or the end of a writer that died.
        while self._in_flight > until or (self._in_flight and self._up.poll()):
            replies.append(await self._reply())
        return replies

    async def _reply(self) -> Progress:
        assert self._up is not None
        try:
            # A reply already in the pipe is read at once: the hop to a thread and back took
            # ~0.4 s in all of a throttled 1M-row walk, on a busy machine. The writer sends a
            # reply in one piece, so reading it does not block.
            if self._up.poll():
                kind, value = self._up.recv()
            else:
                kind, value = await asyncio.to_thread(self._up.recv)
        except (EOFError, ConnectionResetError):
            raise self._died() from None
        self._in_flight -= 1
        if kind == "error":
            raise value
        assert isinstance(value, Progress)
        return value

    def _died(self) -> WriterDied:
        assert self._process is not None
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        how = (
            "is still running"
            if code is None
            else f"was killed by signal {-code}"
            if code < 0
            else f"exited with status {code}"
        )
        return WriterDied(
            f"the funding writer process (pid {self._process.pid}) {how} before it answered; "
            "days it wrote are whole, the others are as they were: run the range again"
        )

    def _close(self) -> None:
        if self._up is not None:
            self._up.close()
        if self._process is not None:
            try:
                self._process.wait(timeout=WRITER_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


def _messages(down: BinaryIO) -> Iterator[tuple[bytes, bytes]]:
    """The messages from the parent, until its end of the pipe closes (or it dies mid-message)."""
    size = struct.calcsize(_HEADER)
    while len(header := down.read(size)) == size:
        kind, length = struct.unpack(_HEADER, header)
        body = down.read(length)
        if len(body) < length:
            return
        yield kind, body


def _started(start: dict[str, Any]) -> DailyFunding:
    """The writer of a start message (`FundingWriter`'s arguments, as JSON)."""
    return DailyFunding(
        start["root"],
        days=[date.fromisoformat(day) for day in start["days"]],
        extracted_at=datetime.fromisoformat(start["extracted_at"]),
        allow_fewer_rows=start["allow_fewer_rows"],
        parent=start["parent"],
    )


def _serve(down: BinaryIO, up: Connection) -> None:
    """The writer's loop: a start message, chunks, a finish; an error ends it.

    This thread reads and normalizes each chunk; a second one writes its days and then answers
    it, so that a chunk is normalized while the one before is written (pyarrow's encoding and
    the fsyncs leave the GIL). Answers go up in the order of the chunks, each once its days are
    written. A pipe that ends before the finish (the load was abandoned, or its process died)
    stops the writes."""
    writer: DailyFunding | None = None
    failed = threading.Event()

    def answer(reply: tuple[str, object]) -> None:
        try:
            try:
                up.send(reply)
            except (TypeError, AttributeError, pickle.PicklingError):
                up.send(("error", RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}")))
        except (BrokenPipeError, ConnectionResetError):
            failed.set()  # the parent is gone: nobody to tell

    def write(job: Callable[[], Progress]) -> None:
        if failed.is_set():
            return
        try:
            answer(("ok", job()))
        except Exception as exc:  # every error goes back to the parent, whole
            failed.set()
            answer(("error", _noted(exc)))

    with ThreadPoolExecutor(1, thread_name_prefix="funding-partitions") as partitions:
        for kind, body in _messages(down):
            try:
                if kind == _START:
                    writer = _started(orjson.loads(body))
                    continue
                assert writer is not None, "the writer got a chunk before it was started"
                job = writer.finish() if kind == _FINISH else writer.take(orjson.loads(body))
            except Exception as exc:
                # Answered after the chunks before it, which are written first.
                partitions.submit(answer, ("error", _noted(exc)))
                return
            partitions.submit(write, job)
            if kind == _FINISH or failed.is_set():
                return
        # The pipe ended before the finish: write no more (the write in progress finishes).
        if writer is not None:
            writer.stop()


def _noted(exc: Exception) -> Exception:
    exc.add_note("in the funding writer process:\n" + traceback.format_exc().rstrip())
    return exc


def main(argv: list[str]) -> int:
    """``python -m warehouse.daily DOWN_FD UP_FD``: serve one load over these pipe ends."""
    # The walk waits on the exchange's pace and the writer has chunks in hand: when both want
    # the same core, the walk goes first, so it keeps its pace and the writer catches up.
    os.nice(WRITER_NICENESS)
    up = Connection(int(argv[1]), readable=False)
    with open(int(argv[0]), "rb") as down, up:
        _serve(down, up)
    return 0


if __name__ == "__main__":
    # Run the module's own import, not this __main__ copy: what goes up the pipe must unpickle
    # as warehouse.daily's classes.
    from warehouse import daily

    sys.exit(daily.main(sys.argv[1:]))
