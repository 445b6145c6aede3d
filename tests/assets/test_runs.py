"""CLI runs on the persistent instance: a run whose process was killed does not block later runs;
what the terminal says while a run waits, and what it says about a run that failed."""

from __future__ import annotations

import asyncio
import io
import logging
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
from rich.console import Console

from assets import outcomes, runs
from assets.console import CLIENT_LOGGER, progress_bar, watched
from assets.instance import CELERY_TASK_TAG, release_dead_runs, runner_tag
from assets.instance import instance as settings_instance
from assets.settings import Settings
from assets.steps import PROGRESS_LOGGER
from pipeline import spec
from pipeline.simulator import Fault, Simulator
from pipeline.whitebit import RETRY_WAIT_FIELD, AsyncWhiteBIT, RetryPolicy
from tests.support.dagster_runs import ACCOUNT

API_POOL = ACCOUNT.pool


def open_instance() -> dg.DagsterInstance:
    """The CLI's instance, of the settings of this process's environment (its DAGSTER_HOME)."""
    return settings_instance(Settings.from_env())


# A run like the CLI's: tagged with its process, holding the API pool's slot when it is killed.
_KILLED_IN_THE_POOL = f"""
import os, signal, socket
import dagster as dg
from assets.instance import instance, runner_tag
from assets.settings import Settings

@dg.asset(pool={API_POOL!r})
def doomed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)

dg.materialize([doomed], instance=instance(Settings.from_env()), tags=runner_tag())
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
    instance = open_instance()
    (run,) = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.STARTED  # as the killed process left it
    assert _claimed(instance) == [run.run_id]

    assert release_dead_runs(instance, service_stopped=False) == [run.run_id]
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
    assert _claimed(instance) == []
    assert release_dead_runs(instance, service_stopped=False) == []  # once is enough


@pytest.mark.slow  # two runs' processes killed
def test_a_service_run_whose_process_died_is_released_unless_it_ran_on_celery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `serve` starts: a run of its own run worker whose process is gone is failed; one a
    Celery worker ran is not, since its pid may be another machine's (run monitoring judges it
    by its Celery task)."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    for tags in ("{}", f"{{{CELERY_TASK_TAG!r}: 'a-task-id'}}"):
        script = _KILLED_IN_THE_POOL.replace("tags=runner_tag()", f"tags={tags}")
        child = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        assert child.returncode == -signal.SIGKILL, child.stderr
        with open_instance() as instance:  # the next run may take the pool then
            for run in instance.get_runs():
                instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    instance = open_instance()
    on_celery, own = sorted(instance.get_runs(), key=lambda r: CELERY_TASK_TAG in r.tags)[::-1]
    assert CELERY_TASK_TAG in on_celery.tags
    assert release_dead_runs(instance, service_stopped=True) == [own.run_id]
    assert instance.get_run_by_id(on_celery.run_id).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]


def test_a_run_whose_process_lives_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    instance = open_instance()
    seen: list[dg.DagsterRunStatus] = []

    # Unannotated: a postponed annotation is text here, which Dagster refuses for ``context``.
    @dg.asset(pool=API_POOL)
    def running(context) -> None:  # type: ignore[no-untyped-def]
        # Another CLI run starting now finds this one alive and leaves it be.
        assert release_dead_runs(instance, service_stopped=False) == []
        seen.append(instance.get_run_by_id(context.run.run_id).status)  # type: ignore[union-attr]

    assert dg.materialize([running], instance=instance, tags=runner_tag()).success
    assert seen == [dg.DagsterRunStatus.STARTED]


# Say it is ready, wait for the parent's signal, then open the instance of a new DAGSTER_HOME.
_OPEN_AT_ONCE = """
import pathlib, sys, time
from assets.instance import instance
from assets.settings import Settings
settings = Settings.from_env()
print("ready", flush=True)
go = pathlib.Path(sys.argv[1])
while not go.exists():
    time.sleep(0.001)
instance(settings)
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


# --- What the terminal says during and after a run --------------------------------------------


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, highlight=False, color_system=None), out


