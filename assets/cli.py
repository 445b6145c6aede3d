"""The `whitebit-etl` command: everything a user does by hand.

``demo`` fills a warehouse from the embedded simulator; ``materialize`` runs assets for a day or
a range; ``ping`` checks the exchange; ``sql`` and ``tables`` query and describe the warehouse;
``simulator`` serves the stand-in exchange; ``reset-key`` is the API's one write, done only here.
Heavy imports (Dagster) happen inside the commands that need them, so ``--help`` is instant.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Final, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from pipeline import spec
from pipeline.simulator import simulator_command
from pipeline.whitebit import AsyncWhiteBIT, WhiteBITError
from warehouse.cli import sql_command, tables_command

if TYPE_CHECKING:
    from assets.resources import Exchange

T = TypeVar("T")

#: Days of funding history the demo backfills, ending yesterday.
DEMO_DAYS: Final = 30
DEMO_QUERY: Final = (
    "SELECT funding_date, market, payments, funding_amount FROM daily_funding_by_market "
    "ORDER BY funding_date DESC, market LIMIT 8"
)
NEXT_STEPS: Final = """
Next:
  make ui                                    # the Dagster UI: these runs, assets and checks
  uv run whitebit-etl sql 'SELECT * FROM latest_balances'
  uv run whitebit-etl tables                 # the data dictionary
  DuckDB file, for any DuckDB client (read-only): {catalog}"""
CREDENTIAL_VARIABLES: Final = ("WHITEBIT_API_KEY", "WHITEBIT_API_SECRET")
DAY: Final = click.DateTime(["%Y-%m-%d"])

log = logging.getLogger("assets.cli")


def _console() -> Console:
    return Console(highlight=False, width=None if sys.stdout.isatty() else 110)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Extract one WhiteBIT account into an exact, partitioned warehouse, and query it.

    Credentials come from WHITEBIT_API_KEY and WHITEBIT_API_SECRET; without them, everything
    runs against the embedded exchange simulator.
    """


main.add_command(sql_command)
main.add_command(tables_command)
main.add_command(simulator_command)


def _against_exchange(
    console: Console, act: Callable[[AsyncWhiteBIT, Exchange], Awaitable[T]]
) -> tuple[T, Exchange]:
    """Run ``act`` with a client of the configured exchange (or the embedded simulator)."""
    from assets.definitions import whitebit_resource

    # Outside a Dagster run, EnvVar fields hold names: resolve them as a run would.
    resource = whitebit_resource().process_config_and_initialize()
    if resource.simulated:
        console.print("[yellow]No credentials set: using the embedded WhiteBIT simulator.[/yellow]")
    with resource.exchange(log) as exchange:

        async def run() -> T:
            async with exchange.client() as client:
                return await act(client, exchange)

        try:
            return asyncio.run(run()), exchange
        except WhiteBITError as exc:
            raise click.ClickException(str(exc)) from exc


@main.command()
def ping() -> None:
    """Check that the exchange answers its public ping, and how fast."""
    console = _console()

    async def act(client: AsyncWhiteBIT, exchange: Exchange) -> float:
        started = time.perf_counter()
        await client.ping()
        return time.perf_counter() - started

    seconds, exchange = _against_exchange(console, act)
    console.print(f"pong from {exchange.base_url} in {seconds * 1000:.1f} ms")


def _asset_names() -> list[str]:
    from assets import ALL_ASSETS

    return [key.to_user_string() for asset in ALL_ASSETS for key in asset.keys]


def _snapshot_names() -> list[str]:
    return [name for name in _asset_names() if name != "funding_history"]


def _selected(names: tuple[str, ...]) -> list[str]:
    known = _asset_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise click.BadParameter(
            f"unknown asset(s) {', '.join(unknown)}; assets: {', '.join(known)}",
            param_hint="ASSETS",
        )
    chosen = list(dict.fromkeys(names))
    # investments and fixed_plans come from one walk: they run together.
    if {"investments", "fixed_plans"} & set(chosen):
        chosen = [n for n in chosen if n not in ("investments", "fixed_plans")]
        chosen += ["investments", "fixed_plans"]
    return chosen


def _run(selection: list[str], first: date | None, last: date | None, console: Console) -> None:
    """One run; no days: snapshots, taken for the day the run takes them."""
    from assets.runs import materialize
    from assets.snapshots import PastSnapshotRefused

    # A short title: the bar and its counters must fit a terminal's width.
    what = ", ".join(selection) if len(selection) <= 2 else f"{len(selection)} assets"
    title = f"{what}: " + (
        "today" if first is None else f"{first}" + (f" .. {last}" if last != first else "")
    )
    try:
        outcome = materialize(selection, first, last, console=console, title=title)
    except PastSnapshotRefused as exc:
        raise click.ClickException(str(exc)) from None
    for said in outcome.said:
        heading = "[yellow]warning:[/yellow]" if said.warns else "[red]failed[/red]"
        console.print(f"{heading} {said.what}" + (":" if said.text else ""))
        for line in said.text.splitlines():
            console.print(f"  {escape(line)}", soft_wrap=True)
    if not outcome.success:
        raise click.ClickException(f"run {outcome.run_id} failed (details: make ui)")
    console.print(f"run {outcome.run_id} succeeded")


