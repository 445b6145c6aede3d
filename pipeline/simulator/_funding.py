"""The account's perpetual markets and their funding rounds: the funding history, and the
positions the ledger derives from it (`_positions`).

Each round ``k`` (at ``k * 8 h``) gives every market a settlement price, a rate and the
account's position: ``Round`` holds them as numbers, `FundingHistory` writes them as the API's
entries. The entries are what they always were for a seed: tests and benchmarks depend on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import orjson

from pipeline.spec import SimClock

from ._basics import (
    ATOM_PLACES,
    EPOCH,
    FUNDING_INTERVAL_S,
    MAIN_PROFILE,
    Decimal,
    Profile,
    Scale,
    decimal_text,
    rng,
)

# Bases of the perpetual markets: real names first, then made-up ones as the scale asks.
_KNOWN_BASES = ("BTC", "ETH", "PEPE", "SOL", "XRP", "DOGE", "TON", "ADA", "LTC", "SHIB", "LINK")
# (price mantissa, price scale, position mantissa, position scale) of the known bases.
_MARKET_SHAPES: dict[str, tuple[int, int, int, int]] = {
    "BTC": (8_412_350, 2, 25_000, 4),
    "ETH": (312_045, 2, 42_000, 4),
    "SOL": (14_233, 2, 1_200, 1),
    "XRP": (523_114, 6, 250_000, 0),
    "DOGE": (1_234_567, 7, 5_000_000, 0),
    "TON": (51_870, 4, 8_000, 1),
    "ADA": (4_521, 4, 120_000, 0),
    "LTC": (8_402, 2, 3_510, 2),
    # Meme coins: positions of 1e12 and more, prices with many decimal places.
    "PEPE": (1_234_567, 11, 1_523_456_789_017, 0),
    "SHIB": (2_345_678, 11, 2_750_123_456_789, 0),
    "LINK": (14_523, 3, 755, 1),
}

_FUNDING_ENTRY = (
    '{"market":"%s","fundingTime":"%s","fundingRate":"%s","fundingAmount":"%s",'
    '"positionAmount":"%s","settlementPrice":"%s","rateCalculatedTime":"%s"}'
)


@dataclass(frozen=True, slots=True)
class PerpMarket:
    name: str
    price: Decimal
    position: Decimal


class Round(NamedTuple):
    """Funding round ``k``, as numbers: each market's settlement price and rate (mantissas at
    the market's price scale and 10**-8), and its entries in the order the API lists them (a
    market's long before its short): (market, position, amount), the position in the market's
    position scale (negative when short), the amount paid at `PerpMarkets.amount_scales`."""

    k: int
    prices: list[int]
    rates: list[int]
    entries: list[tuple[int, int, int]]


class PerpMarkets:
    """The account's perpetual markets, and the funding rounds of its positions in them.

    With hedge mode on, one market (the first base) has a long and a short entry per funding
    time once hedge mode was switched on, half way through the days before the epoch.
    """

    def __init__(self, seed: int, scale: Scale, profile: Profile = MAIN_PROFILE) -> None:
        self._seed = seed
        self.hedge_mode = profile.hedge_mode
        draw = rng(seed, "markets")
        known = list(_KNOWN_BASES)
        if profile.mixed_markets:
            rng(seed, "market-mix").shuffle(known)
        bases = known[: scale.markets]
        while len(bases) < scale.markets:
            bases.append(f"ALT{len(bases):04d}")
        markets = []
        for base in bases:
            if base in _MARKET_SHAPES:
                pm, ps, qm, qs = _MARKET_SHAPES[base]
            else:
                ps = draw.randint(2, 8)
                pm = draw.randint(10**3, 10**7)
                qs = draw.randint(0, 3)
                qm = draw.randint(10, 10**6)
            markets.append(PerpMarket(f"{base}_PERP", (pm, ps), (qm, qs)))
        self.markets: tuple[PerpMarket, ...] = tuple(sorted(markets, key=lambda m: m.name))
        self.names: tuple[str, ...] = tuple(m.name for m in self.markets)
        #: The market with a long and a short entry once hedge mode is on; None when it is off.
        self.hedged_market = f"{bases[0]}_PERP" if profile.hedge_mode else None
        self._hedged = self.names.index(self.hedged_market) if self.hedged_market else -1
        #: Decimal places of each market's funding amounts: price, position and rate places,
        #: at most 18.
        self.amount_scales = tuple(
            min(ATOM_PLACES, m.price[1] + m.position[1] + 8) for m in self.markets
        )
        self._position_texts: dict[tuple[int, int], str] = {}
        self._shapes = tuple(
            (m.price[0], m.position[0], 10 ** max(0, m.price[1] + m.position[1] + 8 - ATOM_PLACES))
            for m in self.markets
        )
        last = EPOCH // FUNDING_INTERVAL_S
        self.first_round = last - scale.days * 3 + 1
        self.hedge_since_round = self.first_round + (scale.days * 3) // 2

    def changes(self, k: int) -> bool:
        """Whether round ``k``'s positions may differ from the round before's: sizes change
        every 9 rounds, sides every 21, and all at the first round and the switch to hedge
        mode."""
        return (
            k % 9 == 0
            or k % 21 == 0
            or k == self.first_round
            or (self.hedge_mode and k == self.hedge_since_round)
        )

    def hedged(self, k: int) -> bool:
        """Whether round ``k`` falls in hedge mode (a long and a short in the hedged market)."""
        return self.hedge_mode and k >= self.hedge_since_round

    def round(self, k: int) -> Round:
        """Funding round ``k``, drawn from the seed alone (every entry's amount is
        ``-position * price * rate``, cut to 18 places as the exchange cuts it)."""
        random = rng(self._seed, "round", k).random
        prices, rates, entries = [], [], []
        by_nine, by_21 = k // 9, k // 21
        hedged = self._hedged if self.hedged(k) else -1
        for i, (pm, qm, cut) in enumerate(self._shapes):
            chance = random()
            price = pm + int((chance - 0.5) * pm / 12)
            # A rate of exactly zero now and then; otherwise mostly positive, as on real markets.
            rate = 0 if chance < 0.03 else int(random() * 120_000) - 30_000
            size = qm * (1 + (by_nine + i) % 4)
            prices.append(price)
            rates.append(rate)
            if i == hedged:
                short = -(size // 2 or 1)
                entries.append((i, size, _cut(-size * price * rate, cut)))
                entries.append((i, short, _cut(-short * price * rate, cut)))
            else:
                position = size if (by_21 + i) % 3 else -size
                entries.append((i, position, _cut(-position * price * rate, cut)))
        return Round(k, prices, rates, entries)

    def entries(self, k: int) -> list[tuple[str, bytes]]:
        """(market, entry) of funding round ``k`` in the order the API lists them."""
        r = self.round(k)
        t = k * FUNDING_INTERVAL_S
        funding_time, calculated = str(t), str(t - 300)
        names, scales, positions = self.names, self.amount_scales, self._position_texts
        out = []
        for i, position, amount in r.entries:
            market = self.markets[i]
            size = positions.get((i, position))
            if size is None:  # a market's positions take a few values: written once each
                size = positions[(i, position)] = decimal_text(position, market.position[1])
            # Every value is digits, a sign or a dot: formatting needs no JSON escaping.
            text = _FUNDING_ENTRY % (
                names[i],
                funding_time,
                decimal_text(r.rates[i], 8),
                decimal_text(amount, scales[i]),
                size,
                decimal_text(r.prices[i], market.price[1]),
                calculated,
            )
            out.append((names[i], text.encode()))
        return out


def _cut(mantissa: int, cut: int) -> int:
    """The mantissa cut by ``cut`` (a power of ten) toward zero, as `_basics.product` cuts."""
    if cut == 1:
        return mantissa
    return mantissa // cut if mantissa >= 0 else -(-mantissa // cut)


class FundingHistory:
    """Funding entries of every perpetual market, every 8 hours, kept oldest first as JSON bytes."""

    def __init__(
        self, seed: int, scale: Scale, clock: SimClock, profile: Profile = MAIN_PROFILE
    ) -> None:
        self._clock = clock
        self.perp = PerpMarkets(seed, scale, profile)
        self.markets = self.perp.markets
        self.market_names: frozenset[str] = frozenset(self.perp.names)
        self.hedged_market = self.perp.hedged_market
        self.first_round = self.perp.first_round
        self.hedge_since_round = self.perp.hedge_since_round
        self._next_round = self.first_round
        self._all: list[bytes] = []
        self._by_market: dict[str, list[bytes]] = {m.name: [] for m in self.markets}

    @property
    def hedge_mode(self) -> bool:
        return self.perp.hedge_mode

    def current(self) -> None:
        """Generate the rounds up to the clock's present (a no-op between funding times)."""
        last = int(self._clock.now()) // FUNDING_INTERVAL_S
        while self._next_round <= last:
            for name, entry in reversed(self.perp.entries(self._next_round)):
                self._all.append(entry)
                self._by_market[name].append(entry)
            self._next_round += 1

    def __len__(self) -> int:
        self.current()
        return len(self._all)

    def page(self, market: str | None, offset: int, limit: int) -> list[bytes]:
        """Entries ``offset .. offset+limit`` counted from the newest."""
        self.current()
        entries = self._all if market is None else self._by_market[market]
        hi = len(entries) - offset
        if hi <= 0:
            return []
        return entries[max(0, hi - limit) : hi][::-1]

    def newest_first(self, market: str | None = None) -> list[dict[str, str]]:
        """Every entry, parsed, in API order: the truth a test compares a walk with."""
        self.current()
        entries = self._all if market is None else self._by_market[market]
        return [orjson.loads(e) for e in reversed(entries)]
