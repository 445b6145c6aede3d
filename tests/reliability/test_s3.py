"""The warehouse on S3 (moto's server on loopback) equals the same warehouse on local disk, row
for row, end to end: the real CLI, real Dagster, the simulator over loopback.

Each scenario runs once with a local root and once with an ``s3://`` root, and the two are read
back through their catalogs' views (every table, every column, ``ORDER BY ALL``): the nightly
job of a warehouse of two accounts, a backfill of months, a rerun of that range, a run SIGKILLed
while it rewrites a month on S3 and run again, two runs of the same months at once, and an
analyst's catalog of the store on another path. The command runs in this process (its settings
are the environment it is invoked with) but where the promise is a process's: the run killed,
the two runs at once, and the analyst's commands on a machine of their own.

Two runs of one scenario are seconds or minutes apart, so the clock the assets stamp rows with
is pinned (given to the command in-process, or `tests.support.pinned_clock` to a child):
``extracted_at`` and ``snapshot_date`` are the same in every run of this module, and no column
is left out of a comparison.

Kills and concurrent writers meet the store's lease (`warehouse.lease`); the killed run's lease
lives `LEASE_SECONDS` so that the run after it takes it over soon.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assets.accounts import DEFAULT_ACCOUNT
from pipeline.simulator import SimClock, SpawnedSimulator
from tests.support.cli_runs import (
    REPO,
    SNAPSHOT_TABLES,
    SUBACCOUNT_SNAPSHOT_TABLES,
    TWO_ACCOUNTS,
    Child,
    Rows,
    cli_env,
    invoke,
    two_accounts_env,
)
from tests.support.pinned_clock import PINNED_NOW_ENV
from tests.support.s3 import S3Server
from warehouse import Warehouse, catalog, layout, schemas
from warehouse.root import CATALOG_FILE
from warehouse.sources import SOURCES_DIR
from warehouse.store import LOCKS_DIR

#: The time every run of this module stamps its rows with (and the day of its snapshots).
PINNED = datetime.now(UTC).replace(microsecond=0)
#: A funding day of the simulator's history (it ends 2026-09-21).
ONE_DAY = "2026-09-12"
NIGHTLY = [
    ["materialize", "funding_history", "--partition", ONE_DAY],
    ["materialize", *SNAPSHOT_TABLES],
]
#: A backfill over parts of three months (three month partitions), as the kill tests take it.
MONTHS = ["2026-07", "2026-08", "2026-09"]
RANGE = ["materialize", "funding_history", "--from", "2026-07-25", "--to", "2026-09-06"]
#: The lease of the killed run and the run after it (seconds).
LEASE_SECONDS = 2


@dataclass
class Store:
    """The S3 server as this module uses it: its buckets are mirrored under ``mirrors`` at the
    end (the secrets scan reads them there)."""

    server: S3Server
    mirrors: Path
    buckets: list[str] = field(default_factory=list)

    def bucket(self) -> str:
        name = self.server.bucket()
        self.buckets.append(name)
        return name


@pytest.fixture(scope="module")
def store(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """This process's AWS variables pointing at the server (the catalogs read the store here
    too), for the whole module."""
    held = Store(s3_server, tmp_path_factory.mktemp("s3-objects"))
    with pytest.MonkeyPatch.context() as patch:
        s3_server.point_here(patch)
        patch.delenv("WAREHOUSE_CATALOG", raising=False)
        yield held
    for bucket in held.buckets:
        s3_server.mirror(bucket, held.mirrors / bucket)


@dataclass(frozen=True)
class Pair:
    """The same warehouse twice: on local disk, and in a bucket (with this machine's state, the
    catalog of the ``s3://`` root, under ``state``)."""

    base: Path
    local: Path
    remote: str
    state: Path

    @property
    def bucket(self) -> str:
        return self.remote.removeprefix("s3://").split("/")[0]

    def catalog_of(self, root: Path | str) -> Path:
        """The catalog a run of ``root`` refreshes: in a local root; for an ``s3://`` root, in
        the state directory (``$XDG_STATE_HOME/whitebit-etl/s3/<bucket>/<prefix>``)."""
        if isinstance(root, Path):
            return root / CATALOG_FILE
        where = root.removeprefix("s3://")
        return self.state / "whitebit-etl" / "s3" / where / CATALOG_FILE

    @property
    def roots(self) -> tuple[Path, str]:
        return (self.local, self.remote)


def _pair(store: Store, base: Path) -> Pair:
    return Pair(base, base / "local", f"s3://{store.bucket()}/warehouse", base / "state")


def _env(
    exchange: SpawnedSimulator,
    pair: Pair,
    root: Path | str,
    home: Path,
    *,
    accounts: bool = False,
    **extra: str,
) -> dict[str, str]:
    """A user's environment for `whitebit-etl` on ``root``, with the AWS variables, the state
    directory under the test's, and the pinned clock."""
    if accounts:
        env = two_accounts_env(exchange, root, home, pair.base / "accounts.yaml")
    else:
        env = cli_env(exchange, root, home)
    env.pop("WAREHOUSE_CATALOG", None)
    return env | {
        "XDG_STATE_HOME": str(pair.state),
        PINNED_NOW_ENV: PINNED.isoformat(),
        **extra,
    }


def _start(module: str, args: list[str], env: dict[str, str], log: Path) -> Child:
    """``python -m MODULE ARGS`` with the assets' clock pinned."""
    return Child.start("tests.support.pinned_clock", [module, *args], env, log)


def _cli(args: list[str], env: dict[str, str]) -> str:
    """``whitebit-etl ARGS`` in this process, to its end, which must be a success; what it
    printed."""
    ran = invoke(args, env, SimClock(PINNED))
    assert ran.exit_code == 0, ran.output
    assert "succeeded" in ran.output
    return ran.output


def _run_both(
    exchange: SpawnedSimulator, pair: Pair, commands: list[list[str]], *, accounts: bool = False
) -> None:
    """The commands, one after the other, on the local root then on the ``s3://`` root."""
    for name, root in zip(("local", "s3"), pair.roots, strict=True):
        env = _env(exchange, pair, root, pair.base / f"dagster-{name}", accounts=accounts)
        for args in commands:
            _cli(args, env)


def rows_of(catalog_file: Path) -> Rows:
    """Every table through the catalog's views, every column, in a fixed order (the catalog
    names the root its views read, as `whitebit-etl sql --catalog` opens one)."""
    with catalog.connect(Warehouse.open(catalog_file.parent), path=catalog_file) as con:
        return {
            table: con.execute(f'SELECT * FROM "{table}" ORDER BY ALL').fetchall()  # noqa: S608
            for table in schemas.TABLES
        }


def _at(table: str, column: str) -> int:
    """Where ``column`` is in a row of ``table``'s view."""
    return [c.name for c in schemas.TABLES[table].view_columns].index(column)


def _both(pair: Pair) -> tuple[Rows, Rows]:
    """Each root's tables, through the catalog its runs refreshed: local, then S3."""
    local, remote = (rows_of(pair.catalog_of(root)) for root in pair.roots)
    # Nothing landed in the real home: the ``s3://`` root's catalog is in the state directory.
    assert pair.catalog_of(pair.remote).is_relative_to(pair.base)
    return local, remote


def _month_keys(store: Store, pair: Pair, account: str = DEFAULT_ACCOUNT) -> dict[str, str]:
    """Each funding month's object key in the bucket."""
    fs = store.server.filesystem()
    prefix = f"{pair.bucket}/warehouse/parquet/funding_history/account={account}"
    return {
        key.split("funding_month=")[1].split("/")[0]: key
        for key in fs.find(prefix)
        if key.endswith(f"/{layout.PARTITION_FILE}")
    }


def _lease_key(pair: Pair) -> str:
    return f"{pair.bucket}/warehouse/{LOCKS_DIR}/funding_history.lock"


# --- The nightly job --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nightly(
    exchange: SpawnedSimulator, store: Store, tmp_path_factory: pytest.TempPathFactory
) -> Pair:
    """A day of funding and today's snapshots of each account of a two-account warehouse (a
    sub-account's key reads no investments: left out for it), on each root."""
    pair = _pair(store, tmp_path_factory.mktemp("s3-nightly"))
    _run_both(exchange, pair, NIGHTLY, accounts=True)
    return pair


