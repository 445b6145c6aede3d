"""The Dagster UI in a real browser: `whitebit-etl ui` (``dagster dev`` over the command line's
instance) with no account configured, so on the embedded simulator's demo accounts (its main
account and a sub-account), driven by headless Chromium (Debian's) through Playwright."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import psutil
import pytest
from dagster import DagsterInstance, DagsterRunStatus
from playwright.sync_api import Browser, Page, expect, sync_playwright

from assets.accounts import load
from assets.service import left_after
from assets.settings import Settings
from pipeline import spec
from pipeline.spec import WALL_CLOCK
from tests.support import real_parts
from tests.support.service import serves
from warehouse import Warehouse

# `whitebit-etl ui` is dagster dev: its daemon launches the runs, on the embedded simulator.
pytestmark = [pytest.mark.browser, pytest.mark.real_parts(real_parts.DAEMON, real_parts.SIMULATOR)]

ROOT = Path(__file__).resolve().parents[2]
#: The demo's accounts: the main one (a B2B partner's key) and a sub-account without investments.
MAIN, SUB = "main", "sub_1"
ASSETS = (
    "funding_history",
    "investments",
    "fixed_plans",
    "main_balances",
    "trading_balances",
    "hedge_mode",
    "watcher_links",
)
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: How long a page may take, for an action or an assertion: Playwright's own 5 s for assertions
#: is too short on a busy machine (a "Launched run" waited on the code server longer than that).
UI_TIMEOUT_MS = 60_000


@dataclass
class DagsterDev:
    url: str
    warehouse: Path
    env: dict[str, str]
    #: ``whitebit-etl ui``, and where it prints.
    process: subprocess.Popen[bytes]
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """dagster dev runs a webserver, a daemon and code servers: stop the whole group, and kill
    what is left of it after a few seconds (nothing of its is asserted any more; a code server
    or a run may take half a minute to notice)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    base = tmp_path_factory.mktemp("ui")
    home, warehouse = base / "dagster", base / "warehouse"
    home.mkdir()
    port = _free_port()
    # No account configured: the UI shows the simulator's demo accounts, as after `make demo`.
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHITEBIT_")}
    env |= {"DAGSTER_HOME": str(home), "WAREHOUSE_ROOT": str(warehouse)}
    log = (base / "dagster-dev.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "assets.cli", "ui", "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not serves(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "dagster dev did not start:\n" + (base / "dagster-dev.log").read_text()[-3000:]
                )
            time.sleep(1)
        yield DagsterDev(url, warehouse, env, process, base / "dagster-dev.log")
    finally:
        _stop(process)
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    assert executable, "Debian's chromium is needed: scripts/ensure-chromium installs it"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, tmp_path: Path) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    p = context.new_page()
    p.set_default_timeout(UI_TIMEOUT_MS)
    expect.set_options(timeout=UI_TIMEOUT_MS)
    # Dagster greets a new browser with a "Join the Dagster community" modal, at a moment of its
    # choosing: whenever it covers the page, skip it.
    p.add_locator_handler(
        p.get_by_text("Join the Dagster community"),
        lambda _: p.get_by_role("button", name="Skip").click(),
    )
    yield p
    p.screenshot(path=str(tmp_path / "last.png"))
    context.close()


def _launch(page: Page, dev: DagsterDev, asset: str, partitions: str) -> None:
    """From an asset's page: Materialize…, pick partitions, launch."""
    page.goto(f"{dev.url}/assets/{asset}")
    page.get_by_role("button", name="Materialize…").click()
    dialog = page.locator("[role=dialog]")
    box = dialog.locator("input[type=text]").first
    box.fill(partitions)
    box.press("Enter")
    box.press("Tab")  # close the partition suggestions, which cover the dialog's buttons
    dialog.get_by_role("button", name="Launch", exact=False).last.click()
    expect(
        page.get_by_text("Created backfill").or_(page.get_by_text("Launched run"))
    ).to_be_visible()