def _run(
    instance: dg.DagsterInstance, console: Console, *assets: dg.AssetsDefinition
) -> dg.ExecuteInProcessResult:
    """The assets in one run, watched as the CLI watches its runs."""
    job = dg.Definitions(
        assets=list(assets), jobs=[dg.define_asset_job(runs.NIGHTLY_JOB)]
    ).resolve_job_def(runs.NIGHTLY_JOB)
    run_id = str(uuid.uuid4())
    with watched(instance, run_id, console):
        return job.execute_in_process(
            instance=instance, run_id=run_id, run_config=runs.QUIET, raise_on_error=False
        )


def test_a_step_up_for_retry_is_said_before_the_retry_with_its_wait_and_reason() -> None:
    console, out = _console()
    said_before_retry: list[str] = []

    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=1, delay=0.5))
    def flaky(context) -> None:  # type: ignore[no-untyped-def]
        if context.retry_number == 0:
            raise ConnectionError("the exchange hung up\nafter 3 bytes")
        said_before_retry.append(out.getvalue())

    with dg.instance_for_test() as instance:
        assert _run(instance, console, flaky).success
    (before,) = said_before_retry
    assert "flaky failed; Dagster tries it again in 0.5 s. " in before
    assert "Why: ConnectionError: the exchange hung up" in before
    assert "after 3 bytes" not in before  # the first line says why; the UI has the rest


def test_the_outcome_names_each_failed_step_and_check_without_wrappers_or_stack() -> None:
    console, _ = _console()

    @dg.asset(retry_policy=dg.RetryPolicy(max_retries=1))
    def broken() -> None:
        raise ValueError("the answer was wrong\nin two ways")

    @dg.asset
    def refused() -> None:
        raise dg.Failure(description="refused: bad key", allow_retries=False)

    @dg.asset(
        check_specs=[
            dg.AssetCheckSpec("counted", asset="checked"),
            dg.AssetCheckSpec("drifted", asset="checked"),
            dg.AssetCheckSpec("fine", asset="checked"),
        ]
    )
    def checked() -> dg.MaterializeResult:  # type: ignore[type-arg]
        return dg.MaterializeResult(
            check_results=[
                dg.AssetCheckResult(check_name="counted", passed=False, description="3 off"),
                dg.AssetCheckResult(
                    check_name="drifted",
                    passed=False,
                    severity=dg.AssetCheckSeverity.WARN,
                    description="a new field",
                ),
                dg.AssetCheckResult(check_name="fine", passed=True),
            ]
        )

    with dg.instance_for_test() as instance:
        result = _run(instance, console, broken, refused, checked)
        outcome = outcomes.outcome(instance, result.run_id, success=result.success)
    assert not outcome.success
    assert sorted(outcome.said, key=lambda s: s.what) == [
        outcomes.Said("check checked.counted", "3 off"),
        outcomes.Said("check checked.drifted", "a new field", warns=True),
        outcomes.Said("step broken", "ValueError: the answer was wrong\nin two ways"),
        outcomes.Said("step refused", "refused: bad key"),
    ]


def test_a_successful_run_still_says_its_warnings() -> None:
    console, _ = _console()

    @dg.asset(check_specs=[dg.AssetCheckSpec("drifted", asset="warned")])
    def warned() -> dg.MaterializeResult:  # type: ignore[type-arg]
        return dg.MaterializeResult(
            check_results=[
                dg.AssetCheckResult(
                    check_name="drifted", passed=False, severity=dg.AssetCheckSeverity.WARN
                )
            ]
        )

    with dg.instance_for_test() as instance:
        result = _run(instance, console, warned)
        outcome = outcomes.outcome(instance, result.run_id, success=result.success)
    assert outcome.success
    assert outcome.said == (outcomes.Said("check warned.drifted", "", warns=True),)


def test_a_long_message_is_cut_to_its_first_lines() -> None:
    console, _ = _console()
    lines = [f"line {n}" for n in range(outcomes.MESSAGE_LINES + 3)]

    @dg.asset
    def wordy() -> None:
        raise dg.Failure(description="\n".join(lines), allow_retries=False)

    with dg.instance_for_test() as instance:
        result = _run(instance, console, wordy)
        (said,) = outcomes.outcome(instance, result.run_id, success=False).said
    assert said.text.splitlines() == [
        *lines[: outcomes.MESSAGE_LINES],
        "... (3 more lines: make ui)",
    ]


