"""The currencies the simulated exchange lists, and what one account holds of them at the epoch.

Balances are anchored at `EPOCH`: `Holdings` says what the main, trading and collateral balances
of each asset are at that moment, and the ledger adds what happened since (or takes away what
happened between an earlier clock and the epoch). So the balances tests rely on hold at the
epoch whatever the ledger holds: SHIB's main balance of 1234567890123.123456789012345678 (13
integer digits and all 18 decimals), XLM listed with an explicit zero (no record ever moves it),
and every fourth asset with nothing on the trading side (never traded on spot, so only a
request naming it shows its zero). The other anchors are large beside what the account trades,
so no balance goes below zero for decades of clock.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ._basics import ATOM_PLACES, Decimal, atoms, rng
from ._funding import PerpMarket

#: ticker -> (full name, price in USDT, decimal places of its amounts): what the exchange lists.
CURRENCIES: dict[str, tuple[str, Decimal, int]] = {
    "USDT": ("Tether US", (1, 0), 6),
    "BTC": ("Bitcoin", (8_412_350, 2), 8),
    "ETH": ("Ethereum", (312_045, 2), 8),
    "USDC": ("USD Coin", (10_001, 4), 6),
    "TRX": ("TRON", (251_234, 6), 6),
    "SOL": ("Solana", (14_233, 2), 8),
    "TON": ("Toncoin", (51_870, 4), 8),
    "DOGE": ("Dogecoin", (1_234_567, 7), 8),
    "XRP": ("Ripple", (523_114, 6), 6),
    "LTC": ("Litecoin", (8_402, 2), 8),
    "ADA": ("Cardano", (4_521, 4), 6),
    "DOT": ("Polkadot", (45_123, 4), 8),
    "SHIB": ("Shiba Inu", (2_345_678, 11), 2),
    "XLM": ("Stellar", (112_345, 6), 7),
    "PEPE": ("Pepe", (1_234_567, 11), 2),
    "LINK": ("Chainlink", (14_523, 3), 8),
}
#: Networks of the multi-network currencies (a transaction of another one has network null).
NETWORKS: dict[str, tuple[str, ...]] = {"USDT": ("TRC20", "ERC20", "BEP20"), "USDC": ("ERC20",)}
#: Collateral is settled in this ticker: funding, realized P&L and collateral trade fees.
SETTLEMENT = "USDT"
#: Assets whose balance only moves from the main balance: stablecoins are not traded on spot.
_STABLE = frozenset({"USDT", "USDC"})
#: Balance components, as the ledger keys its sums.
MAIN, TRADING, COLLATERAL = "main", "trading", "collateral"


@dataclass(frozen=True, slots=True)
class SpotMarket:
    name: str
    base: str
    quote: str
    #: The price it trades around, at its price places.
    price: Decimal
    #: Places of an order's amount: with the price's, at most 10, so that a fill, its deal and
    #: its fee, and the second leg's amount (less a fee of 4 places), stay within 18 places.
    amount_places: int

    @property
    def band(self) -> tuple[int, int]:
        """The lowest and highest price it ever trades at (at its price places): a twentieth of
        its price either side, and a unit more. Every fill's price is drawn inside it
        (`_trades.near`), and every day's candle spans it (`_prices`)."""
        price = self.price[0]
        reach = price // 20 + 1
        return max(1, price - reach), price + reach


