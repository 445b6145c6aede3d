"""`funding_history` of an account: month partitions, and one API walk for any range of them or
of days."""

import asyncio
from datetime import UTC, date, datetime, timedelta

import dagster as dg
from dagster import AssetExecutionContext
from pydantic import Field

from warehouse import catalog

from . import checks
from .accounts import Account
from .loading import FundingLoad, load_funding
from .partitions import MONTHLY, day_range, today
from .reporting import (
    ACCOUNT_TAG,
    API_RETRY,
    preview,
    report_progress,
    retry_only_transient,
    walk_metadata,
)
from .resources import WarehouseResource, WhiteBITResource


class FundingConfig(dg.Config):
    """Run configuration of a funding_history run."""

    #: Let a rerun replace a day with fewer payments than the warehouse holds for it. Off: the
    #: exchange never forgets a payment, so fewer rows mean a faulty answer, and the run stops.
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


def run_days(window: dg.TimeWindow, config: FundingConfig) -> list[date]:
    """The days a run replaces: its months' days up to today, narrowed by the config."""
    first, end = window.start.date(), min(window.end.date(), today() + timedelta(days=1))
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


def _funding_history(
    context: AssetExecutionContext,
    config: FundingConfig,
    account: Account,
    whitebit: WhiteBITResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    days = run_days(context.partition_time_window, config)
    root = warehouse.writing_root()
    key = context.asset_key
    with retry_only_transient(), whitebit.exchange(context.log) as exchange:
        context.log.info(f"walking funding history for {len(days)} day(s): {days[0]} .. {days[-1]}")

        async def run() -> FundingLoad:
            async with exchange.client() as client:
                await client.ping()  # preflight: fail at once, clearly, if the API is down
                return await load_funding(
                    client,
                    root,
                    account=account.name,
                    days=days,
                    extracted_at=datetime.now(UTC),
                    markets=exchange.markets,
                    on_day=lambda day, rows, rejected: report_progress(
                        account.name, "funding_history", day, rows, rejected
                    ),
                    allow_fewer_rows=config.allow_fewer_rows,
                )

        load = asyncio.run(run())
        catalog.refresh(root)
    written = load.written
    context.log.info(
        f"funding_history of {account.name}: {written.rows} rows in {len(written.days)} day(s), "
        f"{written.rejected} rejected"
    )
    return dg.MaterializeResult(
        metadata={
            **walk_metadata(load.report, written, simulated=exchange.simulated),
            "preview": preview(root, "funding_history", account.name, list(written.days)),
        },
        check_results=checks.for_written(
            root, written, load.report.rows, load.report.unknown_fields, key=key
        ),
    )


def funding_history(account: Account) -> dg.AssetsDefinition:
    """The account's ``funding_history`` asset (its key under the account's prefix)."""
    key = dg.AssetKey([*account.key_prefix, "funding_history"])

    @dg.asset(
        key=key,
        partitions_def=MONTHLY,
        # A range is one walk from the head of the history down to its first day: one run.
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=account.pool,
        retry_policy=API_RETRY,
        group_name=account.group,
        kinds={"parquet", "duckdb"},
        check_specs=checks.specs(key),
        required_resource_keys={account.resource_key, "warehouse"},
        tags={ACCOUNT_TAG: account.name},
        description=f"Funding payments of the collateral account of {account.name}, one "
        "partition (and one Parquet file) per UTC month of funding. A run replaces every day of "
        "its months up to today, or only the days from first_day to last_day when the run's "
        "config names them (to rerun the days around 2025-03-14, run the month 2025-03 with "
        "those two days). A backfill of a range walks the history once.",
    )
    def asset(context: AssetExecutionContext, config: FundingConfig) -> dg.MaterializeResult:  # type: ignore[type-arg]
        resources = context.resources
        return _funding_history(
            context,
            config,
            account,
            getattr(resources, account.resource_key),
            resources.warehouse,
        )

    return asset
