"""An account's assets, one per declared history (`pipeline.spec`), each made the same way.

A history partitioned by month (`spec.Monthly`: funding) is an asset partitioned by month: a run
of a month, or a range of months (a single run, one walk down the history), replaces every day of
them up to today, or only the days from ``first_day`` to ``last_day`` its config names. A snapshot
(`spec.Snapshot`: balances, hedge mode, links, investments) is not partitioned: each
materialization takes today's, kept beside the earlier days'; one that others are nested in (an
investment's plans) is one multi-asset with them, from one walk; the balances and the flows
pending (`spec.TOGETHER`) are one multi-asset, asked together until two collects agree. An
account whose key may not read a history (only B2B partner keys read the investments) has no
asset of it.
"""

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg
from dagster import AssetExecutionContext
from pydantic import Field

from pipeline import spec
from pipeline.whitebit import AsyncWhiteBIT, ConnectionRefused, Together
from warehouse import Warehouse, normalize, partitions, schemas, sources
from warehouse.monthly import MonthlyTarget

from . import checks
from .accounts import Account
from .loading import Load, Written, load_monthly, write_snapshot
from .partitions import day_range
from .resources import SIMULATOR_DAY_TAG, Exchange, WarehouseResource, WhiteBITResource
from .steps import (
    ACCOUNT_TAG,
    API_RETRY,
    log_progress,
    preview,
    refresh_catalog,
    retry_only_transient,
    walk_metadata,
)


class HistoryConfig(dg.Config):
    """Run configuration of a run of a history partitioned by month."""

    #: Let a rerun replace a day with fewer records than the warehouse holds for it. Off: the
    #: exchange never forgets a record, so fewer rows mean a faulty answer, and the run stops.
    allow_fewer_rows: bool = False
    first_day: str | None = Field(
        default=None,
        description="Replace only the days from this one (YYYY-MM-DD) on, within the run's months",
    )
    last_day: str | None = Field(
        default=None,
        description="Replace only the days up to this one (YYYY-MM-DD, inclusive)",
    )


class DaysOutsideRun(dg.Failure):
    """Days asked for that the run's partitions do not hold."""


def run_days(window: dg.TimeWindow, config: HistoryConfig, today: date) -> list[date]:
    """The days a run replaces: its months' days up to ``today``, narrowed by the config."""
    first, end = window.start.date(), min(window.end.date(), today + timedelta(days=1))
    months = f"{window.start:%Y-%m} .. {window.end - timedelta(days=1):%Y-%m}"
    try:
        low = date.fromisoformat(config.first_day) if config.first_day else first
        high = date.fromisoformat(config.last_day) if config.last_day else end - timedelta(days=1)
    except ValueError as exc:
        raise DaysOutsideRun(
            description=f"first_day/last_day: {exc}", allow_retries=False
        ) from None
    if low > high:
        raise DaysOutsideRun(
            description=f"first_day {low} is after last_day {high}", allow_retries=False
        )
    if not first <= low <= high < end:
        raise DaysOutsideRun(
            description=f"days {low} .. {high} asked for, but the run's partitions ({months}) "
            f"hold {first} .. {end - timedelta(days=1)}: pick the months that hold the days",
            allow_retries=False,
        )
    return day_range(low, high + timedelta(days=1))


def asset_key(account: Account, table: str) -> dg.AssetKey:
    return dg.AssetKey([*account.key_prefix, table])


def _exchange_run(
    context: AssetExecutionContext,
    account: Account,
    act: Callable[[AsyncWhiteBIT, Exchange], Any],
    clock: spec.Clock,
) -> tuple[Any, Exchange]:
    """Run ``act`` against the account's exchange after the ping preflight (a down exchange
    fails at once, clearly), once the warehouse is found to hold no rows of the account from
    another exchange, nor any of the other kind (`sources.check`: the source is recorded as the
    first rows land). An embedded simulator stands at the start of the run's day (by ``clock``),
    or of the day the run's tag names."""
    whitebit: WhiteBITResource = getattr(context.resources, account.resource_key)
    warehouse: WarehouseResource = context.resources.warehouse
    tagged = context.run.tags.get(SIMULATOR_DAY_TAG)
    day = date.fromisoformat(tagged) if tagged else clock.today()
    sources.check(warehouse.warehouse, account.name, whitebit.source)
    with whitebit.exchange(context.log, simulator_day=day) as exchange:

        async def run() -> Any:
            async with exchange.client(clock) as client:
                try:
                    await client.ping(preflight=True)
                except ConnectionRefused as refused:
                    # Said at once, and not tried again later: the address is wrong or down.
                    raise dg.Failure(description=str(refused), allow_retries=False) from None
                return await act(client, exchange)

        return asyncio.run(run()), exchange


