"""A simulated account's data, deterministic from the seed, the scale and a fixed epoch.

Everything a response carries is generated once and kept as serialized JSON bytes, so serving a
page is slicing a list and joining bytes: a benchmark measures the client, not us. The data is
anchored at `EPOCH`, never at the clock: funding history starts ``scale.days`` before it and
grows at its head as the clock passes each 8-hour funding time after it; the ledger (trades,
positions, deposits and withdrawals, conversions, transfers) does the same, and every balance is
what the ledger sums to at the clock's present (`_ledger`). So a day answers the same entries
on every later day (a rerun of it is never refused for shrinking).

Beside the seed, a `Profile` tells one account's data from another's in what a seed cannot draw:
its mining accounts' names, whether hedge mode is on, which markets it trades, its sub-accounts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pipeline.spec import SimClock

from ._assets import COLLATERAL, MAIN, TRADING, holdings
from ._basics import EPOCH, MAIN_PROFILE, Profile, Scale, atoms_text, decimal_text
from ._funding import FundingHistory
from ._investments import Investments, watcher_links
from ._ledger import Ledger

__all__ = ["EPOCH", "Dataset", "Profile", "Scale", "decimal_text"]


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
        self.investments = Investments(
            seed, scale if profile.invests else replace(scale, investments=0), clock
        )
        self.watcher_links = watcher_links(seed, profile)
        self.holdings = holdings(seed, self.investments.tickers, self.funding.markets)
        #: Made a round at a time the first time a request needs it (`Ledger.current`).
        self.ledger = Ledger(
            seed,
            scale,
            clock,
            self.funding.perp,
            self.holdings,
            profile,
            investments=self.investments,
        )

    @property
    def hedge_mode(self) -> bool:
        return self.funding.hedge_mode

    @property
    def mining_accounts(self) -> tuple[str, ...]:
        return tuple(self.watcher_links)

    @property
    def main_balance(self) -> dict[str, Any]:
        """The main balance at the clock's present, as the API answers it: every asset."""
        sums = self.ledger.balances()
        return {t: {"main_balance": atoms_text(sums[(MAIN, t)])} for t in self.holdings.assets}

    @property
    def trading_balance(self) -> dict[str, Any]:
        """The trading balance of every asset (zeros included) at the clock's present."""
        sums = self.ledger.balances()
        out = {}
        for ticker in self.holdings.assets:
            total = sums.get((TRADING, ticker), 0)
            frozen = self.holdings.freeze.get(ticker, 0)
            out[ticker] = {"available": atoms_text(total - frozen), "freeze": atoms_text(frozen)}
        return out

    @property
    def collateral_balance(self) -> dict[str, str]:
        """The collateral balance of each asset held there, as exact decimal text."""
        sums = self.ledger.balances()
        return {
            asset: atoms_text(amount)
            for (part, asset), amount in sums.items()
            if part == COLLATERAL
        }
