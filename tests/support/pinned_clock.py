"""Runs a module as ``python -m`` would, with the `whitebit-etl` command's clock pinned: tests
that compare two warehouses written by two runs minutes apart then compare every column.

``python -m tests.support.pinned_clock MODULE [ARGS...]`` (``MODULE`` is ``assets.cli``, or
`tests.reliability.killer`, which runs the CLI in turn)

With `PINNED_NOW_ENV` set (an ISO time with its offset), the command in this process goes by a
clock standing at that time (given to it at its edge, as a test in-process gives it with
``CliRunner().invoke(main, ..., obj=clock)``): its runs stamp their rows with it
(``extracted_at``), and its day is that time's UTC day. Dagster, the HTTP client and the
warehouse's leases keep the real clock. Funding rows are stamped in the run's process and handed
to the writer process with their time, so the writer needs no pinning.
"""

from __future__ import annotations

import os
import runpy
import sys
from datetime import datetime
from typing import Final

from pipeline.spec import SimClock

PINNED_NOW_ENV: Final = "TESTS_PINNED_NOW"


def main(argv: list[str]) -> None:
    module, *args = argv
    text = os.environ.get(PINNED_NOW_ENV)
    if text:
        from assets.cli import main as command

        # The command's context object is its clock (`assets.cli._common.clock`).
        command.context_settings["obj"] = SimClock(datetime.fromisoformat(text))
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
