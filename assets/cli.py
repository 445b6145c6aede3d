"""The `whitebit-etl` command: everything a user does by hand.

``demo`` fills a warehouse from the embedded simulator's two accounts; ``materialize`` runs an
account's assets (or every account's) for a day or a range; ``ping`` checks an account's
exchange; ``sql`` and ``tables`` query and describe the warehouse; ``report`` draws it on one
page; ``serve`` runs the nightly service and ``worker`` a Celery worker of its runs;
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
from warehouse.cli import catalog_command, sql_command, tables_command

if TYPE_CHECKING:
    from assets.accounts import Account
    from assets.resources import Exchange

T = TypeVar("T")

#: Days of funding history the demo backfills, ending yesterday.
DEMO_DAYS: Final = 30
#: The demo's accounts: the embedded simulator's main account and one of its sub-accounts.
DEMO_ACCOUNTS: Final = "accounts.demo.yaml"
#: A query across the accounts: each asset's balances summed over them, exactly.
DEMO_QUERY: Final = "SELECT * FROM balances_across_accounts ORDER BY ticker"
NEXT_STEPS: Final = """
Next:
  WHITEBIT_ACCOUNTS_FILE={accounts} make ui
                                             # the Dagster UI: these runs, assets and checks
  uv run whitebit-etl sql 'SELECT * FROM account_summary'
  uv run whitebit-etl tables                 # the data dictionary
  DuckDB file, for any DuckDB client (read-only): {catalog}"""
CREDENTIAL_VARIABLES: Final = ("WHITEBIT_API_KEY", "WHITEBIT_API_SECRET")
DAY: Final = click.DateTime(["%Y-%m-%d"])

log = logging.getLogger("assets.cli")


def _console() -> Console:
    return Console(highlight=False, width=None if sys.stdout.isatty() else 110)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Extract WhiteBIT accounts into one exact, partitioned warehouse, and query it.

    The accounts are those of the file in WHITEBIT_ACCOUNTS_FILE; without it, the one whose
    credentials are in WHITEBIT_API_KEY and WHITEBIT_API_SECRET; without them, everything runs
    against the embedded exchange simulator.
    """


main.add_command(sql_command)
main.add_command(tables_command)
main.add_command(catalog_command)
main.add_command(simulator_command)


def _accounts() -> tuple[Account, ...]:
    """The deployment's accounts, or the accounts file's error as the command's."""
    from assets.accounts import AccountsFileError, load

    try:
        return load()
    except AccountsFileError as exc:
        raise click.ClickException(str(exc)) from None


def _chosen(names: tuple[str, ...]) -> tuple[Account, ...]:
    """The accounts named (all of them when none is), or a usage error naming the unknown."""
    accounts = _accounts()
    if not names:
        return accounts
    known = {account.name: account for account in accounts}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise click.BadParameter(
            f"unknown account(s) {', '.join(unknown)}; accounts: {', '.join(known)}",
            param_hint="--account",
        )
    return tuple(known[name] for name in dict.fromkeys(names))


ACCOUNT_OPTION = click.option(
    "--account",
    "account_names",
    multiple=True,
    metavar="NAME",
    help="Only this account (repeat for several); default: every account.",
)


def _against_exchange(
    console: Console,
    account: str | None,
    act: Callable[[AsyncWhiteBIT, Exchange], Awaitable[T]],
) -> tuple[T, Exchange]:
    """Run ``act`` with a client of an account's exchange (default: the first account's)."""
    from assets.definitions import whitebit_resource

    (chosen, *_) = _chosen((account,) if account else ())
    # Outside a Dagster run, EnvVar fields hold names: resolve them as a run would.
    resource = whitebit_resource(chosen).process_config_and_initialize()
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
@click.option("--account", help="The account whose exchange to ping; default: the first.")
def ping(account: str | None) -> None:
    """Check that an account's exchange answers its public ping, and how fast."""
    console = _console()

    async def act(client: AsyncWhiteBIT, exchange: Exchange) -> float:
        started = time.perf_counter()
        await client.ping()
        return time.perf_counter() - started

    seconds, exchange = _against_exchange(console, account, act)
    console.print(f"pong from {exchange.base_url} in {seconds * 1000:.1f} ms")


