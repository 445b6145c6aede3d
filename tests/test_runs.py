"""CLI runs on the persistent instance: a run whose process was killed does not block later runs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from assets import runs
from assets.reporting import API_POOL

# A run like the CLI's: tagged with its process, holding the API pool's slot when it is killed.
_KILLED_IN_THE_POOL = f"""
import os, signal, socket
import dagster as dg
from assets import runs

@dg.asset(pool={API_POOL!r})
def doomed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)

dg.materialize([doomed], instance=runs.instance(),
               tags={{runs.RUNNER_TAG: f"{{socket.gethostname()}}:{{os.getpid()}}"}})
"""


def _claimed(instance: dg.DagsterInstance) -> list[str]:
    info = instance.event_log_storage.get_concurrency_info(API_POOL)
    return [slot.run_id for slot in info.claimed_slots]


def test_a_killed_run_is_marked_failed_and_its_pool_slot_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_IN_THE_POOL], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    instance = runs.instance()
    (run,) = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.STARTED  # as the killed process left it
    assert _claimed(instance) == [run.run_id]

    assert runs.release_abandoned_runs(instance) == [run.run_id]
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
    assert _claimed(instance) == []
    assert runs.release_abandoned_runs(instance) == []  # once is enough


def test_a_run_whose_process_lives_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    instance = runs.instance()
    seen: list[dg.DagsterRunStatus] = []

    # Unannotated: a postponed annotation is text here, which Dagster refuses for ``context``.
    @dg.asset(pool=API_POOL)
    def running(context) -> None:  # type: ignore[no-untyped-def]
        # Another CLI run starting now finds this one alive and leaves it be.
        assert runs.release_abandoned_runs(instance) == []
        seen.append(instance.get_run_by_id(context.run.run_id).status)  # type: ignore[union-attr]

    tags = {runs.RUNNER_TAG: f"{socket.gethostname()}:{os.getpid()}"}
    assert dg.materialize([running], instance=instance, tags=tags).success
    assert seen == [dg.DagsterRunStatus.STARTED]


# Say it is ready, wait for the parent's signal, then open the instance of a new DAGSTER_HOME.
_OPEN_AT_ONCE = """
import pathlib, sys, time
from assets import runs
print("ready", flush=True)
go = pathlib.Path(sys.argv[1])
while not go.exists():
    time.sleep(0.001)
runs.instance()
"""


@pytest.mark.slow
def test_runs_starting_at_once_on_a_new_home_both_open_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for attempt in range(3):  # the two meet within a millisecond or so: try a few homes
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / f"dagster-{attempt}"))
        go = tmp_path / f"go-{attempt}"
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_AT_ONCE, str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
        go.touch()
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