def test_the_nightly_job_on_s3_equals_it_on_local_disk(nightly: Pair) -> None:
    local, remote = _both(nightly)
    assert remote == local
    assert all(local[table] for table in (*SNAPSHOT_TABLES, "funding_history"))
    day = _at("funding_history", "funding_date")
    assert {row[day].isoformat() for row in local["funding_history"]} == {ONE_DAY}
    assert local["_rejects"] == []
    # The pinned clock reached every row: nothing differs between two runs but what they read.
    for table in ("funding_history", "main_balances"):
        stamped = {row[_at(table, "extracted_at")] for row in local[table]}
        assert stamped == {PINNED}, (table, stamped)


# --- A backfill of months, and its rerun ------------------------------------------------------


@pytest.fixture(scope="module")
def backfill(
    exchange: SpawnedSimulator, store: Store, tmp_path_factory: pytest.TempPathFactory
) -> Pair:
    """The range over three months, written by one run on each root."""
    pair = _pair(store, tmp_path_factory.mktemp("s3-backfill"))
    _run_both(exchange, pair, [RANGE])
    return pair


@pytest.fixture(scope="module")
def backfilled(backfill: Pair) -> Rows:
    """The range as one undisturbed run wrote it on local disk: what every S3 case must equal."""
    rows = rows_of(backfill.catalog_of(backfill.local))
    day = _at("funding_history", "funding_date")
    assert len({row[day] for row in rows["funding_history"]}) == 44
    assert rows["_rejects"] == []
    return rows


