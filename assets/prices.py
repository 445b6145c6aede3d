"""The exchange's prices: one asset, ``exchange/daily_candles``, of the daily candles of every
market needed to value what the accounts hold or moved, and its check of the assets no market
prices.

Which markets (`price_paths`): for each asset the warehouse holds (a ticker of ``holdings`` or
``flow_records``, every account's) other than the reference currency, its spot market against
the reference when the markets list has one, else its market to the first intermediate (by
name) that has a market to the reference, and that one. From the first day the warehouse holds
(of either view), and the day before it (whose close values its first snapshot), to the run's
today: every night replaces the whole range (a past candle stands still; the range's every day
is a few requests per market), written as every history is, under the name
`warehouse.schemas.EXCHANGE`. The rows are the exchange's, not an account's: the prices are
read from the first account's exchange, with no key, and recorded as that name's source.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Final

import dagster as dg
from dagster import AssetExecutionContext

from pipeline import spec
from pipeline.whitebit import AsyncWhiteBIT
from warehouse import Warehouse, catalog, sources
from warehouse.layout import PARQUET_DIR
from warehouse.monthly import MonthlyTarget
from warehouse.schemas import EXCHANGE

from . import checks
from .accounts import Account
from .loading import Load, Written, load_monthly
from .partitions import day_range
from .resources import Exchange, WarehouseResource, WhiteBITResource
from .steps import API_RETRY, log_progress, refresh_catalog, retry_only_transient, walk_metadata

PRICES_KEY: Final = dg.AssetKey([EXCHANGE, spec.DAILY_CANDLES.name])
UNPRICED: Final = "unpriced_assets"
HISTORY: Final = spec.DAILY_CANDLES
PAGING: Final = spec.DailyCandles("market", "price_markets")
assert HISTORY.paging == PAGING, "the candles' walk takes its markets from this setting"


@dataclass(frozen=True, slots=True)
class Held:
    """What the warehouse holds, as the prices need it: the assets, and its first day."""

    assets: tuple[str, ...]
    first_day: date | None


def held(wh: Warehouse) -> Held:
    """Every asset the accounts hold or moved (explicit zeros included), and the first day of
    the warehouse's balances and flows (none of a warehouse with no file yet)."""
    if not wh.store.has_files(PARQUET_DIR):
        return Held((), None)
    catalog.refresh_if_stale(wh)
    with catalog.connect(wh) as con:
        assets = con.execute(
            "SELECT DISTINCT ticker FROM holdings UNION SELECT DISTINCT ticker FROM flow_records "
            "ORDER BY 1"
        ).fetchall()
        (first,) = con.execute(
            "SELECT least((SELECT min(snapshot_date) FROM holdings), "
            "(SELECT min(day) FROM flow_records))"
        ).fetchone() or (None,)
    return Held(tuple(a for (a,) in assets), first)


