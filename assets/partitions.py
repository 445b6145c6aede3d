"""The one daily partitioning of every asset: UTC days from a configurable start, today included.

Funding history is partitioned by the UTC day of each payment; snapshots by the UTC day they
were taken. Today's partition exists (``end_offset=1``) so that today's snapshots can be taken;
today's funding partition holds the day so far and is completed by the next night's run.
"""

from __future__ import annotations

import os
from datetime import UTC, date, datetime, timedelta
from typing import Final

import dagster as dg

START_DATE_ENV: Final = "WHITEBIT_START_DATE"
DEFAULT_START_DATE: Final = "2024-01-01"


def start_date() -> str:
    """The first partition: `WHITEBIT_START_DATE` (YYYY-MM-DD), else 2024-01-01."""
    text = os.environ.get(START_DATE_ENV) or DEFAULT_START_DATE
    try:
        date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{START_DATE_ENV} must be a date like 2024-01-01, not {text!r}") from None
    return text


DAILY: Final = dg.DailyPartitionsDefinition(
    start_date=start_date(), timezone="UTC", end_offset=1, fmt="%Y-%m-%d"
)


def today() -> date:
    return datetime.now(UTC).date()


def day_range(start: date, end: date) -> list[date]:
    """Days ``start <= d < end``."""
    return [start + timedelta(days=n) for n in range((end - start).days)]


def as_utc_day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()
