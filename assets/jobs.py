"""Every account's asset set, the jobs over them, the schedules, and the run requests a night
(or a command) makes.

- An account's asset set (`AccountAssets`): one asset per declared history it extracts, keys
  under the account's prefix, in the account's group, holding the account's pool.
- ``nightly``: every API asset of every account. Its schedule (00:30 UTC unless the settings
  move it) asks, for each account, for two runs (`nightly_requests`): the month that holds
  yesterday of every history partitioned by month (every day of the month so far, so that a
  night that failed is mended by the next), and today's snapshots; and a run per earlier month
  the warehouse says must be read again (`warehouse.rereads`: rows that may still change, days
  the exchange forgets soon that are not archived). An account's runs are its own: one account
  failing (a bad key, a refusal) fails its runs only, and the alerts name it.
  ``whitebit-etl materialize`` with no asset and no day launches exactly these requests.
- ``<history>_job`` for each history partitioned by month: every account's, for ``dagster job
  backfill`` over a range of months (one account: select its group in the UI, or
  ``whitebit-etl materialize --account``).
- ``snapshots_job``: every account's snapshots, today's.
- ``freshness``: the checks of the warehouse alone (02:30 UTC): did last night's partitions land,
  and is a day of a history the exchange forgets at stake (`assets.horizon`)?

Resetting a sub-account key is not an asset and is in no job or schedule: only a person does it,
with ``whitebit-etl reset-key``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Final

import dagster as dg

from pipeline import spec
from warehouse.schemas import EXCHANGE, month_of

from . import checks
from .accounts import Account
from .histories import account_assets
from .horizon import HORIZON, horizon_check
from .prices import PRICES_KEY
from .steps import ACCOUNT_TAG
from .view_checks import views_check

FRESHNESS_CRON: Final = "30 2 * * *"
#: The tags of a run of a range of months (a single run of them all), as Dagster's backfills
#: write them.
RANGE_START_TAG: Final = "dagster/asset_partition_range_start"
RANGE_END_TAG: Final = "dagster/asset_partition_range_end"
#: How long a nightly run may go before the daemon's run monitoring fails it (Dagster's
#: ``dagster/max_runtime`` tag): a run whose Celery worker's machine was lost never reports its
#: end, and its task stays "started" in the result backend; a night's run of one account takes
#: minutes. The instance whitebit-etl writes gives every run this limit (``max_runtime_seconds``
#: in ``assets/dagster.yaml``); the tag keeps it on the nightly runs of any other instance.
NIGHTLY_MAX_RUNTIME_S: Final = 4 * 3600
MAX_RUNTIME_TAG: Final = "dagster/max_runtime"


@dataclass(frozen=True, slots=True)
class AccountAssets:
    """One account's assets: those of histories partitioned by month, and its snapshots."""

    account: Account
    monthly: tuple[dg.AssetsDefinition, ...]
    snapshots: tuple[dg.AssetsDefinition, ...]
    #: The first day of the histories partitioned by month (the settings' start date).
    first_day: date
    #: The clock its runs and checks go by (the code location's).
    clock: spec.Clock

    @classmethod
    def of(
        cls,
        account: Account,
        partitions: dg.TimeWindowPartitionsDefinition,
        writer_env: Mapping[str, str],
        clock: spec.Clock,
        first_day: date | None = None,
    ) -> AccountAssets:
        """``first_day``: the settings' start date (default: the first month's first day)."""
        monthly, snapshots = account_assets(account, partitions, writer_env, clock)
        return cls(account, monthly, snapshots, first_day or partitions.start.date(), clock)

    @property
    def assets(self) -> tuple[dg.AssetsDefinition, ...]:
        return (*self.monthly, *self.snapshots)

    @property
    def monthly_keys(self) -> list[dg.AssetKey]:
        return [key for asset in self.monthly for key in asset.keys]

    @property
    def keys(self) -> list[dg.AssetKey]:
        return [*self.monthly_keys, *self.snapshot_keys]

    @property
    def snapshot_keys(self) -> list[dg.AssetKey]:
        return [key for asset in self.snapshots for key in asset.keys]

    @property
    def tables(self) -> dict[str, dg.AssetsDefinition]:
        """The asset that writes each table, by the table's name."""
        return {key.path[-1]: asset for asset in self.assets for key in asset.keys}

    def run_checks(self, keys: Sequence[dg.AssetKey]) -> list[dg.AssetCheckKey]:
        """The checks a run of these assets evaluates: their own, and the horizon of a history
        the exchange forgets; not the freshness checks, which the watch job runs when their
        partitions are due (a run of yesterday's snapshots would fail them)."""
        chosen = set(keys)
        own = [
            check
            for asset in self.assets
            for check in asset.check_keys
            if check.asset_key in chosen
        ]
        horizons = [
            dg.AssetCheckKey(key, HORIZON)
            for key in keys
            if key in self.monthly_keys and spec.HISTORIES[key.path[-1]].forgotten
        ]
        return [*own, *horizons]

    def views_request(self) -> dg.RunRequest | None:
        """A run of the checks of the catalog's views alone (the reconciliation among them), as
        the watch job runs them; None when the account's tables carry none."""
        views = self._views_check()
        if views is None:
            return None
        return dg.RunRequest(
            asset_selection=[],
            asset_check_keys=list(views.check_keys),
            tags={ACCOUNT_TAG: self.account.name},
        )

    def _views_check(self) -> dg.AssetChecksDefinition | None:
        return views_check(
            self.account.name,
            {key.path[-1]: key for key in self.keys},
            self.clock,
            reconciles=self.account.extracts_all,
        )

    def watch_checks(self) -> list[dg.AssetChecksDefinition]:
        """The checks of the warehouse alone: last night's partitions landed (freshness), the
        days of a history the exchange forgets are archived in time (horizon), and what the
        catalog's views say, the reconciliation among it (`views_check`)."""
        name = self.account.name
        forgotten = [k for k in self.monthly_keys if spec.HISTORIES[k.path[-1]].forgotten]
        views = self._views_check()
        return [
            *([views] if views else []),
            *(horizon_check(key, name, self.first_day, self.clock) for key in forgotten),
            *(
                checks.freshness_check(
                    key,
                    name,
                    lambda today: today - timedelta(days=1),
                    self.clock,
                    complete_day=True,
                )
                for key in self.monthly_keys
            ),
            *(
                checks.freshness_check(
                    key, name, lambda today: today, self.clock, complete_day=False
                )
                for key in self.snapshot_keys
            ),
        ]


