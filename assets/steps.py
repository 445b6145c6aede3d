"""What the step of every API asset shares: the account tag, the retry policy and the interrupts
(SIGINT, SIGTERM) it stops on (`INTERRUPTS`), its progress and its run metadata."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from types import FrameType
from typing import Any, Final

import dagster as dg

from pipeline.whitebit import WalkStats, WhiteBITError
from warehouse import Warehouse, catalog, layout

from . import checks
from .dagster_private import DagsterExecutionInterruptedError
from .loading import Written

# The single-run backfill policy is beta in Dagster 1.13, and exactly what a range of days needs.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`", category=dg.BetaWarning)

#: The tag every asset of an account carries, with the account's name.
ACCOUNT_TAG: Final = "whitebit/account"
#: The tag of a run whose command refreshes the catalog once all its runs are done (the demo):
#: its steps leave the catalog as it is, where each would rebuild it after its first write.
CATALOG_AFTER_TAG: Final = "whitebit/catalog_after_runs"
#: A step that failed on the exchange (after the client's own retries) is tried again later;
#: only for transient failures (see `retry_only_transient`).
API_RETRY: Final = dg.RetryPolicy(
    max_retries=2, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


def refresh_catalog(context: dg.AssetExecutionContext, wh: Warehouse) -> None:
    """Rebuild the catalog after a write when it no longer shows what the warehouse holds
    (`catalog.refresh_if_stale`), unless the run's command does it after its runs."""
    if CATALOG_AFTER_TAG not in context.run.tags:
        catalog.refresh_if_stale(wh)


#: Progress of a run, one record per day written: the CLI shows it as a progress bar.
PROGRESS_LOGGER: Final = "assets.progress"
PREVIEW_ROWS: Final = 5


class Interrupts:
    """Whether this process was asked to stop (SIGINT, SIGTERM) while a run went: the run's later
    steps then stop at once, none is retried, and the command line marks the run canceled.
    Signals are the process's, so this is too: `INTERRUPTS`."""

    def __init__(self) -> None:
        self._noted = threading.Event()
        self.how = ""

    def note(self, how: str) -> None:
        self.how = self.how or how
        self._noted.set()

    def noted(self) -> bool:
        return self._noted.is_set()

    def clear(self) -> None:
        self._noted.clear()
        self.how = ""


INTERRUPTS: Final = Interrupts()


