"""Analyst commands of `whitebit-etl`: ``sql`` (query the catalog), ``catalog`` (write a catalog
over a root, wherever it is) and ``tables`` (the data dictionary). `assets.cli` attaches them to
its group.

Values are printed as `warehouse.display` shows them: every digit of a decimal, times in UTC.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence

import click
import duckdb
from rich.console import Console
from rich.table import Table

from warehouse import catalog, display, schemas

CATALOG_OPTION = click.option(
    "--catalog",
    "catalog_file",
    type=click.Path(dir_okay=False),
    help="The DuckDB catalog to query (one `whitebit-etl catalog --out` wrote); default: "
    "WAREHOUSE_CATALOG, else the warehouse root's.",
)


@click.command("sql")
@click.argument("query")
@CATALOG_OPTION
@click.option("--csv", "output", flag_value="csv", help="Print CSV instead of a table.")
@click.option("--json", "output", flag_value="json", help="Print a JSON array of objects.")
def sql_command(query: str, catalog_file: str | None, output: str | None) -> None:
    """Run QUERY against the warehouse catalog (read-only) and print the result."""
    if catalog_file is None and not catalog.catalog_path().exists():
        catalog.refresh()  # a fresh warehouse: the catalog is views only, cheap to create
    try:
        con = catalog.connect(path=catalog_file)
    except catalog.CatalogError as error:
        raise click.ClickException(str(error)) from None
    with con:
        try:
            result = con.execute(query)
        except duckdb.IOException as error:
            if "No files found" not in str(error):
                raise click.ClickException(f"query failed: {error}") from error
            file = catalog_file or catalog.catalog_path()
            raise click.ClickException(
                f"query failed: {error}\nThe files the catalog's views read are gone (moved or "
                f"removed): rebuild it with `whitebit-etl catalog --root <where the warehouse "
                f"is now> --out {file}`"
            ) from error
        except duckdb.Error as error:
            raise click.ClickException(f"query failed: {error}") from error
        names = [d[0] for d in result.description or ()]
        rows = result.fetchall()
    if output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([[display.text(v) for v in row] for row in rows])
    elif output == "json":
        records = [
            dict(zip(names, (display.json_value(v) for v in row), strict=True)) for row in rows
        ]
        click.echo(json.dumps(records, ensure_ascii=False, indent=2))
    else:
        print_table(names, rows)


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
    try:
        built = catalog.refresh(root, out=out)
    except (ValueError, OSError) as error:
        raise click.ClickException(f"catalog of {root}: {error}") from None
    filled = len(built.table_views) - len(built.empty_tables)
    click.echo(
        f"{built.path}: {len(built.table_views)} table views ({filled} with files), "
        f"{len(built.curated_views)} curated views, reading {root}"
    )
    if built.empty_tables:
        click.echo(
            f"no files yet for {', '.join(built.empty_tables)}: their views are empty until "
            "the catalog is written again"
        )
    click.echo(f'query it: whitebit-etl sql --catalog {built.path} "SELECT ..."')


def _partitioning(schema: schemas.TableSchema) -> str:
    columns = ", ".join((schemas.ACCOUNT, *schema.partition_columns))
    return f"{columns}, a file per month ({schema.month_path})" if schema.month_path else columns


@click.command("tables")
@click.argument("names", nargs=-1)
def tables_command(names: Sequence[str]) -> None:
    """Print the data dictionary: every table (or the NAMES given) with its columns."""
    unknown = [n for n in names if n not in schemas.TABLES]
    if unknown:
        raise click.BadParameter(f"unknown tables {unknown}; tables: {', '.join(schemas.TABLES)}")
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


def print_table(
    names: Sequence[str], rows: Sequence[tuple[object, ...]], console: Console | None = None
) -> None:
    """Rows as a table, every digit of every decimal shown."""
    table = Table(caption=f"{len(rows)} row{'s' if len(rows) != 1 else ''}")
    for name in names:
        # Fold, never ellipsize: a cut-off amount would show wrong digits.
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(display.text(v) for v in row))
    (console or Console()).print(table)
