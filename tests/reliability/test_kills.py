"""A backfill SIGKILLed anywhere and run again leaves exactly the fault-free warehouse, and no
reader ever sees a partial partition.

Each case starts from a warehouse that already holds the range (the interesting case: a kill
during a *re*write), runs the real CLI (``materialize funding_history --from .. --to ..``) in a
child process that `tests.reliability.killer` SIGKILLs at one point (while the walk is paging,
in the middle of a Parquet file, between a complete temp file and its rename, while the DuckDB
catalog is being rebuilt), then runs the CLI again, normally (in this process: the run after a
kill is any run). Meanwhile a reader thread reads
every partition file (pyarrow) and the catalog's view (DuckDB) again and again; every read must
succeed and find each month's (and each day's) full row count. Afterwards the warehouse equals
a fault-free run's, table for table, no temp file is left, and the Dagster instance shows the
killed run as failed.

In a warehouse of two accounts (an accounts file of the simulator's main account and a
sub-account, both loaded once), a run of one account (``--account main``) is killed the same way
and run again: the other account's files keep their bytes and their modification times all the
while, readers of either account see whole partitions, and the killed account's tables equal the
fault-free ones.
"""

from __future__ import annotations

import shutil
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow.parquet as pq
import pytest

from assets.accounts import DEFAULT_ACCOUNT
from assets.steps import ACCOUNT_TAG
from pipeline.simulator import SpawnedSimulator
from tests.support.cli_runs import (
    TWO_ACCOUNTS,
    Child,
    Rows,
    account_files,
    cli_env,
    invoke,
    two_accounts_env,
    warehouse_rows,
)
from warehouse import Warehouse, catalog, partitions
from warehouse.root import CATALOG_FILE
from warehouse.schemas import month_of

#: The backfill: parts of three months, so the walk pages on while the first months are already
#: rewritten.
RANGE = ["materialize", "funding_history", "--from", "2026-07-25", "--to", "2026-09-06"]


@dataclass(frozen=True)
class Reference:
    root: Path
    rows: Rows
    counts: dict[date, int]

    def month_counts(self) -> dict[str, int]:
        months: dict[str, int] = {}
        for day, count in self.counts.items():
            months[month_of(day)] = months.get(month_of(day), 0) + count
        return months


def _reference(root: Path, account: str = DEFAULT_ACCOUNT) -> Reference:
    """The range as an undisturbed run wrote it, of one account of the warehouse at ``root``."""
    rows = warehouse_rows(root, account)
    counts: dict[date, int] = {}
    for row in rows["funding_history"]:
        counts[row[-1]] = counts.get(row[-1], 0) + 1
    assert len(counts) == 44
    assert rows["_rejects"] == []
    return Reference(root, rows, counts)


