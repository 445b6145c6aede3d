"""The horizon check: of a history the exchange answers for six months only (fills, orders,
conversions), the days the warehouse has not archived, and when they are lost.

A day is archived once a walk covered it after it ended (`warehouse.archive`). Days the exchange
still answers that are not archived are *at stake*: the check warns, naming the account, the
history, the days, the date they are lost and the command that reads them (the nightly reads them
again; soon past the six months, it says so). Days that fell past the six months unarchived since
the check last looked are *lost*: an alert. The check is blocking and fails with severity error,
so the run that found them fails (the command line exits non-zero, the webhook is posted),
naming the days and the date they were lost; then they are recorded as said (nothing but the
exchange's web export brings them back). Days already past the six months when the check first
looked at the account's history (a start date further back than the exchange answers) were never
within the warehouse's reach: named once, as a warning. It reads the month files' footers only,
and runs with the nightly runs and, on its own, in the daily watch job (`assets.jobs`): it needs
the warehouse, not the exchange, so a night whose runs all fail still says what is at stake.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Final

import dagster as dg

from pipeline import spec
from warehouse import archive, partitions
from warehouse.store import Store

from .resources import WarehouseResource

HORIZON: Final = "horizon"
#: A gap whose first day is lost within this many days is said to be lost soon.
WARNING_DAYS: Final = 14


def horizon(
    store: Store, table: str, account: str, first: date, today: date, *, key: dg.AssetKey
) -> dg.AssetCheckResult:
    """The days of ``first`` .. yesterday of the account's ``table`` not archived: an error
    when some were lost since the check last looked (said once: then recorded in the
    warehouse), a warning while others are at stake, or for days lost before it first looked."""
    walked = partitions.coverage(store, table, account)
    found = archive.horizon(walked, first, today)
    due = found.due_within(today, WARNING_DAYS)
    said_before = archive.reported_lost(store, table, account)
    newly_lost = archive.gaps(
        d for g in found.lost for d in _days(g.first, g.last) if d not in (said_before or ())
    )
    # A loss only if the warehouse was looking while the exchange still answered the days.
    alert = bool(newly_lost) and said_before is not None
    said = []
    if newly_lost:
        days = sum(g.days for g in newly_lost)
        gaps = "; ".join(map(str, newly_lost))
        said.append(
            f"{table} of {account}: {days} day(s) lost: never archived and past the exchange's "
            f"six months (its web export has them): {gaps}."
            if alert
            else f"{table} of {account}: {days} day(s) were past the exchange's six months "
            f"before the warehouse first looked (its web export has them): {gaps}."
        )
    if found.at_stake:
        said.append(
            f"{table} of {account}: not archived"
            + (" and soon past the exchange's six months" if due else "")
            + ": "
            + "; ".join(map(str, found.at_stake))
            # The command set apart, its sentence ended: what follows it is not its argument.
            + ". Read them now with `whitebit-etl materialize "
            f"{table} --account {account} --from {found.at_stake[0].first} "
            f"--to {found.at_stake[-1].last}`."
        )
    if newly_lost or said_before is None:
        archive.record_lost(
            store, table, account, (d for g in newly_lost for d in _days(g.first, g.last))
        )
    return dg.AssetCheckResult(
        check_name=HORIZON,
        asset_key=key,
        passed=not found.at_stake and not newly_lost,
        severity=dg.AssetCheckSeverity.ERROR if alert else dg.AssetCheckSeverity.WARN,
        # The loss first, on its own line: the command's last line and the alert name it.
        description="\n".join(said)
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


def horizon_check(
    key: dg.AssetKey, account: str, first: date, clock: spec.Clock
) -> dg.AssetChecksDefinition:
    """The horizon check of the account's table (the asset ``key``), from ``first`` on, judged
    on ``clock``'s day."""
    table = key.path[-1]

    @dg.asset_check(
        asset=key,
        name=HORIZON,
        description=f"Every day of {table} of {account} is archived before the exchange's six "
        "months pass it (warns while days are at stake; a day lost fails the run)",
        blocking=True,
    )
    def check(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        return horizon(warehouse.warehouse.store, table, account, first, clock.today(), key=key)

    return check