def usdt_amount(ticker: str, value: int, draw: random.Random) -> Decimal:
    """About ``value`` USDT worth of ``ticker``, at its decimal places (never zero)."""
    _, (pm, ps), places = CURRENCIES[ticker]
    worth = value * 10**6 + draw.randint(0, 10**6 - 1)  # value with six random places
    return max(1, worth * 10 ** (ps + places) // (pm * 10**6)), places


@dataclass(frozen=True, slots=True)
class Holdings:
    """What one account holds at the epoch, and what it trades."""

    #: Its assets, in the order the main balance lists them.
    assets: tuple[str, ...]
    #: Assets it never trades on spot: their trading balance is zero.
    untraded: frozenset[str]
    #: (component, asset) -> balance at the epoch, in atoms (10**-18).
    anchors: dict[tuple[str, str], int]
    #: Trading balance frozen in open orders, per asset (constant: it is never traded away).
    freeze: dict[str, int]
    spot_markets: tuple[SpotMarket, ...]
    #: Assets deposits, withdrawals, conversions and transfers move (all but XLM).
    movable: tuple[str, ...]


def holdings(seed: int, tickers: Sequence[str], perp: Sequence[PerpMarket]) -> Holdings:
    """An account's holdings from its seed, its investment tickers and its perpetual markets."""
    draw = rng(seed, "balances")
    assets = tuple(dict.fromkeys((*tickers, "USDT", "BTC", "ETH", "SHIB", "USDC", "XLM")))
    untraded = frozenset(t for i, t in enumerate(assets) if i % 4 == 3) | {"XLM"}
    anchors: dict[tuple[str, str], int] = {}
    freeze: dict[str, int] = {}
    for i, ticker in enumerate(assets):
        if ticker == "SHIB":  # a holding of more than 1e12 with all 18 decimal places
            anchors[(MAIN, ticker)] = 1_234_567_890_123_123_456_789_012_345_678
        elif ticker == "XLM":  # listed with an explicit zero, as the exchange lists some
            anchors[(MAIN, ticker)] = 0
        else:
            anchors[(MAIN, ticker)] = atoms(usdt_amount(ticker, draw.randint(10**6, 10**7), draw))
        if ticker in untraded:  # zero on the trading side: only a request for it shows it
            anchors[(TRADING, ticker)] = 0
            continue
        trading = atoms(usdt_amount(ticker, draw.randint(2 * 10**6, 2 * 10**7), draw))
        anchors[(TRADING, ticker)] = trading
        # Some assets have a part frozen in open orders (a hundredth, at 8 places).
        freeze[ticker] = 0 if i % 3 else trading // 100 // 10**10 * 10**10
    # Collateral: what the funding and the positions of every market could ever take, 50 times
    # over (the largest notional, a move of the price of a twelfth, funding and fees).
    notional = sum(
        4 * m.position[0] * m.price[0] * 10 ** (ATOM_PLACES - m.position[1] - m.price[1])
        for m in perp
    )
    anchors[(COLLATERAL, SETTLEMENT)] = 50 * notional + atoms((draw.randint(1, 10**12), 6))
    anchors[(COLLATERAL, "BTC")] = atoms((draw.randint(10**7, 10**9), 8))
    anchors[(COLLATERAL, "ETH")] = atoms((draw.randint(10**8, 10**10), 8))
    return Holdings(
        assets=assets,
        untraded=untraded,
        anchors=anchors,
        freeze=freeze,
        spot_markets=_spot_markets(assets, untraded),
        movable=tuple(t for t in assets if t != "XLM"),
    )


def _spot_markets(assets: Sequence[str], untraded: frozenset[str]) -> tuple[SpotMarket, ...]:
    """Each traded asset against USDT, and those worth 0.0001 BTC or more against BTC."""
    bases = [t for t in assets if t not in untraded and t not in _STABLE]
    markets = [_market(base, "USDT") for base in bases]
    if "BTC" in bases:
        crosses = [_market(base, "BTC") for base in bases if base != "BTC"]
        markets += [m for m in crosses if m.price[0] >= 10_000]
    return tuple(sorted(markets, key=lambda m: m.name))


#: The held asset no market prices: held at zero, never traded or moved.
UNPRICED = "XLM"


def listed_markets() -> tuple[SpotMarket, ...]:
    """The spot markets the exchange lists, whichever account trades them: each currency but the
    reference and `UNPRICED` against USDT, and the crosses to BTC an account would trade; so
    every account's `Holdings.spot_markets` are among them, alike."""
    bases = [t for t in CURRENCIES if t not in ("USDT", UNPRICED)]
    stable = [_market(base, "USDT") for base in bases if base in _STABLE]
    return tuple(sorted((*_spot_markets(bases, frozenset()), *stable), key=lambda m: m.name))


def _market(base: str, quote: str) -> SpotMarket:
    _, (bm, bs), _ = CURRENCIES[base]
    _, (qm, qs), _ = CURRENCIES[quote]
    places = 8 if quote != "USDT" else min(8, max(2, bs))
    # base's price in quote, at ``places``: bm/10**bs / (qm/10**qs)
    price = bm * 10 ** (places + qs) // (qm * 10**bs)
    return SpotMarket(f"{base}_{quote}", base, quote, (max(price, 1), places), 10 - places)
