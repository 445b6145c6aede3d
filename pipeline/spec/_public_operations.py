"""The exchange's public prices: its markets list and its daily candles (docs/api.md, sections
4.21 and 4.22), both public ``GET``s with their parameters in the query string.

The markets list is v4's (`MARKETS`): it says each market's ``type`` (a path to a price goes
through spot markets, never a futures one) and its announced delisting, and shares the public v4
budget with ping. The candles are v1's only (`KLINE`: v4 has no kline in the documentation): a
budget of 1,000 requests per 10 s of their own, at most `KLINE_MAX_CANDLES` a request, and a
refused parameter answered HTTP 200 with ``success: false`` and its messages by field.
"""

from __future__ import annotations

from typing import Final

from ._contract import (
    Array,
    Field,
    FieldType,
    Operation,
    Param,
    RateBudget,
    TimeWindow,
    ValidationAnswer,
    Wrapped,
    digits_param,
)
from ._trade_operations import MARKET_PATTERN

#: Every interval the kline documents, in its order; a day is ``1d``.
KLINE_INTERVALS: Final = (
    "1s", "10s", "30s", "1m", "3m", "5m", "15m", "30m",
    "1h", "2h", "4h", "6h", "8h", "12h", "1d", "3d", "1w", "1M",
)  # fmt: skip
#: Most candles one kline answer holds (its ``limit``'s maximum and default).
KLINE_MAX_CANDLES: Final = 1440
#: A market's ``type`` in the markets list.
MARKET_TYPES: Final = ("spot", "futures", "tradfiFutures")

MARKET_FIELDS: Final = (
    Field("name", FieldType.STRING, meaning="Market name, <STOCK>_<MONEY>"),
    Field("stock", FieldType.STRING, meaning="Ticker of the stock (base) currency"),
    Field("money", FieldType.STRING, meaning="Ticker of the money (quote) currency"),
    Field("stockPrec", FieldType.STRING, meaning="Decimal places of a quantity, as text"),
    Field("moneyPrec", FieldType.STRING, meaning="Decimal places of a money amount, as text"),
    Field("feePrec", FieldType.STRING, meaning="Decimal places of a fee, as text"),
    Field("makerFee", FieldType.DECIMAL, meaning="Default maker fee, in percent"),
    Field("takerFee", FieldType.DECIMAL, meaning="Default taker fee, in percent"),
    Field("minAmount", FieldType.DECIMAL, meaning="Smallest order quantity, in stock"),
    Field("minTotal", FieldType.DECIMAL, meaning="Smallest order total, in money"),
    Field("maxTotal", FieldType.DECIMAL, meaning="Largest order total, in money; '0': none"),
    Field("tradesEnabled", FieldType.BOOLEAN, meaning="Always true: only such are listed"),
    Field("isCollateral", FieldType.BOOLEAN, meaning="Margin trading is enabled"),
    Field("type", FieldType.STRING, meaning="spot, futures or tradfiFutures"),
    Field("isTradFiFutures", FieldType.BOOLEAN, meaning="A traditional-finance futures market"),
    Field(
        "delistedAt", FieldType.TIMESTAMP, nullable=True, meaning="Announced delisting; null: none"
    ),
)

#: A candle, a JSON array in this order: note close before high and low.
CANDLE_FIELDS: Final = (
    Field("time", FieldType.TIMESTAMP, meaning="Start of the candle's interval"),
    Field("open", FieldType.DECIMAL, meaning="First price of the interval"),
    Field("close", FieldType.DECIMAL, meaning="Last price of the interval"),
    Field("high", FieldType.DECIMAL, meaning="Highest price of the interval"),
    Field("low", FieldType.DECIMAL, meaning="Lowest price of the interval"),
    Field("volume_stock", FieldType.DECIMAL, meaning="Volume traded, in the stock currency"),
    Field("volume_money", FieldType.DECIMAL, meaning="Volume traded, in the money currency"),
)

MARKETS: Final = Operation(
    name="markets",
    method="GET",
    path="/api/v4/public/markets",
    private=False,
    budget=RateBudget("public", 2000),
    answer=Array(MARKET_FIELDS),
    summary="Every market enabled for trading, spot and futures",
)

KLINE: Final = Operation(
    name="kline",
    method="GET",
    path="/api/v1/public/kline",
    private=False,
    # "Rate limit 1000 requests/10 sec" for every /api/v1 endpoint.
    budget=RateBudget("public-v1", 1000),
    answer=Wrapped(CANDLE_FIELDS),
    params=(
        Param(
            "market",
            str,
            required=True,
            pattern=MARKET_PATTERN,
            must_exist=True,
            exists_in="listed_markets",
        ),
        digits_param("start", minimum=0),
        digits_param("end", minimum=0),
        Param("interval", str, default="1h", text_choices=KLINE_INTERVALS),
        digits_param("limit", default=KLINE_MAX_CANDLES, minimum=1, maximum=KLINE_MAX_CANDLES),
    ),
    validation=ValidationAnswer(200, 0, wording="v1", wrapped=True),
    window=TimeWindow("start", "end", default_end="now", future_end="reject", applies_to="time"),
    summary="Candles of one market, oldest first, at most 1,440 an answer",
)

PUBLIC_OPERATIONS: Final = (MARKETS, KLINE)
