"""Records as the API sends them, and moments to file them under, for the warehouse's tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import cast

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


# --- The rest of the account, as the API sends it (docs/api.md, sections 2.9 to 2.19) ---------


def fraction(moment: datetime) -> Decimal:
    """A time with its microseconds as the API sends a fractional one, parsed exactly."""
    micros = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return Decimal(micros).scaleb(-6)


def trade(**overrides: object) -> dict[str, object]:
    """A fill of the executed history (listed under its market)."""
    value: dict[str, object] = {
        "id": 1001,
        "clientOrderId": "",
        "time": Decimal("1709280000.123456"),
        "side": "buy",
        "role": 2,
        "amount": "0.5",
        "price": "60000",
        "deal": "30000",
        "fee": "0.0005",
        "orderId": 501,
        "feeAsset": "BTC",
    }
    value.update(overrides)
    return value


def order(**overrides: object) -> dict[str, object]:
    """A closed order of the order history (listed under its market)."""
    value: dict[str, object] = {
        "amount": "0.5",
        "price": "60000",
        "type": "limit",
        "id": 501,
        "clientOrderId": "",
        "side": "buy",
        "ctime": Decimal("1709279000.5"),
        "ftime": Decimal("1709280000.123456"),
        "dealFee": "0.0005",
        "dealStock": "0.5",
        "dealMoney": "30000",
        "postOnly": False,
        "ioc": False,
        "status": "FILLED",
        "feeAsset": "BTC",
        "rpi": False,
        "reduceOnly": False,
    }
    value.update(overrides)
    return value


def position_event(**overrides: object) -> dict[str, object]:
    """A change of a collateral position; ``detail`` overrides fields of its ``orderDetail``."""
    detail: dict[str, object] = {
        "id": 601,
        "tradeAmount": "1",
        "price": "61000",
        "tradeFee": "12.2",
        "fundingFee": None,
        "realizedPnl": None,
    }
    detail.update(cast("dict[str, object]", overrides.pop("detail", {})))
    value: dict[str, object] = {
        "positionId": 7001,
        "market": "BTC_PERP",
        "openDate": Decimal("1709200000.000001"),
        "modifyDate": Decimal("1709280000.5"),
        "amount": "1",
        "basePrice": "61000",
        "realizedFunding": "0",
        "liquidationPrice": "30000",
        "liquidationState": None,
        "orderDetail": detail,
        "side": "LONG",
        "isHedge": False,
    }
    value.update(overrides)
    return value


def closed_position(**overrides: object) -> dict[str, object]:
    value: dict[str, object] = {
        "positionId": 7000,
        "market": "BTC_PERP",
        "grossPnl": "90",
        "netPnl": "85.5",
        "totalTradeFee": "10",
        "totalFunding": "4.5",
        "avgEntryPrice": "60000",
        "avgExitPrice": "60100",
        "closedSize": "1",
        "amount": "0",
        "side": "LONG",
        "isHedge": False,
        "openDate": DAY_START - 86400,
        "closeDate": DAY_START + 3600,
    }
    value.update(overrides)
    return value


def open_position(**overrides: object) -> dict[str, object]:
    value: dict[str, object] = {
        "positionId": 7001,
        "market": "BTC_PERP",
        "openDate": Decimal("1709200000.000001"),
        "modifyDate": Decimal("1709280000.5"),
        "amount": "1",
        "basePrice": "61000",
        "liquidationPrice": "30000",
        "liquidationState": None,
        "pnl": "0",
        "pnlPercent": "1.5",
        "margin": "6100",
        "freeMargin": "1000",
        "funding": "-0.5",
        "unrealizedFunding": "0",
        "unrealizedPnl": "91.5",
        "tpsl": None,
        "positionSide": "LONG",
    }
    value.update(overrides)
    return value


def conversion(**overrides: object) -> dict[str, object]:
    value: dict[str, object] = {
        "id": "9001",
        "date": DAY_START + 7200,
        "give": "100",
        "receive": "0.0016",
        "rate": "0.000016",
        "path": [{"from": "USDT", "to": "BTC", "rate": "0.000016"}],
    }
    value.update(overrides)
    return value


def movement(**overrides: object) -> dict[str, object]:
    """A deposit (``method`` 1) or withdrawal (2) of the main account's history."""
    value: dict[str, object] = {
        "address": "0xabc",
        "uniqueId": None,
        "createdAt": DAY_START + 3600,
        "currency": "Tether US",
        "ticker": "USDT",
        "method": 1,
        "amount": "250",
        "description": "",
        "memo": "",
        "fee": "1",
        "status": 3,
        "network": "TRC20",
        "transactionHash": "0xhash",
        "transactionId": "00000000-0000-4000-8000-000000000001",
        "details": None,
        "confirmations": None,
    }
    value.update(overrides)
    return value


#: A sub-account's id, as the main account lists it.
SUBACCOUNT_ID = "11111111-1111-4111-8111-111111111111"


def subaccount(**overrides: object) -> dict[str, object]:
    value: dict[str, object] = {
        "id": SUBACCOUNT_ID,
        "alias": "sub_1",
        "userId": "22222222-2222-4222-8222-222222222222",
        "email": "s***@s***.sim",
        "status": "active",
        "color": "#123456",
        "kyc": {"shareKyc": True, "kycStatus": "shared"},
        "permissions": {"spotEnabled": True, "collateralEnabled": True},
    }
    value.update(overrides)
    return value


def transfer(**overrides: object) -> dict[str, object]:
    """A transfer between the main account and a sub-account (listed under the sub-account)."""
    value: dict[str, object] = {
        "transactionId": "33333333-3333-4333-8333-333333333333",
        "id": "33333333-3333-4333-8333-333333333333",
        "direction": "main_to_sub",
        "currency": "USDT",
        "amount": "40",
        "createdAt": DAY_START + 10800,
    }
    value.update(overrides)
    return value


def collateral_balance(**overrides: object) -> dict[str, object]:
    value: dict[str, object] = {
        "asset": "USDT",
        "balance": "5000",
        "borrow": "0",
        "availableWithoutBorrow": "5000",
        "availableWithBorrow": "50000",
    }
    value.update(overrides)
    return value
