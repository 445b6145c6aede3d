"""Two runs of the same partitions at once (a UI rerun while the schedule runs) both succeed and
leave one copy of each row, no reject, and a DuckDB catalog that opens and answers every view.

Each case starts the real CLI twice at the same moment, as two processes, against a simulator
process. On one Dagster instance (as the UI and the schedule share one), the API pool (limit 1)
makes the two runs' steps take turns; on two instances nothing in Dagster keeps them apart, so
their writers meet at the warehouse's partition locks. Either way both runs must succeed and the
warehouse must equal what a single run writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pipeline.simulator import SpawnedSimulator
from tests.support.cli_runs import (
    FIRST,
    FUNDING_DAYS,
    LAST,
    SNAPSHOT_TABLES,
    Child,
    Rows,
    cli_env,
    run_cli,
    warehouse_rows,
)
from warehouse import catalog

ONE_DAY = FUNDING_DAYS[2]


@pytest.fixture(scope="module")
def single_run(exchange: SpawnedSimulator, tmp_path_factory: pytest.TempPathFactory) -> Rows:
    """The funding range and today's snapshots, each written by one run alone."""
    base = tmp_path_factory.mktemp("concurrency-reference")
    env = cli_env(exchange, base / "warehouse", base / "dagster")
    for n, args in enumerate(
        [
            ["materialize", "funding_history", "--from", FIRST, "--to", LAST],
            ["materialize", *SNAPSHOT_TABLES],
        ]
    ):
        run = run_cli(args, env, base / "logs" / f"run-{n}")
        assert run.process.returncode == 0, run.output
    rows = warehouse_rows(base / "warehouse")
    assert all(rows[table] for table in (*SNAPSHOT_TABLES, "funding_history"))
    assert rows["_rejects"] == []
    return rows


@dataclass(frozen=True)
class Case:
    args: list[str]
    #: The funding days the runs write (none: a snapshot case).
    days: list[date]
    same_instance: bool


CASES = {
    "one-funding-day": Case(
        ["materialize", "funding_history", "--partition", ONE_DAY.isoformat()], [ONE_DAY], True
    ),
    "funding-range-two-instances": Case(
        ["materialize", "funding_history", "--from", FIRST, "--to", LAST], FUNDING_DAYS, False
    ),
    "snapshots-today": Case(["materialize", *SNAPSHOT_TABLES], [], True),
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


@pytest.mark.parametrize("name", list(CASES))
def test_two_runs_at_once_leave_one_copy_of_each_row(
    exchange: SpawnedSimulator, single_run: Rows, tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    root = tmp_path / "warehouse"
    homes = (
        [tmp_path / "dagster"] * 2 if case.same_instance else [tmp_path / "ui", tmp_path / "cli"]
    )
    runs = [
        Child.start("assets.cli", case.args, cli_env(exchange, root, home), tmp_path / f"run-{n}")
        for n, home in enumerate(homes)
    ]
    for run in runs:
        assert run.wait() == 0, run.output
        assert "succeeded" in run.output

    assert warehouse_rows(root) == _expected(single_run, case)
    with catalog.connect(root) as con:
        views = [
            row[0]
            for row in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
            ).fetchall()
        ]
        for view in views:
            con.execute(f'SELECT count(*) FROM "{view}"').fetchall()  # noqa: S608
    assert {"funding_history", "_rejects", "daily_funding_by_market"} <= set(views)
    with duckdb.connect(str(root / catalog.CATALOG_FILE), read_only=True) as con:
        assert con.execute("PRAGMA database_size").fetchall()  # the file itself is whole
    for home in set(homes):
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            statuses = [run.status for run in instance.get_runs()]
        assert statuses == [dg.DagsterRunStatus.SUCCESS] * (2 if case.same_instance else 1)