def test_a_backfill_of_months_on_s3_equals_it_on_local_disk(
    backfill: Pair, backfilled: Rows, store: Store
) -> None:
    local, remote = _both(backfill)
    assert local == backfilled
    assert remote == local
    # A month a partition, one object each; no lease left behind, no temp object: beside the
    # partitions, only the record of the exchange the account's rows came from.
    assert sorted(_month_keys(store, backfill)) == MONTHS
    keys = store.server.filesystem().find(backfill.bucket)
    assert [k for k in keys if not k.endswith(f"/{layout.PARTITION_FILE}")] == [
        f"{backfill.bucket}/warehouse/{SOURCES_DIR}/{DEFAULT_ACCOUNT}.json"
    ]


def test_a_rerun_of_the_range_on_s3_equals_it_on_local_disk_and_itself_before(
    exchange: SpawnedSimulator, backfill: Pair, backfilled: Rows, store: Store
) -> None:
    fs = store.server.filesystem()
    keys = _month_keys(store, backfill)
    before = {month: fs.info(key)["LastModified"] for month, key in keys.items()}
    remote_before = rows_of(backfill.catalog_of(backfill.remote))
    assert remote_before == backfilled
    for name, root in zip(("local", "s3"), backfill.roots, strict=True):
        env = _env(exchange, backfill, root, backfill.base / f"dagster-{name}")
        _cli(RANGE, env)
    local, remote = _both(backfill)
    assert remote == local == remote_before
    # Every month was written again (a later object), not left alone.
    after = {
        month: fs.info(key)["LastModified"] for month, key in _month_keys(store, backfill).items()
    }
    assert after.keys() == before.keys()
    assert all(after[m] > before[m] for m in after), (before, after)


# --- A kill while a month is rewritten on S3 --------------------------------------------------


def test_killed_while_rewriting_a_month_on_s3_then_run_again_equals_local_disk(
    exchange: SpawnedSimulator, backfill: Pair, backfilled: Rows, store: Store, tmp_path: Path
) -> None:
    pair = _pair(store, tmp_path)
    fs = store.server.filesystem()
    fs.copy(
        f"{backfill.bucket}/warehouse/parquet", f"{pair.bucket}/warehouse/parquet", recursive=True
    )
    keys = _month_keys(store, pair)
    assert sorted(keys) == MONTHS
    old = {month: fs.cat_file(key) for month, key in keys.items()}
    rows_in = {
        month: pq.read_metadata(pa.BufferReader(data)).num_rows for month, data in old.items()
    }
    lease = {"WAREHOUSE_LEASE_SECONDS": str(LEASE_SECONDS)}
    env = _env(exchange, pair, pair.remote, tmp_path / "dagster", **lease)
    # The killed run stamps its rows an hour later: a month it rewrote differs from the old one.
    later = (PINNED + timedelta(hours=1)).isoformat()
    killed = _start(
        "tests.reliability.killer",
        ["parquet-mid-file", "--at", "3", "--", *RANGE],
        env | {PINNED_NOW_ENV: later},
        tmp_path / "killed",
    )
    assert killed.wait() == -signal.SIGKILL, killed.output

    # Two months rewritten (the walk goes newest first); the third was half built in memory
    # when the writer died: its old object is there, whole, byte for byte. Every object is
    # whole Parquet of its month's rows.
    now = {month: fs.cat_file(key) for month, key in _month_keys(store, pair).items()}
    assert now.keys() == old.keys()
    assert [m for m in MONTHS if now[m] != old[m]] == MONTHS[1:]
    assert now[MONTHS[0]] == old[MONTHS[0]]
    for month, data in now.items():
        assert pq.read_table(pa.BufferReader(data)).num_rows == rows_in[month]
    # The dead writer's lease is still in the store: nobody gave it back.
    dead = json.loads(fs.cat_file(_lease_key(pair)))
    assert dead["seconds"] == LEASE_SECONDS
    dead_at = fs.info(_lease_key(pair))["LastModified"]

    again = _cli(RANGE, env)
    assert "left unfinished by a killed process" in again
    # The run after took the lease over once it had expired (its holder never renewed it), wrote
    # every month after that, and gave the lease back.
    assert not fs.exists(_lease_key(pair))
    written = {
        month: fs.info(key)["LastModified"] for month, key in _month_keys(store, pair).items()
    }
    # By the store's clock, each month was written once the lease had outlived its time to live.
    assert all((at - dead_at).total_seconds() > LEASE_SECONDS for at in written.values()), (
        dead_at,
        written,
    )
    assert rows_of(pair.catalog_of(pair.remote)) == backfilled
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        statuses = sorted(run.status.value for run in instance.get_runs())
    assert statuses == ["FAILURE", "SUCCESS"]


