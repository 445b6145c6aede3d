"""Running the code location's assets from the command line, through Dagster.

Runs go to the shared instance (`assets.instance`: the one ``make ui`` opens), so the UI shows
them afterwards. A range of days is one run (the single-run backfill policy of
``funding_history``). The terminal says what happens as it happens (`assets.console`); once the
run ends, `assets.outcomes` reads back from the instance what it has to say: each failed step with
its message, each check that did not pass with its description. Each run is tagged with its
process, and runs of CLI processes that were killed are released before a new one starts
(`assets.instance.release_dead_runs`).
"""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from typing import Final

import dagster as dg
from rich.console import Console

from assets.accounts import Account
from assets.console import progress_bar, watched
from assets.dagster_private import DagsterExecutionInterruptedError, check_captured_interrupt
from assets.instance import instance, release_dead_runs, runner_tag
from assets.jobs import build
from assets.outcomes import RunOutcome, outcome
from assets.partitions import day_range
from assets.reporting import ACCOUNT_TAG
from assets.snapshots import refuse_past
from warehouse.schemas import month_of

#: Dagster's own console logging during CLI runs: none. The CLI says what happens (`_Watch`) and
#: sums up failures without their stacks (`outcome`); `make ui` has every event.
QUIET: Final = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
#: The job Dagster gives runs that materialize assets outside the location's jobs (the one
#: `dg.materialize` runs), so the UI lists CLI runs as it lists those.
ASSET_RUN_JOB: Final = "__ephemeral_asset_job__"


def materialize(
    selection: Sequence[str],
    first: date | None,
    last: date | None,
    *,
    account: Account,
    accounts: Sequence[Account],
    console: Console,
    title: str,
) -> RunOutcome:
    """Materialize the selected tables of one account (of ``accounts``, the deployment's) for
    days ``first .. last`` (inclusive) in one run.

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
    tags = runner_tag() | {ACCOUNT_TAG: account.name}
    run_config: dict[str, object] = dict(QUIET)
    partition_key: str | None = None
    (assets,) = build([account])
    if "funding_history" in selection and first is not None and last is not None:
        funding = {"first_day": first.isoformat(), "last_day": last.isoformat()}
        run_config["ops"] = {assets.funding.node_def.name: {"config": funding}}
        partition_key = month_of(first)
        if month_of(last) != partition_key:
            tags |= {
                "dagster/asset_partition_range_start": month_of(first),
                "dagster/asset_partition_range_end": month_of(last),
            }
            partition_key = None
    dagster = instance()
    for run_id in release_dead_runs(dagster, service_stopped=False):
        console.print(
            f"[yellow]run {run_id} was left unfinished by a killed process: marked failed, "
            "its API pool slot freed[/yellow]"
        )
    keys = [dg.AssetKey([*account.key_prefix, name]) for name in selection]
    job = dg.Definitions(
        assets=list(assets.assets),
        jobs=[dg.define_asset_job(ASSET_RUN_JOB, selection=keys)],
        resources=resources(accounts),
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
