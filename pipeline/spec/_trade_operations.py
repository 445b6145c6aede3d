"""The account's trading history: its fills, its closed orders, the deals of one order, and its
conversions (docs/api.md, sections 4.9 to 4.12).

The three trade-account operations share the ``/api/v4/trade-account/*`` budget of 12,000 per
10 s with the trading balance; they word their validation messages as the trade engine does
and answer a malformed or unknown market with code 31. Their histories reach back
`HISTORY_MONTHS`; order history refuses an older start, executed history answers nothing older.
"""

from __future__ import annotations

import re
from typing import Final

from ._contract import (
    Field,
    FieldType,
    Grouped,
    Operation,
    Page,
    PageEnvelope,
    Param,
    RateBudget,
    TimeWindow,
    ValidationAnswer,
    digits_param,
)

#: A spot or collateral market name, ``<BASE>_<QUOTE>`` (``BTC_USDT``, ``BTC_PERP``).
MARKET_PATTERN: Final = re.compile(r"^[A-Z0-9]{1,20}_[A-Z0-9]{1,20}$")

#: A fill's ``role``.
ROLES: Final = {1: "maker", 2: "taker"}
#: Order statuses order history answers (docs/api.md, section 3): one of them is final.
ORDER_STATUSES: Final = {
    "FILLED": "fully executed",
    "CANCELED": "canceled before full execution (also when margin or balance ran short)",
    "AUTO_CANCELED_LIQUIDATION": "canceled because its position was liquidated",
    "AUTO_CANCELED_REDUCE_ONLY": "a reduce-only order canceled because its position closed",
    "CANCELED_STP": "canceled by self-trade prevention",
}
#: The ``status`` filter of order history: ``CANCELED`` takes every canceled status above,
#: ``PARTIALLY_FILLED`` the canceled orders that had fills.
ORDER_STATUS_FILTERS: Final = ("ALL", "FILLED", "CANCELED", "PARTIALLY_FILLED")
#: Order types, as order history writes them.
ORDER_TYPES: Final = ("limit", "market", "stock market", "stop limit", "stop market")

_TRADE_BUDGET: Final = RateBudget("trade-account", 12_000)
_ENGINE: Final = ValidationAnswer(422, 30, wording="engine")
_ENGINE_MARKET: Final = ValidationAnswer(422, 31, wording="engine")
_DAY_S: Final = 86_400


def _market(exists_in: str) -> Param:
    return Param("market", str, pattern=MARKET_PATTERN, must_exist=True, exists_in=exists_in)


# --- Records (docs/api.md, sections 2.9 to 2.12) ----------------------------------------------

EXECUTED_DEAL_FIELDS: Final = (
    Field("id", FieldType.INTEGER, meaning="Deal (fill) identifier"),
    Field("clientOrderId", FieldType.STRING, meaning="Client order id of its order; '' if none"),
    Field("time", FieldType.TIMESTAMP_FRACTIONAL, meaning="When it executed"),
    Field("side", FieldType.STRING, meaning="buy or sell: the side of its order"),
    Field("role", FieldType.INTEGER, meaning="1 maker, 2 taker"),
    Field("amount", FieldType.DECIMAL, meaning="Executed amount, in the base (stock) currency"),
    Field("price", FieldType.DECIMAL, meaning="Execution price, in the quote (money) currency"),
    Field("deal", FieldType.DECIMAL, meaning="amount * price, in the quote currency"),
    Field("fee", FieldType.DECIMAL, meaning="Fee charged, in feeAsset"),
    Field("orderId", FieldType.INTEGER, meaning="The order it filled"),
    Field("feeAsset", FieldType.STRING, meaning="Ticker the fee was paid in"),
)