def _tags(account: Account) -> dict[str, str]:
    return {ACCOUNT_TAG: account.name, MAX_RUNTIME_TAG: str(NIGHTLY_MAX_RUNTIME_S)}


#: The months (``2026-05``) of an account's history a night reads again (`warehouse.rereads`).
Rereads = Callable[[Account, spec.History, date], Sequence[str]]


def nightly_requests(
    built: Sequence[AccountAssets], tick: datetime, rereads: Rereads | None = None
) -> Iterator[dg.RunRequest]:
    """Each account's runs of the night of ``tick``: the month that holds yesterday of its
    histories partitioned by month, its snapshots, and a run per earlier month ``rereads``
    names."""
    today = tick.astimezone(UTC).date()
    yesterday = today - timedelta(days=1)
    for assets in built:
        account = assets.account
        again: dict[str, list[dg.AssetKey]] = {}
        for key in assets.monthly_keys:
            months = rereads(account, spec.HISTORIES[key.path[-1]], today) if rereads else ()
            for month in months:
                if month != month_of(yesterday):
                    again.setdefault(month, []).append(key)
        for month, keys in sorted(again.items()):
            yield dg.RunRequest(
                run_key=f"{account.name}:again:{month}:{yesterday.isoformat()}",
                partition_key=month,
                asset_selection=keys,
                asset_check_keys=assets.run_checks(keys),
                tags=_tags(account),
            )
        if assets.monthly:
            # The same month is asked for every night: the run key names the night, one run each.
            yield dg.RunRequest(
                run_key=f"{account.name}:histories:{yesterday.isoformat()}",
                partition_key=month_of(yesterday),
                asset_selection=assets.monthly_keys,
                asset_check_keys=assets.run_checks(assets.monthly_keys),
                tags=_tags(account),
            )
        if assets.snapshots:
            yield dg.RunRequest(
                run_key=f"{account.name}:snapshots:{today.isoformat()}",
                asset_selection=assets.snapshot_keys,
                asset_check_keys=assets.run_checks(assets.snapshot_keys),
                tags=_tags(account),
            )


