"""The partitioning of the assets: funding history by UTC month; snapshots not at all.

One account's funding is a few hundred payments a day, so a partition (and a Parquet file) is a
month: a backfill of years is a few dozen partitions, not a thousand. Today's month exists
(``end_offset=1``); its partition holds the days so far and grows each night. A run of a month
covers its days up to today; ``FundingConfig`` narrows it to a few days.

Snapshots tell the account as it is now, so they are not partitioned: each materialization takes
today's, kept beside the earlier ones by its ``snapshot_date``.
"""

from __future__ import annotations

import os
from datetime import UTC, date, datetime, timedelta
from typing import Final

import dagster as dg

from warehouse.schemas import month_of

START_DATE_ENV: Final = "WHITEBIT_START_DATE"
DEFAULT_START_DATE: Final = "2024-01-01"


def start_date() -> date:
    """The first day of history: `WHITEBIT_START_DATE` (YYYY-MM-DD), else 2024-01-01."""
    text = os.environ.get(START_DATE_ENV) or DEFAULT_START_DATE
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{START_DATE_ENV} must be a date like 2024-01-01, not {text!r}") from None


MONTHLY: Final = dg.MonthlyPartitionsDefinition(
    start_date=month_of(start_date()), timezone="UTC", end_offset=1, fmt="%Y-%m"
)


def today() -> date:
    return datetime.now(UTC).date()


def day_range(start: date, end: date) -> list[date]:
    """Days ``start <= d < end``."""
    return [start + timedelta(days=n) for n in range((end - start).days)]
