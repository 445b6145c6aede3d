"""A step's interrupt is an interrupt whatever exception ended the step. DuckDB runs the signal
handler during a query and, when it raises, ends the query with ``RuntimeError('Query
interrupted')``, the handler's exception lost (or, at times, goes on with the query): a library
that does so is played here by a function that raises the signal, swallows what the handler
raised and raises DuckDB's error. `tests/service/test_stop_materialize.py` interrupts a real
backfill."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

import dagster as dg
import pytest

from assets.steps import INTERRUPTS, retry_only_transient


@pytest.fixture
def raising_handler() -> Iterator[None]:
    """SIGINT and SIGTERM raise at once, as Dagster's handler does inside a step; the process's
    note of an interrupt cleared before and after."""

    def stop(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    INTERRUPTS.clear()
    try:
        yield
    finally:
        INTERRUPTS.clear()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _query_interrupted_by(signum: signal.Signals) -> None:
    """As DuckDB's query does when a signal comes while it runs."""
    with contextlib.suppress(BaseException):  # lost, as in DuckDB
        signal.raise_signal(signum)
    raise RuntimeError("Query interrupted")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_whose_exception_a_library_lost_fails_the_step_as_interrupted(
    raising_handler: None, signum: signal.Signals
) -> None:
    with pytest.raises(dg.Failure) as failed, retry_only_transient():
        _query_interrupted_by(signum)
    assert failed.value.description is not None
    assert failed.value.description.startswith(f"interrupted ({signum.name}): the step stopped")
    assert failed.value.allow_retries is False
    # The run's later steps stop at their start.
    stopped = rf"not run: the run was interrupted \({signum.name}\)"
    with pytest.raises(dg.Failure, match=stopped), retry_only_transient():
        pass


def test_the_handlers_in_place_before_the_step_are_in_place_after(raising_handler: None) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with retry_only_transient():
        pass
    assert {s: signal.getsignal(s) for s in before} == before


def test_the_same_error_without_a_signal_fails_with_its_own_message(raising_handler: None) -> None:
    with pytest.raises(dg.Failure, match="RuntimeError: Query interrupted"), retry_only_transient():
        raise RuntimeError("Query interrupted")
    assert not INTERRUPTS.noted()