def prices_request(prices: dg.AssetsDefinition, day: date) -> dg.RunRequest:
    """The run of the exchange's prices on ``day``: a run of its own, after the accounts'."""
    return dg.RunRequest(
        run_key=f"{EXCHANGE}:prices:{day.isoformat()}",
        asset_selection=[PRICES_KEY],
        asset_check_keys=list(prices.check_keys),
        tags={ACCOUNT_TAG: EXCHANGE, MAX_RUNTIME_TAG: str(NIGHTLY_MAX_RUNTIME_S)},
    )


def requests_for(
    assets: AccountAssets, tables: Sequence[str], first: date, last: date
) -> Iterator[dg.RunRequest]:
    """An account's runs of these tables for the days ``first .. last``: the histories
    partitioned by month replace exactly those days, in the months that hold them, in one run;
    the snapshots are taken today, in one run (a past day is the caller's to refuse)."""
    by_table = assets.tables
    chosen = {by_table[name] for name in tables}
    monthly = [a for a in assets.monthly if a in chosen]
    snapshots = [a for a in assets.snapshots if a in chosen]
    if monthly:
        days = {"first_day": first.isoformat(), "last_day": last.isoformat()}
        config = {"ops": {asset.node_def.name: {"config": days} for asset in monthly}}
        months = (month_of(first), month_of(last))
        keys = [key for asset in monthly for key in asset.keys]
        yield dg.RunRequest(
            partition_key=months[0] if months[0] == months[1] else None,
            asset_selection=keys,
            asset_check_keys=assets.run_checks(keys),
            run_config=config,
            tags={ACCOUNT_TAG: assets.account.name}
            | (
                {}
                if months[0] == months[1]
                else {RANGE_START_TAG: months[0], RANGE_END_TAG: months[1]}
            ),
        )
    if snapshots:
        keys = [key for asset in snapshots for key in asset.keys]
        yield dg.RunRequest(
            asset_selection=keys,
            asset_check_keys=assets.run_checks(keys),
            tags={ACCOUNT_TAG: assets.account.name},
        )


@dataclass(frozen=True, slots=True)
class Jobs:
    """The jobs and schedules over every account's assets."""

    nightly: dg.UnresolvedAssetJobDefinition
    histories: tuple[dg.UnresolvedAssetJobDefinition, ...]
    snapshots: dg.UnresolvedAssetJobDefinition
    freshness: dg.UnresolvedAssetJobDefinition
    nightly_schedule: dg.ScheduleDefinition
    freshness_schedule: dg.ScheduleDefinition
    watch_checks: tuple[dg.AssetChecksDefinition, ...]
    #: The exchange's prices, a job and a schedule of their own (none without an account).
    prices: dg.UnresolvedAssetJobDefinition | None = None
    prices_schedule: dg.ScheduleDefinition | None = None

    @property
    def jobs(self) -> list[dg.UnresolvedAssetJobDefinition]:
        own = [self.prices] if self.prices else []
        return [self.nightly, *self.histories, self.snapshots, self.freshness, *own]

    @property
    def schedules(self) -> list[dg.ScheduleDefinition]:
        own = [self.prices_schedule] if self.prices_schedule else []
        return [self.nightly_schedule, self.freshness_schedule, *own]


