"""Every name this project takes from Dagster's private API, in one place.

Dagster may move these in any release; `tests/assets/test_dagster_private.py` imports each and
checks it is what the code expects, so an upgrade that moves one fails there, by name.
"""

from __future__ import annotations

# Raised in the main thread to interrupt a run between steps, as Dagster's own handler does.
from dagster._core.errors import DagsterExecutionInterruptedError

# A run's "ticks" of a schedule, as the daemon records them (the service's tests read them).
from dagster._core.scheduler.instigation import InstigatorTick, InstigatorType

# Whether Dagster's signal handler caught SIGTERM or SIGINT during the run.
from dagster._utils.interrupts import check_captured_interrupt

__all__ = [
    "DagsterExecutionInterruptedError",
    "InstigatorTick",
    "InstigatorType",
    "check_captured_interrupt",
]
