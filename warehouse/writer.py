"""A `MonthlyLoad` in a process of its own beside the walk: `HistoryWriter`.

Normalizing and writing use a core of their own while the walk keeps the HTTP connections busy,
instead of sharing one GIL with it:

- The child is forked from a host process, ``python -m warehouse.writer``, started once per
  process that loads: a fresh interpreter per load spent about a second of CPU importing pandas,
  pyarrow and DuckDB before its first row, more than a small load takes to write. The host and
  each writer get an explicit environment, without the exchange's credentials (the caller names
  them; a writer takes its load's from its start message): the writer sees records, never a
  credential. It is written here because multiprocessing's forkserver would import the parent's
  main module again in each child (the command line, Dagster with it) and hand it the parent's
  environment.
- Parent and child talk over two one-way pipes, each end a `multiprocessing.connection.Connection`:
  chunks go down as JSON (the records as the client parsed them), each answered back in order
  with a `Progress`, or with the error the writer raised (pickled, with its note). A number the
  client read exactly (a `Decimal`: a time to the microsecond) goes down as its own digits and is
  read back as the same `Decimal` in a history whose records hold such numbers
  (`spec.History.exact_numbers`), never through a float (`encode`, `decode`).
- The walk waits only when `CHUNKS_IN_FLIGHT` chunks are unanswered.

Kills: a partition is replaced atomically (`parquet`), so a kill of either process leaves each day
old or new. The writer stops when its parent's end of the pipe closes before the finish (the load
was abandoned, or its process died), and a writer orphaned by a SIGKILLed run writes nothing more
(`MonthlyLoad`'s parent check): the process ends with `ABANDONED_EXIT_STATUS`. A writer that
dies makes the load fail with `WriterDied`, naming how it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import queue
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any, BinaryIO, Final

import msgspec
import orjson

from warehouse.errors import WarehouseError
from warehouse.monthly import LoadAbandoned, MonthlyLoad, MonthlyTarget, Progress

#: Chunks sent to the writer and not yet answered: enough that the walk goes on at its pace while
#: the writer starts or lags, few enough to keep memory flat.
CHUNKS_IN_FLIGHT: Final = 16
#: How the host of the writer processes is started (the kill tests start it through their own
#: hooks): it forks one writer per load.
WRITER_COMMAND: list[str] = [sys.executable, "-m", "warehouse.writer"]
#: Seconds a writer gets to finish the chunk in hand after the load ends, before it is killed.
WRITER_EXIT_TIMEOUT_S: Final = 120.0
#: The writer's exit status when the load was abandoned before its finish.
ABANDONED_EXIT_STATUS: Final = 3
#: Messages down the pipe, each a JSON array ``[kind, body]``.
_START, _TAKE, _FINISH = "start", "take", "finish"


#: A `Decimal` written as the JSON number of its own digits in C, without a Python call per value
#: (a fill's time). The records come from a JSON parser, so every `Decimal` is finite, every
#: string valid Unicode; an integer past 64 bits goes down whole, for the writer to reject.
_ENCODER: Final = msgspec.json.Encoder(decimal_format="number")


def encode(message: object) -> bytes:
    """A message down the pipe, as JSON; a `Decimal` as the JSON number of its own digits."""
    return _ENCODER.encode(message)


#: Every number with a fraction a `Decimal` of the digits sent (orjson reads them as floats);
#: msgspec's parser, at twice the standard library's speed with ``parse_float=Decimal``.
_EXACT: Final = msgspec.json.Decoder(float_hook=Decimal)


def decode(payload: bytes, *, exact: bool) -> Any:
    """A message from the pipe; with ``exact``, every number with a fraction a `Decimal` of the
    digits sent."""
    return _EXACT.decode(payload) if exact else orjson.loads(payload)


class WriterDied(WarehouseError):
    """The writer process ended without saying why (killed, or out of memory)."""


#: A reply from the writer, or None: the writer ended (its end of the pipe closed).
_Reply = tuple[str, object] | None


class HistoryWriter:
    """A `MonthlyLoad` in a child process, fed from an event loop without blocking it.

    Use as an async context manager; `take` each chunk, then `finish`. Each returns the
    `Progress` replies that arrived meanwhile, in order, and raises the error the writer raised
    (with its note), or `WriterDied`. Leaving the context closes the pipe (on an error, dropping
    chunks not yet sent, so that the writer stops) and waits for the writer to end, so nothing
    is written after it.
    """

    def __init__(self, target: MonthlyTarget, *, environ: Mapping[str, str]) -> None:
        self._environ = dict(environ)
        self._target = target.as_json()
        self._process: _Forked | None = None
        self._down: Connection | None = None
        self._up: Connection | None = None
        self._in_flight = 0
        # Connection's send and recv block: a thread each keeps the event loop free.
        self._sender = ThreadPoolExecutor(1, thread_name_prefix="writer-chunks")
        self._reader: threading.Thread | None = None
        self._replies: asyncio.Queue[_Reply] = asyncio.Queue()

    @property
    def exit_status(self) -> int | None:
        """How the writer process ended (negative: the signal that killed it); None while it
        runs."""
        return None if self._process is None else self._process.returncode

    async def __aenter__(self) -> HistoryWriter:
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._spawn)
        self._reader = threading.Thread(
            target=self._read_replies, args=(loop,), name="writer-replies", daemon=True
        )
        self._reader.start()
        assert self._process is not None
        # A writer whose host is gone (its load's process died) writes nothing more.
        self._send(
            [
                _START,
                {"target": self._target, "parent": self._process.host_pid, "env": self._environ},
            ]
        )
        return self

    def _spawn(self) -> None:
        down_r, down_w = Pipe(duplex=False)
        up_r, up_w = Pipe(duplex=False)
        try:
            self._process = _host(self._environ).fork(down_r.fileno(), up_w.fileno())
        except BaseException:
            down_w.close()
            up_r.close()
            raise
        finally:
            down_r.close()
            up_w.close()
        self._down, self._up = down_w, up_r

    async def __aexit__(self, error: type[BaseException] | None, *_: object) -> None:
        await asyncio.to_thread(self._close, abandoned=error is not None)

    async def take(self, records: list[Any] | dict[str, list[Any]]) -> list[Progress]:
        """Send a chunk of records (JSON values, as the client parsed them: a list, or lists by
        owner) once fewer than `CHUNKS_IN_FLIGHT` are unanswered; the replies that came
        meanwhile."""
        replies = await self._collect(until=CHUNKS_IN_FLIGHT - 1)
        self._send([_TAKE, records])
        self._in_flight += 1
        return replies

    async def finish(self) -> list[Progress]:
        """Have the writer write the month in hand and empty the days the walk had nothing for;
        every reply still due."""
        self._send([_FINISH, None])
        self._in_flight += 1
        return await self._collect(until=0)

    def _send(self, message: list[object]) -> None:
        """Queue one message; the sender thread writes it into the pipe, in order."""
        self._sender.submit(self._deliver, encode(message))

    def _deliver(self, payload: bytes) -> None:
        assert self._down is not None
        # A writer that ended cannot take it: the reply thread sees its end and says how.
        with contextlib.suppress(OSError):
            self._down.send_bytes(payload)

    def _read_replies(self, loop: asyncio.AbstractEventLoop) -> None:
        """The reply thread: every reply, then None once the writer's end closes."""
        assert self._up is not None
        while True:
            reply: _Reply
            try:
                reply = self._up.recv()
            except (EOFError, OSError):
                reply = None
            except Exception as exc:  # a reply that does not unpickle is the writer's error
                reply = ("error", exc)
            try:
                loop.call_soon_threadsafe(self._replies.put_nowait, reply)
            except RuntimeError:  # the event loop is closed: nobody waits for replies
                return
            if reply is None:
                return

    async def _collect(self, *, until: int) -> list[Progress]:
        """Replies already in, and more until at most ``until`` chunks are unanswered."""
        replies = []
        # With nothing unanswered, the queue holds at most the writer's end (after the finish).
        while self._in_flight and (self._in_flight > until or not self._replies.empty()):
            reply = await self._replies.get()
            if reply is None:
                raise await asyncio.to_thread(self._died)
            kind, value = reply
            self._in_flight -= 1
            if kind == "error":
                assert isinstance(value, BaseException)
                raise value
            assert isinstance(value, Progress)
            replies.append(value)
        return replies

    def _died(self) -> WriterDied:
        assert self._process is not None
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return WriterDied(
            f"the writer process (pid {self._process.pid}) {_how(code)} before it answered; "
            "days it wrote are whole, the others are as they were: run the range again"
        )

    def _close(self, *, abandoned: bool) -> None:
        if abandoned and self._process is not None and self._process.poll() is None:
            # Chunks still in the pipe are not written: the writer stops after the one in hand
            # (and reads the one being sent, so the sender is not held on a full pipe).
            with contextlib.suppress(ProcessLookupError):
                self._process.terminate()
        # On an error, chunks not yet sent are dropped; the one being sent goes in whole.
        self._sender.shutdown(wait=True, cancel_futures=abandoned)
        if self._down is not None:
            # The writer sees the end: after the finish it has ended already, else it stops.
            self._down.close()
        if self._process is not None:
            try:
                self._process.wait(timeout=WRITER_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._reader is not None:
            self._reader.join()
        if self._up is not None:
            self._up.close()


# --- The host, as its callers see it ----------------------------------------------------------

#: The host's notes to its caller, each `_NOTE` packed: ``b"P"`` and the pid of the writer it
#: forked, in the order asked; ``b"X"``, a writer's pid and how it ended (`subprocess`'s
#: returncode: negative, the signal that killed it).
_NOTE: Final = struct.Struct("!cxxxii")
#: A caller's asks: a writer over the two pipe ends sent with it; or retire (fork no more, and
#: end once the writers forked have ended). An end of the socket without ``retire``: the caller
#: died, and the host ends at once, so its writers (orphaned) write nothing more.
_FORK, _RETIRE = b"f", b"r"


class _Forked:
    """A writer forked by a host: `subprocess.Popen`'s ways of waiting for and ending it."""

    def __init__(self, pid: int, host: _Host) -> None:
        self.pid = pid
        self.host_pid = host.pid
        self.returncode: int | None = None
        self._ended = threading.Event()

    def ended(self, returncode: int | None) -> None:
        """Said by the host's reader: how it ended (None: unknown, the host is gone)."""
        self.returncode = returncode
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"writer {self.pid}", timeout or 0.0)
        return self.returncode

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if not self._ended.is_set():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


