"""Running the code location's assets from the command line, through Dagster, with progress.

Runs go to the persistent Dagster instance under ``$DAGSTER_HOME`` (default
``WAREHOUSE_ROOT/dagster``, the one ``make ui`` opens), so the UI shows them afterwards. A range
of days is one run (the single-run backfill policy of ``funding_history``).

The terminal says what happens as it happens, in place of Dagster's console log (`watched`):
warnings and errors the steps log, each step Dagster will retry (in how long, and why), each
client retry that waits long enough to notice. Once the run ends, `assets.outcomes` reads back
from the instance what it has to say: each failed step with its message, each check that did not
pass with its description.

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
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Final

import dagster as dg
from rich.console import Console
from rich.markup import escape
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
from assets.outcomes import RunOutcome, error_text, outcome
from assets.partitions import day_range
from assets.reporting import PROGRESS_LOGGER
from assets.snapshots import refuse_past
from pipeline.whitebit import RETRY_WAIT_FIELD
from warehouse.parquet import exclusive_lock
from warehouse.schemas import month_of
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
#: Dagster's own console logging during CLI runs: none. The CLI says what happens (`_Watch`) and
#: sums up failures without their stacks (`outcome`); `make ui` has every event.
QUIET: Final = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
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


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
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
        if where != host or not pid.isdigit() or process_alive(int(pid)):
            continue
        instance.report_run_failed(
            run,
            message=f"whitebit-etl process {pid} ended before this run did (it was killed); "
            "marked failed by a later run, which freed the run's API pool slot",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


#: Client retry waits from this long on are shown as they begin. Shorter ones pass unshown: a
#: healthy exchange's blip costs a fraction of a second (the run's metadata counts it), while
#: a wait of a second or more, and the doubling waits after it, are long enough to wonder about.
CLIENT_WAIT_SHOWN_S: Final = 1.0
#: The job Dagster gives runs that materialize assets outside the location's jobs (the one
#: `dg.materialize` runs), so the UI lists CLI runs as it lists those.
ASSET_RUN_JOB: Final = "__ephemeral_asset_job__"
#: The logger of `pipeline.whitebit`'s client, which logs each retry at INFO before waiting,
#: the wait in seconds as the record's `RETRY_WAIT_FIELD`.
CLIENT_LOGGER: Final = "pipeline.whitebit"


class _ProgressHandler(logging.Handler):
    """Advances a progress bar for every day a run writes."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        super().__init__(logging.INFO)
        self._progress, self._task = progress, task

    def emit(self, record: logging.LogRecord) -> None:
        self._progress.update(self._task, advance=1, description=record.getMessage())


@dataclass
class _Ending:
    """How a progress bar ends: failed, unless the run is said to have succeeded."""

    succeeded: bool = False


@contextmanager
def progress_bar(console: Console, total: int, title: str) -> Iterator[_Ending]:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(title, total=total)
        ending = _Ending()
        try:
            with _listening(PROGRESS_LOGGER, _ProgressHandler(progress, task)):
                yield ending
        finally:
            ended = "done" if ending.succeeded else "failed"
            progress.update(task, description=f"{title}: {ended}")


@contextmanager
def _listening(name: str, handler: logging.Handler) -> Iterator[None]:
    """``handler`` gets the INFO records of logger ``name`` while the block runs."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class _Watch(logging.Handler):
    """Says on the console what happens in a run as it happens, in place of Dagster's console
    log: what the steps and the client log at WARNING and above, each step that Dagster retries
    later (which, in how long, why), and each client call retried after a wait long enough to
    notice; failures are summed up once the run ends (`outcome`), without their stacks.

    Dagster's events arrive through the instance's listener for the run (`event`), each just
    after it is written; the client's retries are records of its logger (`emit`)."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO)
        self._console = console
        self._step = ""
        # What the steps warned of: each step of a run may warn the same (the simulator's).
        self._warned: set[str] = set()

    def _say(self, text: str, style: str) -> None:
        self._console.print(f"[{style}]{escape(text)}[/{style}]", soft_wrap=True)

    def event(self, entry: dg.EventLogEntry) -> None:
        event = entry.dagster_event
        if event is None:
            level = entry.level if isinstance(entry.level, int) else logging.INFO
            if level >= logging.WARNING and entry.user_message not in self._warned:
                self._warned.add(entry.user_message)
                where = f"{entry.step_key}: " if entry.step_key else ""
                self._say(where + entry.user_message, "red" if level >= logging.ERROR else "yellow")
        elif event.event_type == dg.DagsterEventType.STEP_START and event.step_key:
            self._step = event.step_key
        elif event.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY:
            data = event.step_retry_data
            reason = error_text(data.error).splitlines()[0]
            self._say(
                f"{event.step_key} failed; Dagster tries it again in "
                f"{data.seconds_to_wait or 0:.1f} s. Why: {reason}",
                "yellow",
            )

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        where = f"{self._step}: " if self._step else ""
        if record.levelno >= logging.WARNING:  # the client's own warnings, as it logs them
            self._say(where + message, "red" if record.levelno >= logging.ERROR else "yellow")
            return
        wait = getattr(record, RETRY_WAIT_FIELD, None)
        if isinstance(wait, float) and wait >= CLIENT_WAIT_SHOWN_S:
            self._say(f"{where}waiting for the exchange: {message}", "yellow")


