"""Two runs of the same partitions at once (a UI rerun while the schedule runs) both succeed and
leave one copy of each row, no reject, and a DuckDB catalog that opens and answers every view.

Each case starts the real CLI twice at the same moment, as two processes, against a simulator
process. On one Dagster instance (as the UI and the schedule share one), the API pool (limit 1)
makes the two runs' steps take turns; on two instances nothing in Dagster keeps them apart, so
their writers meet at the warehouse's partition locks. Either way both runs must succeed and the
warehouse must equal what a single run writes. One case declares two accounts (an accounts file
of the simulator's main account and a sub-account): each process runs each account's run of the
same day.

In a warehouse of two accounts, two runs of *different* accounts at once (their API pools differ,
so on one instance they really run side by side, meeting at each table's lock and the shared
catalog) both succeed, and each account's tables equal what its runs write alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from assets.accounts import DEFAULT_ACCOUNT
from assets.steps import ACCOUNT_TAG
from pipeline.simulator import SpawnedSimulator
from tests.support.cli_runs import (
    FIRST,
    FUNDING_DAYS,
    LAST,
    SNAPSHOT_TABLES,
    SUBACCOUNT_SNAPSHOT_TABLES,
    TWO_ACCOUNTS,
    Child,
    Rows,
    cli_env,
    invoke,
    two_accounts_env,
    warehouse_rows,
)
from warehouse import Warehouse, catalog

ONE_DAY = FUNDING_DAYS[2]
FUNDING_RANGE = ["materialize", "funding_history", "--from", FIRST, "--to", LAST]
#: Each account's snapshots (a sub-account's key reads no investments).
SNAPSHOTS_OF = {"main": SNAPSHOT_TABLES, "sub_1": SUBACCOUNT_SNAPSHOT_TABLES}


@pytest.fixture(scope="module")
def single_run(exchange: SpawnedSimulator, tmp_path_factory: pytest.TempPathFactory) -> Rows:
    """The funding range and today's snapshots, each written by one run alone."""
    base = tmp_path_factory.mktemp("concurrency-reference")
    env = cli_env(exchange, base / "warehouse", base / "dagster")
    for args in (FUNDING_RANGE, ["materialize", *SNAPSHOT_TABLES]):
        run = invoke(args, env)  # in-process: a run alone needs no process of its own
        assert run.exit_code == 0, run.output
    rows = warehouse_rows(base / "warehouse")
    assert all(rows[table] for table in (*SNAPSHOT_TABLES, "funding_history"))
    assert rows["_rejects"] == []
    return rows


@pytest.fixture(scope="module")
def accounts_alone(
    exchange: SpawnedSimulator, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Rows]:
    """Each of `TWO_ACCOUNTS` in a warehouse of both: the funding range and today's snapshots,
    each account's runs one after another, none at once."""
    base = tmp_path_factory.mktemp("concurrency-accounts-reference")
    root = base / "warehouse"
    env = two_accounts_env(exchange, root, base / "dagster", base / "accounts.yaml")
    commands = [FUNDING_RANGE]  # a run per account, one after the other
    commands += [["materialize", *SNAPSHOTS_OF[a], "--account", a] for a in TWO_ACCOUNTS]
    for args in commands:
        run = invoke(args, env)
        assert run.exit_code == 0, run.output
    rows = {account: warehouse_rows(root, account) for account in TWO_ACCOUNTS}
    for account, tables in rows.items():
        assert all(tables[table] for table in (*SNAPSHOTS_OF[account], "funding_history"))
        assert tables["_rejects"] == []
    assert rows["main"]["funding_history"] != rows["sub_1"]["funding_history"]
    return rows


@dataclass(frozen=True)
class Case:
    args: list[str]
    #: The funding days the runs write (none: a snapshot case).
    days: list[date]
    same_instance: bool
    #: Both of `TWO_ACCOUNTS` declared, each process running each one's run; else the single
    #: account of the variables.
    two_accounts: bool = False