class _Host:
    """A host process and the thread that reads its notes."""

    def __init__(self, command: list[str], environ: dict[str, str]) -> None:
        self.command, self.owner = command, os.getpid()
        ours, theirs = socket.socketpair()
        # Born with SIGTERM blocked, and so is each writer it forks, which takes one sent before
        # its handler is in place once it is (`_write_one`): an abandoned load's writer stops
        # after the chunk in hand.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            self.process = subprocess.Popen(  # noqa: S603 - our interpreter and module
                [*command, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                # It writes records; it has no use for the exchange's credentials.
                env=environ,
                # Ctrl-C in a terminal signals its whole process group: stopping is the parent's
                # to decide, and a writer stops when the parent closes its pipe.
                process_group=0,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            theirs.close()
        self.pid = self.process.pid
        self._socket = ours
        self._asking = threading.Lock()
        self._forked: queue.SimpleQueue[_Forked | None] = queue.SimpleQueue()
        self._writers: dict[int, _Forked] = {}
        self._gone = False
        threading.Thread(target=self._read_notes, name="writer-host", daemon=True).start()

    def fork(self, down: int, up: int) -> _Forked:
        """A writer over these pipe ends (the caller closes its own); `WriterDied` when the host
        ended instead."""
        with self._asking:
            # A host that is gone cannot take it: the reader has said so, or will.
            with contextlib.suppress(OSError):
                socket.send_fds(self._socket, [_FORK], [down, up])
            forked = self._forked.get()
            if forked is None:
                self._forked.put(None)  # for the next ask, which a gone host cannot answer
                raise _host_died(self.process)
            return forked

    def retire(self) -> None:
        """Fork no more; the host ends once its writers have."""
        with contextlib.suppress(OSError):
            self._socket.sendall(_RETIRE)
        self._socket.close()

    def _read_notes(self) -> None:
        stream = self._socket.makefile("rb")
        for note in iter(lambda: _read_note(stream), None):
            kind, pid, returncode = _NOTE.unpack(note)
            if kind == b"P":
                self._writers[pid] = _Forked(pid, self)
                self._forked.put(self._writers[pid])
            elif (forked := self._writers.pop(pid, None)) is not None:
                forked.ended(returncode)
        # The host is gone: its writers' ends are unknown, and it forks no more.
        self._gone = True
        for forked in self._writers.values():
            forked.ended(None)
        self._forked.put(None)

    @property
    def usable(self) -> bool:
        return not self._gone and self.owner == os.getpid()


def _read_note(stream: BinaryIO) -> bytes | None:
    """The host's next note; None once it ended (a host that ended with asks unread resets the
    socket)."""
    try:
        note = stream.read(_NOTE.size)
    except OSError:
        return None
    return note if len(note) == _NOTE.size else None


def _host_died(process: subprocess.Popen[bytes]) -> WriterDied:
    try:
        code: int | None = process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        code = None
    return WriterDied(
        f"the writer process (pid {process.pid}) {_how(code)} before it answered; "
        "days it wrote are whole, the others are as they were: run the range again"
    )


def _how(code: int | None) -> str:
    return (
        "is still running"
        if code is None
        else f"was killed by signal {-code}"
        if code < 0
        else f"exited with status {code}"
    )


_HOST: _Host | None = None
_HOST_LOCK: Final = threading.Lock()


def _host(environ: dict[str, str]) -> _Host:
    """This process's host of writers, started (with ``environ``) when there is none, or the one
    there was ended or runs another command (then retired). Each writer takes its own load's
    environment from its start message."""
    global _HOST
    with _HOST_LOCK:
        host = _HOST
        if host is not None and host.usable and host.command == WRITER_COMMAND:
            return host
        if host is not None and host.owner == os.getpid():
            host.retire()
        _HOST = _Host(list(WRITER_COMMAND), environ)
        return _HOST


def _forget_host_after_fork() -> None:
    """In a child forked from a process with a host (a Celery pool process), the copy of its
    socket is closed: the host must see its owner's end when the owner dies."""
    global _HOST
    if _HOST is not None:
        with contextlib.suppress(OSError):
            _HOST._socket.close()
    _HOST = None


os.register_at_fork(after_in_child=_forget_host_after_fork)


# --- The writer process ------------------------------------------------------------------------


def serve(down: Connection, up: Connection) -> None:
    """The writer's loop: a start message, chunks, a finish; an error ends it.

    Each chunk is normalized and its complete months written, then answered, in the order the
    chunks came. Raises `LoadAbandoned` when the pipe ends before the finish (the load was
    abandoned, or its process died): the write in progress finishes, no other begins.
    """
    writer: MonthlyLoad | None = None
    exact = False  # the start message holds no number with a fraction
    while True:
        try:
            kind, body = decode(down.recv_bytes(), exact=exact)
        except EOFError:
            raise LoadAbandoned(
                "the load ended before its finish: no partition more was written"
            ) from None
        if _ABANDONED.is_set():
            raise LoadAbandoned("the load was abandoned: no partition more was written")
        try:
            if kind == _START:
                # The load's own environment (its host's is the first load's of its process).
                os.environ.clear()
                os.environ.update(body["env"])
                writer = MonthlyLoad(MonthlyTarget.of_json(body["target"]), parent=body["parent"])
                exact = writer.target.history.exact_numbers
                continue
            assert writer is not None, "the writer got a chunk before it was started"
            progress = writer.finish() if kind == _FINISH else writer.take(body)
        except Exception as exc:  # every error goes back to the parent, whole
            _answer(up, ("error", _noted(exc)))
            return
        _answer(up, ("ok", progress))
        if kind == _FINISH:
            return


def _answer(up: Connection, reply: tuple[str, object]) -> None:
    try:
        try:
            up.send(reply)
        except (TypeError, AttributeError, pickle.PicklingError):
            up.send(("error", RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}")))
    except OSError:
        pass  # the parent is gone: nobody to tell, and the next read finds the pipe's end


def _noted(exc: Exception) -> Exception:
    exc.add_note("in the writer process:\n" + traceback.format_exc().rstrip())
    return exc


#: Set by SIGTERM: the parent abandoned the load (`HistoryWriter._close`).
_ABANDONED: Final = threading.Event()


def _write_one(down_fd: int, up_fd: int) -> int:
    """A forked writer: serve one load over these pipe ends. Exit status 0, or
    `ABANDONED_EXIT_STATUS` when the load ended before its finish (its pipe closed, or SIGTERM:
    the chunk in hand is written, no other)."""
    signal.signal(signal.SIGTERM, lambda _signum, _frame: _ABANDONED.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    with (
        Connection(down_fd, writable=False) as down,
        Connection(up_fd, readable=False) as up,
    ):
        try:
            serve(down, up)
        except LoadAbandoned:
            return ABANDONED_EXIT_STATUS
    return 0


def main(argv: list[str]) -> int:
    """``python -m warehouse.writer SOCKET_FD``: the host. Forks a writer (`_write_one`) for each
    pair of pipe ends its caller sends over the socket, says each one's pid and, once reaped,
    how it ended. Ends when the caller retires it and its writers have ended, or at once when
    the caller's end closes without it (the caller died: its orphaned writers write nothing
    more)."""
    caller = socket.socket(fileno=int(argv[0]))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
    writers: set[int] = set()
    retired = False
    while writers or not retired:
        ready, _, _ = select.select([wake_r] if retired else [caller.fileno(), wake_r], [], [])
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            while writers and (ended := os.waitpid(-1, os.WNOHANG))[0]:
                writers.discard(ended[0])
                _tell(caller, b"X", ended[0], os.waitstatus_to_exitcode(ended[1]))
        if caller.fileno() in ready:
            ask, fds, _, _ = socket.recv_fds(caller, 1, 2)
            if not ask:
                return 0  # the caller died
            if ask == _RETIRE:
                retired = True
                continue
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (caller.fileno(), wake_r, wake_w):
                        os.close(fd)
                    code = _write_one(*fds)
                except BaseException:  # the writer's own end: the host's loop is not its own
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            for fd in fds:
                os.close(fd)
            writers.add(pid)
            _tell(caller, b"P", pid, 0)
    return 0


def _tell(caller: socket.socket, kind: bytes, pid: int, code: int) -> None:
    with contextlib.suppress(OSError):  # a caller that ended no longer listens
        caller.sendall(_NOTE.pack(kind, pid, code))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
