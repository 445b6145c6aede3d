"""Fixtures shared by every test: simulators served over real loopback HTTP; and, for the whole
session, a record of every secret handed out and a watch on where they land (`tests.leaks`),
which the last test of the session (marked ``after_all``) reads.

``make test`` runs the suite in two sessions: most of it on three processes (pytest-xdist, whole
modules to a process), then the tests marked ``serial`` and the secrets scan in a session of their
own. Each process saves its ledger of secrets in the directory ``--secrets-ledgers`` names, and
the scan takes in the ledgers of the sessions before it (`earlier_sessions`)."""

from __future__ import annotations

import logging
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import s3fs

from pipeline.simulator import Scale, SimClock, Simulator
from tests.support import real_parts
from tests.support.leaks import LEDGER
from tests.support.s3 import S3Server
from tests.support.simulated import FROZEN_AT

#: Fixtures whose simulator holds a million funding entries: a test using one is slow.
LARGE_SIMULATORS = frozenset({"large_sim", "too_large_sim"})

TESTS = Path(__file__).parent
#: Modules that measure time (request pacing): marked ``serial``, they need the machine to
#: themselves; ``make test`` runs them in a session of their own, after the parallel one.
SERIAL_MODULES = frozenset({TESTS / "whitebit" / "test_pacing.py"})
#: The thirty modules that take longest, longest first (their durations in a whole suite's run):
#: three mostly waiting (on the daemon's per-minute ticks, on runs launched from the browser),
#: then whole CLI runs and nights. ``make test`` hands out whole modules to its workers (``--dist
#: loadfile``) in collection order (``--no-loadscope-reorder``): these first, so that the shorter
#: ones fill the workers around them at the end rather than a long one started last leaving the
#: others idle.
LONGEST_MODULES = tuple(
    TESTS / module
    for module in (
        "service/test_celery.py",
        "ui/test_dagster_ui.py",
        "assets/test_cli.py",
        "service/test_service.py",
        "reliability/test_concurrency.py",
        "reliability/test_s3.py",
        "assets/test_many_accounts.py",
        "reliability/test_kills.py",
        "reliability/test_terminal.py",
        "warehouse/test_s3.py",
        "reliability/test_fault_matrix.py",
        "ui/test_report_browser.py",
        "service/test_stop_materialize.py",
        "reliability/test_store_stopped.py",
        "reliability/test_instance_stopped.py",
        "reliability/test_bad_answers_flows.py",
        "reliability/test_bad_input.py",
        "assets/test_runs.py",
        "warehouse/test_reconciliation.py",
        "service/test_stop_service.py",
        "warehouse/test_snapshot_placement.py",
        "whitebit/test_funding_walk.py",
        "assets/test_demo.py",
        "simulator/test_accounts.py",
        "assets/test_materialize.py",
        "assets/test_mistakes.py",
        "simulator/test_ledger.py",
        "warehouse/test_report.py",
        "whitebit/test_flows_walk.py",
        "assets/test_histories_land.py",
    )
)
if missing := [str(path) for path in LONGEST_MODULES if not path.exists()]:
    raise pytest.UsageError(f"LONGEST_MODULES names modules that are not there: {missing}")