CASES = {
    "one-funding-day": Case(
        ["materialize", "funding_history", "--partition", ONE_DAY.isoformat()], [ONE_DAY], True
    ),
    "funding-range-two-instances": Case(
        ["materialize", "funding_history", "--from", FIRST, "--to", LAST], FUNDING_DAYS, False
    ),
    "snapshots-today": Case(["materialize", *SNAPSHOT_TABLES], [], True),
    "one-funding-day-two-accounts": Case(
        ["materialize", "funding_history", "--partition", ONE_DAY.isoformat()],
        [ONE_DAY],
        True,
        two_accounts=True,
    ),
}


def _expected(single_run: Rows, case: Case) -> Rows:
    expected: Rows = {table: [] for table in single_run}
    if case.days:
        expected["funding_history"] = [
            row for row in single_run["funding_history"] if row[-1] in case.days
        ]
    else:
        expected |= {table: single_run[table] for table in SNAPSHOT_TABLES}
    return expected


def _catalog_answers(root: Path) -> None:
    """The catalog opens, and answers every view."""
    with catalog.connect(Warehouse.open(root)) as con:
        views = [
            row[0]
            for row in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
            ).fetchall()
        ]
        for view in views:
            con.execute(f'SELECT count(*) FROM "{view}"').fetchall()  # noqa: S608
    assert {"funding_history", "_rejects", "daily_funding_by_market"} <= set(views)
    with duckdb.connect(str(Warehouse.open(root).catalog_path), read_only=True) as con:
        assert con.execute("PRAGMA database_size").fetchall()  # the file itself is whole


@pytest.mark.parametrize("name", list(CASES))
def test_two_runs_at_once_leave_one_copy_of_each_row(
    exchange: SpawnedSimulator, request: pytest.FixtureRequest, tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    root = tmp_path / "warehouse"
    homes = (
        [tmp_path / "dagster"] * 2 if case.same_instance else [tmp_path / "ui", tmp_path / "cli"]
    )
    if case.two_accounts:
        alone: dict[str, Rows] = request.getfixturevalue("accounts_alone")
        expected = {account: _expected(alone[account], case) for account in TWO_ACCOUNTS}
        envs = [
            two_accounts_env(exchange, root, home, tmp_path / "accounts.yaml") for home in homes
        ]
    else:
        single_run: Rows = request.getfixturevalue("single_run")
        expected = {DEFAULT_ACCOUNT: _expected(single_run, case)}
        envs = [cli_env(exchange, root, home) for home in homes]
    runs = [
        Child.start("assets.cli", case.args, env, tmp_path / f"run-{n}")
        for n, env in enumerate(envs)
    ]
    for run in runs:
        assert run.wait() == 0, run.output
        assert "succeeded" in run.output

    assert {account: warehouse_rows(root, account) for account in expected} == expected
    _catalog_answers(root)
    for home in set(homes):
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            statuses = [run.status for run in instance.get_runs()]
        processes = 2 if case.same_instance else 1
        assert statuses == [dg.DagsterRunStatus.SUCCESS] * processes * len(expected)


@pytest.mark.parametrize("tables", ["funding-range", "snapshots-today"])
def test_two_accounts_run_at_once_each_equals_its_runs_alone(
    exchange: SpawnedSimulator, accounts_alone: dict[str, Rows], tmp_path: Path, tables: str
) -> None:
    root, home = tmp_path / "warehouse", tmp_path / "dagster"
    env = two_accounts_env(exchange, root, home, tmp_path / "accounts.yaml")
    written = {
        account: ["funding_history"] if tables == "funding-range" else SNAPSHOTS_OF[account]
        for account in TWO_ACCOUNTS
    }
    runs = [
        Child.start(
            "assets.cli",
            ["materialize", *written[account], "--account", account]
            + (["--from", FIRST, "--to", LAST] if tables == "funding-range" else []),
            env,
            tmp_path / account,
        )
        for account in TWO_ACCOUNTS
    ]
    for run in runs:
        assert run.wait() == 0, run.output
        assert "succeeded" in run.output

    for account, alone in accounts_alone.items():
        expected = {table: alone[table] if table in written[account] else [] for table in alone}
        assert warehouse_rows(root, account) == expected, account
    _catalog_answers(root)
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        finished = instance.get_runs()
    assert [run.status for run in finished] == [dg.DagsterRunStatus.SUCCESS] * 2
    assert sorted(run.tags[ACCOUNT_TAG] for run in finished) == sorted(TWO_ACCOUNTS)