def monthly_asset(
    account: Account,
    history: spec.History,
    months: dg.PartitionsDefinition,
    writer_env: Mapping[str, str],
    clock: spec.Clock,
) -> dg.AssetsDefinition:
    """The account's asset of a history partitioned by month, going by ``clock``."""
    key = asset_key(account, history.name)
    name = history.name

    @dg.asset(
        key=key,
        partitions_def=months,
        # A range is one walk from the head of the history down to its first day: one run.
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=account.pool,
        retry_policy=API_RETRY,
        group_name=account.group,
        kinds={"parquet", "duckdb"},
        check_specs=checks.specs(key, history),
        required_resource_keys={account.resource_key, "warehouse"},
        tags={ACCOUNT_TAG: account.name},
        description=f"{history.description}, of {account.name}: one partition (and one Parquet "
        "file) per UTC month. A run replaces every day of its months up to today, or only the "
        "days from first_day to last_day when the run's config names them (to rerun the days "
        "around 2025-03-14, run the month 2025-03 with those two days). A backfill of a range "
        "walks the history once.",
    )
    def asset(context: AssetExecutionContext, config: HistoryConfig) -> dg.MaterializeResult:  # type: ignore[type-arg]
        days = run_days(context.partition_time_window, config, clock.today())
        warehouse: WarehouseResource = context.resources.warehouse
        wh = warehouse.warehouse
        with retry_only_transient():
            _record_landed(context, wh, account, history)

        async def act(client: AsyncWhiteBIT, exchange: Exchange) -> tuple[Load | None, list[date]]:
            # The six months are the exchange's: reckoned from its clock (the preflight's Date).
            reach, gone = _within_reach(history, days, await client.exchange_time())
            if gone:
                # Never asked for: the exchange no longer answers them; what the warehouse
                # archived of them stays as it is.
                context.log.warning(
                    f"{name} of {account.name}: {gone[0]} .. {gone[-1]} ({len(gone)} day(s)) "
                    "are past the exchange's six months and were not asked for; the warehouse "
                    "keeps what it archived of them (the horizon check names any it never did)"
                )
            if not reach:
                return None, gone
            context.log.info(f"walking {name} for {len(reach)} day(s): {reach[0]} .. {reach[-1]}")
            target = MonthlyTarget(
                wh,
                history,
                account=account.name,
                days=reach,
                extracted_at=clock.moment(),
                allow_fewer_rows=config.allow_fewer_rows,
            )
            load = await load_monthly(
                client,
                target,
                source=exchange.source,
                environ=writer_env,
                values=exchange.settings(),
                on_day=lambda day, rows, rejected: log_progress(
                    account.name, name, day, rows, rejected
                ),
            )
            return load, gone

        with retry_only_transient():
            (load, gone), exchange = _exchange_run(context, account, act, clock)
            if load is None:
                # Every check evaluated, of nothing written: a result that leaves declared
                # checks out is read by Dagster as a tuple of outputs, its metadata lost.
                return dg.MaterializeResult(
                    metadata={"days_past_the_exchange": len(gone), "rows": 0},
                    check_results=checks.for_written(
                        wh, Written(name, account.name), 0, {}, key=key, out_of_reach=[]
                    ),
                )
            refresh_catalog(context, wh)
        written = load.written
        context.log.info(
            f"{name} of {account.name}: {written.rows} rows in {len(written.days)} day(s), "
            f"{written.rejected} rejected"
        )
        return dg.MaterializeResult(
            metadata={
                **walk_metadata(load.stats, written, simulated=exchange.simulated),
                **({"days_past_the_exchange": len(gone)} if gone else {}),
                "preview": preview(wh, name, account.name, list(written.days)),
            },
            check_results=checks.for_written(
                wh,
                written,
                load.stats.rows,
                load.stats.unknown_fields,
                key=key,
                out_of_reach=[str(exceeded) for exceeded in load.stats.incomplete_slices],
            ),
        )

    return asset


def _within_reach(
    history: spec.History, days: Sequence[date], now: float
) -> tuple[list[date], list[date]]:
    """The days the exchange still answers at ``now`` (Unix seconds, its clock) of a history it
    forgets (all days of another), and those it no longer does."""
    if not history.forgotten:
        return list(days), []
    floor = spec.floor_day(datetime.fromtimestamp(now, UTC).date())
    return [d for d in days if d >= floor], [d for d in days if d < floor]


def _record_landed(
    context: AssetExecutionContext, wh: Warehouse, account: Account, history: spec.History
) -> None:
    """Record the months whose partitions landed in the warehouse but not in the instance: a run
    that wrote them and then could not reach the instance (a database outage at a step's end)
    left no materialization, and the UI would show a landed month as missing."""
    key = asset_key(account, history.name)
    recorded = context.instance.get_materialized_partitions(key)
    depth = len(schemas.TABLES[history.name].path_columns) + 3
    for path in partitions.partition_files(wh.store, history.name, account=account.name):
        month = path.split("/")[depth - 2].partition("=")[2]
        if month not in recorded:
            context.instance.report_runless_asset_event(
                dg.AssetMaterialization(
                    asset_key=key,
                    partition=month,
                    description="landed in the warehouse by a run that could not record it",
                    metadata={"path": wh.store.url(path)},
                )
            )