@contextmanager
def watched(instance: dg.DagsterInstance, run_id: str, console: Console) -> Iterator[None]:
    """While the block runs, ``console`` says what happens in run ``run_id`` (see `_Watch`)."""
    watch = _Watch(console)
    instance.add_event_listener(run_id, watch.event)
    with _listening(CLIENT_LOGGER, watch):
        yield


def materialize(
    selection: Sequence[str],
    first: date | None,
    last: date | None,
    *,
    console: Console,
    title: str,
) -> RunOutcome:
    """Materialize the selected assets for days ``first .. last`` (inclusive) in one run.

    Funding history replaces exactly these days, in the months that hold them; snapshots are
    taken for today only, and any other day is refused before any request. With no days (only
    snapshots), they are taken for the day the run takes them, so a run started just before
    midnight is not refused just after it.
    """
    from assets.definitions import resources

    if first is None or last is None:
        if "funding_history" in selection:
            raise ValueError("funding history needs the days to replace")
        days = []
    else:
        days = day_range(first, date.fromordinal(last.toordinal() + 1))
        if not days:
            raise ValueError(f"empty range: {first} .. {last}")
        refuse_past([name for name in selection if name != "funding_history"], first, last)
    tags = {RUNNER_TAG: _runner()}
    run_config: dict[str, object] = dict(QUIET)
    partition_key: str | None = None
    if "funding_history" in selection and first is not None and last is not None:
        funding = {"first_day": first.isoformat(), "last_day": last.isoformat()}
        run_config["ops"] = {"funding_history": {"config": funding}}
        partition_key = month_of(first)
        if month_of(last) != partition_key:
            tags |= {
                "dagster/asset_partition_range_start": month_of(first),
                "dagster/asset_partition_range_end": month_of(last),
            }
            partition_key = None
    dagster = instance()
    for run_id in release_abandoned_runs(dagster):
        console.print(
            f"[yellow]run {run_id} was left unfinished by a killed process: marked failed, "
            "its API pool slot freed[/yellow]"
        )
    job = dg.Definitions(
        assets=list(ALL_ASSETS),
        jobs=[dg.define_asset_job(ASSET_RUN_JOB, selection=list(selection))],
        resources=resources(),
    ).resolve_job_def(ASSET_RUN_JOB)
    # The run's id is chosen here so that its events can be watched from the first one on.
    run_id = str(uuid.uuid4())
    # A progress step per day written: every day of funding, one per snapshot table.
    total = sum(len(days) if name == "funding_history" else 1 for name in selection)
    with (
        _stop_promptly(dagster, run_id),
        progress_bar(console, total, title) as bar,
        watched(dagster, run_id, console),
    ):
        result = job.execute_in_process(
            run_config=run_config,
            instance=dagster,
            partition_key=partition_key,
            raise_on_error=False,
            run_id=run_id,
            tags=tags,
        )
        bar.succeeded = result.success
    return outcome(dagster, run_id, success=result.success)


@contextmanager
def _stop_promptly(instance: dg.DagsterInstance, run_id: str) -> Iterator[None]:
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
            run = instance.get_run_by_id(run_id)
            if run is not None:
                instance.report_engine_event(
                    "whitebit-etl was asked to stop (SIGTERM or SIGINT) while the run waited "
                    "between steps: the run was interrupted",
                    run,
                )
