"""What a CLI run says on the terminal as it happens, in place of Dagster's console log: a
progress bar of the days written, warnings and errors the steps log, each step Dagster will retry
(in how long, and why), each client retry that waits long enough to notice."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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

from assets.outcomes import error_text
from assets.steps import PROGRESS_LOGGER
from pipeline.whitebit import RETRY_WAIT_FIELD

#: Client retry waits from this long on are shown as they begin. Shorter ones pass unshown: a
#: healthy exchange's blip costs a fraction of a second (the run's metadata counts it), while
#: a wait of a second or more, and the doubling waits after it, are long enough to wonder about.
CLIENT_WAIT_SHOWN_S: Final = 1.0
#: The logger of `pipeline.whitebit`'s client, which logs each retry at INFO before waiting,
#: the wait in seconds as the record's `RETRY_WAIT_FIELD`.
CLIENT_LOGGER: Final = "pipeline.whitebit"
#: The warehouse's loggers: a wait for a store's lease is said there at WARNING.
WAREHOUSE_LOGGER: Final = "warehouse"
#: A wait for a pool's slot is said this often.
WAIT_SAID_EVERY_S: Final = 5.0


class _ProgressHandler(logging.Handler):
    """Advances a progress bar for every day a run writes, once per day and table: a step tried
    again writes its days again, and the bar never counts past its total."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        super().__init__(logging.INFO)
        self._progress, self._task = progress, task
        self._written: set[tuple[object, ...]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        done = tuple(getattr(record, name, None) for name in ("account", "table", "day"))
        fresh = done not in self._written
        self._written.add(done)
        self._progress.update(self._task, advance=int(fresh), description=record.getMessage())


@dataclass
class _Ending:
    """How a progress bar ends: failed, unless the run is said to have succeeded."""

    succeeded: bool = False


@contextmanager
def progress_bar(console: Console, total: int | None, title: str) -> Iterator[_Ending]:
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

    def __init__(self, console: Console, warned: set[str] | None = None) -> None:
        super().__init__(logging.INFO)
        self._console = console
        self._step = ""
        # What was said: each step of a run, and each run of a command, may warn the same (the
        # simulator's warning, a wait for the same run).
        self.warned: set[str] = set() if warned is None else warned

    def say(self, text: str, style: str) -> None:
        self._console.print(f"[{style}]{escape(text)}[/{style}]", soft_wrap=True)

    def event(self, entry: dg.EventLogEntry) -> None:
        event = entry.dagster_event
        if event is None:
            level = entry.level if isinstance(entry.level, int) else logging.INFO
            if level >= logging.WARNING and entry.user_message not in self.warned:
                self.warned.add(entry.user_message)
                where = f"{entry.step_key}: " if entry.step_key else ""
                self.say(where + entry.user_message, "red" if level >= logging.ERROR else "yellow")
        elif event.event_type == dg.DagsterEventType.STEP_START and event.step_key:
            self._step = event.step_key
        elif event.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY:
            data = event.step_retry_data
            reason = error_text(data.error).splitlines()[0]
            self.say(
                f"{event.step_key} failed; Dagster tries it again in "
                f"{data.seconds_to_wait or 0:.1f} s. Why: {reason}",
                "yellow",
            )

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        where = f"{self._step}: " if self._step else ""
        if record.levelno >= logging.WARNING:  # the client's own warnings, as it logs them
            self.say(where + message, "red" if record.levelno >= logging.ERROR else "yellow")
            return
        wait = getattr(record, RETRY_WAIT_FIELD, None)
        if isinstance(wait, float) and wait >= CLIENT_WAIT_SHOWN_S:
            self.say(f"{where}waiting for the exchange: {message}", "yellow")


@contextmanager
def watched(
    instance: dg.DagsterInstance,
    run_id: str,
    console: Console,
    waits: Callable[[], Sequence[str]] = tuple,
    said: set[str] | None = None,
) -> Iterator[None]:
    """While the block runs, ``console`` says what happens in run ``run_id`` (see `_Watch`),
    and what it waits for (``waits``: a line each, looked at every `WAIT_SAID_EVERY_S`), each
    wait once, whether a terminal shows the progress or not. A message the command said before
    (``said``: those of its earlier runs) is not said again."""
    watch = _Watch(console, said)
    instance.add_event_listener(run_id, watch.event)
    done = threading.Event()

    def waiting() -> None:
        while not done.wait(WAIT_SAID_EVERY_S):
            for line in waits():
                if line not in watch.warned:
                    watch.warned.add(line)
                    watch.say(line, "yellow")

    thread = threading.Thread(target=waiting, daemon=True, name="pool-wait")
    thread.start()
    try:
        with _listening(CLIENT_LOGGER, watch), _listening(WAREHOUSE_LOGGER, watch):
            yield
    finally:
        done.set()
        thread.join()
