"""``materialize``, ``demo`` and ``report``: runs of the code location, and the page of what they
wrote.

``materialize`` with no asset and no day launches exactly the run requests the nightly schedule
would make at this moment (`assets.jobs.nightly_requests`): the month so far of every history, and
today's snapshots, a run each per account; then the exchange's prices, as the prices schedule
would; then, per account, the checks of the catalog's views the daily watch job runs (the
reconciliation among them), so a residual fails the command. Named
assets with no day: the same requests, narrowed to them. With days: the histories replace exactly
those days (`assets.jobs.requests_for`), and a snapshot can only be taken today. Everything a
request could not do is refused before any run starts, in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Final

import click
from rich.console import Console
from rich.markup import escape

from assets.accounts import Account
from assets.settings import REAL_ROOT
from warehouse.schemas import EXCHANGE

from ._common import (
    ACCOUNT_OPTION,
    DAY,
    accounts,
    chosen,
    clock,
    console,
    said_in_one_line,
    settings,
    this_command,
    warehouse,
)

if TYPE_CHECKING:  # Dagster loads in the commands that run something: --help stays instant
    import dagster as dg

    from assets.definitions import Location
    from assets.jobs import AccountAssets
    from assets.outcomes import Said

#: Days of every history the demo backfills before the day it is asked on (and that day's start):
#: its first day is its start date.
DEMO_DAYS: Final = 30
#: A query across the accounts: each asset's balances summed over them, exactly.
#: What the demo prints last: the assets summed over the accounts, and what each is worth.
DEMO_QUERIES: Final = (
    "SELECT * FROM balances_across_accounts ORDER BY ticker",
    "SELECT account, snapshot_date, value, assets_valued, unpriced_assets FROM account_value "
    "ORDER BY ALL",
)


def _location(names: Sequence[Account]) -> Location:
    """The code location of these accounts, going by the command's clock."""
    from assets.definitions import location

    return location(settings(), names, clock=clock())


def _requests(
    assets: Sequence[AccountAssets],
    tables: tuple[str, ...],
    first: date | None,
    last: date | None,
    *,
    now: datetime,
    named: bool,
    out: Console,
    prices: dg.RunRequest | None = None,
) -> list[tuple[str, dg.RunRequest]]:
    """(account, request) of each run: the schedules' at the moment ``now`` (the accounts' runs,
    then the exchange's ``prices`` for a whole night, then the checks of the views), or those of
    the tables and days asked for."""
    from assets.definitions import rereads_of
    from assets.jobs import nightly_requests, requests_for

    every = sorted({name for a in assets for name in a.tables})
    nowhere = [name for name in tables if not any(name in a.tables for a in assets)]
    if nowhere and len(assets) > 1:  # one account's own message names it
        raise click.BadParameter(
            f"unknown asset(s) {', '.join(nowhere)}; assets: {', '.join(every)}",
            param_hint="ASSETS",
        )
    found: list[tuple[str, dg.RunRequest]] = []
    views_found: list[tuple[str, dg.RunRequest]] = []
    for account_assets in assets:
        name = account_assets.account.name
        lacking = [t for t in tables if t not in account_assets.tables]
        if lacking and (named or len(assets) == 1):
            raise click.BadParameter(
                f"unknown asset(s) {', '.join(lacking)} of account {name}; its assets: "
                f"{', '.join(account_assets.tables)}",
                param_hint="ASSETS",
            )
        if lacking:
            out.print(f"[yellow]{name} has no {', '.join(lacking)}: left out[/yellow]")
        kept = [t for t in tables if t in account_assets.tables]
        if tables and not kept:
            continue
        if first is None or last is None:
            wanted = {key for t in kept for key in account_assets.tables[t].keys}
            for request in nightly_requests([account_assets], now, rereads_of(settings())):
                selection = list(request.asset_selection or ())
                if wanted:
                    selection = [key for key in selection if key in wanted]
                if selection:
                    narrowed = request.with_replaced_attrs(
                        asset_selection=selection,
                        asset_check_keys=account_assets.run_checks(selection),
                    )
                    found.append((name, narrowed))
            views = account_assets.views_request()
            if not tables and views is not None:
                # The night ends as the watch job's does: with what the views say, a residual
                # of the reconciliation failing it.
                views_found.append((name, views))
            continue
        chosen_tables = kept or list(account_assets.tables)
        found += [(name, r) for r in requests_for(account_assets, chosen_tables, first, last)]
    if prices is not None and not tables and first is None:
        # Before the views: they value what the accounts hold with its prices.
        found.append((EXCHANGE, prices))
    return found + views_found


