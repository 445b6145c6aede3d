"""Running the code location's run requests from the command line, through Dagster.

The command line loads the code location `workspace.yaml` loads (`assets.definitions.location`)
and launches the run requests the schedule would make (`assets.jobs.nightly_requests`), or those
of the tables and days a user named (`assets.jobs.requests_for`), each as a run of the location's
``nightly`` job, in this process, against the shared instance (`assets.instance`: the one ``make
ui`` opens), so the UI shows them afterwards. The terminal says what happens as it happens
(`assets.console`); once the run ends, `assets.outcomes` reads back from the instance what it has
to say: each failed step with its message, each check that did not pass with its description.
Each run is tagged with its process, and runs of CLI processes that were killed are released
before a new one starts (`assets.instance.release_dead_runs`).
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any, Final

import dagster as dg
from rich.console import Console

from assets.console import WAIT_SAID_EVERY_S, progress_bar, watched
from assets.dagster_private import (
    RUN_FAILURE_REASON_TAG,
    DagsterExecutionInterruptedError,
    RunFailureReason,
    check_captured_interrupt,
)
from assets.definitions import Location
from assets.horizon import HORIZON
from assets.instance import (
    free_slots_of_ended_runs,
    release_dead_runs,
    runner_tag,
    slot_holders,
)
from assets.jobs import RANGE_END_TAG, RANGE_START_TAG
from assets.outcomes import RunOutcome, outcome
from assets.steps import INTERRUPTS, quiet_interrupted_pools
from assets.view_checks import BALANCES_RECONCILE
from warehouse.schemas import month_days
from warehouse.store import StoreError

#: Dagster's own console logging during CLI runs: none. The CLI says what happens (`_Watch`) and
#: sums up failures without their stacks (`outcome`); `make ui` has every event.
QUIET: Final = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
#: The job every request is a run of: the schedule's.
NIGHTLY_JOB: Final = "nightly"


def days_of(request: dg.RunRequest, today: date) -> list[date]:
    """The days a request's runs of histories partitioned by month replace: those its config
    names, else every day of its months up to ``today``."""
    config: Mapping[str, Any] = request.run_config or {}
    for op in (config.get("ops") or {}).values():
        days = op.get("config") or {}
        if days.get("first_day") and days.get("last_day"):
            first = date.fromisoformat(days["first_day"])
            last = date.fromisoformat(days["last_day"])
            return [first + timedelta(days=n) for n in range((last - first).days + 1)]
    months = [request.partition_key] if request.partition_key else []
    if not months and RANGE_START_TAG in request.tags:
        months = [request.tags[RANGE_START_TAG], request.tags[RANGE_END_TAG]]
    if not months:
        return []
    first, _ = month_days(months[0])
    _, following = month_days(months[-1])
    end = min(following, today + timedelta(days=1))
    return [first + timedelta(days=n) for n in range((end - first).days)]


def materialize(
    location: Location,
    request: dg.RunRequest,
    instance: dg.DagsterInstance,
    *,
    console: Console,
    title: str,
    said: set[str] | None = None,
) -> RunOutcome:
    """Run one request of the location in this process: a run of its ``nightly`` job of the
    request's assets, partition (or range of partitions), config and tags, tagged with this
    process; what it says as it goes, but what is in ``said`` (the command's earlier runs
    said it), added there."""
    for run_id in release_dead_runs(instance, service_stopped=False):
        console.print(
            f"[yellow]run {run_id} was left unfinished by a killed process: marked failed, "
            "its API pool slot freed[/yellow]"
        )
    job = location.definitions.resolve_job_def(NIGHTLY_JOB)
    selection = list(request.asset_selection or ())
    pools = [
        built.account.pool
        for built in location.built
        if {*built.monthly_keys, *built.snapshot_keys} & set(selection)
    ]
    for run_id in free_slots_of_ended_runs(instance, pools):
        console.print(f"[yellow]run {run_id} had ended holding an API pool slot: freed[/yellow]")
    # A progress step per day written: every day of each history by month, one per snapshot.
    days = len(days_of(request, location.clock.today()))
    monthly = {key for assets in location.built for key in assets.monthly_keys}
    snapshots = {key for assets in location.built for key in assets.snapshot_keys}
    # The prices' days are the warehouse's, known once the run has read it: no total.
    total = (
        None
        if set(selection) - monthly - snapshots
        else sum(days if key in monthly else 1 for key in selection)
    )
    # The run's id is chosen here so that its events can be watched from the first one on.
    run_id = str(uuid.uuid4())
    INTERRUPTS.clear()
    success = False
    with (
        progress_bar(console, total, title) as bar,
        watched(instance, run_id, console, lambda: _pool_waits(instance, run_id, pools), said),
        _obeying_interrupts(instance, run_id),
    ):
        checks = request.asset_check_keys
        # The request's checks only (the freshness checks wait for the watch job).
        chosen = job.get_subset(
            asset_selection=set(selection),
            asset_check_selection=set(checks) if checks is not None else None,
        )
        try:
            result = chosen.execute_in_process(
                run_config={**QUIET, **(request.run_config or {})},
                instance=instance,
                partition_key=request.partition_key,
                raise_on_error=False,
                run_id=run_id,
                tags={**request.tags, **runner_tag()},
            )
        except Exception as exc:
            if (failed_part(exc) or "").startswith(_INSTANCE):
                _end_when_back(instance, run_id, console)
            raise
        success = bar.succeeded = result.success
    if INTERRUPTS.noted():
        return RunOutcome(run_id, False, (), interrupted=INTERRUPTS.how)
    return outcome(instance, run_id, success=success)


#: How long a run the instance's database cut off waits for it to come back, to be marked failed
#: and give back its API pool slot (else the next run does both as it starts).
INSTANCE_BACK_WAIT_S: Final = 120.0
_INSTANCE: Final = "the Dagster instance's database"


def _end_when_back(instance: dg.DagsterInstance, run_id: str, console: Console) -> None:
    """Once the instance's database answers again (within `INSTANCE_BACK_WAIT_S`), mark the run
    it cut off failed and free the API pool slot it holds, saying every few seconds that it
    waits."""
    started = said = time.monotonic()
    while time.monotonic() - started < INSTANCE_BACK_WAIT_S:
        try:
            run = instance.get_run_by_id(run_id)
            if run is not None and not run.is_finished:
                instance.report_run_failed(
                    run, message="the instance's database could not be reached at the run's end"
                )
            instance.event_log_storage.free_concurrency_slots_for_run(run_id)
        except Exception:  # the database still away: Dagster's own retries gave up again
            if time.monotonic() - said >= WAIT_SAID_EVERY_S:
                said = time.monotonic()
                console.print(
                    f"[yellow]waiting for {_INSTANCE} to mark run {run_id} failed and give back "
                    f"its API pool slot ({time.monotonic() - started:.0f} s of "
                    f"{INSTANCE_BACK_WAIT_S:.0f})[/yellow]"
                )
            time.sleep(1)
            continue
        console.print(f"[yellow]run {run_id} marked failed, its API pool slot given back[/yellow]")
        return


#: The parts of a deployment an error may come from, by the package that raised it.
_PARTS: Final = {
    "psycopg2": "the Dagster instance's database (PostgreSQL)",
    "dagster_postgres": "the Dagster instance's database (PostgreSQL)",
    "sqlalchemy": "the Dagster instance's database",
    "sqlite3": "the Dagster instance's database (SQLite)",
    "redis": "the Celery broker (Redis)",
    "kombu": "the Celery broker",
    "botocore": "the warehouse's object store",
    "aiobotocore": "the warehouse's object store",
}


def failed_part(error: BaseException) -> str | None:
    """The part of the deployment an error came from (the instance's database, the broker, the
    store), to be named in the command's last line; None for any other error."""
    seen: BaseException | None = error
    while seen is not None:
        part = _PARTS.get(type(seen).__module__.split(".")[0])
        if part is not None:
            return part
        seen = seen.__cause__ or seen.__context__
    return None


