"""What the service tests share: a PostgreSQL server of the session's own, a simulated exchange
whose history reaches yesterday, a loopback webhook that records what it is sent, and
`whitebit-etl serve` as a child process in a process group of its own (so a test can SIGKILL the
whole service, as a power cut would)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.simulator import SpawnedSimulator, spawn
from tests.support.postgres import LocalPostgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    with LocalPostgres(durable=False) as server:
        yield server


@pytest.fixture(scope="session")
def today_exchange() -> Iterator[SpawnedSimulator]:
    """The simulated exchange with its data clock running with the wall clock: yesterday is a
    whole day of its funding history, as a real account's is at night, whenever the tick
    comes (its past days are fixed, so a session that crosses midnight sees the same)."""
    with spawn(seed=7, scale="small") as sim:
        yield sim