def _asset_names(account: Account) -> list[str]:
    """The tables the account's assets write (no investments for a key without B2B access)."""
    from assets import build

    (assets,) = build([account])
    return [key.path[-1] for asset in assets.assets for key in asset.keys]


def _selections(
    names: tuple[str, ...], accounts: tuple[Account, ...], *, named: bool, console: Console
) -> dict[str, list[str]]:
    """The tables each account runs. A table no account has is refused; one an account has not
    (no investments for a key without B2B access) is refused when the account was named
    (``--account``, or the only one), else left out for that account, saying so."""
    known_by = {account.name: _asset_names(account) for account in accounts}
    nowhere = [n for n in names if not any(n in known for known in known_by.values())]
    if nowhere and len(accounts) > 1:  # one account's own message names it
        every = sorted({name for known in known_by.values() for name in known})
        raise click.BadParameter(
            f"unknown asset(s) {', '.join(nowhere)}; assets: {', '.join(every)}",
            param_hint="ASSETS",
        )
    selections = {}
    for account in accounts:
        known = known_by[account.name]
        lacking = [n for n in names if n not in known]
        if lacking and (named or len(accounts) == 1):
            raise click.BadParameter(
                f"unknown asset(s) {', '.join(lacking)} of account {account.name}; its assets: "
                f"{', '.join(known)}",
                param_hint="ASSETS",
            )
        if lacking:
            console.print(f"[yellow]{account.name} has no {', '.join(lacking)}: left out[/yellow]")
        kept = tuple(n for n in names if n in known)
        if kept or not names:
            selections[account.name] = _selected(kept, known)
    return selections


def _selected(names: tuple[str, ...], known: list[str]) -> list[str]:
    if not names:
        return known
    chosen = list(dict.fromkeys(names))
    # investments and fixed_plans come from one walk: they run together.
    if {"investments", "fixed_plans"} & set(chosen):
        chosen = [n for n in chosen if n not in ("investments", "fixed_plans")]
        chosen += ["investments", "fixed_plans"]
    return chosen


def _run(
    selection: list[str],
    first: date | None,
    last: date | None,
    console: Console,
    *,
    account: Account,
    accounts: tuple[Account, ...],
) -> str | None:
    """One run of one account; no days: snapshots, taken for the day the run takes them. The id
    of the run when it failed (its failures are printed), else None."""
    from assets.runs import materialize
    from assets.snapshots import PastSnapshotRefused

    # A short title: the bar and its counters must fit a terminal's width.
    what = ", ".join(selection) if len(selection) <= 2 else f"{len(selection)} assets"
    whose = f"{account.name} " if len(accounts) > 1 else ""
    title = f"{whose}{what}: " + (
        "today" if first is None else f"{first}" + (f" .. {last}" if last != first else "")
    )
    try:
        outcome = materialize(
            selection, first, last, account=account, accounts=accounts, console=console,
            title=title,
        )  # fmt: skip
    except PastSnapshotRefused as exc:
        raise click.ClickException(str(exc)) from None
    for said in outcome.said:
        heading = "[yellow]warning:[/yellow]" if said.warns else "[red]failed[/red]"
        console.print(f"{heading} {said.what}" + (":" if said.text else ""))
        for line in said.text.splitlines():
            console.print(f"  {escape(line)}", soft_wrap=True)
    if not outcome.success:
        return outcome.run_id
    console.print(f"run {outcome.run_id} succeeded")
    return None


#: A failed run: its account, its id.
Failed = tuple[str, str]


def _ended(failed: list[Failed]) -> None:
    """Exit saying which runs failed, once every account's runs went."""
    if len(failed) == 1:
        raise click.ClickException(f"run {failed[0][1]} failed (details: make ui)")
    if failed:
        runs = ", ".join(f"{run_id} ({account})" for account, run_id in failed)
        raise click.ClickException(f"runs failed: {runs} (details: make ui)")


