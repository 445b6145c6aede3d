"""The account's trading history: its fills, its closed orders and its conversions, each
declared once. The exchange answers them for `HISTORY_MONTHS` only: the warehouse is their
archive (`History.forgotten`).
"""

from __future__ import annotations

from typing import Final

from ._histories import PERP_MARKET, TICKER, TICKER_FORM
from ._history import OWNER, Column, Flow, History, Monthly, TimeWindows
from ._trade_operations import (
    CONVERT_HISTORY,
    EXECUTED_HISTORY,
    MARKET_PATTERN,
    ORDER_HISTORY,
    ORDER_STATUSES,
    ORDER_TYPES,
    ROLES,
)

#: A market's name as a column holds it (spot ``BTC_USDT`` and collateral ``BTC_PERP``).
MARKET: Final = MARKET_PATTERN.pattern
MARKET_FORM: Final = "of the form <BASE>_<QUOTE>"
SIDES: Final = ("buy", "sell")
POSITION_SIDES_OF_ORDERS: Final = ("LONG", "SHORT", "BOTH")


#: A fill of a spot market: a collateral fill's fee is its position event's, counted there.
_SPOT: Final = f"NOT regexp_matches(market, '{PERP_MARKET}')"
#: A fill's sign for its base: a buy adds it, a sale takes it.
_SIDE_SIGN: Final = "CASE side WHEN 'buy' THEN 1 WHEN 'sell' THEN -1 END"


def market(source: tuple[str, ...] = OWNER) -> Column:
    """The market a record belongs to: the key it is listed under, unless named in it."""
    return Column(
        "market",
        "Market, <BASE>_<QUOTE> (spot) or <BASE>_PERP",
        source,
        pattern=MARKET,
        form=MARKET_FORM,
    )


def ticker(name: str, description: str, *source: str | int) -> Column:
    return Column(name, description, source, pattern=TICKER, form=TICKER_FORM)


def kept(name: str, description: str, source: str, choices: tuple[str, ...]) -> Column:
    """A text whose documented values are ``choices``; another lands as received, named."""
    return Column(name, description, (source,), choices=choices, unlisted="keep")


TRADES: Final = History(
    name="trades",
    description="One row per fill (executed deal) of the account, spot and collateral",
    operation=EXECUTED_HISTORY,
    columns=(
        market(),
        Column("trade_id", "Fill identifier (the exchange's deal id)", ("id",)),
        Column("order_id", "The order it filled (orders.order_id)", ("orderId",)),
        Column(
            "client_order_id",
            "The order's client order id; '' if none",
            ("clientOrderId",),
            allow_empty=True,
        ),
        Column("trade_time", "When it executed, to the microsecond", ("time",)),
        kept("side", "buy or sell: its order's side", "side", SIDES),
        Column("role", "1 maker, 2 taker", ("role",), labels=ROLES, unlisted="keep"),
        Column("amount", "Executed amount, in the base currency", ("amount",)),
        Column("price", "Execution price, in the quote currency", ("price",)),
        Column("deal", "amount * price, in the quote currency", ("deal",)),
        Column("fee", "Fee charged, in fee_asset", ("fee",)),
        ticker("fee_asset", "Ticker the fee was paid in", "feeAsset"),
        Column("trade_date", "UTC day of trade_time (a file holds a month)", day_of="trade_time"),
    ),
    key=("trade_id",),
    flows=(
        Flow("spot_trades", "split_part(market, '_', 1)", f"{_SIDE_SIGN} * amount", "exact", _SPOT),
        Flow("spot_trades", "split_part(market, '_', 2)", f"-{_SIDE_SIGN} * deal", "exact", _SPOT),
        Flow("spot_trades", "fee_asset", "-fee", "exact", _SPOT, fee="-fee"),
    ),
    partition=Monthly(time="trade_time", day="trade_date", month_path="trade_month"),
    paging=TimeWindows(identity=("id",)),
)

ORDERS: Final = History(
    name="orders",
    description="One row per closed order (filled or canceled), by the time it closed",
    operation=ORDER_HISTORY,
    columns=(
        market(),
        Column("order_id", "Order identifier", ("id",)),
        Column(
            "client_order_id", "Client order id; '' if none", ("clientOrderId",), allow_empty=True
        ),
        kept("type", "limit, market, stock market, stop limit, stop market", "type", ORDER_TYPES),
        kept("side", "buy or sell", "side", SIDES),
        kept("status", "Final status (FILLED, CANCELED, ...)", "status", tuple(ORDER_STATUSES)),
        Column("amount", "Ordered amount (in the quote currency for a market buy)", ("amount",)),
        Column("price", "Limit price; 0 for market orders", ("price",)),
        Column("deal_stock", "Sum of its fills' amounts (base currency)", ("dealStock",)),
        Column("deal_money", "Sum of its fills' deals (quote currency)", ("dealMoney",)),
        Column("deal_fee", "Sum of its fills' fees, in fee_asset", ("dealFee",)),
        ticker("fee_asset", "Ticker its fees were paid in", "feeAsset"),
        Column("created_at", "When it was placed, to the microsecond", ("ctime",)),
        Column("finished_at", "When it closed, to the microsecond", ("ftime",)),
        Column("post_only", "Post-only order", ("postOnly",)),
        Column("ioc", "Immediate-or-cancel order", ("ioc",)),
        Column("rpi", "Retail price improvement order", ("rpi",)),
        Column("reduce_only", "Reduce-only order", ("reduceOnly",)),
        Column("activated_at", "Stop orders: when triggered", ("activated",), nullable=True),
        Column(
            "activation_price", "Stop orders: trigger price", ("activationPrice",), nullable=True
        ),
        Column(
            "activation_condition",
            "Stop orders: <= or >=",
            ("activationCondition",),
            nullable=True,
        ),
        Column(
            "position_side",
            "Collateral orders: LONG, SHORT or BOTH",
            ("positionSide",),
            nullable=True,
            choices=POSITION_SIDES_OF_ORDERS,
            unlisted="keep",
        ),
        Column(
            "finished_date", "UTC day of finished_at (a file holds a month)", day_of="finished_at"
        ),
    ),
    key=("order_id",),
    # What an order moves, its fills (trades) tell.
    flows=(),
    partition=Monthly(time="finished_at", day="finished_date", month_path="finished_month"),
    paging=TimeWindows(identity=("id",)),
)

CONVERSIONS: Final = History(
    name="conversions",
    description="One row per conversion (Convert) of one ticker into another",
    operation=CONVERT_HISTORY,
    columns=(
        Column(
            "conversion_id", "Conversion identifier", ("id",), pattern=r"^[0-9]+$", form="digits"
        ),
        Column("converted_at", "When it was made, to the second", ("date",)),
        ticker("give_ticker", "Ticker given (the first step's)", "path", 0, "from"),
        ticker("receive_ticker", "Ticker received (the last step's)", "path", -1, "to"),
        Column("give", "Amount given, in give_ticker", ("give",)),
        Column("receive", "Amount received, in receive_ticker: give * rate", ("receive",)),
        Column("rate", "Received per given", ("rate",)),
        Column("path", "The steps from the given to the received ticker, as JSON", ("path",)),
        Column(
            "converted_date",
            "UTC day of converted_at (a file holds a month)",
            day_of="converted_at",
        ),
    ),
    key=("conversion_id",),
    flows=(
        Flow("conversions", "give_ticker", "-give", "stamped"),
        Flow("conversions", "receive_ticker", "receive", "stamped"),
    ),
    partition=Monthly(time="converted_at", day="converted_date", month_path="converted_month"),
    paging=TimeWindows(identity=("id",)),
)
