"""Jobs and the nightly schedule.

- ``nightly``: every API asset. Its schedule (00:30 UTC) asks for two runs: the funding month
  that holds yesterday, now complete (every day of the month so far, so that a night that failed
  is mended by the next), and today's snapshots.
- ``funding_history_job``: funding alone, for ``dagster job backfill`` over a range of months.
- ``snapshots_job``: today's snapshots alone.

- ``freshness``: the freshness checks alone (02:30 UTC): did last night's partitions land?

Resetting a sub-account key is not an asset and is in no job or schedule: only a person does it,
with ``whitebit-etl reset-key``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Final

import dagster as dg

from warehouse.schemas import month_of

from . import checks
from .funding import funding_history
from .snapshots import SNAPSHOTS

#: 00:30 UTC; `WHITEBIT_NIGHTLY_CRON` moves it (the service test fires it every minute).
NIGHTLY_CRON: Final = os.environ.get("WHITEBIT_NIGHTLY_CRON") or "30 0 * * *"

SNAPSHOT_KEYS: Final = [key for asset in SNAPSHOTS for key in asset.keys]

nightly_job = dg.define_asset_job(
    "nightly",
    selection=dg.AssetSelection.assets(funding_history, *SNAPSHOTS),
    description="Yesterday's funding history and today's snapshots (run by the nightly schedule).",
)
funding_history_job = dg.define_asset_job(
    "funding_history_job",
    selection=dg.AssetSelection.assets(funding_history),
    description="Funding history for a month or a range of months "
    "(dagster job backfill --from 2025-01 --to 2025-03).",
)
snapshots_job = dg.define_asset_job(
    "snapshots_job",
    selection=dg.AssetSelection.assets(*SNAPSHOTS),
    description="Today's snapshots: investments, plans, balances, hedge mode, watcher links.",
)


@dg.schedule(
    job=nightly_job,
    cron_schedule=NIGHTLY_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="00:30 UTC: the funding month that holds yesterday, and today's snapshots.",
)
def nightly_schedule(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest]:
    tick = context.scheduled_execution_time
    today = (tick or datetime.now(UTC)).astimezone(UTC).date()
    yesterday = today - timedelta(days=1)
    # The same month is asked for every night: the run key names the night, one run each.
    yield dg.RunRequest(
        run_key=f"funding_history:{yesterday.isoformat()}",
        partition_key=month_of(yesterday),
        asset_selection=list(funding_history.keys),
    )
    yield dg.RunRequest(run_key=f"snapshots:{today.isoformat()}", asset_selection=SNAPSHOT_KEYS)


FRESHNESS_CRON: Final = "30 2 * * *"

FRESHNESS_CHECKS: Final = [
    checks.freshness_check(
        "funding_history", lambda today: today - timedelta(days=1), complete_day=True
    ),
    *(
        checks.freshness_check(key.to_user_string(), lambda today: today, complete_day=False)
        for key in SNAPSHOT_KEYS
    ),
]
freshness_job = dg.define_asset_job(
    "freshness",
    selection=dg.AssetSelection.checks(*FRESHNESS_CHECKS),
    description="Whether the nightly partitions landed (run at 02:30 UTC).",
)
freshness_schedule = dg.ScheduleDefinition(
    job=freshness_job,
    cron_schedule=FRESHNESS_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="02:30 UTC: check that last night's partitions are on disk.",
)
