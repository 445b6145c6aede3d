"""The analysts' commands: ``sql`` (query the catalog), ``catalog`` (write a catalog over a root,
wherever it is), ``tables`` (the data dictionary) and ``export`` (a year of an account's
movements as a tax tool imports them).

Query results are drawn by DuckDB's own renderer (its CLI's boxes: numbers right-aligned, each
column's type under its name, the columns that do not fit the terminal left out and counted);
``--csv`` and ``--json`` print every row, every digit of a decimal (`warehouse.display`).
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from collections.abc import Sequence
from typing import Final

import click
import duckdb
from rich.console import Console
from rich.table import Table

from warehouse import catalog, display, exports, schemas
from warehouse.layout import PARQUET_DIR

from ._common import said_in_one_line, this_command, warehouse

#: A column narrower than this is never wrapped: the widest DECIMAL(38,18) is 40 characters, so
#: DuckDB leaves out a column that does not fit rather than fold an amount over lines.
MAX_COLUMN_WIDTH: Final = 42
#: The width drawn to when the output is not a terminal.
PIPED_WIDTH: Final = 160
#: A query that runs on any catalog: a curated view's rows (none before the first run).
EXAMPLE_QUERY: Final = "TABLE account_summary"
#: What a query's own file pattern names: where DuckDB's "No files found" is the query's.
_OWN_FILES: Final = ("read_parquet", "parquet_scan", "read_csv", "read_json", "glob(")

CATALOG_OPTION = click.option(
    "--catalog",
    "catalog_file",
    type=click.Path(dir_okay=False),
    help="The DuckDB catalog to query (one `whitebit-etl catalog --out` wrote); default: "
    "WAREHOUSE_CATALOG, else the warehouse root's.",
)


def _no_files(query: str, error: duckdb.Error, file: str) -> str:
    if any(name in query.lower() for name in _OWN_FILES):
        return f"query failed: the query's own file pattern matched no file ({error})"
    return (
        f"query failed: {error}\nThe files the catalog's views read are gone (moved or removed): "
        f"rebuild it with `whitebit-etl catalog --root <where the warehouse is now> --out {file}`"
    )


@click.command("sql")
@click.argument("query")
@CATALOG_OPTION
@click.option("--csv", "output", flag_value="csv", help="Print CSV instead of a table.")
@click.option("--json", "output", flag_value="json", help="Print a JSON array of objects.")
def sql_command(query: str, catalog_file: str | None, output: str | None) -> None:
    """Run QUERY against the warehouse catalog (read-only) and print the result."""
    if not query.strip():
        raise click.UsageError(
            f'QUERY is empty: give the SQL to run, like "{EXAMPLE_QUERY}" (`whitebit-etl '
            "tables` lists the tables and views)"
        )
    wh = warehouse()
    with said_in_one_line():
        con = catalog.connect(wh, path=catalog_file)
    file = str(catalog_file or wh.catalog_path)
    with con:
        try:
            relation = con.sql(query)
            if relation is None:
                click.echo("done (the statement returns no rows)")
                return
            if output is None:
                width = shutil.get_terminal_size((PIPED_WIDTH, 24)).columns
                if not sys.stdout.isatty():
                    width = PIPED_WIDTH
                relation.show(max_width=width, max_col_width=MAX_COLUMN_WIDTH)
                return
            names, rows = relation.columns, relation.fetchall()
        except duckdb.IOException as error:
            if "No files found" not in str(error):
                raise click.ClickException(f"query failed: {error}") from None
            raise click.ClickException(_no_files(query, error, file)) from None
        except duckdb.Error as error:
            raise click.ClickException(f"query failed: {error}") from None
    if output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([[display.text(v) for v in row] for row in rows])
    else:
        records = [
            dict(zip(names, (display.json_value(v) for v in row), strict=True)) for row in rows
        ]
        click.echo(json.dumps(records, ensure_ascii=False, indent=2))


@click.command("catalog")
@click.option(
    "--root",
    required=True,
    help="Where the Parquet is: a local directory, or s3://bucket/prefix (AWS variables or "
    "profile for the credentials and endpoint).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="The DuckDB file to write (default: WAREHOUSE_CATALOG, else the root's catalog).",
)
def catalog_command(root: str, out: str | None) -> None:
    """Write a DuckDB catalog whose views read the Parquet under ROOT, wherever it is: an
    analyst's own over a shared warehouse, or a moved warehouse's. It holds views only, and no
    credential."""
    wh = warehouse(root)
    with said_in_one_line():
        if not wh.store.has_files(PARQUET_DIR):
            raise click.ClickException(
                f"no warehouse at {wh.location}: nothing has been extracted there yet (or the "
                "root is mistyped); a catalog reads an existing warehouse"
            )
        try:
            built = catalog.refresh(wh, out=out)
        except (ValueError, OSError) as error:
            raise click.ClickException(f"catalog of {wh.location}: {error}") from None
    filled = len(built.table_views) - len(built.empty_tables)
    click.echo(
        f"{built.path}: {len(built.table_views)} table views ({filled} with files), "
        f"{len(built.curated_views)} curated views, reading {wh.location}"
    )
    if built.empty_tables:
        click.echo(
            f"no files yet for {', '.join(built.empty_tables)}: their views are empty until "
            "the catalog is written again"
        )
    click.echo(f'query it: {this_command()} sql --catalog {built.path} "SELECT ..."')


def _partitioning(schema: schemas.TableSchema) -> str:
    columns = ", ".join((schemas.ACCOUNT, *schema.partition_columns))
    return f"{columns}, a file per month ({schema.month_path})" if schema.month_path else columns


@click.command("tables")
@click.argument("names", nargs=-1)
def tables_command(names: Sequence[str]) -> None:
    """Print the data dictionary: every table with its columns, then the curated views (the
    queries made for analysts: account_summary, account_statement, ...) with what each holds;
    or the tables and views NAMES, each with its columns."""
    views = {view.name: view for view in catalog.curated_views()}
    unknown = [n for n in names if n not in schemas.TABLES and n not in views]
    if unknown:
        raise click.BadParameter(
            f"unknown table(s) or view(s) {', '.join(unknown)}; tables: "
            f"{', '.join(schemas.TABLES)}; curated views: {', '.join(views)}",
            param_hint="NAMES",
        )
    console = Console()
    for schema in schemas.TABLES.values():
        if names and schema.name not in names:
            continue
        table = Table(
            title=f"[bold]{schema.name}[/bold]: {schema.description}",
            caption=(
                f"partitioned by {_partitioning(schema)}; key: "
                + (", ".join((schemas.ACCOUNT, *schema.key)) if schema.key else "none")
            ),
            title_justify="left",
            caption_justify="left",
        )
        for heading in ("column", "type", "null", "description"):
            table.add_column(heading, overflow="fold")
        for column in schema.view_columns:
            table.add_row(
                column.name,
                catalog.duckdb_type(column.type),
                "yes" if column.nullable else "no",
                column.description,
            )
        console.print(table)
    for view in views.values():
        if not names or view.name not in names:
            continue
        console.print(f"[bold]{view.name}[/bold] (curated view): {view.comment}")
        table = Table()
        for heading in ("column", "type"):
            table.add_column(heading, overflow="fold")
        for name, kind in view.columns:
            table.add_row(name, kind)
        console.print(table)
    if not names:
        listed = Table(
            title="[bold]Curated views[/bold]: queries over the tables "
            "(`whitebit-etl tables <view>` for its columns)",
            title_justify="left",
        )
        listed.add_column("view", no_wrap=True)
        listed.add_column("what it holds", overflow="fold")
        for view in views.values():
            listed.add_row(view.name, view.comment)
        console.print(listed)


@click.command("export")
@click.option(
    "--format",
    "name",
    required=True,
    metavar="FORMAT",
    help=f"The tool's import format: {', '.join(exports.FORMATS)} (docs/exports.md).",
)
@click.option("--account", required=True, metavar="NAME", help="The account whose records go in.")
@click.option("--year", required=True, type=int, help="The UTC year of the records.")
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False), help="The CSV file to write."
)
def export_command(name: str, account: str, year: int, out: str) -> None:
    """Write ACCOUNT's movements of YEAR (every record the account statement counts: fills,
    conversions, deposits, withdrawals, transfers, funding, realized P&L, position fees,
    interest) as a tax tool's documented import file, a row per record, amounts exact."""
    wh = warehouse()
    with said_in_one_line():
        written = exports.write(wh, name, account, year, out)
    fmt = exports.FORMATS[name]
    click.echo(
        f"{written.path}: {written.records:,} records of {account} in {year}, {written.rows:,} "
        f"rows for {fmt.tool}"
    )
