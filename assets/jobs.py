"""Every account's asset set, the jobs over them and the schedules.

- An account's asset set (`AccountAssets`): its ``funding_history`` and its snapshots, keys under
  the account's prefix, in the account's group, holding the account's pool.
- ``nightly``: every API asset of every account. Its schedule (00:30 UTC) asks, for each
  account, for two runs: the funding month that holds yesterday, now complete (every day of the
  month so far, so that a night that failed is mended by the next), and today's snapshots. An
  account's runs are its own: one account failing (a bad key, a refusal) fails its runs only,
  and the alerts name it.
- ``funding_history_job``: every account's funding, for ``dagster job backfill`` over a range of
  months (one account: select its group in the UI, or ``whitebit-etl materialize --account``).
- ``snapshots_job``: every account's snapshots, today's.
- ``freshness``: the freshness checks alone (02:30 UTC): did last night's partitions land?

Resetting a sub-account key is not an asset and is in no job or schedule: only a person does it,
with ``whitebit-etl reset-key``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

import dagster as dg

from warehouse.schemas import month_of

from . import checks
from .accounts import Account, single
from .funding import funding_history
from .reporting import ACCOUNT_TAG
from .snapshots import snapshots

#: 00:30 UTC; `WHITEBIT_NIGHTLY_CRON` moves it (the service test fires it every minute).
NIGHTLY_CRON: Final = os.environ.get("WHITEBIT_NIGHTLY_CRON") or "30 0 * * *"
FRESHNESS_CRON: Final = "30 2 * * *"
#: How long a nightly run may go before the daemon's run monitoring fails it (Dagster's
#: ``dagster/max_runtime`` tag): a run whose Celery worker's machine was lost never reports its
#: end, and its task stays "started" in the result backend; a night's run of one account takes
#: minutes. The instance whitebit-etl writes gives every run this limit (``max_runtime_seconds``
#: in ``assets/dagster.yaml``); the tag keeps it on the nightly runs of any other instance.
NIGHTLY_MAX_RUNTIME_S: Final = 4 * 3600
MAX_RUNTIME_TAG: Final = "dagster/max_runtime"


@dataclass(frozen=True, slots=True)
class AccountAssets:
    """One account's assets."""

    account: Account
    funding: dg.AssetsDefinition
    snapshots: tuple[dg.AssetsDefinition, ...]

    @classmethod
    def of(cls, account: Account) -> AccountAssets:
        return cls(account, funding_history(account), snapshots(account))

    @property
    def assets(self) -> tuple[dg.AssetsDefinition, ...]:
        return (self.funding, *self.snapshots)

    @property
    def funding_keys(self) -> list[dg.AssetKey]:
        return list(self.funding.keys)

    @property
    def snapshot_keys(self) -> list[dg.AssetKey]:
        return [key for asset in self.snapshots for key in asset.keys]

    def freshness_checks(self) -> list[dg.AssetChecksDefinition]:
        name = self.account.name
        return [
            *(
                checks.freshness_check(
                    key, name, lambda today: today - timedelta(days=1), complete_day=True
                )
                for key in self.funding_keys
            ),
            *(
                checks.freshness_check(key, name, lambda today: today, complete_day=False)
                for key in self.snapshot_keys
            ),
        ]


#: The asset set of the account of the single-account variables (unprefixed keys).
SINGLE: Final = AccountAssets.of(single({}))


def build(accounts: Sequence[Account]) -> tuple[AccountAssets, ...]:
    """Each account's asset set (the single account's is `SINGLE`)."""
    return tuple(
        SINGLE if account.name == SINGLE.account.name and not account.prefixed
        else AccountAssets.of(account)
        for account in accounts
    )  # fmt: skip


def nightly_requests(
    built: Sequence[AccountAssets], tick: datetime | None
) -> Iterator[dg.RunRequest]:
    """Each account's runs of a night: its funding month that holds yesterday, its snapshots."""
    today = (tick or datetime.now(UTC)).astimezone(UTC).date()
    yesterday = today - timedelta(days=1)
    for assets in built:
        account = assets.account
        prefix = f"{account.name}:" if account.prefixed else ""
        tags = {ACCOUNT_TAG: account.name, MAX_RUNTIME_TAG: str(NIGHTLY_MAX_RUNTIME_S)}
        # The same month is asked for every night: the run key names the night, one run each.
        yield dg.RunRequest(
            run_key=f"{prefix}funding_history:{yesterday.isoformat()}",
            partition_key=month_of(yesterday),
            asset_selection=assets.funding_keys,
            tags=tags,
        )
        yield dg.RunRequest(
            run_key=f"{prefix}snapshots:{today.isoformat()}",
            asset_selection=assets.snapshot_keys,
            tags=tags,
        )


@dataclass(frozen=True, slots=True)
class Jobs:
    """The jobs and schedules over every account's assets."""

    nightly: dg.UnresolvedAssetJobDefinition
    funding_history: dg.UnresolvedAssetJobDefinition
    snapshots: dg.UnresolvedAssetJobDefinition
    freshness: dg.UnresolvedAssetJobDefinition
    nightly_schedule: dg.ScheduleDefinition
    freshness_schedule: dg.ScheduleDefinition
    freshness_checks: tuple[dg.AssetChecksDefinition, ...]

    @property
    def jobs(self) -> list[dg.UnresolvedAssetJobDefinition]:
        return [self.nightly, self.funding_history, self.snapshots, self.freshness]

    @property
    def schedules(self) -> list[dg.ScheduleDefinition]:
        return [self.nightly_schedule, self.freshness_schedule]


def jobs(built: Sequence[AccountAssets]) -> Jobs:
    names = ", ".join(assets.account.name for assets in built)
    nightly = dg.define_asset_job(
        "nightly",
        selection=dg.AssetSelection.assets(*(a for assets in built for a in assets.assets)),
        description="Yesterday's funding history and today's snapshots of every account "
        f"({names}); run by the nightly schedule, a run per account and kind.",
    )
    funding = dg.define_asset_job(
        "funding_history_job",
        selection=dg.AssetSelection.assets(*(assets.funding for assets in built)),
        description="Funding history of every account for a month or a range of months "
        "(dagster job backfill --from 2025-01 --to 2025-03).",
    )
    snapshot = dg.define_asset_job(
        "snapshots_job",
        selection=dg.AssetSelection.assets(*(a for assets in built for a in assets.snapshots)),
        description="Today's snapshots of every account: investments, plans, balances, hedge "
        "mode, watcher links.",
    )

    @dg.schedule(
        job=nightly,
        cron_schedule=NIGHTLY_CRON,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="00:30 UTC: for each account, the funding month that holds yesterday, and "
        "today's snapshots.",
    )
    def nightly_schedule(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
        yield from nightly_requests(built, context.scheduled_execution_time)

    freshness_checks = tuple(check for assets in built for check in assets.freshness_checks())
    freshness = dg.define_asset_job(
        "freshness",
        selection=dg.AssetSelection.checks(*freshness_checks),
        description="Whether the nightly partitions of every account landed (run at 02:30 UTC).",
    )
    freshness_schedule = dg.ScheduleDefinition(
        job=freshness,
        cron_schedule=FRESHNESS_CRON,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="02:30 UTC: check that last night's partitions are on disk.",
    )
    return Jobs(
        nightly, funding, snapshot, freshness, nightly_schedule, freshness_schedule,
        freshness_checks,
    )  # fmt: skip
