"""Running the code location's assets from the command line, through Dagster, with progress.

Runs go to the persistent Dagster instance under ``$DAGSTER_HOME`` (default
``WAREHOUSE_ROOT/dagster``, the one ``make ui`` opens), so the UI shows them afterwards. A range
of days is one run (the single-run backfill policy of ``funding_history``).

A CLI run executes in the CLI's own process, so nothing outside it ends the run if the process is
killed: the run would stay "started" and keep its slot of the API pool (limit 1) forever, and
every later run of an API asset would wait for that slot. Each run is therefore tagged with its
process, and the next CLI run marks the runs of processes that are gone as failed and frees their
slots (`release_abandoned_runs`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Final

import dagster as dg
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from upath import UPath

from assets import ALL_ASSETS
from assets.partitions import day_range
from assets.reporting import PROGRESS_LOGGER
from warehouse.parquet import exclusive_lock
from warehouse.settings import warehouse_root

INSTANCE_CONFIG: Final = """\
# Written by whitebit-etl for the Dagster instance that `make ui` and the CLI share.
telemetry:
  enabled: false
concurrency:
  pools:
    # whitebit_api: each step paces itself to the whole API budget, so one step at a time.
    default_limit: 1
"""
#: Dagster's own console logging during CLI runs: warnings and errors only; progress is ours.
QUIET: Final = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
#: Lock file in DAGSTER_HOME under which CLI processes open the instance.
INSTANCE_LOCK: Final = ".whitebit-etl.lock"
#: Tag of every CLI run: ``<host>:<pid>`` of the process executing it.
RUNNER_TAG: Final = "whitebit-etl/runner"
_UNFINISHED: Final = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def dagster_home() -> Path:
    """``$DAGSTER_HOME``, else ``WAREHOUSE_ROOT/dagster``; created with its dagster.yaml."""
    home = Path(os.environ.get("DAGSTER_HOME") or Path(warehouse_root().path) / "dagster")
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        # Whole or not at all: another process may be reading it already.
        temp = config.with_name(f".{config.name}.{os.getpid()}.tmp")
        temp.write_text(INSTANCE_CONFIG, encoding="utf-8")
        os.replace(temp, config)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def instance() -> dg.DagsterInstance:
    """The persistent instance. Two runs starting at once on a new home would both create its
    storage, and one would fail on the other's half-made schema: they take turns opening it."""
    home = dagster_home()
    with exclusive_lock(UPath(home / INSTANCE_LOCK)):
        return dg.DagsterInstance.get()


def _runner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True


def release_abandoned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed the unfinished CLI runs of this host whose process is gone, and free the pool
    slots they hold; their ids. (A reused pid keeps a run as it is: the safe side.)"""
    host = socket.gethostname()
    released = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=_UNFINISHED)):
        where, _, pid = run.tags.get(RUNNER_TAG, "").rpartition(":")
        if where != host or not pid.isdigit() or _alive(int(pid)):
            continue
        instance.report_run_failed(
            run,
            message=f"whitebit-etl process {pid} ended before this run did (it was killed); "
            "marked failed by a later run, which freed the run's API pool slot",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run_id: str
    success: bool
    failures: tuple[str, ...]


class _ProgressHandler(logging.Handler):
    """Advances a progress bar for every partition a run writes."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        super().__init__(logging.INFO)
        self._progress, self._task = progress, task

    def emit(self, record: logging.LogRecord) -> None:
        self._progress.update(self._task, advance=1, description=record.getMessage())


@contextmanager
def progress_bar(console: Console, total: int, title: str) -> Iterator[None]:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(title, total=total)
        handler = _ProgressHandler(progress, task)
        logger = logging.getLogger(PROGRESS_LOGGER)
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            progress.update(task, description=f"{title}: done")


def materialize(
    selection: Sequence[str],
    first: date,
    last: date,
    *,
    console: Console,
    title: str,
) -> RunOutcome:
    """Materialize the selected assets for days ``first .. last`` (inclusive) in one run."""
    from assets.definitions import resources

    days = day_range(first, date.fromordinal(last.toordinal() + 1))
    if not days:
        raise ValueError(f"empty range: {first} .. {last}")
    tags = {RUNNER_TAG: _runner()}
    partition_key: str | None = first.isoformat()
    if len(days) > 1:
        tags |= {
            "dagster/asset_partition_range_start": first.isoformat(),
            "dagster/asset_partition_range_end": last.isoformat(),
        }
        partition_key = None
    dagster = instance()
    for run_id in release_abandoned_runs(dagster):
        console.print(
            f"[yellow]run {run_id} was left unfinished by a killed process: marked failed, "
            "its API pool slot freed[/yellow]"
        )
    # A progress step per partition written: every day of funding, one per snapshot table.
    total = sum(len(days) if name == "funding_history" else 1 for name in selection)
    with _stop_promptly(dagster), progress_bar(console, total, title):
        result = dg.materialize(
            list(ALL_ASSETS),
            selection=list(selection),
            partition_key=partition_key,
            tags=tags,
            instance=dagster,
            resources=resources(),
            run_config=QUIET,
            raise_on_error=False,
        )
    return RunOutcome(result.run_id, result.success, tuple(_failures(result)))


def _failures(result: dg.ExecuteInProcessResult) -> list[str]:
    """Each failed step with the reason it gave."""
    found = []
    for event in result.all_events:
        data = event.step_failure_data if event.is_step_failure else None
        if data is None:
            continue
        user = data.user_failure_data
        reason = (user.description if user else None) or (data.error.message if data.error else "")
        found.append(f"{event.step_key}: {reason.strip()}")
    return found


@contextmanager
def _stop_promptly(instance: dg.DagsterInstance) -> Iterator[None]:
    """SIGTERM (how a service manager stops a process) or SIGINT ends the run within a second,
    whatever it waits for: the writes in progress end as on any interrupt, leaving the warehouse
    whole, and the run fails; its log says why.

    During a run, Dagster handles both signals: inside a step it raises at once, but between
    steps (a step's retry wait) it only takes note until the next step starts. A watcher thread
    sees that note and interrupts the wait (the main thread, by a signal of our own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from dagster._core.errors import DagsterExecutionInterruptedError
    from dagster._utils.interrupts import check_captured_interrupt

    received = threading.Event()
    done = threading.Event()
    main = threading.main_thread().ident

    def interrupt(_signum: int, _frame: object) -> None:
        raise DagsterExecutionInterruptedError()

    def watch() -> None:
        while not done.wait(0.2):
            if check_captured_interrupt() and main is not None:
                received.set()
                signal.pthread_kill(main, signal.SIGUSR1)
                return

    previous = signal.signal(signal.SIGUSR1, interrupt)
    watcher = threading.Thread(target=watch, daemon=True, name="interrupt-watcher")
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGUSR1, previous)
        if received.is_set():
            mine = dg.RunsFilter(tags={RUNNER_TAG: _runner()})
            for run in instance.get_runs(filters=mine, limit=1):
                instance.report_engine_event(
                    "whitebit-etl was asked to stop (SIGTERM or SIGINT) while the run waited "
                    "between steps: the run was interrupted",
                    run,
                )