def test_client_retry_waits_from_a_second_on_and_client_warnings_are_said(
    own_sim: Simulator,
) -> None:
    console, out = _console()

    async def ping(initial_delay_s: float) -> None:
        own_sim.faults.script([Fault.HTTP_503], paths=[spec.PING.path])
        retry = RetryPolicy(max_retries=1, initial_delay_s=initial_delay_s)
        async with AsyncWhiteBIT(own_sim.credentials, base_url=own_sim.url, retry=retry) as c:
            await c.ping()

    @dg.asset
    def pinged() -> None:
        asyncio.run(ping(0.05))  # a blip: retried unsaid
        asyncio.run(ping(1.4))  # waits 1.05 to 1.4 s (jitter takes off up to a quarter)
        logging.getLogger(CLIENT_LOGGER).warning("the answer has %s", "a new field")

    with dg.instance_for_test() as instance:
        assert _run(instance, console, pinged).success
    assert "pinged: the answer has a new field" in out.getvalue().splitlines()
    said = [line for line in out.getvalue().splitlines() if "waiting for the exchange" in line]
    assert len(said) == 1, out.getvalue()
    assert said[0].startswith("pinged: waiting for the exchange: ping: attempt 1 of 2 failed")
    assert "HTTP 503" in said[0]
    assert float(said[0].split("retrying in ")[1].removesuffix(" s")) >= 1.0


@pytest.mark.parametrize("succeeded", [True, False])
def test_a_progress_bar_ends_as_its_run_did(succeeded: bool) -> None:
    console, out = _console()
    with progress_bar(console, 3, "funding_history: 2026-09-01") as bar:
        logging.getLogger(PROGRESS_LOGGER).info("funding_history 2026-09-01: 5 rows, 0 rejected")
        bar.succeeded = succeeded
    ended = "done" if succeeded else "failed"
    assert f"funding_history: 2026-09-01: {ended} " in out.getvalue()
    assert "1/3" in out.getvalue()


def test_a_progress_bar_left_by_an_error_ends_failed() -> None:
    console, out = _console()
    with pytest.raises(KeyboardInterrupt), progress_bar(console, 1, "hedge_mode: today"):
        raise KeyboardInterrupt
    assert "hedge_mode: today: failed " in out.getvalue()


def test_a_retry_wait_is_read_from_its_record_not_its_text() -> None:
    console, out = _console()
    client = logging.getLogger(CLIENT_LOGGER)
    with dg.instance_for_test() as instance, watched(instance, "no-run", console):
        client.info("ping: attempt 1 of 2 failed; retrying in 9.00 s")  # no field: a blip
        client.info("ping: attempt 1 of 2 failed", extra={RETRY_WAIT_FIELD: 3.0})
    said = [line for line in out.getvalue().splitlines() if "waiting for the exchange" in line]
    assert said == ["waiting for the exchange: ping: attempt 1 of 2 failed"]


def test_a_wait_for_the_pool_slot_another_run_holds_is_said_once_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two runs of one account at once, the output not a terminal: the one whose step waits for
    the slot the other holds says so, in one line naming the pool and the run, once, however
    long it waits (it was said every 5 s, and not at all between two steps)."""
    monkeypatch.setattr("assets.console.WAIT_SAID_EVERY_S", 0.05)
    holder, waiting = str(uuid.uuid4()), str(uuid.uuid4())
    out = io.StringIO()
    console = Console(file=out, width=400)
    assert not console.is_terminal
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        storage = instance.event_log_storage
        storage.set_concurrency_slots(API_POOL, 1)
        assert storage.claim_concurrency_slot(API_POOL, holder, "main__trades").is_claimed
        with watched(
            instance, waiting, console, lambda: runs._pool_waits(instance, waiting, [API_POOL])
        ):
            time.sleep(0.5)  # its first step not asking yet: no wait to say
            assert out.getvalue() == ""
            # A later step of the run asks for the slot the other run holds, and waits.
            claim = storage.claim_concurrency_slot(API_POOL, waiting, "main__orders")
            assert not claim.is_claimed
            time.sleep(1.0)
    said = out.getvalue().splitlines()
    assert said == [
        f"waiting for the pool {API_POOL}: its slot is held by run {holder} (gone from the "
        "instance); a run that is no longer going frees it once marked ended (the UI's "
        "Terminate does)"
    ]
