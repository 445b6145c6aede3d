"""`whitebit-etl sql` and `whitebit-etl tables`, through click and as the installed command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from assets.cli import main
from pipeline import spec
from tests.support.records import ACCOUNT, DAY, EXTRACTED_AT
from warehouse import Warehouse, normalize, partitions, schemas

TINY = "0.000000000000000001"
HUGE = "-99999999999999999999.999999999999999999"


@pytest.fixture
def warehouse(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WAREHOUSE_ROOT", str(root))
    batch = normalize.normalize(
        spec.MAIN_BALANCES,
        {"A": {"main_balance": TINY}, "B": {"main_balance": HUGE}, "C": {"main_balance": "0"}},
        extracted_at=EXTRACTED_AT,
        day=DAY,
    )
    partitions.write_batch(Warehouse.open(root), batch, account=ACCOUNT)
    return root


def run(*arguments: str) -> str:
    result = CliRunner().invoke(main, list(arguments), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_sql_json_keeps_every_digit_as_a_string(warehouse: Path) -> None:
    output = run("sql", "--json", "SELECT ticker, main_balance FROM main_balances ORDER BY 1")
    assert json.loads(output) == [
        {"ticker": "A", "main_balance": TINY},
        {"ticker": "B", "main_balance": HUGE},
        {"ticker": "C", "main_balance": "0"},
    ]


def test_sql_csv(warehouse: Path) -> None:
    output = run("sql", "--csv", "SELECT ticker, main_balance, snapshot_date FROM main_balances")
    assert output.splitlines()[0] == "ticker,main_balance,snapshot_date"
    assert f"A,{TINY},2024-03-01" in output.splitlines()


def test_sql_table_shows_whole_numbers(warehouse: Path) -> None:
    output = run("sql", "SELECT main_balance FROM main_balances WHERE ticker = 'B'")
    # DuckDB's boxes: the column's name and type, a rule, then one line per row.
    lines = output.splitlines()
    rule = next(n for n, line in enumerate(lines) if line.startswith("├"))
    cells = [line.strip("│ ") for line in lines[rule + 1 :] if line.startswith("│")]
    assert cells == [HUGE]
    assert "decimal(38,18)" in "".join(lines[:rule])


def test_sql_error_is_reported_not_raised(warehouse: Path) -> None:
    result = CliRunner().invoke(main, ["sql", "SELECT nope FROM main_balances"])
    assert result.exit_code == 1
    assert "query failed" in result.output
    assert "nope" in result.output


def test_tables_prints_the_data_dictionary() -> None:
    output = run("tables")
    for schema in schemas.TABLES.values():
        assert schema.name in output
    assert "DECIMAL(38,18)" in output
    assert "position_side" in run("tables", "funding_history")


def test_installed_command_end_to_end(warehouse: Path) -> None:
    command = Path(sys.executable).parent / "whitebit-etl"
    result = subprocess.run(
        [str(command), "sql", "--csv", "SELECT count(*) AS n FROM main_balances"],
        capture_output=True,
        text=True,
        env={**os.environ, "WAREHOUSE_ROOT": str(warehouse)},
        check=True,
    )
    assert result.stdout == "n\n3\n"


def test_tables_lists_the_curated_views_with_their_comments_and_sql_suggests_a_query_that_runs(
    warehouse: Path,
) -> None:
    """``tables`` named none of the curated views (``tables account_summary`` was refused as an
    unknown table), and ``sql ""`` suggested a query that fails."""
    wide = {"COLUMNS": "1000"}
    # The views and their comments as a catalog holds them, where analysts meet them.
    run("sql", "SELECT 1")
    with duckdb.connect(str(Warehouse.open(warehouse).catalog_path), read_only=True) as con:
        held = dict(
            con.execute(
                "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal "
                "AND view_name NOT IN ? AND NOT starts_with(view_name, '_')",
                [list(schemas.TABLES)],
            ).fetchall()
        )
        columns = [
            name
            for (name,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = 'account_summary' "
                "ORDER BY column_index"
            ).fetchall()
        ]
    assert len(held) >= 16
    assert "account_summary" in held
    listed = CliRunner().invoke(main, ["tables"], env=wide)
    assert listed.exit_code == 0, listed.output
    rows = [" ".join(line.strip("│ ").split()) for line in listed.output.splitlines()]
    for view, comment in held.items():
        assert f"{view} │ {comment}" in rows, view
    one = CliRunner().invoke(main, ["tables", "account_summary"], env=wide)
    assert one.exit_code == 0, one.output
    assert f"account_summary (curated view): {held['account_summary']}" in one.output
    assert [c for c in columns if c not in one.output] == []

    empty = CliRunner().invoke(main, ["sql", ""])
    assert empty.exit_code == 2
    (suggested,) = re.findall(r'like "([^"]+)"', empty.output)
    assert run("sql", "--json", suggested)