def _finished_runs(dev: DagsterDev) -> list[DagsterRunStatus]:
    """Statuses of the instance's runs, read from its storage (as the UI reads them), but those
    of the report the sensor asks for after them."""
    with DagsterInstance.from_config(dev.env["DAGSTER_HOME"]) as instance:
        return [
            r.dagster_run.status
            for r in instance.get_run_records()
            if r.dagster_run.job_name != "report"
        ]


def _wait_for_runs(page: Page, dev: DagsterDev, succeeded: int) -> None:
    """``succeeded`` runs have succeeded and none failed, and the Runs page shows it."""
    page.goto("about:blank")  # no page polling the webserver meanwhile: both cost CPU
    deadline = time.monotonic() + 240
    while True:
        statuses = _finished_runs(dev)
        assert DagsterRunStatus.FAILURE not in statuses, statuses
        if statuses.count(DagsterRunStatus.SUCCESS) >= succeeded:
            break
        assert time.monotonic() < deadline, f"runs did not succeed in time: {statuses}"
        time.sleep(2)
    page.goto(f"{dev.url}/runs")
    expect(page.get_by_text("Success").first).to_be_visible()
    expect(page.get_by_text("Failure")).to_have_count(0)


def _funding_rows(warehouse: Path) -> list[tuple[object, ...]]:
    with duckdb.connect(str(Warehouse.open(warehouse).catalog_path), read_only=True) as con:
        return con.execute(
            "SELECT market, funding_time, position_side, funding_amount FROM funding_history"
        ).fetchall()


def test_every_asset_of_each_account_is_in_its_group(page: Page, dagster_dev: DagsterDev) -> None:
    # The group's list draws the rows in view only: a page tall enough for all of them.
    page.set_viewport_size({"width": 1400, "height": 4000})
    demo = {account.name: account for account in load(Settings.from_env({}))}
    for group in (MAIN, SUB):
        account = demo[group]
        page.goto(f"{dagster_dev.url}/locations/assets.definitions/asset-groups/{group}/list")
        for history in spec.HISTORIES.values():
            # A nested history is extracted with the one it is nested in.
            if account.extracts(history.nested_in or history):
                link = page.locator(f'a[href="/assets/{group}/{history.name}"]').first
                expect(link).to_be_visible()
    # The sub-account's key may not read the investments history: it has no asset of them.
    expect(page.locator(f'a[href="/assets/{SUB}/investments"]')).to_have_count(0)


def _months_back(n: int) -> str:
    """The month ``n`` months before this one, as its partition key (``2026-09``)."""
    year, month = divmod(WALL_CLOCK.today().year * 12 + WALL_CLOCK.today().month - 1 - n, 12)
    return f"{year:04d}-{month + 1:02d}"


def _month_files(warehouse: Path, account: str) -> set[str]:
    directory = warehouse / "parquet" / "funding_history" / f"account={account}"
    return {p.name for p in directory.iterdir()} if directory.exists() else set()


def test_a_range_backfill_of_one_account_fills_its_partitions_and_a_rerun_from_the_ui(
    page: Page, dagster_dev: DagsterDev
) -> None:
    first, last = _months_back(1), _months_back(0)
    _launch(page, dagster_dev, f"{MAIN}/funding_history", f"[{first}...{last}]")
    _wait_for_runs(page, dagster_dev, succeeded=1)
    rows = _funding_rows(dagster_dev.warehouse)
    months = {f"funding_month={first}", f"funding_month={last}"}
    assert _month_files(dagster_dev.warehouse, MAIN) == months
    assert _month_files(dagster_dev.warehouse, SUB) == set()  # the other account: untouched
    assert rows
    assert len(rows) == len(set(rows))
    # The partitions the run landed show as filled, and only those.
    page.goto(f"{dagster_dev.url}/assets/{MAIN}/funding_history?view=partitions")
    expect(page.get_by_text("Materialized (2)", exact=True)).to_be_visible()
    # A rerun of one month of the range replaces it: the same rows, one copy each.
    _launch(page, dagster_dev, f"{MAIN}/funding_history", first)
    _wait_for_runs(page, dagster_dev, succeeded=2)
    assert sorted(_funding_rows(dagster_dev.warehouse)) == sorted(rows)


