"""What the reliability tests share: the nightly workload, the warehouse read back whole, and
the real CLI run as a child process against a simulator running as its own process.

The nightly job here is what the schedule asks for, on the simulator's data: funding history for
a few days inside its history (one range run, as a backfill is) and today's snapshots (one run).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.simulator import (
    SpawnedSimulator,
    spawn,
)
from tests.support.simulated import FROZEN_AT


@pytest.fixture(scope="package")
def exchange() -> Iterator[SpawnedSimulator]:
    """The simulated exchange in a process of its own (its stdout, which prints the demo secret
    by design, is read by `spawn` and goes to no file)."""
    with spawn(seed=7, scale="small", frozen_at=FROZEN_AT) as sim:
        yield sim