def _checked_days(
    tables: Sequence[str], first: date, last: date, assets: Sequence[AccountAssets], now: date
) -> None:
    """Refuse, before any request, days the histories do not hold and snapshots of any day but
    today (``now``)."""
    start = settings().start_date
    if last > now:
        raise click.BadParameter(
            f"{last} is in the future: the last day the exchange can tell is today ({now}, UTC)",
            param_hint="--to/--partition",
        )
    if first < start:
        raise click.BadParameter(
            f"{first} is before the first day of history, {start} (WHITEBIT_START_DATE moves it)",
            param_hint="--from/--partition",
        )
    snapshots = sorted(
        {
            key.path[-1]
            for a in assets
            for key in a.snapshot_keys
            if not tables or key.path[-1] in tables
        }
    )
    if snapshots and (first, last) != (now, now):
        asked = first if first == last else f"{first} .. {last}"
        raise click.ClickException(
            f"{', '.join(snapshots)}: a snapshot of the account as it is now can be taken for "
            f"today ({now}, UTC) only, not {asked}: the WhiteBIT API cannot tell what it was on "
            "another day. Past snapshots exist only if they were taken on that day."
        )


def _title(account: str, request: dg.RunRequest, several: bool, today: date) -> str:
    """A short title: the bar and its counters must fit a terminal's width."""
    from assets.runs import days_of

    names = [key.path[-1] for key in request.asset_selection or ()]
    what = ", ".join(names) if len(names) <= 2 else f"{len(names)} assets"
    if not names:
        what = "what the views say"
    days = days_of(request, today)
    when = "today" if not days else f"{days[0]}" + (f" .. {days[-1]}" if len(days) > 1 else "")
    return f"{account + ' ' if several else ''}{what}: {when}"


def _checked_before_runs(location: Location) -> None:
    """Before any run (and any file), in one line each: a store that cannot be used at all (said
    once here, not by every step of every run), and a warehouse holding rows of the other kind
    than the accounts' (the embedded simulator's where real accounts' would land, or the
    reverse; each run checks its account's source again before its first request)."""
    from assets.definitions import whitebit_resource
    from warehouse import sources

    wh = warehouse()
    wh.store.check()
    # Outside a Dagster run, EnvVar fields hold names: resolved as a run would.
    wanted = {
        account.name: whitebit_resource(account, settings()).process_config_and_initialize().source
        for account in location.accounts
    }
    with said_in_one_line():
        sources.check_kinds(wh, wanted)


def _launch(location: Location, requests: list[tuple[str, dg.RunRequest]], out: Console) -> None:
    """Run each request, saying what each run had to say; exit naming the runs that failed."""
    from assets.instance import instance
    from assets.runs import cause_of, failed_part, materialize

    opened = instance(settings(), command_line=True)
    several = len({account for account, _ in requests}) > 1
    failed: list[tuple[str, str]] = []
    cause: str | None = None
    # What the command said, once each: as its runs went (warnings, waits), and after each.
    watched: set[str] = set()
    printed: set[str] = set()
    for account, request in requests:
        try:
            result = materialize(
                location,
                request,
                opened,
                console=out,
                title=_title(account, request, several, location.clock.today()),
                said=watched,
            )
        except Exception as exc:
            part = failed_part(exc)
            if part is None:
                raise
            # SQLAlchemy quotes the statement and its parameters after "[SQL:": left out.
            reason = " ".join(str(exc).split("[SQL:")[0].split())[:300]
            raise click.ClickException(
                f"{part} failed the run ({type(exc).__name__}: {reason}); the partitions that "
                "landed are whole, and the next run records them"
            ) from None
        if result.interrupted:
            out.print(
                f"[red]run {result.run_id} canceled[/red]: interrupted ({result.interrupted}); "
                "every partition it had not finished is as it was: run the same command again "
                "to complete it"
            )
            raise SystemExit(143 if result.interrupted == "SIGTERM" else 130)
        if not result.success:
            failed.append((account, result.run_id))
            cause = cause or cause_of(result)
        _say(out, result.said, printed, cause)
        if result.success:
            out.print(f"run {result.run_id} succeeded")
    if len(failed) == 1:
        why = f": {cause}" if cause is not None else ""
        raise click.ClickException(f"run {failed[0][1]} failed{why} (details: make ui)")
    if failed:
        runs = ", ".join(f"{run_id} ({account})" for account, run_id in failed)
        why = f"; {cause}" if cause is not None else ""
        raise click.ClickException(f"runs failed: {runs}{why} (details: make ui)")