#: The checks whose failure is a loss, which the command's last line names: days lost to the
#: exchange's six months, a residual of the reconciliation.
LOSSES: Final = (HORIZON, BALANCES_RECONCILE)


def cause_of(result: RunOutcome) -> str | None:
    """What the command's last line says failed a run, in one line, when it is something to
    name there: the store's error (the file and why: a write refused, a store that did not
    answer), or what was lost (the days past the six months, a residual); None else (the
    failed step's message is printed above the last line)."""
    for said in result.said:
        first = said.text.splitlines()[0] if said.text else ""
        if said.warns:
            continue
        if said.what.startswith("step ") and first.startswith(f"{StoreError.__name__}: "):
            return first.partition(": ")[2]
        if said.what.startswith("check ") and said.what.rpartition(".")[2] in LOSSES:
            return first
    return None


def _pool_waits(instance: dg.DagsterInstance, run_id: str, pools: list[str]) -> list[str]:
    """What the run waits for: the account's API pool slot, while a step of it waits for the
    slot another run holds (before its first step, or between two)."""
    waits = []
    for pool in pools:
        pending = instance.event_log_storage.get_concurrency_info(pool).pending_steps
        if not any(s.run_id == run_id and s.assigned_timestamp is None for s in pending):
            continue
        held = [holder for holder in slot_holders(instance, pool) if run_id not in holder]
        if held:
            waits.append(
                f"waiting for the pool {pool}: its slot is held by {', '.join(held)}; a run "
                "that is no longer going frees it once marked ended (the UI's Terminate does)"
            )
    return waits