@main.command()
@click.argument("assets", nargs=-1)
@click.option("--partition", type=DAY, help="One UTC day, YYYY-MM-DD.")
@click.option("--from", "first", type=DAY, help="First day of a range.")
@click.option("--to", "last", type=DAY, help="Last day of a range (inclusive).")
def materialize(
    assets: tuple[str, ...],
    partition: datetime | None,
    first: datetime | None,
    last: datetime | None,
) -> None:
    """Materialize ASSETS (default: all) for a day or a range of days, in one Dagster run.

    With no day: yesterday's funding history and today's snapshots (of those named, or all).
    Funding history replaces exactly the days given (a range is one walk); snapshots can only be
    taken for today.
    """
    from assets.partitions import today

    console = _console()
    if partition is not None and (first is not None or last is not None):
        raise click.UsageError("give --partition, or --from and --to, not both")
    if (first is None) != (last is None):
        raise click.UsageError("a range needs both --from and --to")
    if partition is not None:
        start = end = partition.date()
    elif first is not None and last is not None:
        start, end = first.date(), last.date()
    else:
        selected = _selected(assets) if assets else _asset_names()
        now = today()
        if "funding_history" in selected:
            _run(["funding_history"], now - timedelta(days=1), now - timedelta(days=1), console)
        if snapshots := [name for name in selected if name != "funding_history"]:
            _run(snapshots, None, None, console)
        return
    if end < start:
        raise click.BadParameter(f"{end} is before {start}", param_hint="--to")
    _run(_selected(assets) if assets else _asset_names(), start, end, console)


@main.command()
def demo() -> None:
    """Fill the warehouse from the embedded simulator: 30 days of funding, today's snapshots.

    Everything goes through Dagster (the runs appear in `make ui`). Running it again leaves
    the same rows, with a new extracted_at.
    """
    from assets.partitions import today
    from warehouse import catalog, schemas
    from warehouse.cli import print_table

    set_ = [name for name in CREDENTIAL_VARIABLES if os.environ.get(name)]
    if set_:
        raise click.ClickException(
            f"{' and '.join(set_)} set: the demo extracts the embedded simulator only. "
            "Unset it, or use `whitebit-etl materialize` for your account."
        )
    console = _console()
    console.print(
        "[bold]whitebit-etl demo[/bold]: the embedded WhiteBIT simulator, through Dagster"
    )
    now = today()
    _run(["funding_history"], now - timedelta(days=DEMO_DAYS), now - timedelta(days=1), console)
    _run(_snapshot_names(), None, None, console)

    with catalog.connect() as con:
        console.print("\n[bold]Rows per table[/bold]")
        for table in schemas.TABLES:
            found = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()  # noqa: S608
            console.print(f"  {table:<18} {found[0] if found else 0:>8,}")
        console.print(f"\n[bold]{DEMO_QUERY}[/bold]")
        result = con.execute(DEMO_QUERY)
        print_table([d[0] for d in result.description or ()], result.fetchall(), console)
    console.print(NEXT_STEPS.format(catalog=catalog.catalog_path()))


def _uuid(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not spec.UUID_PATTERN.match(value):
        raise click.BadParameter(
            f"{value!r} is not a UUID (like 3fa85f64-5717-4562-b3fc-2c963f66afa6)"
        )
    return value


@main.command("reset-key")
@click.option(
    "--api-key-id", required=True, callback=_uuid, help="The sub-account key's id (a UUID)."
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def reset_key(api_key_id: str, yes: bool) -> None:
    """Give a sub-account API key a new secret (the API's one write; never scheduled).

    The key keeps its id; its current secret stops working at once.
    """
    console = _console()

    async def act(client: AsyncWhiteBIT, exchange: Exchange) -> None:
        if not yes:
            click.confirm(
                f"Reset the secret of sub-account key {api_key_id} at {exchange.base_url}? "
                "Its current secret stops working at once",
                abort=True,
            )
        await client.reset_subaccount_key(api_key_id)

    _, exchange = _against_exchange(console, act)
    console.print(f"key {api_key_id} reset at {exchange.base_url}: same id, new secret.")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The webserver's address.")
@click.option("--port", default=3000, show_default=True, help="The webserver's port.")
def serve(host: str, port: int) -> None:
    """Run the nightly service: the webserver, the daemon and the code location server.

    SQLite instance by default; PostgreSQL when DAGSTER_POSTGRES_URL is set. Failed runs are
    posted to WHITEBIT_ALERT_WEBHOOK_URL when set. Stops cleanly on SIGTERM or Ctrl-C.
    """
    from assets.instance import InstanceError
    from assets.service import serve as run_service

    try:
        run_service(_console(), host, port)
    except InstanceError as exc:
        raise click.ClickException(str(exc)) from exc


if __name__ == "__main__":
    main()
