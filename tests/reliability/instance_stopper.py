"""Runs ``whitebit-etl`` and holds it at a step's end until the test has stopped the instance's
database: the PostgreSQL outage test's child process.

``python -m tests.reliability.instance_stopper --note FILE --go FILE -- <whitebit-etl args>``

Inside this process only, the first output a step reports to the Dagster instance (its
``STEP_OUTPUT`` event: the step's work is done, its partitions written, nothing of its end yet
recorded) first writes FILE ``--note``, then waits for the file ``--go`` (the test stops
PostgreSQL in between, then writes it), then goes on as it would: the step's end meets an
instance that is not there. No product code knows about it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg

from assets import cli

#: How long the run waits for the test to stop the database.
GO_TIMEOUT_S = 120.0


def arm(note: Path, go: Path) -> None:
    handle = dg.DagsterInstance.handle_new_event
    held = False

    def holding(self: dg.DagsterInstance, event: dg.EventLogEntry, **kwargs: Any) -> None:
        nonlocal held
        kind = event.dagster_event.event_type if event.dagster_event else None
        if not held and kind == dg.DagsterEventType.STEP_OUTPUT:
            held = True
            note.write_text(str(event.step_key))
            deadline = time.monotonic() + GO_TIMEOUT_S
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            print(f"instance_stopper: {event.step_key} goes on", file=sys.stderr)
        handle(self, event, **kwargs)

    dg.DagsterInstance.handle_new_event = holding  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="instance_stopper")
    parser.add_argument("--note", type=Path, required=True)
    parser.add_argument("--go", type=Path, required=True)
    options = parser.parse_args(argv[:split])
    arm(options.note, options.go)
    cli.main(args=argv[split + 1 :], prog_name="whitebit-etl")


if __name__ == "__main__":
    main(sys.argv[1:])