def pytest_configure(config: pytest.Config) -> None:
    """A shell that starts `make test` in the background (``make test &``, nohup, a CI runner's
    script) has each process ignore SIGINT, and Dagster maps SIGTERM to SIGINT's handler after
    each run in-process: from then on every process the session started ignored SIGTERM, and
    each simulator it stopped took the full 10 s before being killed. Both are put back to
    Python's defaults, as a terminal leaves them."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--secrets-ledgers",
        metavar="DIR",
        type=Path,
        help="save each process's ledger of secrets in DIR; the secrets scan (after_all) takes in "
        "the ledgers already there and reads the files of their sessions too",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks ``slow`` the reliability suite (end to end through Dagster, processes killed) and
    every test on a large simulator, beside those marked by hand; ``make test-fast`` leaves them
    out. Marks ``serial`` the tests of `SERIAL_MODULES`. Tests marked ``after_all`` run last,
    after everything else the session runs. On a pytest-xdist worker, `LONGEST_MODULES` come
    first (every worker orders its collection alike)."""
    for item in items:
        reliability = item.path.parent.name == "reliability"
        if reliability or LARGE_SIMULATORS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.path in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
    first = LONGEST_MODULES if hasattr(config, "workerinput") else ()
    items.sort(
        key=lambda item: (
            item.get_closest_marker("after_all") is not None,
            first.index(item.path) if item.path in first else len(first),
        )
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """On a pytest-xdist worker, a test marked ``serial`` would share the machine, and one
    marked ``after_all`` would be last on its worker only: both are refused there. The real
    parts started from here on are the test's (`tests.support.real_parts`)."""
    real_parts.begin()
    if hasattr(item.config, "workerinput"):
        for mark, why in (
            ("serial", "it measures time, so needs the machine to itself"),
            ("after_all", "it must run after every other test, in one process"),
        ):
            if item.get_closest_marker(mark) is not None:
                pytest.fail(f"marked {mark}, {why}: run it without -n (make test does)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """The real parts the test exercised, carried by its report."""
    try:
        return (yield)
    finally:
        values = getattr(item, "funcargs", {}).values()
        item.user_properties.append((real_parts.PROPERTY, real_parts.of_test(item, values)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many of the session's tests exercised each real part."""
    if real_parts.Counted.tests:
        terminalreporter.section("real parts")
        for line in real_parts.summary():
            terminalreporter.write_line(line)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every report's failure text and captured output (stdout, stderr, log), read for secrets;
    the real parts it exercised, counted."""
    real_parts.Counted.take(report)
    LEDGER.look(f"{report.nodeid} ({report.when}) failure text", report.longreprtext)
    for section, content in report.sections:
        LEDGER.look(f"{report.nodeid} ({report.when}) {section}", content)


class _Saved:
    """With ``--secrets-ledgers``: this process's ledger file and its base temp directory."""

    file: Path | None = None
    basetemp: Path | None = None


@pytest.fixture(scope="session", autouse=True)
def _secrets_are_watched(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """From the first test on: record the secrets handed out, and read every log record. With
    ``--secrets-ledgers``, the ledger is saved at once, as unfinished (a process that dies
    leaves it so), and again at the end of the session (`pytest_sessionfinish`)."""
    ledgers: Path | None = request.config.getoption("secrets_ledgers")
    if ledgers is not None:
        worker = getattr(request.config, "workerinput", {}).get("workerid", "main")
        _Saved.file = ledgers.resolve() / f"{worker}-{os.getpid()}.json"
        _Saved.basetemp = tmp_path_factory.getbasetemp()
        LEDGER.save(_Saved.file, _Saved.basetemp, finished=False)
    handler = LEDGER.log_handler()
    root = logging.getLogger()
    with pytest.MonkeyPatch.context() as patch:
        LEDGER.watch(patch)
        root.addHandler(handler)
        try:
            yield
        finally:
            root.removeHandler(handler)


@pytest.fixture(scope="session", autouse=True)
def _real_parts_are_seen() -> Iterator[None]:
    """From the first test on: each real part noted as it starts (`tests.support.real_parts`)."""
    with pytest.MonkeyPatch.context() as patch:
        real_parts.watch(patch)
        yield


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The ledger saved again, finished: every report of the session has been read."""
    if _Saved.file is not None and _Saved.basetemp is not None:
        LEDGER.save(_Saved.file, _Saved.basetemp, finished=True)


@pytest.fixture
def earlier_sessions(request: pytest.FixtureRequest) -> list[Path]:
    """The base temp directory of each session whose ledger is in ``--secrets-ledgers`` (in
    ``make test``, each worker of the parallel session), that ledger taken into `LEDGER`. Every
    one of those sessions must have finished."""
    ledgers: Path | None = request.config.getoption("secrets_ledgers")
    if ledgers is None:
        return []
    found = []
    for path in sorted(ledgers.resolve().glob("*.json")):
        if path == _Saved.file:
            continue
        basetemp, finished = LEDGER.take_in(path)
        assert finished, f"{path}: its session did not finish, so its ledger is not whole"
        assert basetemp.is_dir(), f"{path}: its session's files are gone ({basetemp})"
        found.append(basetemp)
    return found


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


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server, one per test process."""
    server = S3Server(tmp_path_factory.mktemp("s3") / "moto.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_requests(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The S3 requests this process sends (through s3fs) from here on, by operation."""
    sent: Counter[str] = Counter()
    send = s3fs.S3FileSystem._call_s3

    async def counted(self: s3fs.S3FileSystem, method: str, *args: Any, **kwargs: Any) -> Any:
        sent[method] += 1
        return await send(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
    return sent


@pytest.fixture
def s3_root(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """``s3://<a new bucket>/warehouse``, this process's AWS variables pointing at the server (and
    the local catalog and state under the test's directory). The bucket's objects are copied
    under the test's directory afterwards, where the secrets scan reads them."""
    s3_server.point_here(monkeypatch)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    bucket = s3_server.bucket()
    yield f"s3://{bucket}/warehouse"
    s3_server.mirror(bucket, tmp_path / "s3-objects")