def _spec(account: Account, history: spec.History) -> dg.AssetSpec:
    return dg.AssetSpec(
        asset_key(account, history.name),
        description=f"{history.description}, of {account.name}, per snapshot day.",
        kinds={"parquet", "duckdb"},
        group_name=account.group,
        tags={ACCOUNT_TAG: account.name},
    )


def snapshot_asset(
    account: Account, histories: Sequence[spec.History], clock: spec.Clock
) -> dg.AssetsDefinition:
    """The account's asset of a snapshot, with the histories nested in it (one walk); of more
    than one (`spec.TOGETHER`), one asset taking them together (`AsyncWhiteBIT.together`); going
    by ``clock``."""
    top = {t.name: h for h in histories for t in (h, *normalize.nested(h))}
    tables = [spec.HISTORIES[name] for name in top]
    keys = {h.name: asset_key(account, h.name) for h in tables}
    name = histories[0].name if len(histories) == 1 else "together"

    @dg.multi_asset(
        name=f"{account.name}_{name}",
        specs=[_spec(account, h) for h in tables],
        check_specs=[spec for h in tables for spec in checks.specs(keys[h.name], h)],
        pool=account.pool,
        retry_policy=API_RETRY,
        required_resource_keys={account.resource_key, "warehouse"},
    )
    def snapshot(context: AssetExecutionContext) -> Iterator[dg.MaterializeResult]:  # type: ignore[type-arg]
        async def act(client: AsyncWhiteBIT, exchange: Exchange) -> Together:
            values = exchange.settings()
            if len(histories) > 1:
                return await client.together(histories, values=values)
            answer, stats = await client.whole(histories[0], values=values)
            return Together.one(histories[0], answer, stats)

        with retry_only_transient():
            took, exchange = _exchange_run(context, account, act, clock)
        if took.consistent is False:
            context.log.warning(
                f"{', '.join(took.answers)} of {account.name} never answered alike twice in a "
                f"row in {took.collects} collects: the last is kept, its rows not consistent"
            )
        extracted_at = clock.moment()
        observed = took.span.observed_at
        # The exchange's day: a snapshot shows the account as the exchange's clock stood.
        day = observed.astimezone(UTC).date() if observed is not None else extracted_at.date()
        batches = {h.name: _normalized(h, top[h.name], took, extracted_at, day) for h in tables}
        fetched = {h.name: batches[h.name].received for h in tables}
        for h in histories:
            fetched[h.name] = normalize.records_received(h, took.answers[h.name])
        out_of_reach = [str(e) for r in took.stats.values() for e in r.incomplete_slices]
        if out_of_reach:
            context.log.error(
                f"{name} out of the offset window's reach: " + "; ".join(out_of_reach)
            )
        warehouse: WarehouseResource = context.resources.warehouse
        wh = warehouse.warehouse
        with retry_only_transient():
            written = write_snapshot(wh, batches, account=account.name, source=exchange.source)
            refresh_catalog(context, wh)
        for h in tables:
            batch, stats = batches[h.name], took.stats[top[h.name].name]
            log_progress(account.name, h.name, day, batch.normalized, batch.rejected)
            yield dg.MaterializeResult(
                asset_key=keys[h.name],
                metadata={
                    **walk_metadata(stats, written[h.name], simulated=exchange.simulated),
                    **({"collects": took.collects} if took.consistent is not None else {}),
                    "preview": preview(wh, h.name, account.name, list(written[h.name].days)),
                },
                check_results=checks.for_written(
                    wh,
                    written[h.name],
                    fetched[h.name],
                    stats.unknown_fields,
                    key=keys[h.name],
                    out_of_reach=out_of_reach,
                ),
            )

    return snapshot


def _normalized(
    table: spec.History, top: spec.History, took: Together, extracted_at: datetime, day: date
) -> normalize.Batch:
    """A table of a snapshot, from its answer (of ``top``, the one it is nested in or itself),
    with when it was seen."""
    stats, span = took.stats[top.name], took.span
    seen = normalize.Seen(
        observed_from=span.observed_from,
        observed_until=span.observed_until,
        asked_at=stats.asked_at,
        answered_at=stats.answered_at,
        consistent=took.consistent,
    )
    return normalize.normalize(
        table,
        took.answers[top.name],
        extracted_at=extracted_at,
        day=day,
        observed_at=stats.observed_at,
        seen=seen,
    )


def account_assets(
    account: Account,
    months: dg.PartitionsDefinition,
    writer_env: Mapping[str, str],
    clock: spec.Clock,
) -> tuple[tuple[dg.AssetsDefinition, ...], tuple[dg.AssetsDefinition, ...]]:
    """The account's assets of histories partitioned by month, and of snapshots, going by
    ``clock``."""
    extracted = [h for h in spec.HISTORIES.values() if h.nested_in is None and account.extracts(h)]
    monthly = tuple(
        monthly_asset(account, h, months, writer_env, clock) for h in extracted if h.monthly
    )
    together = [h for h in spec.TOGETHER if h in extracted]
    alone = [(h,) for h in extracted if not h.monthly and h not in together]
    snapshots = tuple(
        snapshot_asset(account, hs, clock) for hs in [*alone, *([together] if together else [])]
    )
    return monthly, snapshots
