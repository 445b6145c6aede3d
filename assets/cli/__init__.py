"""The `whitebit-etl` command: everything a user does by hand.

``demo`` fills a warehouse from the embedded simulator's two accounts; ``materialize`` runs an
account's assets (or every account's) as the schedule would, or for a day or a range; ``ping``
checks an account's exchange; ``sql`` and ``tables`` query and describe the warehouse; ``report``
draws it on one page; ``export`` writes a year of an account's records for a tax tool; ``serve``
runs the nightly service, ``worker`` a Celery worker of its runs and ``ui`` the Dagster UI;
``simulator`` serves the stand-in exchange; ``reset-key`` is the API's one write, done only here;
``move-account`` records another address for an account whose exchange moved. The settings are
read once, when a command starts. Heavy imports (Dagster) happen inside the commands that need
them, so ``--help`` is instant.
"""

from __future__ import annotations

import click

from pipeline.simulator import simulator_command

from ._common import said_in_one_line
from ._exchange import ping, reset_key
from ._materialize import demo, materialize, report_command
from ._query import catalog_command, export_command, sql_command, tables_command
from ._service import serve, ui, worker
from ._sources import move_account


class _Commands(click.Group):
    """The commands, each ending in one line (never a traceback) when a setting or an accounts
    file cannot be used, or the warehouse cannot do what was asked, wherever it is found out."""

    def invoke(self, ctx: click.Context) -> object:
        with said_in_one_line():
            return super().invoke(ctx)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Extract WhiteBIT accounts into one exact, partitioned warehouse, and query it.

    The accounts are those of the file in WHITEBIT_ACCOUNTS_FILE; without it, the one whose
    credentials are in WHITEBIT_API_KEY and WHITEBIT_API_SECRET; without them, the embedded
    exchange simulator's demo accounts.
    """


for command in (
    demo,
    materialize,
    move_account,
    ping,
    report_command,
    reset_key,
    sql_command,
    tables_command,
    catalog_command,
    export_command,
    serve,
    worker,
    ui,
    simulator_command,
):
    main.add_command(command)
