"""The object store stops answering in the middle of a backfill on S3: the run fails within the
store's documented bound, its last line naming the store; once the store answers again, a rerun
completes, and the warehouse equals an uninterrupted run's, row for row, with nothing left in
the bucket but the partitions (no temporary object, no multipart upload, no lease).

The store is moto's S3 server of this module's own (its process is stopped, so no other test
shares it). The backfill is ``whitebit-etl materialize funding_history --from .. --to ..`` over
five months, a child process (`tests.reliability.store_stopper`) that sends moto SIGSTOP just
before the second month's PUT: a month has landed, the walk and the other months are still to
come, and the PUT meets a store that accepts connections and never answers (as a hung store, or
one partitioned away, does).

The store stays stopped until the run has ended, and at most the bound and a margin: every
request to the store is bounded at `REQUEST_TIMEOUT_S` (30 s, docs/warehouse.md), so a stop of
the bound shows what a stop of five minutes would; the suite does not wait five minutes for it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from assets.accounts import DEFAULT_ACCOUNT
from pipeline.simulator import SpawnedSimulator
from tests.support.cli_runs import Child, Rows, cli_env, invoke, warehouse_rows
from tests.support.s3 import S3Server
from warehouse import Warehouse, catalog, layout
from warehouse.object_store import REQUEST_TIMEOUT_S
from warehouse.sources import SOURCES_DIR

#: Five months of funding, walked newest first, a partition each.
MONTHS = ["2026-05", "2026-06", "2026-07", "2026-08", "2026-09"]
RANGE = ["materialize", "funding_history", "--from", "2026-05-01", "--to", "2026-09-06"]
#: The run's end, counted from the stop, as docs/warehouse.md promises it: the hung PUT's bound,
#: and the lease's renewal that was in flight (bounded alike, begun before the PUT failed), with
#: a margin for a busy machine.
RUN_ENDS_WITHIN_S = 2 * REQUEST_TIMEOUT_S + 30


@dataclass(frozen=True)
class Stopped:
    """The run the stop cut off: its child process, when the store was stopped, and when the
    run had ended."""

    child: Child
    stopped_at: float
    ended_at: float

    @property
    def last_line(self) -> str:
        return [line for line in self.child.output.splitlines() if line.strip()][-1]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server, this module's own; this process's AWS variables pointing at it."""
    server = S3Server(tmp_path_factory.mktemp("s3-stopped") / "moto.log")
    try:
        with pytest.MonkeyPatch.context() as patch:
            server.point_here(patch)
            yield server
    finally:
        os.kill(server.pid, signal.SIGCONT)  # never left stopped, whatever failed
        server.stop()


def _env(
    exchange: SpawnedSimulator, root: Path | str, base: Path, server: S3Server
) -> dict[str, str]:
    env = cli_env(exchange, root, base / "dagster")
    env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    env.pop("WAREHOUSE_CATALOG", None)
    return env | server.env | {"XDG_STATE_HOME": str(base / "state")}


@pytest.fixture(scope="module")
def reference(
    exchange: SpawnedSimulator, store: S3Server, tmp_path_factory: pytest.TempPathFactory
) -> Rows:
    """The range as one uninterrupted run writes it (on local disk: the S3 tests show the two
    equal)."""
    base = tmp_path_factory.mktemp("reference")
    done = invoke(RANGE, _env(exchange, base / "warehouse", base, store))
    assert done.exit_code == 0, done.output
    rows = warehouse_rows(base / "warehouse")
    assert rows["funding_history"]
    return rows


@pytest.fixture(scope="module")
def bucket(store: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    name = store.bucket()
    yield name
    store.mirror(name, tmp_path_factory.mktemp("s3-stopped-objects"))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stopped")


@pytest.fixture(scope="module")
def stopped(exchange: SpawnedSimulator, store: S3Server, bucket: str, base: Path) -> Stopped:
    """The backfill with the store stopped before its second month's PUT; the store started
    again once the run has ended (or the bound and margin have passed)."""
    note = base / "stopped-at"
    env = _env(exchange, f"s3://{bucket}/warehouse", base, store)
    args = ["--pid", str(store.pid), "--at", "2", "--note", str(note), "--", *RANGE]
    child = Child.start("tests.reliability.store_stopper", args, env, base / "logs" / "stopped")
    try:
        while child.process.poll() is None and not note.exists():
            time.sleep(0.1)
        assert note.exists(), child.output
        stopped_at = float(note.read_text())
        try:
            child.process.wait(timeout=stopped_at + RUN_ENDS_WITHIN_S - time.time())
        except Exception:
            child.process.kill()
            child.process.wait()
        ended_at = time.time()
    finally:
        os.kill(store.pid, signal.SIGCONT)
    return Stopped(child, stopped_at, ended_at)


def test_a_stopped_store_fails_the_run_within_the_bound_naming_the_store(
    stopped: Stopped, bucket: str
) -> None:
    output = stopped.child.output
    assert "store_stopper: SIGSTOP" in output
    assert stopped.child.process.returncode == 1, output
    took = stopped.ended_at - stopped.stopped_at
    assert took < RUN_ENDS_WITHIN_S, (took, output)
    # The hung request said which store and which object did not answer, within the bound.
    said = f"s3://{bucket}/warehouse: the store did not answer the write of parquet/funding_history"
    assert said in output
    assert f"within {REQUEST_TIMEOUT_S:.0f} s" in output
    # And while it waited, it said so every few seconds, naming the store and the object.
    waiting = [
        line for line in output.splitlines() if "waiting" in line and "for the store" in line
    ]
    assert len(waiting) >= 2, output[-3000:]
    assert all(f"s3://{bucket}/warehouse" in line for line in waiting)
    # The command's last line names the store.
    assert f"s3://{bucket}/warehouse" in stopped.last_line, output[-3000:]


def test_after_the_store_answers_again_a_rerun_equals_the_uninterrupted_run(
    exchange: SpawnedSimulator,
    store: S3Server,
    bucket: str,
    base: Path,
    stopped: Stopped,
    reference: Rows,
) -> None:
    root = f"s3://{bucket}/warehouse"
    again = invoke(RANGE, _env(exchange, root, base, store))  # any run, in-process
    assert again.exit_code == 0, again.output
    assert "succeeded" in again.output
    state = str(base / "test-state")
    catalog.refresh(Warehouse.open(root, state_home=state))
    assert warehouse_rows(root, state_home=state) == reference
    # Nothing left behind: the months' partitions, the record of the account's exchange, and
    # no temporary object, no lease, no multipart upload begun and not completed.
    fs = store.filesystem()
    keys = sorted(fs.find(bucket))
    prefix = f"{bucket}/warehouse/{layout.PARQUET_DIR}/funding_history/account={DEFAULT_ACCOUNT}"
    assert keys == sorted(
        [f"{prefix}/funding_month={m}/{layout.PARTITION_FILE}" for m in MONTHS]
        + [f"{bucket}/warehouse/{SOURCES_DIR}/{DEFAULT_ACCOUNT}.json"]
    )
    uploads = fs.call_s3("list_multipart_uploads", Bucket=bucket)
    assert uploads.get("Uploads", []) == []
