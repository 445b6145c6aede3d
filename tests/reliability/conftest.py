"""The reliability tests' simulator, running as its own process for the whole package. The
nightly workload, the warehouse read back whole and the CLI run as a child process are in
`tests/support/cli_runs.py`."""

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