ORDER_FIELDS: Final = (
    Field("amount", FieldType.DECIMAL, meaning="Ordered amount (in quote for a market buy)"),
    Field("price", FieldType.DECIMAL, meaning="Limit price; '0' for market orders"),
    Field("type", FieldType.STRING, meaning="limit, market, stock market, stop limit, stop market"),
    Field("id", FieldType.INTEGER, meaning="Order identifier"),
    Field("clientOrderId", FieldType.STRING, meaning="Client order id; '' if none"),
    Field("side", FieldType.STRING, meaning="buy or sell"),
    Field("ctime", FieldType.TIMESTAMP_FRACTIONAL, meaning="When it was created"),
    Field("ftime", FieldType.TIMESTAMP_FRACTIONAL, meaning="When it reached its final status"),
    Field("dealFee", FieldType.DECIMAL, meaning="Sum of its fills' fees, in feeAsset"),
    Field("dealStock", FieldType.DECIMAL, meaning="Sum of its fills' amounts (base currency)"),
    Field("dealMoney", FieldType.DECIMAL, meaning="Sum of its fills' deals (quote currency)"),
    Field("postOnly", FieldType.BOOLEAN, meaning="Post-only order"),
    Field("ioc", FieldType.BOOLEAN, meaning="Immediate-or-cancel order"),
    Field(
        "activated",
        FieldType.TIMESTAMP,
        optional=True,
        meaning="Stop orders only: when the trigger price was reached",
    ),
    Field("activationPrice", FieldType.DECIMAL, optional=True, meaning="Stop orders only"),
    Field("activationCondition", FieldType.STRING, optional=True, meaning="Stop orders: <= or >="),
    Field("status", FieldType.STRING, meaning="Final status (ORDER_STATUSES)"),
    Field("feeAsset", FieldType.STRING, meaning="Ticker its fees were paid in"),
    Field(
        "positionSide",
        FieldType.STRING,
        optional=True,
        meaning="Collateral orders only: LONG, SHORT or BOTH",
    ),
    Field("rpi", FieldType.BOOLEAN, meaning="Retail price improvement order"),
    Field("reduceOnly", FieldType.BOOLEAN, meaning="Reduce-only order"),
)

ORDER_DEAL_FIELDS: Final = (
    Field("time", FieldType.TIMESTAMP_FRACTIONAL, meaning="When it executed"),
    Field("fee", FieldType.DECIMAL, meaning="Fee charged, in feeAsset"),
    Field("price", FieldType.DECIMAL, meaning="Execution price"),
    Field("amount", FieldType.DECIMAL, meaning="Executed amount, in the base currency"),
    Field("id", FieldType.INTEGER, meaning="Deal (fill) identifier"),
    Field("dealOrderId", FieldType.INTEGER, meaning="The counterparty's order"),
    Field("clientOrderId", FieldType.STRING, meaning="Client order id of the order; '' if none"),
    Field("role", FieldType.INTEGER, meaning="1 maker, 2 taker"),
    Field("deal", FieldType.DECIMAL, meaning="amount * price, in the quote currency"),
    Field("feeAsset", FieldType.STRING, meaning="Ticker the fee was paid in"),
    Field("rpi", FieldType.BOOLEAN, meaning="Retail price improvement deal"),
)

CONVERSION_PATH_FIELDS: Final = (
    Field("from", FieldType.STRING, meaning="Ticker given at this step"),
    Field("to", FieldType.STRING, meaning="Ticker received at this step"),
    Field("rate", FieldType.DECIMAL, meaning="Rate of this step"),
)

CONVERSION_FIELDS: Final = (
    Field("id", FieldType.STRING, meaning="Conversion identifier (digits, increasing)"),
    Field("date", FieldType.TIMESTAMP, meaning="When it was made"),
    Field("give", FieldType.DECIMAL, meaning="Amount given, in the path's first ticker"),
    Field("receive", FieldType.DECIMAL, meaning="Amount received: give * rate"),
    Field("rate", FieldType.DECIMAL, meaning="Received per given"),
    Field(
        "path",
        FieldType.OBJECT_LIST,
        meaning="The steps from the given to the received ticker",
        fields=CONVERSION_PATH_FIELDS,
    ),
)