def jobs(
    built: Sequence[AccountAssets],
    nightly_cron: str,
    clock: spec.Clock,
    rereads: Rereads | None = None,
    prices: dg.AssetsDefinition | None = None,
    prices_cron: str = "0 1 * * *",
) -> Jobs:
    """The jobs and schedules of the accounts' assets, and of the exchange's ``prices`` (at
    ``prices_cron``)."""
    names = ", ".join(assets.account.name for assets in built)
    nightly = dg.define_asset_job(
        "nightly",
        selection=dg.AssetSelection.assets(
            *(a for assets in built for a in assets.assets), *([prices] if prices else [])
        ),
        description="The month so far of every history, and today's snapshots, of every "
        f"account ({names}); run by the nightly schedule, a run per account and kind. The "
        "command line runs the exchange's prices in it too.",
    )
    histories = tuple(
        dg.define_asset_job(
            f"{history.name}_job",
            selection=dg.AssetSelection.assets(
                *(a.tables[history.name] for a in built if history.name in a.tables)
            ),
            description=f"{history.name} of every account for a month or a range of months "
            "(dagster job backfill --from 2025-01 --to 2025-03).",
        )
        for history in spec.HISTORIES.values()
        if history.monthly and any(history.name in a.tables for a in built)
    )
    snapshot = dg.define_asset_job(
        "snapshots_job",
        selection=dg.AssetSelection.assets(*(a for assets in built for a in assets.snapshots)),
        description="Today's snapshots of every account.",
    )

    @dg.schedule(
        job=nightly,
        cron_schedule=nightly_cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"{nightly_cron} (UTC): for each account, the month that holds yesterday of "
        "its histories, and today's snapshots.",
    )
    def nightly_schedule(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
        # A tick evaluated by hand (the UI's test, a test's context) may have no time: now's.
        tick = context.scheduled_execution_time or clock.moment()
        yield from nightly_requests(built, tick, rereads)

    prices_job, prices_schedule = _prices(prices, prices_cron, clock)

    watch_checks = tuple(check for assets in built for check in assets.watch_checks())
    freshness = dg.define_asset_job(
        "freshness",
        selection=dg.AssetSelection.checks(*watch_checks),
        description="Whether the nightly partitions of every account landed, whether a day "
        "of a history the exchange forgets is at stake, and whether each account reconciles "
        "(run at 02:30 UTC).",
    )
    freshness_schedule = dg.ScheduleDefinition(
        job=freshness,
        cron_schedule=FRESHNESS_CRON,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="02:30 UTC: last night's partitions on disk, the days at stake, and what "
        "the views say.",
    )
    return Jobs(
        nightly, histories, snapshot, freshness, nightly_schedule, freshness_schedule,
        watch_checks, prices_job, prices_schedule,
    )  # fmt: skip


def _prices(
    prices: dg.AssetsDefinition | None, cron: str, clock: spec.Clock
) -> tuple[dg.UnresolvedAssetJobDefinition | None, dg.ScheduleDefinition | None]:
    """The job of the exchange's prices and its schedule (``cron``, after the nightly runs):
    ticks of its own, so that a night's tick is the accounts' runs alone (each account's failure
    its own, the prices none of theirs), and the prices read what the night wrote."""
    if prices is None:
        return None, None
    job = dg.define_asset_job(
        "prices",
        selection=dg.AssetSelection.assets(prices),
        description="The exchange's daily candles of every market the accounts' assets need "
        "(exchange/daily_candles); run by the prices schedule.",
    )

    @dg.schedule(
        job=job,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"{cron} (UTC): the exchange's prices, up to today, of what the warehouse "
        "holds as it starts.",
    )
    def prices_schedule(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
        tick = context.scheduled_execution_time or clock.moment()
        yield prices_request(prices, tick.astimezone(UTC).date())

    return job, prices_schedule