@pytest.fixture(scope="module")
def reference(exchange: SpawnedSimulator, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The range written by an undisturbed run."""
    base = tmp_path_factory.mktemp("kills-reference")
    root = base / "warehouse"
    run = invoke(RANGE, cli_env(exchange, root, base / "dagster"))
    assert run.exit_code == 0, run.output
    return _reference(root)


@pytest.fixture(scope="module")
def two_accounts(
    exchange: SpawnedSimulator, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Reference]:
    """The range of each of `TWO_ACCOUNTS`, written into one warehouse by an undisturbed
    command (a run per account)."""
    base = tmp_path_factory.mktemp("kills-two-accounts")
    root = base / "warehouse"
    env = two_accounts_env(exchange, root, base / "dagster", base / "accounts.yaml")
    run = invoke(RANGE, env)
    assert run.exit_code == 0, run.output
    references = {account: _reference(root, account) for account in TWO_ACCOUNTS}
    # Each account has its own funding: a mix-up of the two would show.
    assert references["main"].rows["funding_history"] != references["sub_1"].rows["funding_history"]
    return references


class Reader(threading.Thread):
    """An analyst reading the funding partitions (of each account referred to) again and again
    while runs write them."""

    def __init__(
        self, root: Path, references: Mapping[str, Reference], pause: float = 0.01
    ) -> None:
        super().__init__(daemon=True)
        self.root, self.pause = root, pause
        self.counts = {account: ref.counts for account, ref in references.items()}
        self.months = {account: ref.month_counts() for account, ref in references.items()}
        self.reads = 0
        self.problems: list[str] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            for account in self.counts:
                self._read_files(account)
            self._read_catalog()
            self._done.wait(self.pause)  # a breath between rounds, on a shared machine

    def _read_files(self, account: str) -> None:
        months = self.months[account]
        store = Warehouse.open(self.root).store
        for path in partitions.partition_files(store, "funding_history", account=account):
            month = path.split("/")[-2].removeprefix("funding_month=")
            try:
                found = pq.read_table(self.root / path).num_rows
            except Exception as error:  # the test asserts there was none
                self.problems.append(f"{path}: {type(error).__name__}: {error}")
                continue
            self.reads += 1
            if found != months.get(month):
                self.problems.append(f"{account} {month}: {found} rows, it has {months[month]}")

    def _read_catalog(self) -> None:
        try:
            with catalog.connect(Warehouse.open(self.root)) as con:
                rows = con.execute(
                    "SELECT account, funding_date, count(*) FROM funding_history GROUP BY ALL"
                ).fetchall()
        except Exception as error:  # the test asserts there was none
            self.problems.append(f"catalog: {type(error).__name__}: {error}")
            return
        self.reads += 1
        found: dict[str, dict[date, int]] = {}
        for account, day, count in rows:
            found.setdefault(account, {})[day] = count
        if found != self.counts:
            self.problems.append(f"catalog: rows per account and day {found}")

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=60)


def _files(root: Path, account: str | None = None) -> list[str]:
    """The funding partition files the warehouse lists (of one account, or of all)."""
    store = Warehouse.open(root).store
    return partitions.partition_files(store, "funding_history", account=account)


def _built_by_an_older_version(wh: Warehouse) -> None:
    """The warehouse's catalog, its views reading every file, as a version from before catalogs
    named their design built it: the run rebuilds it after its writes (where ``catalog`` kills),
    and a reader reads through it meanwhile."""
    catalog.refresh(wh)
    with duckdb.connect(str(wh.catalog_path)) as con:
        con.execute(f"DROP VIEW {catalog.ROOT_VIEW}")
        root = wh.location.replace("'", "''")
        older = f"SELECT '{root}' AS root, true AS had_files"
        con.execute(f"CREATE VIEW {catalog.ROOT_VIEW} AS {older}")


def _inodes(root: Path, account: str = DEFAULT_ACCOUNT) -> dict[str, int]:
    """Each month's file's inode: a file rewritten is a new one."""
    return {p.split("/")[-2]: (root / p).stat().st_ino for p in _files(root, account)}


def _leftovers(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith((".tmp", ".tmp.wal")))


def _readable(path: Path) -> bool:
    try:
        pq.read_metadata(path)
    except Exception:  # a half-written file is not Parquet: that is the point
        return False
    return True


@pytest.mark.parametrize(
    ("point", "at", "chunk_records"),
    [
        ("walk", 1, 20),  # the next page once a month is rewritten: more to page through
        ("parquet-mid-file", 3, None),  # two months rewritten, the third half in its temp file
        ("parquet-before-rename", 3, None),  # two rewritten, the third whole, not yet renamed
        ("catalog", 1, None),  # every month rewritten, the new catalog half built
    ],
)
def test_killed_and_run_again_the_warehouse_is_the_fault_free_one(
    exchange: SpawnedSimulator,
    reference: Reference,
    tmp_path: Path,
    point: str,
    at: int,
    chunk_records: int | None,
) -> None:
    root, home = tmp_path / "warehouse", tmp_path / "dagster"
    shutil.copytree(reference.root / "parquet", root / "parquet")
    _built_by_an_older_version(Warehouse.open(root))
    before = _inodes(root)
    catalog_before = (root / CATALOG_FILE).stat().st_ino
    env = cli_env(exchange, root, home)

    reader = Reader(root, {DEFAULT_ACCOUNT: reference})
    reader.start()
    try:
        killer = ["--at", str(at)]
        if chunk_records is not None:
            killer += ["--chunk-records", str(chunk_records)]
        killed = Child.start(
            "tests.reliability.killer", [point, *killer, "--", *RANGE], env, tmp_path / "killed"
        )
        assert killed.wait() == -signal.SIGKILL, killed.output
        reads_while_killed = reader.reads

        # Where the kill landed, as the files show it.
        rewritten = [day for day, inode in _inodes(root).items() if inode != before[day]]
        leftovers = _leftovers(root)
        if point == "walk":
            assert 0 < len(rewritten) < len(before), rewritten
        elif point.startswith("parquet"):
            assert len(rewritten) == at - 1, rewritten
            (temp,) = leftovers
            assert temp.name.startswith(".data.parquet.")
            assert _readable(temp) == (point == "parquet-before-rename")
        else:
            assert len(rewritten) == len(before)
            # The half-built catalog (and its write-ahead log) beside the old one.
            assert leftovers
            assert all(p.name.startswith(f".{CATALOG_FILE}.") for p in leftovers)
            assert (root / CATALOG_FILE).stat().st_ino == catalog_before
        # Temp files are dot-named beside the partition: no reader's glob or view sees them.
        assert not any(p.split("/")[-1].startswith(".") for p in _files(root))

        again = invoke(RANGE, env)
        assert again.exit_code == 0, again.output
        assert "left unfinished by a killed process" in again.output
    finally:
        reader.stop()

    assert reader.problems == []
    assert reads_while_killed > 0
    assert warehouse_rows(root) == reference.rows
    assert _leftovers(root) == []
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        statuses = sorted(run.status.value for run in instance.get_runs())
    assert statuses == ["FAILURE", "SUCCESS"]


@pytest.mark.parametrize(
    ("point", "at", "chunk_records"),
    [
        ("walk", 1, 20),  # the run and its writer killed while the walk pages on
        ("parquet-mid-file", 3, None),  # two months rewritten, the third half in its temp file
        ("catalog", 1, None),  # the account's months rewritten, the shared catalog half built
    ],
)
def test_one_account_killed_and_run_again_leaves_the_other_account_untouched(
    exchange: SpawnedSimulator,
    two_accounts: dict[str, Reference],
    tmp_path: Path,
    point: str,
    at: int,
    chunk_records: int | None,
) -> None:
    root, home = tmp_path / "warehouse", tmp_path / "dagster"
    shutil.copytree(two_accounts["main"].root / "parquet", root / "parquet")
    _built_by_an_older_version(Warehouse.open(root))
    env = two_accounts_env(exchange, root, home, tmp_path / "accounts.yaml")
    untouched = account_files(root, "sub_1")
    assert untouched
    before = _inodes(root, "main")
    catalog_before = (root / CATALOG_FILE).stat().st_ino
    one_account = [*RANGE, "--account", "main"]

    reader = Reader(root, two_accounts, pause=0.05)  # twice the files a round: a longer breath
    reader.start()
    try:
        killer = ["--at", str(at)]
        if chunk_records is not None:
            killer += ["--chunk-records", str(chunk_records)]
        killed = Child.start(
            "tests.reliability.killer",
            [point, *killer, "--", *one_account],
            env,
            tmp_path / "killed",
        )
        assert killed.wait() == -signal.SIGKILL, killed.output
        reads_while_killed = reader.reads

        # The kill landed in the killed account's files (and the catalog), nowhere else.
        rewritten = [day for day, inode in _inodes(root, "main").items() if inode != before[day]]
        leftovers = _leftovers(root)
        if point == "walk":
            assert 0 < len(rewritten) < len(before), rewritten
        elif point == "parquet-mid-file":
            assert len(rewritten) == at - 1, rewritten
            (temp,) = leftovers
            assert temp.parent.parent.name == "account=main", temp
        else:
            assert len(rewritten) == len(before)
            assert leftovers
            assert all(p.name.startswith(f".{CATALOG_FILE}.") for p in leftovers)
            assert (root / CATALOG_FILE).stat().st_ino == catalog_before
        assert account_files(root, "sub_1") == untouched

        again = invoke(one_account, env)
        assert again.exit_code == 0, again.output
        assert "left unfinished by a killed process" in again.output
    finally:
        reader.stop()

    assert reader.problems == []
    assert reads_while_killed > 0
    assert account_files(root, "sub_1") == untouched  # same bytes, same modification times
    assert {account: warehouse_rows(root, account) for account in TWO_ACCOUNTS} == {
        account: reference.rows for account, reference in two_accounts.items()
    }
    assert _leftovers(root) == []
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        runs = instance.get_runs()
    assert sorted(run.status.value for run in runs) == ["FAILURE", "SUCCESS"]
    assert {run.tags[ACCOUNT_TAG] for run in runs} == {"main"}
