"""`whitebit-etl materialize`, stopped by SIGTERM (as a service manager stops it) while its step
waits to be retried, or by Ctrl-C (SIGINT to its process group) in the middle of a backfill, ends
within seconds, non-zero, saying so; the run is marked canceled, never retried, and the warehouse
is the one it had before or, after a rerun, the one an uninterrupted run makes."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import dagster as dg
import pytest

from pipeline.simulator import spawn
from tests.support.cli_runs import CLI_TIMEOUT_S, Child, cli_env, run_cli, warehouse_rows
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


def test_sigterm_during_a_retry_wait_cancels_the_run_within_seconds(tmp_path: Path) -> None:
    root, home = tmp_path / "warehouse", tmp_path / "dagster"
    with spawn(seed=7, scale="small", frozen_at=FROZEN_AT) as sim:
        env = cli_env(sim, root, home)
        before = run_cli(DAY, env, tmp_path / "before")
        assert before.process.returncode == 0, before.output
        rows = warehouse_rows(root)
        assert rows["funding_history"]

        sim.control("faults", probability=1.0, kinds=["http_503"])
        held = Child.start("tests.service.no_client_retries", DAY, env, tmp_path / "held")
        deadline = time.monotonic() + CLI_TIMEOUT_S  # the child's start, on a busy machine
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
        assert last.status == dg.DagsterRunStatus.CANCELED, held.output
        said = [e.message for e in instance.all_logs(last.run_id)]
    # Signaled in a retry wait, Dagster's handler takes note of the signal but not of which one
    # it was: the run's message names both.
    assert any(re.search(r"asked to stop \([^)]*SIGTERM", m) for m in said), said[-5:]
    assert "Traceback" not in held.output
    assert warehouse_rows(root) == rows
    assert not [p for p in root.rglob("*") if p.name.endswith((".tmp", ".tmp.wal"))]


BACKFILL = ["materialize", "funding_history", "--from", "2024-01-01", "--to", "2026-09-20"]
#: Each answer of the interrupted backfill comes this late (the simulator's slow fault): its walk
#: of the small scale's funding lasts far past the three seconds it is given, however fast the
#: machine (unslowed, it ends in one or two, its windows in flight together), and the reruns,
#: answered at once, stay short.
SLOW_ANSWER_S = 1.0


def _started(home: Path) -> bool:
    if not (home / "dagster.yaml").exists():
        return False
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return any(r.status == dg.DagsterRunStatus.STARTED for r in instance.get_runs(limit=1))


def test_ctrl_c_three_seconds_into_a_backfill_cancels_it_within_five(tmp_path: Path) -> None:
    root, home = tmp_path / "warehouse", tmp_path / "dagster"
    with spawn(seed=7, scale="small", frozen_at=FROZEN_AT) as sim:
        env = cli_env(sim, root, home)
        before = run_cli(["materialize", "hedge_mode"], env, tmp_path / "before")
        assert before.process.returncode == 0, before.output
        rows = warehouse_rows(root)
        sim.control("faults", probability=1.0, kinds=["slow"], slow_seconds=SLOW_ANSWER_S)
        # Its own process group, as a shell gives a command: Ctrl-C signals the whole group.
        held = Child.start("assets.cli", BACKFILL, env, tmp_path / "held", new_group=True)
        deadline = time.monotonic() + CLI_TIMEOUT_S  # the child's start, on a busy machine
        while not _started(home):
            assert held.process.poll() is None, held.output
            assert time.monotonic() < deadline, held.output
            time.sleep(0.2)
        time.sleep(3)
        assert held.process.poll() is None, "the backfill ended before it could be interrupted"
        started = time.monotonic()
        os.killpg(held.process.pid, signal.SIGINT)
        code = held.wait()
        seconds = time.monotonic() - started
        sim.control("faults", probability=0.0)
        interrupted = warehouse_rows(root)
        again = run_cli(BACKFILL, env, tmp_path / "again")
        assert again.process.returncode == 0, again.output
        rerun = warehouse_rows(root)
        whole = tmp_path / "whole"
        reference = run_cli(BACKFILL, cli_env(sim, whole, tmp_path / "home2"), tmp_path / "ref")
        assert reference.process.returncode == 0, reference.output

    assert seconds < 5, held.output
    assert code != 0
    assert "Traceback" not in held.output
    assert "canceled" in held.output
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        canceled = [r for r in runs if r.status == dg.DagsterRunStatus.CANCELED]
        assert len(canceled) == 1, [r.status for r in runs]
        retried = instance.all_logs(
            canceled[0].run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY
        )
        assert not retried
    # Each month the interrupted run left is as it was, or as the whole run writes it.
    whole_rows = warehouse_rows(whole)["funding_history"]
    assert set(interrupted["funding_history"]) <= set(whole_rows)
    assert rows["funding_history"] == []
    assert rerun["funding_history"] == whole_rows