# --- Two runs at once -------------------------------------------------------------------------


def test_two_runs_of_the_same_months_at_once_on_s3_leave_one_copy_of_each_row(
    exchange: SpawnedSimulator, backfilled: Rows, store: Store, tmp_path: Path
) -> None:
    pair = _pair(store, tmp_path)
    # Two Dagster instances (the UI's and a terminal's): nothing in Dagster keeps the runs apart,
    # their writers meet at the store's lease.
    envs = [_env(exchange, pair, pair.remote, tmp_path / f"dagster-{n}") for n in range(2)]
    runs = [_start("assets.cli", RANGE, env, tmp_path / f"run-{n}") for n, env in enumerate(envs)]
    for run in runs:
        assert run.wait() == 0, run.output
        assert "succeeded" in run.output
    assert rows_of(pair.catalog_of(pair.remote)) == backfilled
    assert sorted(_month_keys(store, pair)) == MONTHS
    assert not store.server.filesystem().exists(_lease_key(pair))


# --- An analyst's catalog ---------------------------------------------------------------------

#: Every row of every table, as JSON text, and a curated view: one query, one process.
EVERY_ROW = " UNION ALL ".join(
    f'SELECT \'{table}\' AS "table", CAST(to_json(t) AS VARCHAR) AS "row" FROM "{table}" t'  # noqa: S608
    for table in schemas.TABLES
)
QUERIES = [
    f"SELECT * FROM ({EVERY_ROW}) ORDER BY ALL",  # noqa: S608
    "SELECT * FROM daily_funding_by_market ORDER BY ALL",
]


def _sql(catalog_file: Path, query: str, env: dict[str, str]) -> Any:
    asked = subprocess.run(
        [sys.executable, "-m", "assets.cli", "sql", "--catalog", str(catalog_file), "--json",
         query],
        capture_output=True, text=True, env=env, cwd=REPO, check=False, timeout=300,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    return json.loads(asked.stdout)


def test_an_analysts_catalog_of_the_store_answers_as_the_local_one(
    nightly: Pair, store: Store, tmp_path: Path
) -> None:
    # An analyst's machine: the AWS variables, nothing of the warehouse's own settings.
    home = tmp_path / "analyst"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", **store.server.env, "HOME": str(home)}
    mine = tmp_path / "analyst.duckdb"
    wrote = subprocess.run(
        [sys.executable, "-m", "assets.cli", "catalog", "--root", nightly.remote, "--out",
         str(mine)],
        capture_output=True, text=True, env=env, cwd=REPO, check=False, timeout=300,
    )  # fmt: skip
    assert wrote.returncode == 0, wrote.stderr
    assert str(mine) in wrote.stdout
    assert rows_of(mine) == rows_of(nightly.catalog_of(nightly.local))
    for query in QUERIES:
        remote = _sql(mine, query, env)
        assert remote == _sql(nightly.catalog_of(nightly.local), query, env)
        assert remote
    # Nothing was written under the analyst's home: the catalog went where it was told.
    assert list(home.iterdir()) == []


# --- Two accounts -----------------------------------------------------------------------------


def test_the_accounts_of_a_two_account_warehouse_on_s3_equal_them_on_local_disk(
    nightly: Pair,
) -> None:
    local, remote = _both(nightly)
    assert remote == local
    for table, accounts in (
        ("funding_history", set(TWO_ACCOUNTS)),
        ("main_balances", set(TWO_ACCOUNTS)),
        ("investments", {"main"}),
    ):
        assert {row[0] for row in local[table]} == accounts, table
    assert all(local[table] for table in SUBACCOUNT_SNAPSHOT_TABLES)
    by_account = {
        account: [row[1:] for row in local["funding_history"] if row[0] == account]
        for account in TWO_ACCOUNTS
    }
    assert by_account["main"] != by_account["sub_1"]
