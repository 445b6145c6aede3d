"""Runs ``whitebit-etl`` and SIGKILLs it at a chosen point: the kill tests' child process.

``python -m tests.reliability.killer POINT --at N [--chunk-records R] -- <whitebit-etl args>``

Inside this process only, the function at POINT is wrapped so that its N-th call kills the
process with SIGKILL (no handler, no cleanup, as the OOM killer or a power cut would), then the
real CLI runs. No product code knows about it. The points:

- ``walk``: the funding walk takes its N-th page (`NewestFirstCursor.read`) after the writer process
  reported its first days written: a month is rewritten by then, the rest still to page.
- ``parquet-mid-file``: the N-th Parquet file write has put half of its bytes in its temp file
  (on an object store, in the memory buffer its PUT would send).
- ``parquet-before-rename``: the N-th partition file's temp file is complete and synced, not yet
  renamed over (on local disk).
- ``catalog``: the new DuckDB catalog is half built beside the old one (its views made, those
  of the tables over their files not yet).

``--chunk-records`` makes the funding load normalize (and so write) in smaller chunks, and wait
for each chunk's answer before the next, so that months are rewritten while the walk is still
paging (a short walk would otherwise end before the writer has started).

Funding partitions are written by the load's writer process (`warehouse.writer`), forked by a
host this module starts too (``killer writer POINT --at N -- SOCKET_FD``), armed the same way: a
kill in a writer takes the run with it, as a kill of the whole job would.

``killer worker POINT --at N --queue Q -- <whitebit-etl worker args>`` is a Celery worker of the
nightly service's runs, armed: Celery runs in this process instead of replacing it, so each pool
process it forks (one per run) inherits the hooks, and so does that run's writer; it takes the
runs sent to queue Q only (their ``dagster-celery/queue`` tag).
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from assets import cli, loading, workers
from pipeline.whitebit import _paging
from warehouse import catalog, layout, store, writer

_WHOLE_JOB = False


def _die() -> None:
    print(f"killer: SIGKILL in {'the writer' if _WHOLE_JOB else 'the run'}", file=sys.stderr)
    sys.stderr.flush()
    if _WHOLE_JOB:  # a writer process: the run, its host's parent, dies with it
        host_stat = Path(f"/proc/{os.getppid()}/stat").read_text()
        os.kill(int(host_stat.rpartition(")")[2].split()[1]), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _on_call(at: int, before: Callable[..., Any] | None = None) -> Callable[..., None]:
    """A hook that, at its ``at``-th call, runs ``before`` with the call's arguments and dies."""
    calls = 0

    def hook(*args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == at:
            if before is not None:
                before(*args, **kwargs)
            _die()

    return hook


def _wrap(owner: Any, name: str, hook: Callable[..., None]) -> None:
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        hook(*args, **kwargs)
        return original(*args, **kwargs)

    setattr(owner, name, wrapped)


_WRITE_PARQUET = store.write_parquet


def _half_written(table: Any, sink: Any, *args: Any) -> None:
    """Write half of the file the real call would write, durably, then let the kill come. On
    an object store the file is built in memory before its one PUT: the half stays there."""
    whole = io.BytesIO()
    _WRITE_PARQUET(table, whole, *args)
    sink.write(whole.getvalue()[: len(whole.getvalue()) // 2])
    if isinstance(sink, pa.NativeFile):
        return
    sink.flush()
    os.fsync(sink.fileno())


def _complete_before_rename(hook: Callable[[], None]) -> None:
    """Call ``hook`` once a partition file's temp file on local disk is whole and synced, before
    it is renamed over the partition's file."""
    replace = store.LocalStore._replace

    def replaced(self: store.LocalStore, relative: str, write: Callable[[Any], object]) -> None:
        def complete(sink: Any) -> None:
            write(sink)
            if relative.endswith(f"/{layout.PARTITION_FILE}"):
                sink.flush()
                os.fsync(sink.fileno())
                hook()

        replace(self, relative, complete)

    store.LocalStore._replace = replaced  # type: ignore[method-assign]


def arm(point: str, at: int) -> None:
    if point == "walk":
        kill = _on_call(at)
        wrote: list[object] = []
        _wrap(loading.Written, "wrote", lambda *args: wrote.append(args))
        _wrap(_paging.NewestFirstCursor, "read", lambda *args: kill() if wrote else None)
    elif point == "parquet-mid-file":
        _wrap(store, "write_parquet", _on_call(at, _half_written))
    elif point == "parquet-before-rename":
        _complete_before_rename(_on_call(at))
    elif point == "catalog":
        _wrap(catalog, "_create_table_views", _on_call(at))
    else:
        raise SystemExit(f"unknown kill point {point!r}")


def _celery_here(queue: str) -> Callable[[str, list[str], Mapping[str, str]], None]:
    """In place of `os.execve` for `whitebit-etl worker`: its Celery command, run in this
    process with the environment it would have had, taking the runs of ``queue`` only."""

    def run(_path: str, command: list[str], env: Mapping[str, str]) -> None:
        from celery.bin.celery import celery

        os.environ.clear()
        os.environ.update(env)
        args = command[1:]
        args[args.index("-Q") + 1] = queue
        celery.main(args=args, prog_name="celery")

    return run


def main(argv: list[str]) -> None:
    global _WHOLE_JOB
    split = argv.index("--")
    if argv[0] == "writer":
        _WHOLE_JOB = True
        arm(argv[1], int(argv[3]))
        sys.exit(writer.main(argv[split + 1 :]))
        return
    worker = argv[0] == "worker"
    parser = argparse.ArgumentParser(prog="killer")
    parser.add_argument("point")
    parser.add_argument("--at", type=int, default=1)
    parser.add_argument("--chunk-records", type=int, default=None)
    parser.add_argument("--queue", default=workers.QUEUE)
    options = parser.parse_args(argv[1 if worker else 0 : split])
    if options.chunk_records is not None:
        loading.CHUNK_RECORDS = options.chunk_records  # type: ignore[misc]
        writer.CHUNKS_IN_FLIGHT = 1  # type: ignore[misc]
    arm(options.point, options.at)
    writer.WRITER_COMMAND[:] = [
        sys.executable, "-m", "tests.reliability.killer", "writer", options.point,
        "--at", str(options.at), "--",
    ]  # fmt: skip
    args = argv[split + 1 :]
    if worker:
        # This process only: it does nothing else (the service's own workers are untouched).
        os.execve = _celery_here(options.queue)  # type: ignore[assignment]
        args = ["worker", *args]
    cli.main(args=args, prog_name="whitebit-etl")


if __name__ == "__main__":
    main(sys.argv[1:])