def _say(out: Console, said: Sequence[Said], printed: set[str], cause: str | None) -> None:
    """What a run has to say, each message once: the steps (or checks) that say the same are
    named together (an account's source refused fails each of its steps alike); a message an
    earlier run of the command said is named, not repeated; and the cause the command's last
    line states is left to it."""
    groups: dict[tuple[bool, str, str], list[str]] = {}
    for one in said:
        kind, _, name = one.what.partition(" ")
        groups.setdefault((one.warns, kind, one.text), []).append(name)
    for (warns, kind, text), names in groups.items():
        heading = "[yellow]warning:[/yellow]" if warns else "[red]failed[/red]"
        what = f"{heading} {kind}{'s' if len(names) > 1 else ''} {', '.join(names)}".rstrip()
        if text in printed:
            out.print(f"{what}: as said above", soft_wrap=True)
            continue
        printed.add(text)
        lines = text.splitlines()
        if cause is not None and lines and cause in (lines[0], lines[0].partition(": ")[2]):
            lines = lines[1:]
            what += " (why: the last line)"
        out.print(what + (":" if lines else ""), soft_wrap=True)
        for line in lines:
            out.print(f"  {escape(line)}", soft_wrap=True)


@click.command()
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
    """Materialize ASSETS (default: all) of each account (or those given), in one Dagster run
    per account and kind, as the nightly schedule would.

    With no day: what the nightly schedule asks for now (the month so far of every history,
    today's snapshots), narrowed to ASSETS; with no ASSETS either, the exchange's prices follow,
    and the night ends with what the catalog's views say (the reconciliation), as the daily
    watch job checks it. With days: the
    histories replace exactly the days given (a range is one walk); snapshots can only be taken
    for today. An account whose run fails does not stop the others'.
    """
    # The moment the command asks at: its days and the schedule's requests are of it.
    now = clock().moment()
    out = console()
    if partition is not None and (first is not None or last is not None):
        raise click.UsageError("give --partition, or --from and --to, not both")
    if (first is None) != (last is None):
        raise click.UsageError("a range needs both --from and --to")
    start: date | None = None
    end: date | None = None
    if partition is not None:
        start = end = partition.date()
    elif first is not None and last is not None:
        start, end = first.date(), last.date()
        if end < start:
            raise click.BadParameter(f"{end} is before {start}", param_hint="--to")
    location = _location(chosen(account_names))
    _checked_before_runs(location)
    if start is not None and end is not None:
        _checked_days(assets, start, end, location.built, now.date())
    prices = None
    if location.prices is not None:
        from assets.jobs import prices_request

        prices = prices_request(location.prices, now.date())
    requests = _requests(
        location.built,
        assets,
        start,
        end,
        now=now,
        named=bool(account_names),
        out=out,
        prices=prices,
    )
    _launch(location, requests, out)


@click.command("report")
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
    write_report(
        console(),
        account_names,
        first.date() if first else None,
        last.date() if last else None,
        out,
    )


def write_report(
    out: Console,
    names: tuple[str, ...] = (),
    first: date | None = None,
    last: date | None = None,
    file: str | None = None,
) -> None:
    from assets.instance import instance
    from assets.report import run_facts
    from warehouse import report

    every = accounts()
    facts = run_facts(instance(settings()), _location(every).built)
    with said_in_one_line():
        written = report.write(
            warehouse(),
            accounts=names,
            declared=[account.name for account in every],
            first=first,
            last=last,
            out=file,
            facts=facts,
        )
    headline = written.headline
    days = f"{headline.first_day} .. {headline.last_day}" if headline.first_day else "no data yet"
    out.print(
        f"\n[bold]Report[/bold] of {', '.join(headline.accounts) or 'no account'}, {days}, "
        f"{headline.rows:,} rows, {len(written.html.encode()) / 1e6:.1f} MB:\n  {written.path}"
    )


def demo_requests(built: Sequence[AccountAssets], now: date) -> list[tuple[str, dg.RunRequest]]:
    """The demo's runs, asked on the day ``now``, per account: `DEMO_DAYS` days of every history
    through ``now`` (its snapshot holds what moved at its midnight, the funding paid then: records
    of ``now``'s day that the statement between the two snapshots counts), and the snapshots of
    yesterday and of ``now``, each at the start of its day by the embedded simulator's clock.
    Each run leaves the catalog to the demo, which refreshes it once after them."""
    from assets.jobs import requests_for
    from assets.resources import SIMULATOR_DAY_TAG
    from assets.steps import CATALOG_AFTER_TAG

    yesterday = now - timedelta(days=1)
    after = {CATALOG_AFTER_TAG: "demo"}
    requests: list[tuple[str, dg.RunRequest]] = []
    for assets in built:
        name = assets.account.name
        monthly = [key.path[-1] for key in assets.monthly_keys]
        snapshots = [key.path[-1] for key in assets.snapshot_keys]
        requests += [
            (name, r.with_replaced_attrs(tags={**r.tags, **after}))
            for r in requests_for(assets, monthly, demo_start(now), now)
        ]
        # Yesterday's snapshots too (the simulator's clock set back a day), so that the
        # statement and the reconciliation have a day between two snapshots to show; each
        # run's simulator stands at the start of the day asked for, whenever the run goes.
        requests += [
            (name, r.with_replaced_attrs(tags={**r.tags, **after, SIMULATOR_DAY_TAG: str(day)}))
            for day in (yesterday, now)
            for r in requests_for(assets, snapshots, now, now)
        ]
    return requests


