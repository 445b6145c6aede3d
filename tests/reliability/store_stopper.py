"""Runs ``whitebit-etl`` and stops the object store (SIGSTOP to moto's server) just before a chosen
partition write: the hung-store test's child process.

``python -m tests.reliability.store_stopper --pid PID --at N --note FILE -- <whitebit-etl args>``

Inside this process and the load's writer process only (`warehouse.writer`, started through
this module too), the N-th PUT of a partition file (`ObjectStore.write_bytes` of a
``part.parquet``) first sends SIGSTOP to process PID (the store's server), writes the time it
did so in FILE, then goes on as it would: the PUT meets a store that does not answer. The months
written before it are in the store, whole; the ones after it never start. No product code knows
about it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from assets import cli
from warehouse import layout, writer
from warehouse.object_store import ObjectStore


def arm(pid: int, at: int, note: Path) -> None:
    write = ObjectStore.write_bytes
    calls = 0

    def stopping(self: ObjectStore, relative: str, data: bytes) -> Any:
        nonlocal calls
        if relative.endswith(f"/{layout.PARTITION_FILE}"):
            calls += 1
            if calls == at:
                os.kill(pid, signal.SIGSTOP)
                note.write_text(repr(time.time()))
                print(f"store_stopper: SIGSTOP to {pid} before {relative}", file=sys.stderr)
                sys.stderr.flush()
        return write(self, relative, data)

    ObjectStore.write_bytes = stopping  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="store_stopper")
    parser.add_argument("role", nargs="?", default="cli", choices=["cli", "writer"])
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--at", type=int, required=True)
    parser.add_argument("--note", type=Path, required=True)
    options = parser.parse_args(argv[:split])
    arm(options.pid, options.at, options.note)
    if options.role == "writer":
        sys.exit(writer.main(argv[split + 1 :]))
    writer.WRITER_COMMAND[:] = [
        sys.executable, "-m", "tests.reliability.store_stopper", "writer",
        "--pid", str(options.pid), "--at", str(options.at), "--note", str(options.note), "--",
    ]  # fmt: skip
    cli.main(args=argv[split + 1 :], prog_name="whitebit-etl")


if __name__ == "__main__":
    main(sys.argv[1:])
