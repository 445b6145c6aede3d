"""`whitebit-etl materialize`, stopped by SIGTERM (as a service manager stops it) while its step
waits to be retried, ends within seconds; the run is marked failed with that reason, and the
warehouse is the one it had before."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import dagster as dg
import pytest

from pipeline.simulator import spawn
from tests.support.cli_runs import Child, cli_env, run_cli, warehouse_rows
from tests.support.simulated import FROZEN_AT

pytestmark = pytest.mark.slow

DAY = ["materialize", "funding_history", "--partition", "2026-09-15"]


def _waiting_for_retry(home: Path) -> bool:
    if not (home / "dagster.yaml").exists():
        return False
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return any(
            instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY)
            for run in instance.get_runs()
        )


def test_sigterm_during_a_retry_wait_fails_the_run_within_seconds(tmp_path: Path) -> None:
    root, home = tmp_path / "warehouse", tmp_path / "dagster"
    with spawn(seed=7, scale="small", frozen_at=FROZEN_AT) as sim:
        env = cli_env(sim, root, home)
        before = run_cli(DAY, env, tmp_path / "before")
        assert before.process.returncode == 0, before.output
        rows = warehouse_rows(root)
        assert rows["funding_history"]

        sim.control("faults", probability=1.0, kinds=["http_503"])
        held = Child.start("tests.service.no_client_retries", DAY, env, tmp_path / "held")
        deadline = time.monotonic() + 60
        while not _waiting_for_retry(home):
            assert held.process.poll() is None, held.output
            assert time.monotonic() < deadline, held.output
            time.sleep(0.5)
        started = time.monotonic()
        held.process.send_signal(signal.SIGTERM)
        code = held.wait()
        seconds = time.monotonic() - started

    assert seconds < 10, held.output
    assert code != 0
    with dg.DagsterInstance.from_config(str(home)) as instance:
        last = instance.get_runs(limit=1)[0]
        assert last.status == dg.DagsterRunStatus.FAILURE, held.output
        said = [e.message for e in instance.all_logs(last.run_id)]
    assert any("asked to stop (SIGTERM" in m for m in said), said[-5:]
    assert "Error: run" in held.output
    assert warehouse_rows(root) == rows
    assert not [p for p in root.rglob("*") if p.name.endswith((".tmp", ".tmp.wal"))]