def price_paths(
    markets: Iterable[Mapping[str, Any]], assets: Iterable[str], reference: str
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Each asset's markets to the reference (one, or two through an intermediate), of the
    markets list's spot markets; and the assets none prices. The reference needs none."""
    spot = {(m["stock"], m["money"]): m["name"] for m in markets if m.get("type") == "spot"}
    paths: dict[str, tuple[str, ...]] = {}
    unpriced: list[str] = []
    for asset in sorted(set(assets) - {reference}):
        if (asset, reference) in spot:
            paths[asset] = (spot[asset, reference],)
            continue
        via = sorted(x for (s, x) in spot if s == asset and (x, reference) in spot)
        if via:
            paths[asset] = (spot[asset, via[0]], spot[via[0], reference])
        else:
            unpriced.append(asset)
    return paths, unpriced


@dataclass(slots=True)
class Priced:
    """What a run of the prices did: its load (None: nothing held to price), the paths and the
    assets no market prices."""

    load: Load | None
    paths: dict[str, tuple[str, ...]]
    unpriced: list[str]
    reference: str


async def load_prices(
    client: AsyncWhiteBIT,
    wh: Warehouse,
    *,
    today: date,
    extracted_at: Any,
    source: sources.Source,
    environ: Mapping[str, str],
) -> Priced:
    """Walk the candles of every market the warehouse's assets need, from the day before its
    first to ``today``, and replace those days of ``daily_candles``; the warehouse's source
    checked before the first request."""
    reference = wh.config.reference
    sources.check(wh, EXCHANGE, source)
    found = held(wh)
    markets = await client.markets()
    paths, unpriced = price_paths(markets, found.assets, reference)
    needed = sorted({m for path in paths.values() for m in path})
    if not needed or found.first_day is None:
        return Priced(None, paths, unpriced, reference)
    # A snapshot is valued at the close of the day before its own (holdings_value).
    days = day_range(found.first_day - timedelta(days=1), today + timedelta(days=1))
    target = MonthlyTarget(wh, HISTORY, account=EXCHANGE, days=days, extracted_at=extracted_at)
    load = await load_monthly(
        client,
        target,
        source=source,
        environ=environ,
        values={PAGING.setting: needed},
        on_day=lambda day, rows, rejected: log_progress(
            EXCHANGE, HISTORY.name, day, rows, rejected
        ),
    )
    return Priced(load, paths, unpriced, reference)


def unpriced_check(priced: Priced) -> dg.AssetCheckResult:
    """Warns naming every asset held or moved that no market prices: the views give it no price,
    never a price of zero."""
    named = priced.unpriced
    return dg.AssetCheckResult(
        check_name=UNPRICED,
        asset_key=PRICES_KEY,
        passed=not named,
        severity=dg.AssetCheckSeverity.WARN,
        description=None
        if not named
        else f"{len(named)} asset(s) held or moved have no market to {priced.reference}, "
        f"direct or through one intermediate, and no price: {', '.join(named)}",
        metadata={"unpriced": named, "reference": priced.reference},
    )


def prices_asset(
    account: Account,
    writer_env: Mapping[str, str],
    clock: spec.Clock,
    deps: Sequence[dg.AssetKey] = (),
) -> dg.AssetsDefinition:
    """The exchange's prices, read through ``account``'s exchange (its address; no key is
    used), going by ``clock``; of what the assets ``deps`` (the accounts') wrote."""

    @dg.asset(
        key=PRICES_KEY,
        deps=list(deps),
        retry_policy=API_RETRY,
        group_name=EXCHANGE,
        kinds={"parquet", "duckdb"},
        check_specs=[
            *checks.specs(PRICES_KEY, HISTORY),
            dg.AssetCheckSpec(
                UNPRICED,
                asset=PRICES_KEY,
                description="Every asset held or moved has a price (warns naming those without)",
            ),
        ],
        required_resource_keys={account.resource_key, "warehouse"},
        description=f"{HISTORY.description}, of every market needed to value what the accounts "
        "hold or moved in the reference currency, from the warehouse's first day to today; each "
        "run replaces the whole range. Read from the exchange of "
        f"{account.name}, with no key.",
    )
    def asset(context: AssetExecutionContext) -> dg.MaterializeResult:  # type: ignore[type-arg]
        whitebit: WhiteBITResource = getattr(context.resources, account.resource_key)
        warehouse: WarehouseResource = context.resources.warehouse
        wh = warehouse.warehouse

        def run(exchange: Exchange) -> Priced:
            import asyncio

            async def act() -> Priced:
                async with exchange.client(clock) as client:
                    return await load_prices(
                        client,
                        wh,
                        today=clock.today(),
                        extracted_at=clock.moment(),
                        source=exchange.source,
                        environ=writer_env,
                    )

            return asyncio.run(act())

        with retry_only_transient():
            with whitebit.exchange(context.log, simulator_day=clock.today()) as exchange:
                priced = run(exchange)
            refresh_catalog(context, wh)
        meta: dict[str, Any] = {
            "reference": priced.reference,
            "paths": {a: "*".join(p) for a, p in priced.paths.items()},
            "unpriced": priced.unpriced,
        }
        if priced.load is None:
            results = checks.for_written(wh, Written(HISTORY.name, EXCHANGE), 0, {}, key=PRICES_KEY)
            return dg.MaterializeResult(
                metadata={**meta, "rows": 0}, check_results=[*results, unpriced_check(priced)]
            )
        load = priced.load
        context.log.info(
            f"{HISTORY.name}: {load.written.rows} rows of {len(set(_markets(priced)))} market(s) "
            f"in {len(load.written.days)} day(s); no market prices: "
            f"{', '.join(priced.unpriced) or 'none'}"
        )
        return dg.MaterializeResult(
            metadata={
                **meta,
                **walk_metadata(load.stats, load.written, simulated=whitebit.simulated),
            },
            check_results=[
                *checks.for_written(
                    wh, load.written, load.stats.rows, load.stats.unknown_fields, key=PRICES_KEY
                ),
                unpriced_check(priced),
            ],
        )

    return asset


def _markets(priced: Priced) -> Sequence[str]:
    return [m for path in priced.paths.values() for m in path]
