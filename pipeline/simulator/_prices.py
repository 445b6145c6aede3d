"""The exchange's public prices: its markets list and each spot market's daily candles.

The markets are `_assets.listed_markets`, the same for every account and region. A day's candle
is drawn from the seed, the market and the day alone: its low and high are the market's
`SpotMarket.band`, which every fill's price is drawn inside (`_trades`), so every fill of any
account lies within its day's candle by construction; its close is drawn inside the band, its
open is the day before's close. A past day's candle is the same whatever the clock; the day the
clock is in has the close of its hour so far and the volume of its elapsed part. Candles begin
at `LISTED_FROM` and end with the clock's day. Only ``1d`` is made: another documented interval
is refused (`interval_refused`).
"""

from __future__ import annotations

import orjson

from ._assets import UNPRICED, SpotMarket, listed_markets
from ._basics import DAY_S, decimal_text, rng
from ._trades import FEE_PLACES, SPOT_FEES

#: 2019-01-01 00:00 UTC: the first day every listed market has a candle of.
LISTED_FROM = 1_546_300_800
#: The one interval the simulator makes candles of, and its length.
DAILY = "1d"

__all__ = ["DAILY", "LISTED_FROM", "UNPRICED", "Prices"]


def _market_record(m: SpotMarket) -> dict[str, object]:
    return {
        "name": m.name,
        "stock": m.base,
        "money": m.quote,
        "stockPrec": str(m.amount_places),
        "moneyPrec": str(m.price[1]),
        "feePrec": str(FEE_PLACES + 4),
        # The fee rates of `_trades`, at 4 places, in percent (2 places fewer).
        "makerFee": decimal_text(SPOT_FEES[1], FEE_PLACES - 2),
        "takerFee": decimal_text(SPOT_FEES[2], FEE_PLACES - 2),
        "minAmount": decimal_text(1, m.amount_places),
        "minTotal": "0",
        "maxTotal": "0",
        "tradesEnabled": True,
        "isCollateral": False,
        "type": "spot",
        "isTradFiFutures": False,
        "delistedAt": None,
    }


class Prices:
    """The markets list and the candles of one simulated exchange (its seed)."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self.markets: dict[str, SpotMarket] = {m.name: m for m in listed_markets()}
        self.markets_body = orjson.dumps([_market_record(m) for m in self.markets.values()])

    def _close(self, market: SpotMarket, day: int, hour: int | None = None) -> int:
        low, high = market.band
        return low + rng(self._seed, "close", market.name, day, hour).randrange(high - low + 1)

    def candle(self, name: str, day: int, now: float) -> list[object]:
        """The candle of day number ``day`` (Unix days) as the kline writes it, at ``now``."""
        market = self.markets[name]
        low, high = market.band
        first = LISTED_FROM // DAY_S
        opened = self._close(market, day - 1) if day > first else self._close(market, day, -1)
        elapsed = min(DAY_S, int(now) - day * DAY_S)
        # The day the clock is in is not over: its close is its hour's so far.
        close = self._close(market, day, None if elapsed == DAY_S else elapsed // 3600)
        # About 20,000 to 2,000,000 USDT's worth a day, at the market's amount places.
        worth = rng(self._seed, "volume", name, day).randint(20_000, 2_000_000)
        if market.quote != "USDT":
            worth = max(1, worth // 84_123)
        places, price_places = market.amount_places, market.price[1]
        stock = worth * 10 ** (places + price_places) // market.price[0] * elapsed // DAY_S
        money = stock * market.price[0]
        return [
            day * DAY_S,
            decimal_text(opened, price_places),
            decimal_text(close, price_places),
            decimal_text(high, price_places),
            decimal_text(low, price_places),
            decimal_text(stock, places),
            decimal_text(money, places + price_places),
        ]

    def days(self, start: int, end: int, limit: int, now: float) -> range:
        """The days whose 00:00 lies in ``start .. end`` (both included), from `LISTED_FROM` to
        the clock's day, the newest ``limit`` of them."""
        first = max(-(-start // DAY_S), LISTED_FROM // DAY_S)
        last = min(end, int(now)) // DAY_S
        return range(max(first, last - limit + 1), last + 1)
