"""The exchange's own records, the same for every account: its daily candles (the prices).

A history here is declared as an account's is (`History`), and the warehouse writes it as it
writes those, under the one name `EXCHANGE_ACCOUNT` stands for instead of an account's: it is
read from a public operation with no key, and no account's record moves its rows.
"""

from __future__ import annotations

from typing import Final

from ._history import OWNER, Column, DailyCandles, History, Monthly
from ._public_operations import KLINE
from ._trade_operations import MARKET_PATTERN

#: The currency prices are told in unless a setting says another.
REFERENCE_CURRENCY: Final = "USDT"


def _price(name: str, what: str) -> Column:
    return Column(name, f"{what} of the day, in the market's money currency", (name,))


DAILY_CANDLES: Final = History(
    name="daily_candles",
    description="One row per spot market and UTC day: the exchange's daily candle (kline 1d)",
    operation=KLINE,
    columns=(
        Column(
            "market",
            "Spot market, <STOCK>_<MONEY>: a price of STOCK in MONEY",
            OWNER,
            pattern=MARKET_PATTERN.pattern,
            form="of the form <STOCK>_<MONEY>",
        ),
        Column("candle_time", "Start of the candle's day, 00:00 UTC", ("time",)),
        _price("open", "First price"),
        _price("close", "Last price"),
        _price("high", "Highest price"),
        _price("low", "Lowest price"),
        Column("volume_stock", "Volume traded, in the stock currency", ("volume_stock",)),
        Column("volume_money", "Volume traded, in the money currency", ("volume_money",)),
        Column("candle_date", "UTC day of the candle (a file holds a month)", day_of="candle_time"),
    ),
    key=("market", "candle_time"),
    # Prices move no holdings.
    flows=(),
    partition=Monthly(time="candle_time", day="candle_date", month_path="candle_month"),
    paging=DailyCandles(param="market", setting="price_markets"),
)

#: The exchange's histories, by name.
EXCHANGE_HISTORIES: Final = {DAILY_CANDLES.name: DAILY_CANDLES}
