"""The horizon check: of a history the exchange answers for six months only (fills, orders,
conversions), the days the warehouse has not archived, and when they are lost.

A day is archived once a walk covered it after it ended (`warehouse.archive`). The check fails,
as a warning, while days the exchange still answers are not archived, and as an error once the
first of them falls past its six months within `WARNING_DAYS`, naming the account, the history,
the days and the date they are lost. Days already past it are named as lost once, as a warning,
then recorded as said (nothing but the exchange's web export brings them back). It reads the
month files' footers only, and runs with the nightly runs and, on its own, in the daily watch
job (`assets.jobs`): it needs the warehouse, not the exchange, so a night whose runs all fail
still says what is at stake.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Final

import dagster as dg

from warehouse import archive, partitions
from warehouse.store import Store

from .resources import WarehouseResource

HORIZON: Final = "horizon"
#: A gap whose first day is lost within this many days is an error.
WARNING_DAYS: Final = 14


def horizon(
    store: Store, table: str, account: str, first: date, today: date, *, key: dg.AssetKey
) -> dg.AssetCheckResult:
    """The days of ``first`` .. yesterday of the account's ``table`` not archived: an error
    when some are lost within `WARNING_DAYS`, a warning while others are at stake or when days
    are found lost (said once: then recorded in the warehouse)."""
    walked = partitions.coverage(store, table, account)
    found = archive.horizon(walked, first, today)
    due = found.due_within(today, WARNING_DAYS)
    said_before = archive.reported_lost(store, table, account)
    newly_lost = archive.gaps(
        d for g in found.lost for d in _days(g.first, g.last) if d not in said_before
    )
    said = []
    if found.at_stake:
        said.append(
            f"{table} of {account}: not archived"
            + (" and soon past the exchange's six months" if due else "")
            + ": "
            + "; ".join(map(str, found.at_stake))
            + ". Read them now: whitebit-etl materialize "
            f"{table} --account {account} --from {found.at_stake[0].first} "
            f"--to {found.at_stake[-1].last}"
        )
    if newly_lost:
        days = sum(g.days for g in newly_lost)
        said.append(
            f"{table} of {account}: {days} day(s) were never archived and are past the "
            "exchange's six months, lost to the API (its web export has them): "
            + "; ".join(f"{g.first} .. {g.last}" for g in newly_lost)
        )
        archive.record_lost(
            store, table, account, (d for g in newly_lost for d in _days(g.first, g.last))
        )
    return dg.AssetCheckResult(
        check_name=HORIZON,
        asset_key=key,
        passed=not found.at_stake and not newly_lost,
        severity=dg.AssetCheckSeverity.ERROR if due else dg.AssetCheckSeverity.WARN,
        description=" ".join(said)
        or f"every day of {table} of {account} since {first} that "
        "the exchange still answers is archived",
        metadata={
            "at_stake": dg.MetadataValue.json([str(g) for g in found.at_stake]),
            "lost": dg.MetadataValue.json([str(g) for g in found.lost]),
            "first_day": str(first),
        },
    )


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def horizon_check(key: dg.AssetKey, account: str, first: date) -> dg.AssetChecksDefinition:
    """The horizon check of the account's table (the asset ``key``), from ``first`` on."""
    table = key.path[-1]

    @dg.asset_check(
        asset=key,
        name=HORIZON,
        description=f"Every day of {table} of {account} is archived before the exchange's six "
        f"months pass it (an error {WARNING_DAYS} days before a day is lost)",
    )
    def check(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        today = datetime.now(UTC).date()
        return horizon(warehouse.warehouse.store, table, account, first, today, key=key)

    return check