def test_snapshots_show_no_partition_and_materialize_all_takes_today(
    page: Page, dagster_dev: DagsterDev
) -> None:
    before = _finished_runs(dagster_dev).count(DagsterRunStatus.SUCCESS)
    started = WALL_CLOCK.today()
    for asset in ASSETS[1:]:
        page.goto(f"{dagster_dev.url}/assets/{MAIN}/{asset}")
        expect(page.get_by_role("button", name=re.compile(r"Materialize$"))).to_be_visible()
        # No partition picker, no partitions tab: nothing that could never be filled.
        expect(page.get_by_role("button", name="Materialize…")).to_have_count(0)
        expect(page.get_by_role("tab", name="Partitions")).to_have_count(0)
    page.goto(f"{dagster_dev.url}/jobs")
    page.get_by_text("snapshots_job", exact=True).click()
    page.get_by_role("button", name=re.compile(r"Materialize all$")).click()
    expect(page.get_by_text("Launched run").first).to_be_visible()
    _wait_for_runs(page, dagster_dev, succeeded=before + 1)
    catalog_file = Warehouse.open(dagster_dev.warehouse).catalog_path
    with duckdb.connect(str(catalog_file), read_only=True) as con:
        for table, accounts in (
            ("hedge_mode", [MAIN, SUB]),
            ("main_balances", [MAIN, SUB]),
            ("investments", [MAIN]),
        ):
            found = con.execute(
                f"SELECT DISTINCT account, snapshot_date FROM {table} ORDER BY ALL"  # noqa: S608
            ).fetchall()
            assert [account for account, _ in found] == accounts, table
            # Today: the day the run took them, whichever side of midnight it fell on.
            assert all(started <= day <= WALL_CLOCK.today() for _, day in found), table


def test_dagster_job_backfill_for_a_range(page: Page, dagster_dev: DagsterDev) -> None:
    """The command-line backfill a user types after an outage: one run per month of the range."""
    first, last = _months_back(2), _months_back(1)
    before = _finished_runs(dagster_dev).count(DagsterRunStatus.SUCCESS)
    done = subprocess.run(
        [sys.executable, "-m", "dagster", "job", "backfill", "-w", "workspace.yaml",
         "-j", "funding_history_job", "--from", first, "--to", last, "--noprompt"],
        cwd=ROOT, env=dagster_dev.env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Launched backfill" in done.stdout
    _wait_for_runs(page, dagster_dev, succeeded=before + 2)
    for account in (MAIN, SUB):  # the job holds every account's funding
        assert {f"funding_month={first}", f"funding_month={last}"} <= _month_files(
            dagster_dev.warehouse, account
        )


# Last: it stops the module's `whitebit-etl ui`.
def test_sigterm_to_the_ui_command_alone_stops_dagster_dev_and_all_it_started_within_10_s(
    dagster_dev: DagsterDev,
) -> None:
    """`kill <pid of whitebit-etl ui>`, as a user or a service manager stops it: its daemon and
    webserver used to keep running, the port answering half a minute later."""
    process = dagster_dev.process
    assert process.poll() is None
    started = psutil.Process(process.pid).children(recursive=True)
    assert started
    stopped_at = time.monotonic()
    process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    left = left_after(started, max(0.0, 10 - (time.monotonic() - stopped_at)))
    seconds = time.monotonic() - stopped_at
    output = dagster_dev.log.read_text(errors="replace")
    assert code == 128 + signal.SIGTERM, output[-3000:]
    assert seconds < 10, output[-3000:]
    assert left == [], [p.cmdline()[:4] for p in left]
    assert not serves(dagster_dev.url)
    assert "Traceback" not in output, output[-3000:]
    assert "Stack Trace" not in output, output[-3000:]
