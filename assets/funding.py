"""`funding_history`: daily partitions, and one API walk for any range of them."""

import asyncio
from datetime import UTC, datetime

import dagster as dg
from dagster import AssetExecutionContext

from warehouse import catalog

from . import checks
from .loading import FundingLoad, load_funding
from .partitions import DAILY, day_range
from .reporting import (
    API_POOL,
    API_RETRY,
    GROUP,
    preview,
    report_progress,
    retry_only_transient,
    walk_metadata,
)
from .resources import WarehouseResource, WhiteBITResource


class FundingConfig(dg.Config):
    """Run configuration of a funding_history run."""

    #: Let a rerun replace a day's partition with fewer payments than it holds. Off: the exchange
    #: never forgets a payment, so fewer rows mean a faulty answer, and the run stops instead.
    allow_fewer_rows: bool = False


def _funding_history(
    context: AssetExecutionContext,
    config: FundingConfig,
    whitebit: WhiteBITResource,
    warehouse: WarehouseResource,
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    window = context.partition_time_window
    days = day_range(window.start.date(), window.end.date())
    root = warehouse.path
    with retry_only_transient(), whitebit.exchange(context.log) as exchange:
        context.log.info(f"walking funding history for {len(days)} day(s): {days[0]} .. {days[-1]}")

        async def run() -> FundingLoad:
            async with exchange.client() as client:
                await client.ping()  # preflight: fail at once, clearly, if the API is down
                return await load_funding(
                    client,
                    root,
                    days=days,
                    extracted_at=datetime.now(UTC),
                    markets=exchange.markets,
                    on_day=lambda day, rows, rejected: report_progress(
                        "funding_history", day, rows, rejected
                    ),
                    allow_fewer_rows=config.allow_fewer_rows,
                )

        load = asyncio.run(run())
        catalog.refresh(root)
    written = load.written
    context.log.info(
        f"funding_history: {written.rows} rows in {len(written.partitions)} partition(s), "
        f"{written.rejected} rejected"
    )
    return dg.MaterializeResult(
        metadata={
            **walk_metadata(load.report, written, simulated=exchange.simulated),
            "preview": preview(root, "funding_history", list(written.partitions)),
        },
        check_results=checks.for_written(
            root, written, load.report.rows, load.report.unknown_fields
        ),
    )


funding_history = dg.asset(
    name="funding_history",
    partitions_def=DAILY,
    # A range is one walk from the head of the history down to its first day: one run.
    backfill_policy=dg.BackfillPolicy.single_run(),
    pool=API_POOL,
    retry_policy=API_RETRY,
    group_name=GROUP,
    kinds={"parquet", "duckdb"},
    check_specs=checks.specs("funding_history"),
    description="Funding payments of the collateral account, one partition per UTC day of "
    "funding. A backfill of a range walks the history once and replaces every day of it.",
)(_funding_history)