@main.command()
@click.argument("assets", nargs=-1)
@ACCOUNT_OPTION
@click.option("--partition", type=DAY, help="One UTC day, YYYY-MM-DD.")
@click.option("--from", "first", type=DAY, help="First day of a range.")
@click.option("--to", "last", type=DAY, help="Last day of a range (inclusive).")
def materialize(
    assets: tuple[str, ...],
    account_names: tuple[str, ...],
    partition: datetime | None,
    first: datetime | None,
    last: datetime | None,
) -> None:
    """Materialize ASSETS (default: all) of each account (or those given) for a day or a range
    of days, in one Dagster run per account.

    With no day: yesterday's funding history and today's snapshots (of those named, or all).
    Funding history replaces exactly the days given (a range is one walk); snapshots can only be
    taken for today. An account whose run fails does not stop the others'.
    """
    from assets.partitions import today

    console = _console()
    accounts = _accounts()
    chosen = _chosen(account_names)
    if partition is not None and (first is not None or last is not None):
        raise click.UsageError("give --partition, or --from and --to, not both")
    if (first is None) != (last is None):
        raise click.UsageError("a range needs both --from and --to")
    if partition is not None:
        start: date | None = partition.date()
        end: date | None = start
    elif first is not None and last is not None:
        start, end = first.date(), last.date()
        if end < start:
            raise click.BadParameter(f"{end} is before {start}", param_hint="--to")
    else:
        start = end = None
    selections = _selections(assets, chosen, named=bool(account_names), console=console)
    failed: list[Failed] = []
    for account in chosen:
        selected = selections.get(account.name)
        if selected is None:
            continue

        def run(
            tables: list[str], a: date | None, b: date | None, account: Account = account
        ) -> None:
            run_id = _run(tables, a, b, console, account=account, accounts=accounts)
            if run_id is not None:
                failed.append((account.name, run_id))

        if start is not None:
            run(selected, start, end)
            continue
        yesterday = today() - timedelta(days=1)
        if "funding_history" in selected:
            run(["funding_history"], yesterday, yesterday)
        if snapshots := [name for name in selected if name != "funding_history"]:
            run(snapshots, None, None)
    _ended(failed)


