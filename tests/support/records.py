"""Records as the API sends them, and moments to file them under, for the warehouse's tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time
from pathlib import Path

from warehouse import Warehouse, partitions

#: The account the warehouse's tests write as.
ACCOUNT = "default"

EXTRACTED_AT = datetime(2024, 3, 2, 6, 0, tzinfo=UTC)


DAY = date(2024, 3, 1)


#: 2024-03-01T00:00:00Z in Unix seconds.
DAY_START = 1709251200


FundingRecord = Callable[..., dict[str, object]]


def funding_record(**overrides: object) -> dict[str, object]:
    """One funding-history entry, all values strings as the API sends them."""
    record: dict[str, object] = {
        "market": "BTC_PERP",
        "fundingTime": str(DAY_START + 8 * 3600),
        "fundingRate": "0.0001",
        "fundingAmount": "-0.123456789012345678",
        "positionAmount": "1.5",
        "settlementPrice": "61000.25",
        "rateCalculatedTime": str(DAY_START + 8 * 3600 - 60),
    }
    record.update(overrides)
    return record


# Four days, newest last; EXTRACTED_AT is the morning after D4.
D1, D2, D3, D4 = date(2024, 2, 27), date(2024, 2, 28), date(2024, 2, 29), date(2024, 3, 1)


def at(day: date, hour: int, market: str = "BTC_PERP", **fields: object) -> dict[str, object]:
    """A funding payment of ``market`` at ``hour`` of ``day``."""
    seconds = int(datetime.combine(day, time(hour), UTC).timestamp())
    return funding_record(
        market=market, fundingTime=str(seconds), rateCalculatedTime=str(seconds - 60), **fields
    )


def markets(root: Path, day: date) -> list[str] | None:
    """The markets of the day's payments, or None when its month has no file."""
    rows = partitions.read_partition(Warehouse.open(root), "funding_history", (ACCOUNT, day))
    if rows is None:
        return None
    return sorted(
        m
        for m, d in zip(rows["market"].to_pylist(), rows["funding_date"].to_pylist(), strict=True)
        if d == day
    )


def plan(**overrides: object) -> dict[str, object]:
    value: dict[str, object] = {
        "id": "plan-1",
        "ticker": "USDT",
        "status": 1,
        "percent": "5.25",
        "duration": 43200,
        "interestTicker": "USDT",
        "interestRatio": "1",
        "minInvestment": "10",
        "maxInvestment": "100000",
        "maxPossibleInvestment": "50000.5",
    }
    value.update(overrides)
    return value


def investment(**overrides: object) -> dict[str, object]:
    value: dict[str, object] = {
        "id": "inv-1",
        "plan": plan(),
        "status": 1,
        "created": DAY_START - 86400,
        "updated": DAY_START,
        "paymentTime": DAY_START + 30 * 86400,
        "amount": "1000",
        "interestPaid": "0.000123456789",
    }
    value.update(overrides)
    return value


def watcher_link(**overrides: object) -> dict[str, object]:
    value: dict[str, object] = {
        "id": "link-1",
        "accounts": ["miner1", "miner2"],
        "name": "family",
        "link": "https://whitebit.com/mining-pool/watcher-link/link-1",
        "permissions": ["dashboard", "rewards"],
        "liveUntil": None,
        "createdAt": DAY_START - 3600,
    }
    value.update(overrides)
    return value
