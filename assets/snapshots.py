"""Snapshot assets: the account as it is now, kept per UTC day it was taken.

The API tells only the present (balances, hedge mode, links, the investments as they stand), so
the assets are not partitioned: each materialization takes today's snapshot, which replaces the
``snapshot_date`` of today in the warehouse and leaves the earlier days as they were. Asking for a
past day (``whitebit-etl materialize --partition``) is refused before any request
(`refuse_past`).
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, TypeVar

import dagster as dg
from dagster import AssetExecutionContext

from pipeline.whitebit import AsyncWhiteBIT, WalkReport
from warehouse import catalog, normalize
from warehouse.normalize import Batch

from . import checks
from .loading import write_snapshot
from .partitions import today
from .reporting import (
    API_POOL,
    API_RETRY,
    GROUP,
    preview,
    report_progress,
    retry_only_transient,
    walk_metadata,
)
from .resources import Exchange, WarehouseResource, WhiteBITResource

T = TypeVar("T")


class PastSnapshotRefused(ValueError):
    """A snapshot asked for a day that is not today."""


def refuse_past(names: Sequence[str], first: date, last: date) -> None:
    """Refuse, saying why, snapshots asked for any day but today."""
    now = today()
    if names and (first, last) != (now, now):
        asked = first if first == last else f"{first} .. {last}"
        raise PastSnapshotRefused(
            f"{', '.join(names)}: a snapshot of the account as it is now can be taken for today "
            f"({now.isoformat()}, UTC) only, not {asked}: the WhiteBIT API cannot tell what it "
            "was on a past day. Past snapshots exist only if they were taken on that day."
        )


def _fetch(
    whitebit: WhiteBITResource,
    context: AssetExecutionContext,
    fetch: Callable[[AsyncWhiteBIT, Exchange], Awaitable[T]],
) -> tuple[T, bool]:
    """Run ``fetch`` against the exchange after the ping preflight; (its result, simulated)."""
    with retry_only_transient(), whitebit.exchange(context.log) as exchange:

        async def run() -> T:
            async with exchange.client() as client:
                await client.ping()
                return await fetch(client, exchange)

        return asyncio.run(run()), exchange.simulated


def _materialized(
    context: AssetExecutionContext,
    warehouse: WarehouseResource,
    batches: Mapping[str, Batch],
    fetched: Mapping[str, int],
    *,
    simulated: bool,
    report: WalkReport,
    extra_checks: Mapping[str, list[dg.AssetCheckResult]] | None = None,
) -> list[dg.MaterializeResult]:  # type: ignore[type-arg]
    root = warehouse.path
    with retry_only_transient():
        written = write_snapshot(root, batches)
        catalog.refresh(root)
    results: list[dg.MaterializeResult] = []  # type: ignore[type-arg]
    for table, batch in batches.items():
        report_progress(table, batch.covers[0], batch.normalized, batch.rejected)
        results.append(
            dg.MaterializeResult(
                asset_key=table,
                metadata={
                    **walk_metadata(report, written[table], simulated=simulated),
                    "preview": preview(root, table, list(written[table].days)),
                },
                check_results=[
                    *checks.for_written(
                        root, written[table], fetched[table], report.unknown_fields
                    ),
                    *(extra_checks or {}).get(table, []),
                ],
            )
        )
    return results


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "investments",
            description="Fixed-term investments as they stand on the snapshot day, with their "
            "plan flattened into plan_* columns.",
            kinds={"parquet", "duckdb"},
            group_name=GROUP,
        ),
        dg.AssetSpec(
            "fixed_plans",
            description="The invest plans the investments belong to, as seen that day.",
            kinds={"parquet", "duckdb"},
            group_name=GROUP,
        ),
    ],
    check_specs=[
        *checks.specs("investments", blocking_complete=True),
        *checks.specs("fixed_plans"),
    ],
    pool=API_POOL,
    retry_policy=API_RETRY,
)
def investments(
    context: AssetExecutionContext, whitebit: WhiteBITResource, warehouse: WarehouseResource
) -> Iterator[dg.MaterializeResult]:  # type: ignore[type-arg]
    """Every investment, each status slice walked and split by ticker past the offset window."""
    day = today()

    async def fetch(client: AsyncWhiteBIT, exchange: Exchange) -> tuple[list[Any], WalkReport]:
        walk = client.walk_investments(on_window_exceeded="report")
        records: list[Any] = []
        async for page in walk:
            records.extend(page)
        return records, walk.report

    (records, report), simulated = _fetch(whitebit, context, fetch)
    extracted_at = datetime.now(UTC)
    both = normalize.normalize_investments(records, snapshot_date=day, extracted_at=extracted_at)
    out_of_reach = [str(exceeded) for exceeded in report.incomplete_slices]
    if out_of_reach:
        context.log.error(
            "investments out of the offset window's reach: " + "; ".join(out_of_reach)
        )
    yield from _materialized(
        context,
        warehouse,
        {"investments": both.investments, "fixed_plans": both.fixed_plans},
        {"investments": len(records), "fixed_plans": both.fixed_plans.received},
        simulated=simulated,
        report=report,
        extra_checks={"investments": [checks.complete("investments", out_of_reach)]},
    )


#: A snapshot's fetch: its calls count retries and report unknown fields in the report given.
Fetch = Callable[[AsyncWhiteBIT, Exchange, WalkReport], Awaitable[Any]]


def _single_snapshot(
    name: str,
    description: str,
    fetch: Fetch,
    normalize_raw: Callable[..., Batch],
    count: Callable[[Any], int],
) -> dg.AssetsDefinition:
    """A snapshot asset: one fetch, one table."""

    @dg.asset(
        name=name,
        description=description,
        check_specs=checks.specs(name),
        pool=API_POOL,
        retry_policy=API_RETRY,
        group_name=GROUP,
        kinds={"parquet", "duckdb"},
    )
    def snapshot(
        context: AssetExecutionContext, whitebit: WhiteBITResource, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:  # type: ignore[type-arg]
        day = today()
        report = WalkReport(name)

        async def reported(client: AsyncWhiteBIT, exchange: Exchange) -> Any:
            return await fetch(client, exchange, report)

        raw, simulated = _fetch(whitebit, context, reported)
        batch = normalize_raw(raw, snapshot_date=day, extracted_at=datetime.now(UTC))
        (result,) = _materialized(
            context, warehouse, {name: batch}, {name: count(raw)}, simulated=simulated,
            report=report,
        )  # fmt: skip
        return result

    return snapshot


async def _main_balance(client: AsyncWhiteBIT, exchange: Exchange, report: WalkReport) -> Any:
    return await client.main_balance(report=report)


async def _trading_balance(client: AsyncWhiteBIT, exchange: Exchange, report: WalkReport) -> Any:
    return await client.trading_balance(report=report)


async def _hedge_mode(client: AsyncWhiteBIT, exchange: Exchange, report: WalkReport) -> Any:
    return await client.hedge_mode(report=report)


async def _watcher_links(client: AsyncWhiteBIT, exchange: Exchange, report: WalkReport) -> Any:
    accounts = exchange.mining_accounts
    if not accounts:
        logging.getLogger(__name__).warning(
            "no mining accounts configured (WHITEBIT_MINING_ACCOUNTS): no watcher link to list"
        )
    links = await asyncio.gather(*(client.watcher_links(a, report=report) for a in accounts))
    return dict(zip(accounts, links, strict=True))


main_balances = _single_snapshot(
    "main_balances",
    "Main-account balance per asset, as listed on the snapshot day.",
    _main_balance,
    normalize.normalize_main_balances,
    len,
)
trading_balances = _single_snapshot(
    "trading_balances",
    "Trading-account balance per asset (available and frozen); zero balances are not listed.",
    _trading_balance,
    normalize.normalize_trading_balances,
    len,
)
hedge_mode = _single_snapshot(
    "hedge_mode",
    "Whether hedge mode is on for the collateral account, on the snapshot day.",
    _hedge_mode,
    normalize.normalize_hedge_mode,
    lambda raw: 1,
)
watcher_links = _single_snapshot(
    "watcher_links",
    "Watcher links of each configured mining-pool account (WHITEBIT_MINING_ACCOUNTS).",
    _watcher_links,
    normalize.normalize_watcher_links,
    lambda raw: sum(len(links) for links in raw.values()),
)

SNAPSHOTS = (investments, main_balances, trading_balances, hedge_mode, watcher_links)