# --- The operations (docs/api.md, sections 4.9 to 4.12) ---------------------------------------

EXECUTED_HISTORY: Final = Operation(
    name="executed_history",
    method="POST",
    path="/api/v4/trade-account/executed-history",
    private=True,
    budget=_TRADE_BUDGET,
    answer=Grouped(EXECUTED_DEAL_FIELDS, flat_when="market"),
    params=(
        _market("markets"),
        Param("clientOrderId", str, max_length=255),
        digits_param("startDate", minimum=0),
        digits_param("endDate", minimum=0),
        digits_param("offset", default=0, minimum=0),
        digits_param("limit", default=50, minimum=1, maximum=500),
    ),
    validation=_ENGINE,
    unknown_value=_ENGINE_MARKET,
    window=TimeWindow("startDate", "endDate", floor="clamp", applies_to="time"),
    summary="Fills of every market (spot and collateral), newest first; by market without one",
)

ORDER_HISTORY: Final = Operation(
    name="order_history",
    method="POST",
    path="/api/v4/trade-account/order/history",
    private=True,
    budget=_TRADE_BUDGET,
    answer=Grouped(ORDER_FIELDS),
    params=(
        _market("markets"),
        Param("clientOrderId", str, max_length=255),
        digits_param("orderId", minimum=1),
        Param("status", str, default="ALL", text_choices=ORDER_STATUS_FILTERS, fold_case=True),
        digits_param("startDate", minimum=0),
        digits_param("endDate", minimum=0),
        digits_param("offset", default=0, minimum=0),
        digits_param("limit", default=50, minimum=1, maximum=500),
    ),
    validation=_ENGINE,
    unknown_value=_ENGINE_MARKET,
    window=TimeWindow(
        "startDate",
        "endDate",
        max_span_s=31 * _DAY_S,
        floor="reject",
        default_start="month",
        default_end="now",
        applies_to="ftime",
    ),
    summary="Closed orders, newest first by ftime, grouped by market; a 31-day window",
)

ORDER_DEALS: Final = Operation(
    name="order_deals",
    method="POST",
    path="/api/v4/trade-account/order",
    private=True,
    budget=_TRADE_BUDGET,
    answer=Page(ORDER_DEAL_FIELDS),
    params=(
        digits_param("orderId", required=True),
        digits_param("offset", default=0, minimum=0),
        digits_param("limit", default=50, minimum=1),
    ),
    validation=_ENGINE,
    summary="The fills of one order, oldest first; an unknown order is an empty page",
)

CONVERT_HISTORY: Final = Operation(
    name="convert_history",
    method="POST",
    path="/api/v4/convert/history",
    private=True,
    # Under no published scope; the endpoint's own text says 10,000 per 10 s.
    budget=RateBudget("convert", 10_000),
    answer=PageEnvelope(CONVERSION_FIELDS, total=True),
    params=(
        Param("fromTicker", str, must_exist=True, exists_in="currencies"),
        Param("toTicker", str, must_exist=True, exists_in="currencies"),
        # Typed string (Unix seconds) by the docs; clients send strings and integers alike.
        digits_param("from", minimum=0),
        digits_param("to", minimum=0),
        Param("quoteId", str),
        digits_param("limit", default=100, minimum=1, maximum=100),
        digits_param("offset", default=0, minimum=0),
    ),
    validation=ValidationAnswer(422, 30, wording="keys"),
    window=TimeWindow(
        "from",
        "to",
        max_span_s=30 * _DAY_S,
        floor="reject",
        default_start="now",
        default_end="now",
        applies_to="date",
    ),
    summary="Conversions, newest first by id; a 30-day window that defaults to now",
)

TRADE_OPERATIONS: Final = (EXECUTED_HISTORY, ORDER_HISTORY, ORDER_DEALS, CONVERT_HISTORY)