def demo_start(now: date) -> date:
    """The demo's first day, asked on ``now``: its start date, so that no day before it is
    taken for one the warehouse failed to archive."""
    return now - timedelta(days=DEMO_DAYS)


@click.command()
def demo() -> None:
    """Fill the demo's own warehouse (./data-demo, unless WAREHOUSE_ROOT says; never a
    warehouse holding a real account's rows) from the embedded simulator's main account and one
    of its sub-accounts: 30 days of every history up to today's midnight, yesterday's and
    today's snapshots, then a query across the two.

    Everything goes through Dagster (the runs appear in `make ui`). Running it again leaves the
    same rows (today's, on a later day, with the rest of the day), with a new extracted_at.
    """
    from assets.definitions import location as location_of
    from warehouse import catalog, schemas

    # The day the demo asks on: its runs' days are of it, whenever they go.
    asked = clock().today()
    configured = settings().single_account_set or (
        ("WHITEBIT_ACCOUNTS_FILE",) if settings().accounts_file else ()
    )
    if configured:
        raise click.ClickException(
            f"{' and '.join(configured)} set: the demo extracts the embedded simulator's accounts "
            "only. Unset it, or use `whitebit-etl materialize` for your accounts."
        )
    out = console()
    # The demo's history starts at its first day: the horizon checks judge its days only.
    since = settings().model_copy(update={"start_date": demo_start(asked)})
    location = location_of(since, accounts(), clock=clock())
    _checked_before_runs(location)
    out.print(
        "[bold]whitebit-etl demo[/bold]: the embedded WhiteBIT simulator's accounts "
        f"({', '.join(a.name for a in location.accounts)}), through Dagster: {DEMO_DAYS} "
        f"days of every history, {demo_start(asked)} .. {asked}, and the snapshots of "
        f"{asked - timedelta(days=1)} and {asked}, into the demo's own warehouse at "
        f"{warehouse().location} (WAREHOUSE_ROOT moves it; real accounts' is {REAL_ROOT})"
    )
    requests = demo_requests(location.built, asked)
    if location.prices is not None:
        # Last: the prices of what the accounts' runs wrote.
        from assets.jobs import prices_request
        from assets.steps import CATALOG_AFTER_TAG

        priced = prices_request(location.prices, asked)
        requests.append(
            (EXCHANGE, priced.with_replaced_attrs(tags={**priced.tags, CATALOG_AFTER_TAG: "demo"}))
        )
    try:
        _launch(location, requests, out)
    finally:
        # Once, whole or interrupted: the runs leave the catalog to the demo.
        catalog.refresh_if_stale(warehouse())

    names = [account.name for account in location.accounts]
    tables = [*(t.name for t in schemas.ACCOUNT_TABLES), schemas.REJECTS]
    counts = " UNION ALL ".join(
        f"SELECT '{table}' AS \"table\", "  # noqa: S608 - the schema's own names
        + ", ".join(f"count(*) FILTER (account = '{n}') AS \"{n}\"" for n in names)
        + f' FROM "{table}"'
        for table in tables
    )
    with catalog.connect(warehouse()) as con:
        out.print("\n[bold]Rows per table and account[/bold]")
        con.sql(counts).show(max_width=120, max_rows=len(tables))
        ((rows, markets),) = con.execute(
            "SELECT count(*), count(DISTINCT market) FROM daily_candles"
        ).fetchall()
        out.print(f"daily_candles, the exchange's: {rows} rows of {markets} markets")
        for query in DEMO_QUERIES:
            out.print(f"\n[bold]{query}[/bold]")
            con.sql(query).show(max_width=120)
    write_report(out)
    command = this_command()
    hints = [
        "make ui                       # the Dagster UI: these runs, assets and checks",
        f"{command} sql 'TABLE account_summary'",
        f"{command} tables             # the data dictionary",
        f"DuckDB file, for any DuckDB client (read-only): {warehouse().catalog_path}",
    ]
    out.print("\nNext:\n" + "\n".join(f"  {hint}" for hint in hints))