@main.command("report")
@click.option(
    "--account",
    "account_names",
    multiple=True,
    metavar="NAME",
    help="Only this account (repeat for several); default: every account of the accounts file "
    "and any other the warehouse holds.",
)
@click.option("--from", "first", type=DAY, help="First day (default: the warehouse's first).")
@click.option("--to", "last", type=DAY, help="Last day, inclusive (default: its last).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="The HTML file to write (default: report.html in the warehouse's local directory, "
    "where the nightly account_report asset writes it).",
)
def report_command(
    account_names: tuple[str, ...],
    first: datetime | None,
    last: datetime | None,
    out: str | None,
) -> None:
    """Write the account report: one HTML page of charts beside exact tables (funding per market
    and per day, funding rates, balances, investments; a summary across accounts), that opens
    offline in any browser. Prints its path."""
    _write_report(
        _console(),
        account_names,
        first.date() if first else None,
        last.date() if last else None,
        out,
    )


def _write_report(
    console: Console,
    names: tuple[str, ...] = (),
    first: date | None = None,
    last: date | None = None,
    out: str | None = None,
) -> None:
    from assets.instance import instance
    from assets.jobs import build
    from assets.report import run_facts
    from warehouse import report

    accounts = _accounts()
    facts = run_facts(instance(), build(accounts))
    try:
        written = report.write(
            accounts=names,
            declared=[account.name for account in accounts],
            first=first,
            last=last,
            out=out,
            facts=facts,
        )
    except report.ReportError as exc:
        raise click.ClickException(str(exc)) from None
    headline = written.headline
    days = f"{headline.first_day} .. {headline.last_day}" if headline.first_day else "no data yet"
    console.print(
        f"\n[bold]Report[/bold] of {', '.join(headline.accounts) or 'no account'}, {days}, "
        f"{headline.rows:,} rows, {len(written.html.encode()) / 1e6:.1f} MB:\n  {written.path}"
    )


@main.command()
def demo() -> None:
    """Fill the warehouse from the embedded simulator's main account and one of its
    sub-accounts: 30 days of funding, today's snapshots, then a query across the two.

    Everything goes through Dagster (the runs appear in `make ui` with the printed accounts
    file). Running it again leaves the same rows, with a new extracted_at.
    """
    from importlib import resources

    from assets.accounts import ACCOUNTS_FILE_ENV, load
    from assets.partitions import today
    from warehouse import catalog, schemas
    from warehouse.cli import print_table

    set_ = [name for name in (*CREDENTIAL_VARIABLES, ACCOUNTS_FILE_ENV) if os.environ.get(name)]
    if set_:
        raise click.ClickException(
            f"{' and '.join(set_)} set: the demo extracts the embedded simulator's accounts "
            "only. Unset it, or use `whitebit-etl materialize` for your accounts."
        )
    demo_file = str(resources.files("assets").joinpath(DEMO_ACCOUNTS))
    # The demo's runs (and the code location they build) read the accounts from the variable.
    os.environ[ACCOUNTS_FILE_ENV] = demo_file
    accounts = load()
    console = _console()
    console.print(
        "[bold]whitebit-etl demo[/bold]: the embedded WhiteBIT simulator's accounts "
        f"({', '.join(a.name for a in accounts)}), through Dagster"
    )
    now = today()
    failed: list[Failed] = []
    for account in accounts:
        days = (now - timedelta(days=DEMO_DAYS), now - timedelta(days=1))
        snapshots = [name for name in _asset_names(account) if name != "funding_history"]
        ran = (
            _run(["funding_history"], *days, console, account=account, accounts=accounts),
            _run(snapshots, None, None, console, account=account, accounts=accounts),
        )
        failed += [(account.name, run_id) for run_id in ran if run_id is not None]
    _ended(failed)

    with catalog.connect() as con:
        console.print("\n[bold]Rows per table and account[/bold]")
        names = [account.name for account in accounts]
        rows = []
        for table in schemas.TABLES:
            counts = dict(
                con.execute(
                    f'SELECT account, count(*) FROM "{table}" GROUP BY account'  # noqa: S608
                ).fetchall()
            )
            rows.append((table, *(f"{counts.get(name, 0):,}" for name in names)))
        print_table(["table", *names], rows, console)
        console.print(f"\n[bold]{DEMO_QUERY}[/bold]")
        result = con.execute(DEMO_QUERY)
        print_table([d[0] for d in result.description or ()], result.fetchall(), console)
    _write_report(console)
    console.print(NEXT_STEPS.format(accounts=demo_file, catalog=catalog.catalog_path()))


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
@click.option("--account", help="The main account whose key resets it; default: the first account.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def reset_key(api_key_id: str, account: str | None, yes: bool) -> None:
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

    _, exchange = _against_exchange(console, account, act)
    console.print(f"key {api_key_id} reset at {exchange.base_url}: same id, new secret.")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The webserver's address.")
@click.option("--port", default=3000, show_default=True, help="The webserver's port.")
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Celery workers to start beside the service (0: runs are launched the default way, "
    "or to the workers of CELERY_BROKER_URL when it is set).",
)
def serve(host: str, port: int, workers: int) -> None:
    """Run the nightly service: the webserver, the daemon and the code location server.

    SQLite instance by default; PostgreSQL when DAGSTER_POSTGRES_URL is set. With --workers N,
    runs go to N Celery workers, their broker Debian's redis-server on a loopback port unless
    CELERY_BROKER_URL names one. Failed runs are posted to WHITEBIT_ALERT_WEBHOOK_URL when set.
    Stops cleanly on SIGTERM or Ctrl-C, its workers and broker with it.
    """
    from assets.instance import InstanceError
    from assets.service import serve as run_service

    try:
        run_service(_console(), host, port, workers)
    except InstanceError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Runs this worker executes at once, each in a process of its own.",
)
@click.option(
    "--name",
    default="whitebit",
    show_default=True,
    help="The worker's name; Celery adds @<host>.",
)
def worker(concurrency: int, name: str) -> None:
    """Run a Celery worker of the nightly service's runs, on this machine or another.

    It takes the runs the service launches to the broker of CELERY_BROKER_URL (results to
    CELERY_RESULT_BACKEND, by default the same), and executes them against the instance of
    DAGSTER_POSTGRES_URL and the warehouse of WAREHOUSE_ROOT, with the accounts' variables: see
    docs/many-machines.md. Stops on SIGTERM once its runs have ended (a second one, at once).
    """
    from assets.instance import InstanceError
    from assets.workers import run_worker

    try:
        run_worker(_console(), concurrency, name)
    except InstanceError as exc:
        raise click.ClickException(str(exc)) from exc


if __name__ == "__main__":
    main()
