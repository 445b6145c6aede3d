"""The partitioning of the assets: a history partitioned by the record's month (`spec.Monthly`) by
UTC month; snapshots not at all.

One account's funding is a few hundred payments a day, so a partition (and a Parquet file) is a
month: a backfill of years is a few dozen partitions, not a thousand. Today's month exists
(``end_offset=1``); its partition holds the days so far and grows each night. A run of a month
covers its days up to today; ``HistoryConfig`` narrows it to a few days. The first month is the
settings' start date's (``WHITEBIT_START_DATE``).

Snapshots tell the account as it is now, so they are not partitioned: each materialization takes
today's, kept beside the earlier ones by its ``snapshot_date``.
"""

from __future__ import annotations

from datetime import date, timedelta

import dagster as dg

from warehouse.schemas import month_of


def monthly(start: date) -> dg.MonthlyPartitionsDefinition:
    """Months from the one holding ``start`` to today's."""
    return dg.MonthlyPartitionsDefinition(
        start_date=month_of(start), timezone="UTC", end_offset=1, fmt="%Y-%m"
    )


def day_range(start: date, end: date) -> list[date]:
    """Days ``start <= d < end``."""
    return [start + timedelta(days=n) for n in range((end - start).days)]
