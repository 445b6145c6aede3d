"""Fixtures shared by every test: simulators served over real loopback HTTP; and, for the whole
session, a record of every secret handed out and a watch on where they land (`tests.leaks`),
which the last test of the session (marked ``after_all``) reads."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from pipeline.simulator import Scale, SimClock, Simulator
from tests.leaks import Ledger

#: The session's secrets and where they were seen (log records, reports).
LEDGER = Ledger()


#: Fixtures whose simulator holds a million funding entries: a test using one is slow.
LARGE_SIMULATORS = frozenset({"large_sim", "too_large_sim"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``slow`` the reliability suite (end to end through Dagster, processes killed) and
    every test on a large simulator, beside those marked by hand; ``make test-fast`` leaves them
    out. Tests marked ``after_all`` run last, after everything else the session runs."""
    for item in items:
        reliability = item.path.parent.name == "reliability"
        if reliability or LARGE_SIMULATORS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("after_all") is not None)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every report's failure text and captured output (stdout, stderr, log), read for secrets."""
    LEDGER.look(f"{report.nodeid} ({report.when}) failure text", report.longreprtext)
    for section, content in report.sections:
        LEDGER.look(f"{report.nodeid} ({report.when}) {section}", content)


@pytest.fixture(scope="session", autouse=True)
def _secrets_are_watched() -> Iterator[None]:
    """From the first test on: record the secrets handed out, and read every log record."""
    handler = LEDGER.log_handler()
    root = logging.getLogger()
    with pytest.MonkeyPatch.context() as patch:
        LEDGER.watch(patch)
        root.addHandler(handler)
        try:
            yield
        finally:
            root.removeHandler(handler)


#: A fixed moment for reproducible data: 2026-09-21 13:33:20 UTC.
FROZEN_AT = 1_790_000_000


@pytest.fixture(scope="session")
def sim() -> Iterator[Simulator]:
    """One small simulator for tests that only read (no faults, no clock moves, no key resets)."""
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as s:
        yield s


@pytest.fixture
def own_sim() -> Iterator[Simulator]:
    """A simulator of the test's own, free to be steered (faults, clock, budgets, resets)."""
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as s:
        yield s


@pytest.fixture(scope="session")
def large_sim() -> Iterator[Simulator]:
    """The large scale: the offset window bites, a million funding entries exist."""
    with Simulator(seed=7, scale=Scale.large(), clock=SimClock(FROZEN_AT)) as s:
        yield s


@pytest.fixture
def sim_at() -> Iterator[Callable[[str], Simulator]]:
    """Start simulators at other scales (``Scale.parse`` text); each is the test's own."""
    started: list[Simulator] = []

    def start(scale: str) -> Simulator:
        s = Simulator(seed=7, scale=Scale.parse(scale), clock=SimClock(FROZEN_AT)).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def too_large_sim() -> Iterator[Simulator]:
    """One ticker, so splitting by ticker cannot bring the active slice under the window."""
    with Simulator(
        seed=7, scale=Scale.parse("investments=25000,tickers=1"), clock=SimClock(FROZEN_AT)
    ) as s:
        yield s
