"""The Dagster instance's PostgreSQL stops at a step's end, for longer than the instance's own
retries last: the run ends naming PostgreSQL; with the database back, no API pool slot is held,
the next command line run starts at once, and the instance records every month the warehouse
holds, the one the cut-off run wrote included.

The database is a PostgreSQL server of this module's own (`tests.support.postgres.LocalPostgres`,
stopped with a fast shutdown and started again on its data). The run is ``whitebit-etl
materialize funding_history --partition ..`` against it, in a child process
(`tests.reliability.instance_stopper`) held at the funding step's first output, its month
written in the warehouse and nothing of the step's end recorded: the test stops PostgreSQL
there, lets the step go on, and starts the database again once the run has given up on it
(Dagster's own retries spent) and says it waits for it, to mark itself failed and give its API
pool slot back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from assets.accounts import DEFAULT_ACCOUNT
from pipeline.simulator import SpawnedSimulator
from tests.support.cli_runs import CLI_TIMEOUT_S, Child, cli_env, invoke
from tests.support.postgres import LocalPostgres
from warehouse import Warehouse, partitions

#: The day the cut-off run writes, and the day of another month the next run writes.
CUT_DAY, NEXT_DAY = "2026-09-12", "2026-08-15"
#: The account's API pool (no accounts file: the single account ``default``).
POOL = f"whitebit_api_{DEFAULT_ACCOUNT}"
FUNDING = dg.AssetKey([DEFAULT_ACCOUNT, "funding_history"])
#: What the cut-off run says while it waits for the database, to give its slot back.
WAITS = "waiting for the Dagster instance's database to mark run"


@dataclass(frozen=True)
class Cut:
    """The run the outage cut off, and the environment of the command line runs."""

    child: Child
    env: dict[str, str]
    root: Path
    #: How long the database was down.
    outage_s: float

    @property
    def last_line(self) -> str:
        return [line for line in self.child.output.splitlines() if line.strip()][-1]


@pytest.fixture(scope="module")
def postgres() -> Iterator[LocalPostgres]:
    with LocalPostgres(durable=False) as server:
        yield server


@pytest.fixture(scope="module")
def cut(
    exchange: SpawnedSimulator, postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory
) -> Cut:
    base = tmp_path_factory.mktemp("instance-stopped")
    env = cli_env(exchange, base / "warehouse", base / "dagster") | {
        "DAGSTER_POSTGRES_URL": postgres.url(postgres.new_database())
    }
    note, go = base / "held", base / "go"
    args = ["--note", str(note), "--go", str(go), "--", "materialize", "funding_history"]
    child = Child.start(
        "tests.reliability.instance_stopper",
        [*args, "--partition", CUT_DAY],
        env,
        base / "logs" / "cut",
    )
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while child.process.poll() is None and not note.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert note.exists(), child.output
    postgres.halt()
    stopped = time.monotonic()
    go.touch()
    try:
        # Down until the run has given up on it (Dagster's own retries spent) and waits for it.
        while child.process.poll() is None and time.monotonic() < deadline:
            if WAITS in child.output:
                break
            time.sleep(0.2)
    finally:
        outage = time.monotonic() - stopped
        postgres.resume()
    child.wait()
    return Cut(child, env, base / "warehouse", outage)


def _slots(env: dict[str, str]) -> list[str]:
    """The runs that hold a slot of a pool, as the instance has them (the account's pool among
    the instance's)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_POSTGRES_URL", env["DAGSTER_POSTGRES_URL"])
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            storage = instance.event_log_storage
            pools = storage.get_concurrency_keys()
            assert POOL in pools, pools
            return [
                f"{pool}: {slot.run_id}"
                for pool in sorted(pools)
                for slot in storage.get_concurrency_info(pool).claimed_slots
            ]


def _recorded(env: dict[str, str]) -> set[str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_POSTGRES_URL", env["DAGSTER_POSTGRES_URL"])
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            return set(instance.get_materialized_partitions(FUNDING))


def _landed(root: Path) -> set[str]:
    """The funding months the warehouse holds a partition of."""
    files = partitions.partition_files(Warehouse.open(root).store, "funding_history")
    return {path.split("funding_month=")[1].split("/")[0] for path in files}


def test_the_run_cut_off_by_postgresql_ends_naming_it(cut: Cut) -> None:
    output = cut.child.output
    assert "instance_stopper: default__funding_history goes on" in output
    assert cut.child.process.returncode == 1, output
    assert "PostgreSQL" in cut.last_line, output[-3000:]
    # Down past what the instance's own retries absorb: the run waited for it to come back, then
    # ended its record and gave back its slot.
    assert WAITS in output
    assert "marked failed, its API pool slot given back" in output
    # Its month landed, whole, before the outage.
    assert _landed(cut.root) == {CUT_DAY[:7]}


def test_with_postgresql_back_no_slot_is_held_and_the_next_run_starts_at_once(
    cut: Cut,
) -> None:
    assert _slots(cut.env) == []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_POSTGRES_URL", cut.env["DAGSTER_POSTGRES_URL"])
        with dg.DagsterInstance.from_config(cut.env["DAGSTER_HOME"]) as instance:
            (run,) = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.FAILURE
    after = invoke(["materialize", "funding_history", "--partition", NEXT_DAY], cut.env)
    assert after.exit_code == 0, after.output
    assert "succeeded" in after.output
    assert "waiting for the pool" not in after.output
    assert _slots(cut.env) == []
    # Every month the warehouse holds is recorded as materialized: the cut-off run's too.
    assert _landed(cut.root) == {CUT_DAY[:7], NEXT_DAY[:7]}
    assert _recorded(cut.env) == _landed(cut.root)