class _InterruptLogged(logging.Filter):
    """Leaves out a log record of the ``KeyboardInterrupt`` our handlers raise once this process
    was asked to stop: SQLAlchemy's pools log one that lands in a connection's close, traceback
    and all, then raise it on (the run ends canceled; the record would say nothing more)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (INTERRUPTS.noted() and isinstance(error, KeyboardInterrupt))


def quiet_interrupted_pools() -> None:
    """`_InterruptLogged` on the logger of each kind of SQLAlchemy pool (a pool logs on its
    class's logger, ``<module>.<class>``)."""
    from sqlalchemy.pool import Pool

    kinds, seen = [Pool], []
    while kinds:
        kind = kinds.pop()
        seen.append(kind)
        kinds += kind.__subclasses__()
    for kind in seen:
        pool = logging.getLogger(f"{kind.__module__}.{kind.__name__}")
        if not any(isinstance(f, _InterruptLogged) for f in pool.filters):
            pool.addFilter(_InterruptLogged())


@contextmanager
def _noting_signals() -> Iterator[None]:
    """SIGINT and SIGTERM noted in `INTERRUPTS`, then raised as ``KeyboardInterrupt`` (in place of
    Dagster's handler, which raises its own error at once) until the step has stopped.

    A handler's exception can be lost where it lands: DuckDB ends its query with
    ``RuntimeError('Query interrupted')`` (the note tells), asyncio logs any exception but a
    ``KeyboardInterrupt`` raised in a socket write as a fatal error and drops it, and Python
    prints one raised in a weakref callback as ignored. So the signal is sent again every half
    second while the step goes on, and one ignored is not printed: the note has it."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return
    ended = threading.Event()
    main = threading.main_thread().ident

    def again(signum: int) -> None:
        while not ended.wait(0.5) and main is not None:
            signal.pthread_kill(main, signum)

    def noting(signum: int, _frame: FrameType | None) -> None:
        if not INTERRUPTS.noted():
            threading.Thread(target=again, args=(signum,), daemon=True, name="interrupt").start()
        INTERRUPTS.note(signal.Signals(signum).name)
        raise KeyboardInterrupt

    default_hook = sys.unraisablehook

    def unraisable(info: Any) -> None:
        if not (INTERRUPTS.noted() and isinstance(info.exc_value, KeyboardInterrupt)):
            default_hook(info)

    previous = {s: signal.signal(s, noting) for s in (signal.SIGINT, signal.SIGTERM)}
    sys.unraisablehook = unraisable
    quiet_interrupted_pools()
    try:
        yield
    finally:
        ended.set()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = default_hook


def _interrupted() -> dg.Failure:
    INTERRUPTS.note("SIGINT or SIGTERM")
    return dg.Failure(
        description=f"interrupted ({INTERRUPTS.how}): the step stopped, every partition it had "
        "not finished is as it was",
        allow_retries=False,
    )


@contextmanager
def retry_only_transient() -> Iterator[None]:
    """Let Dagster retry a step only when waiting could help: the exchange stayed unavailable, or
    its answers were cut short. A refusal (bad credentials, a permission, a validation), an
    answer that breaks the contract, bad data or a bug fails the step once, with its message. An
    interrupt (SIGINT, SIGTERM) fails it once too, and every later step of the run at once,
    whatever the exception it ended the step with."""
    if INTERRUPTS.noted():
        raise dg.Failure(
            description=f"not run: the run was interrupted ({INTERRUPTS.how})", allow_retries=False
        )
    try:
        with _noting_signals():
            yield
    except (DagsterExecutionInterruptedError, KeyboardInterrupt):
        raise _interrupted() from None
    except dg.Failure:
        raise
    except Exception as exc:
        if INTERRUPTS.noted():
            raise _interrupted() from None
        if isinstance(exc, WhiteBITError):
            if exc.retryable:
                raise
            raise dg.Failure(description=str(exc), allow_retries=False) from exc
        raise dg.Failure(description=f"{type(exc).__name__}: {exc}", allow_retries=False) from exc


def log_progress(account: str, table: str, day: date, rows: int, rejected: int) -> None:
    logging.getLogger(PROGRESS_LOGGER).info(
        "%s %s %s: %d rows, %d rejected",
        account,
        table,
        day,
        rows,
        rejected,
        extra={"account": account, "table": table, "day": day, "rows": rows},
    )


def walk_metadata(stats: WalkStats, written: Written, *, simulated: bool) -> dict[str, Any]:
    """The numbers of a materialization: rows, days, pages, slices, retries, rejects, and
    the fields the exchange sent that the spec does not name (``unknown_fields``, empty when
    none; the ``schema_drift`` check warns on the same)."""
    meta: dict[str, Any] = {
        "dagster/row_count": written.rows,
        "days_written": len(written.days),
        "rejected": written.rejected,
        "exact_duplicates": written.duplicates,
        "source": "embedded simulator" if simulated else "WhiteBIT",
    }
    if written.rejects_preview:
        meta["first_reject_reasons"] = written.rejects_preview
    meta |= {
        "retries": stats.retries,
        "rate_limited_answers": stats.rate_limited,
        "unknown_fields": dg.MetadataValue.json(dict(sorted(stats.unknown_fields.items()))),
    }
    if stats.slices:  # a walk's: single calls have no pages to count
        meta |= {
            "pages_fetched": stats.pages,
            "rows_fetched": stats.rows,
            "slices": stats.slices,
            "repeats_dropped": stats.duplicates_dropped,
            "walk_seconds": round(stats.elapsed_s, 3),
        }
    if stats.notes:
        meta["notes"] = stats.notes
    return meta


def preview(wh: Warehouse, table: str, account: str, days: Sequence[date]) -> dg.MetadataValue:
    """The first rows of the account's newest written day, as a markdown table."""
    if not days:
        return dg.MetadataValue.md("_no rows_")
    newest = max(days)
    path = layout.partition_file(table, (account, newest))
    if not wh.store.exists(path):
        return dg.MetadataValue.md("_no rows_")
    where, params = checks.of_days(table, [newest])
    with wh.store.copied([path]) as (store, (located,)), catalog.reader(store) as con:
        relation = con.sql(
            f"SELECT * FROM read_parquet(?) {where} LIMIT ?",  # noqa: S608
            params=[located, *params, PREVIEW_ROWS],
        )
        columns = relation.columns
        rows = relation.fetchall()
    header = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in rows)
    return dg.MetadataValue.md(header + body)
