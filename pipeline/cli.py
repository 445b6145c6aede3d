"""The `whitebit-etl` command: one click group; each layer contributes its commands."""

from __future__ import annotations

import click

from warehouse.cli import sql_command, tables_command


@click.group()
def main() -> None:
    """Extract one WhiteBIT account into an exact, partitioned warehouse, and query it."""


main.add_command(sql_command)
main.add_command(tables_command)
