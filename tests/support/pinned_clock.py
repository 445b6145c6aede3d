"""Runs a module as ``python -m`` would, with the clock of what a run extracts pinned: tests
that compare two warehouses written by two runs minutes apart then compare every column.

``python -m tests.support.pinned_clock MODULE [ARGS...]`` (``MODULE`` is ``assets.cli``, or
`tests.reliability.killer`, which runs the CLI in turn)

With `PINNED_NOW_ENV` set (an ISO time with its offset), inside this process only, the
``datetime.now`` the assets stamp their rows with (``extracted_at``) returns that time, and the
day snapshots are taken for (``snapshot_date``) is its UTC day. Nothing else is touched:
Dagster, the HTTP client and the warehouse's leases keep the real clock. No product code knows
about it. Funding rows are stamped in the run's process and handed to the writer process with
their time, so the writer needs no pinning.

In a test's own process, `pinned` does the same for a block, and pins the day the horizon check
judges the archive on too (a night or a watch months from now, replayed today).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, tzinfo
from typing import Final

PINNED_NOW_ENV: Final = "TESTS_PINNED_NOW"


def pin(now: datetime) -> None:
    """Make the assets' ``datetime.now`` return ``now``, and their ``today`` its UTC day."""
    from assets import histories

    class Pinned(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> datetime:
            return now.astimezone(tz) if tz is not None else now.replace(tzinfo=None)

    def today() -> date:
        return now.astimezone(UTC).date()

    histories.datetime = Pinned  # type: ignore[misc]
    histories.today = today


def main(argv: list[str]) -> None:
    module, *args = argv
    text = os.environ.get(PINNED_NOW_ENV)
    if text:
        pin(datetime.fromisoformat(text))
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])


@contextmanager
def pinned(now: datetime) -> Iterator[None]:
    """Within the block, in this process: the assets' clock is ``now`` (`pin`'s), and so is the
    horizon check's (the day it judges the archive on). Restored after it."""
    from assets import histories, horizon

    saved = histories.datetime, histories.today, horizon.datetime
    pin(now)
    horizon.datetime = histories.datetime  # type: ignore[misc]
    try:
        yield
    finally:
        histories.datetime, histories.today, horizon.datetime = saved  # type: ignore[misc]
