"""A simulated account's data, deterministic from the seed, the scale and a fixed epoch.

Everything a response carries is generated once and kept as serialized JSON bytes, so serving a
page is slicing a list and joining bytes: a benchmark measures the client, not us. The data is
anchored at `EPOCH`, never at the clock: funding history starts ``scale.days`` before it and
grows at its head as the clock passes each 8-hour funding time after it (`_funding`), so a day
answers the same entries on every later day (a rerun of it is never refused for shrinking).
Investments and watcher links are made before the epoch (`_investments`).

Beside the seed, a `Profile` tells one account's data from another's in what a seed cannot draw:
its mining accounts' names, whether hedge mode is on, which markets it trades.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._basics import EPOCH, MAIN_PROFILE, Profile, Scale, decimal_text, rng
from ._clock import SimClock
from ._funding import FundingHistory
from ._investments import Investments, watcher_links

__all__ = ["EPOCH", "Dataset", "Profile", "Scale", "decimal_text"]


def _balances(seed: int, tickers: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    draw = rng(seed, "balances")
    main: dict[str, Any] = {}
    trading: dict[str, Any] = {}
    names = list(dict.fromkeys((*tickers, "USDT", "BTC", "ETH", "SHIB", "USDC", "XLM")))
    for i, ticker in enumerate(names):
        if ticker == "SHIB":  # a holding of more than 1e12 with all 18 decimal places
            main[ticker] = {"main_balance": "1234567890123.123456789012345678"}
        elif ticker == "XLM":  # listed with an explicit zero, as the exchange lists some
            main[ticker] = {"main_balance": "0"}
        else:
            main[ticker] = {"main_balance": decimal_text(draw.randint(1, 10**14), i % 9 + 2)}
        if i % 4 == 3:  # zero on the trading side: only a request for this ticker shows it
            trading[ticker] = {"available": "0", "freeze": "0"}
        else:
            trading[ticker] = {
                "available": decimal_text(draw.randint(0, 10**12), 8),
                "freeze": "0" if i % 3 else decimal_text(draw.randint(1, 10**8), 8),
            }
    return main, trading


class Dataset:
    """Everything one simulated account holds."""

    def __init__(
        self, seed: int, scale: Scale, clock: SimClock, profile: Profile = MAIN_PROFILE
    ) -> None:
        self.seed = seed
        self.scale = scale
        self.clock = clock
        self.profile = profile
        self.funding = FundingHistory(seed, scale, clock, profile)
        self.investments = Investments(seed, scale)
        self.main_balance, self.trading_balance = _balances(seed, self.investments.tickers)
        self.watcher_links = watcher_links(seed, profile)

    @property
    def hedge_mode(self) -> bool:
        return self.funding.hedge_mode

    @property
    def mining_accounts(self) -> tuple[str, ...]:
        return tuple(self.watcher_links)
