"""Snapshot assets of an account: the account as it is now, kept per UTC day it was taken.

The API tells only the present (balances, hedge mode, links, the investments as they stand), so
the assets are not partitioned: each materialization takes today's snapshot, which replaces the
``snapshot_date`` of today in the warehouse and leaves the earlier days as they were. Asking for a
past day (``whitebit-etl materialize --partition``) is refused before any request
(`refuse_past`).

An account whose key may not read the investments history (only B2B partner keys may) has no
``investments`` asset, so that its other tables land every night.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Final, TypeVar

import dagster as dg
from dagster import AssetExecutionContext

from pipeline.whitebit import AsyncWhiteBIT, WalkReport
from warehouse import catalog, normalize
from warehouse.normalize import Batch

from . import checks
from .accounts import Account
from .loading import write_snapshot
from .partitions import today
from .reporting import (
    ACCOUNT_TAG,
    API_RETRY,
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
    account: Account,
    context: AssetExecutionContext,
    fetch: Callable[[AsyncWhiteBIT, Exchange], Awaitable[T]],
) -> tuple[T, bool]:
    """Run ``fetch`` against the account's exchange after the ping preflight; (its result,
    simulated)."""
    whitebit: WhiteBITResource = getattr(context.resources, account.resource_key)
    with retry_only_transient(), whitebit.exchange(context.log) as exchange:

        async def run() -> T:
            async with exchange.client() as client:
                await client.ping()
                return await fetch(client, exchange)

        return asyncio.run(run()), exchange.simulated


def _materialized(
    context: AssetExecutionContext,
    account: Account,
    batches: Mapping[str, Batch],
    fetched: Mapping[str, int],
    *,
    simulated: bool,
    report: WalkReport,
    extra_checks: Mapping[str, list[dg.AssetCheckResult]] | None = None,
) -> list[dg.MaterializeResult]:  # type: ignore[type-arg]
    warehouse: WarehouseResource = context.resources.warehouse
    root = warehouse.writing_root()
    with retry_only_transient():
        written = write_snapshot(root, batches, account=account.name)
        catalog.refresh(root)
    results: list[dg.MaterializeResult] = []  # type: ignore[type-arg]
    for table, batch in batches.items():
        report_progress(account.name, table, batch.covers[0], batch.normalized, batch.rejected)
        key = _key(account, table)
        results.append(
            dg.MaterializeResult(
                asset_key=key,
                metadata={
                    **walk_metadata(report, written[table], simulated=simulated),
                    "preview": preview(root, table, account.name, list(written[table].days)),
                },
                check_results=[
                    *checks.for_written(
                        root, written[table], fetched[table], report.unknown_fields, key=key
                    ),
                    *(extra_checks or {}).get(table, []),
                ],
            )
        )
    return results


def _key(account: Account, table: str) -> dg.AssetKey:
    return dg.AssetKey([*account.key_prefix, table])


def _spec(account: Account, table: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        _key(account, table),
        description=description,
        kinds={"parquet", "duckdb"},
        group_name=account.group,
        tags={ACCOUNT_TAG: account.name},
    )


def _investments(account: Account) -> dg.AssetsDefinition:
    """``investments`` and ``fixed_plans``: one walk of the investments history."""
    investments_key, plans_key = _key(account, "investments"), _key(account, "fixed_plans")

    @dg.multi_asset(
        name=f"{account.name}_investments" if account.prefixed else "investments",
        specs=[
            _spec(
                account,
                "investments",
                f"Fixed-term investments of {account.name} as they stand on the snapshot day, "
                "with their plan flattened into plan_* columns.",
            ),
            _spec(
                account,
                "fixed_plans",
                f"The invest plans {account.name}'s investments belong to, as seen that day.",
            ),
        ],
        check_specs=[
            *checks.specs(investments_key, blocking_complete=True),
            *checks.specs(plans_key),
        ],
        pool=account.pool,
        retry_policy=API_RETRY,
        required_resource_keys={account.resource_key, "warehouse"},
    )
    def investments(context: AssetExecutionContext) -> Iterator[dg.MaterializeResult]:  # type: ignore[type-arg]
        """Every investment, each status slice walked and split by ticker past the offset
        window."""
        day = today()

        async def fetch(client: AsyncWhiteBIT, exchange: Exchange) -> tuple[list[Any], WalkReport]:
            walk = client.walk_investments(on_window_exceeded="report")
            records: list[Any] = []
            async for page in walk:
                records.extend(page)
            return records, walk.report

        (records, report), simulated = _fetch(account, context, fetch)
        extracted_at = datetime.now(UTC)
        both = normalize.normalize_investments(
            records, snapshot_date=day, extracted_at=extracted_at
        )
        out_of_reach = [str(exceeded) for exceeded in report.incomplete_slices]
        if out_of_reach:
            context.log.error(
                "investments out of the offset window's reach: " + "; ".join(out_of_reach)
            )
        yield from _materialized(
            context,
            account,
            {"investments": both.investments, "fixed_plans": both.fixed_plans},
            {"investments": len(records), "fixed_plans": both.fixed_plans.received},
            simulated=simulated,
            report=report,
            extra_checks={"investments": [checks.complete(investments_key, out_of_reach)]},
        )

    return investments


#: A snapshot's fetch: its calls count retries and report unknown fields in the report given.
Fetch = Callable[[AsyncWhiteBIT, Exchange, WalkReport], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class _Single:
    """A snapshot of one fetch into one table."""

    name: str
    description: str
    fetch: Fetch
    normalize: Callable[..., Batch]
    count: Callable[[Any], int]


def _single_snapshot(account: Account, single: _Single) -> dg.AssetsDefinition:
    """A snapshot asset of the account: one fetch, one table."""
    name = single.name
    key = _key(account, name)

    @dg.asset(
        key=key,
        description=single.description,
        check_specs=checks.specs(key),
        pool=account.pool,
        retry_policy=API_RETRY,
        group_name=account.group,
        kinds={"parquet", "duckdb"},
        tags={ACCOUNT_TAG: account.name},
        required_resource_keys={account.resource_key, "warehouse"},
    )
    def snapshot(context: AssetExecutionContext) -> dg.MaterializeResult:  # type: ignore[type-arg]
        day = today()
        report = WalkReport(name)

        async def reported(client: AsyncWhiteBIT, exchange: Exchange) -> Any:
            return await single.fetch(client, exchange, report)

        raw, simulated = _fetch(account, context, reported)
        batch = single.normalize(raw, snapshot_date=day, extracted_at=datetime.now(UTC))
        (result,) = _materialized(
            context, account, {name: batch}, {name: single.count(raw)}, simulated=simulated,
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
            "no mining accounts configured (mining_accounts, or WHITEBIT_MINING_ACCOUNTS): "
            "no watcher link to list"
        )
    links = await asyncio.gather(*(client.watcher_links(a, report=report) for a in accounts))
    return dict(zip(accounts, links, strict=True))


SINGLES: Final = (
    _Single(
        "main_balances",
        "Main-account balance per asset, as listed on the snapshot day.",
        _main_balance,
        normalize.normalize_main_balances,
        len,
    ),
    _Single(
        "trading_balances",
        "Trading-account balance per asset (available and frozen); zero balances are not listed.",
        _trading_balance,
        normalize.normalize_trading_balances,
        len,
    ),
    _Single(
        "hedge_mode",
        "Whether hedge mode is on for the collateral account, on the snapshot day.",
        _hedge_mode,
        normalize.normalize_hedge_mode,
        lambda raw: 1,
    ),
    _Single(
        "watcher_links",
        "Watcher links of each of the account's mining-pool accounts (mining_accounts).",
        _watcher_links,
        normalize.normalize_watcher_links,
        lambda raw: sum(len(links) for links in raw.values()),
    ),
)


def snapshots(account: Account) -> tuple[dg.AssetsDefinition, ...]:
    """The account's snapshot assets: investments (B2B partner keys only), then the rest."""
    singles = tuple(_single_snapshot(account, single) for single in SINGLES)
    return (_investments(account), *singles) if account.investments else singles