@contextmanager
def _obeying_interrupts(instance: dg.DagsterInstance, run_id: str) -> Iterator[None]:
    """SIGINT (Ctrl-C) or SIGTERM (how a service manager stops a process) ends the run within
    seconds, whatever it waits for, as canceled: never retried, no later step started; the writes
    in progress end as on any interrupt, leaving each partition old or new.

    Inside a step Dagster raises at once and the step stops (`INTERRUPTS`: no retry, the later
    steps stop at their start); between steps (a step's retry wait) our own handlers raise, or,
    where Dagster only took note of the signal, a watcher thread interrupts the wait (the main
    thread, by a signal of our own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    done = threading.Event()
    main = threading.main_thread().ident

    def stop(signum: int, _frame: object) -> None:
        INTERRUPTS.note(signal.Signals(signum).name)
        raise KeyboardInterrupt

    def watch() -> None:
        while not done.wait(0.2):
            if check_captured_interrupt() and main is not None:
                INTERRUPTS.note("SIGINT or SIGTERM")
                signal.pthread_kill(main, signal.SIGUSR1)
                return

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    quiet_interrupted_pools()
    watcher = threading.Thread(target=watch, daemon=True, name="interrupt-watcher")
    watcher.start()
    try:
        yield
    except (KeyboardInterrupt, DagsterExecutionInterruptedError):
        INTERRUPTS.note("SIGINT or SIGTERM")
    finally:
        done.set()
        watcher.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    run = instance.get_run_by_id(run_id)
    ended_by_dagster = RunFailureReason.UNEXPECTED_TERMINATION.value
    if run is not None and run.tags.get(RUN_FAILURE_REASON_TAG) == ended_by_dagster:
        # Dagster took the signal between steps, before the watcher saw it, and failed the run.
        INTERRUPTS.note("SIGINT or SIGTERM")
    if INTERRUPTS.noted() and run is not None:
        instance.report_run_canceled(
            run,
            message=f"whitebit-etl was asked to stop ({INTERRUPTS.how}): the run was "
            "interrupted, none of its steps retried; run the same command again to complete it",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run_id)
