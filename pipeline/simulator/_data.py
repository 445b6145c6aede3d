"""A simulated account's data, deterministic from the seed, the scale and a fixed epoch.

Everything a response carries is generated here once and kept as serialized JSON bytes, so
serving a page is slicing a list and joining bytes: a benchmark measures the client, not us.
The data is anchored at `EPOCH`, never at the clock: funding history starts ``scale.days`` before
it and grows at its head as the clock passes each 8-hour funding time after it, so a day answers
the same entries on every later day (a rerun of it is never refused for shrinking).
Beside the seed, a `Profile` tells one account's data from another's in what a seed cannot draw:
its mining accounts' names, whether hedge mode is on, which markets it trades.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from pipeline.spec import GLOBAL_BASE_URL

from ._clock import SimClock

FUNDING_INTERVAL_S = 8 * 3600
DAY_S = 86_400
#: The moment the data is anchored at (2026-09-21 14:13 UTC): investments and watcher links are
#: made before it, the funding history's first ``scale.days`` end with the round it falls in.
EPOCH = 1_790_000_000

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
_TICKERS = ("USDT", "BTC", "ETH", "USDC", "TRX", "SOL", "TON", "DOGE", "XRP", "LTC", "ADA", "DOT")


@dataclass(frozen=True, slots=True)
class Profile:
    """What sets an account's data apart beside its seed; the default is the main account's of
    the global region, whose data tests and benchmarks compare with."""

    #: Its mining accounts are ``{miner}-miner`` and ``{miner}-miner-eu``.
    miner: str = "demo"
    #: Whether hedge mode is on (its funding then has a long and a short entry in one market).
    hedge_mode: bool = True
    #: Markets drawn from the known bases by the seed, rather than the first ones in order.
    mixed_markets: bool = False
    #: The site its watcher links point at.
    site: str = GLOBAL_BASE_URL


@dataclass(frozen=True, slots=True)
class Scale:
    """How much data the simulated account holds."""

    markets: int
    days: int
    investments: int
    tickers: int = 4

    @classmethod
    def small(cls) -> Scale:
        return cls(markets=6, days=60, investments=300, tickers=4)

    @classmethod
    def large(cls) -> Scale:
        # > 1,000,000 funding entries; > 10,100 active investments (the offset window bites),
        # yet every (status, ticker) slice stays below it, so splitting reaches them all.
        return cls(markets=250, days=1400, investments=30_000, tickers=8)

    @classmethod
    def parse(cls, text: str) -> Scale:
        """``small``, ``large``, or explicit sizes: ``markets=20,days=90,investments=500``."""
        text = text.strip()
        if text == "small":
            return cls.small()
        if text == "large":
            return cls.large()
        sizes: dict[str, int] = {}
        fields = {"markets", "days", "investments", "tickers"}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            name = name.strip()
            if not sep or name not in fields or not value.strip().isdigit():
                raise ValueError(
                    f"scale {text!r}: expected small, large or sizes like "
                    f"'markets=20,days=90,investments=500,tickers=4', not {part!r}"
                )
            sizes[name] = int(value)
        base = cls.small()
        scale = cls(
            markets=sizes.get("markets", base.markets),
            days=sizes.get("days", base.days),
            investments=sizes.get("investments", base.investments),
            tickers=sizes.get("tickers", base.tickers),
        )
        if scale.markets < 1 or scale.days < 1 or not 1 <= scale.tickers <= len(_TICKERS):
            raise ValueError(f"scale {text!r}: markets and days >= 1, tickers 1..{len(_TICKERS)}")
        return scale


def decimal_text(mantissa: int, scale: int) -> str:
    """The decimal ``mantissa * 10**-scale`` as the exchange writes it (no trailing zeros)."""
    if mantissa == 0:
        return "0"
    sign = "-" if mantissa < 0 else ""
    digits = str(abs(mantissa))
    if scale <= 0:
        return sign + digits + "0" * -scale
    digits = digits.rjust(scale + 1, "0")
    whole, frac = digits[:-scale], digits[-scale:].rstrip("0")
    return f"{sign}{whole}.{frac}" if frac else sign + whole


def _product(*factors: tuple[int, int], max_scale: int = 18) -> tuple[int, int]:
    """Exact product of decimals; beyond ``max_scale`` places it is cut as the exchange would."""
    mantissa, scale = 1, 0
    for m, s in factors:
        mantissa *= m
        scale += s
    if scale > max_scale:
        cut = 10 ** (scale - max_scale)
        mantissa = abs(mantissa) // cut * (1 if mantissa >= 0 else -1)
        scale = max_scale
    return mantissa, scale


def _rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _dumps(value: Any) -> bytes:
    # orjson over-allocates its result; a copy keeps a million records small.
    return bytes(memoryview(orjson.dumps(value)))


_FUNDING_ENTRY = (
    '{"market":"%s","fundingTime":"%s","fundingRate":"%s","fundingAmount":"%s",'
    '"positionAmount":"%s","settlementPrice":"%s","rateCalculatedTime":"%s"}'
)


@dataclass(frozen=True, slots=True)
class _Market:
    name: str
    price: tuple[int, int]
    position: tuple[int, int]


class FundingHistory:
    """Funding entries of every perpetual market, every 8 hours, kept oldest first as JSON bytes.

    With hedge mode on, one market (the first) has a long and a short entry per funding time
    once hedge mode was switched on, half way through the days before the epoch.
    """

    def __init__(
        self, seed: int, scale: Scale, clock: SimClock, profile: Profile = Profile()
    ) -> None:
        self._seed = seed
        self._clock = clock
        self._hedge_mode = profile.hedge_mode
        rng = _rng(seed, "markets")
        known = list(_KNOWN_BASES)
        if profile.mixed_markets:
            _rng(seed, "market-mix").shuffle(known)
        bases = known[: scale.markets]
        while len(bases) < scale.markets:
            bases.append(f"ALT{len(bases):04d}")
        markets = []
        for base in bases:
            if base in _MARKET_SHAPES:
                pm, ps, qm, qs = _MARKET_SHAPES[base]
            else:
                ps = rng.randint(2, 8)
                pm = rng.randint(10**3, 10**7)
                qs = rng.randint(0, 3)
                qm = rng.randint(10, 10**6)
            markets.append(_Market(f"{base}_PERP", (pm, ps), (qm, qs)))
        self.markets: tuple[_Market, ...] = tuple(sorted(markets, key=lambda m: m.name))
        self.market_names: frozenset[str] = frozenset(m.name for m in self.markets)
        #: The market with a long and a short entry once hedge mode is on; None when it is off.
        self.hedged_market = f"{bases[0]}_PERP" if profile.hedge_mode else None
        last = EPOCH // FUNDING_INTERVAL_S
        self.first_round = last - scale.days * 3 + 1
        self.hedge_since_round = self.first_round + (scale.days * 3) // 2
        self._next_round = self.first_round
        self._all: list[bytes] = []
        self._by_market: dict[str, list[bytes]] = {m.name: [] for m in self.markets}

    @property
    def hedge_mode(self) -> bool:
        return self._hedge_mode

    def _round_entries(self, k: int) -> list[tuple[str, bytes]]:
        """(market, entry) of funding round ``k`` in the order the API lists them."""
        rng = _rng(self._seed, "round", k)
        t = k * FUNDING_INTERVAL_S
        funding_time, calculated = str(t), str(t - 300)
        out: list[tuple[str, bytes]] = []
        for i, market in enumerate(self.markets):
            pm, ps = market.price
            draw = rng.random()
            price = (pm + int((draw - 0.5) * pm / 12), ps)
            # A rate of exactly zero now and then; otherwise mostly positive, as on real markets.
            rate = (0, 8) if draw < 0.03 else (int(rng.random() * 120_000) - 30_000, 8)
            qm, qs = market.position
            size = qm * (1 + (k // 9 + i) % 4)
            sides = [size if (k // 21 + i) % 3 else -size]
            if market.name == self.hedged_market and k >= self.hedge_since_round:
                sides = [size, -(size // 2 or 1)]
            price_text, rate_text = decimal_text(*price), decimal_text(*rate)
            for position in sides:
                # Every value is digits, a sign or a dot: formatting needs no JSON escaping.
                entry = _FUNDING_ENTRY % (
                    market.name,
                    funding_time,
                    rate_text,
                    decimal_text(*_product((-position, qs), price, rate)),
                    decimal_text(position, qs),
                    price_text,
                    calculated,
                )
                out.append((market.name, entry.encode()))
        return out

    def current(self) -> None:
        """Generate the rounds up to the clock's present (a no-op between funding times)."""
        last = int(self._clock.now()) // FUNDING_INTERVAL_S
        while self._next_round <= last:
            entries = self._round_entries(self._next_round)
            for name, entry in reversed(entries):
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


class Investments:
    """Fixed plans and the investments made in them, newest first, filterable as the API is."""

    def __init__(self, seed: int, scale: Scale) -> None:
        rng = _rng(seed, "investments")
        self.tickers: tuple[str, ...] = _TICKERS[: scale.tickers]
        plans: list[dict[str, Any]] = []
        for ticker in self.tickers:
            for n in range(4):
                status = (len(plans) % 4) + 1  # every plan status appears
                percent = (rng.randint(100, 2500), 1)
                plans.append(
                    {
                        "id": _uuid(rng),
                        "ticker": ticker,
                        "status": status,
                        "percent": decimal_text(*percent),
                        "duration": (7, 30, 90, 180)[n] * 1440,
                        "interestTicker": ticker if n % 2 == 0 else "USDT",
                        "interestRatio": "1"
                        if n % 2 == 0
                        else decimal_text(rng.randint(1, 10**9), 12),
                        "minInvestment": decimal_text(rng.randint(1, 1000), 2),
                        "maxInvestment": decimal_text(rng.randint(10**6, 10**9), 0),
                        "maxPossibleInvestment": "0"
                        if status == 2
                        else decimal_text(rng.randint(10**5, 10**14), 6),
                    }
                )
        self.plans: tuple[dict[str, Any], ...] = tuple(plans)
        records: list[dict[str, Any]] = []
        start = EPOCH - 720 * DAY_S
        for _ in range(scale.investments):
            plan = plans[rng.randrange(len(plans))]
            created = rng.randint(start, EPOCH - 3600)
            status = 1 if rng.random() < 0.6 else 2  # active, closed
            amount = (rng.randint(10**4, 10**12), rng.randint(0, 8))
            interest = (0, 0) if rng.random() < 0.1 else (rng.randint(1, 10**18), 18)
            records.append(
                {
                    "id": _uuid(rng),
                    "plan": plan,
                    "status": status,
                    "created": created,
                    "updated": min(EPOCH, created + rng.randint(0, 30 * DAY_S)),
                    "paymentTime": created + plan["duration"] * 60,
                    "amount": decimal_text(*amount),
                    "interestPaid": decimal_text(*interest),
                }
            )
        records.sort(key=lambda r: (-r["created"], r["id"]))
        self._records = [(r["id"], r["status"], r["plan"]["ticker"], _dumps(r)) for r in records]
        self.ids: frozenset[str] = frozenset(r[0] for r in self._records)
        self._slices: dict[tuple[int | None, str | None], list[bytes]] = {}

    def select(self, *, id: str | None, ticker: str | None, status: int | None) -> list[bytes]:
        """Every investment matching the filters, newest first (slices are cached)."""
        if id is not None:
            return [
                r[3]
                for r in self._records
                if r[0] == id
                and (ticker is None or r[2] == ticker)
                and (status is None or r[1] == status)
            ]
        key = (status, ticker)
        found = self._slices.get(key)
        if found is None:
            found = [
                r[3]
                for r in self._records
                if (ticker is None or r[2] == ticker) and (status is None or r[1] == status)
            ]
            self._slices[key] = found
        return found

    def all(self) -> list[dict[str, Any]]:
        """Every investment, parsed, newest first."""
        return [orjson.loads(r[3]) for r in self._records]

    def count(self, *, status: int | None = None, ticker: str | None = None) -> int:
        return len(self.select(id=None, ticker=ticker, status=status))


def _balances(seed: int, tickers: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    rng = _rng(seed, "balances")
    main: dict[str, Any] = {}
    trading: dict[str, Any] = {}
    names = list(dict.fromkeys((*tickers, "USDT", "BTC", "ETH", "SHIB", "USDC", "XLM")))
    for i, ticker in enumerate(names):
        if ticker == "SHIB":  # a holding of more than 1e12 with all 18 decimal places
            main[ticker] = {"main_balance": "1234567890123.123456789012345678"}
        elif ticker == "XLM":  # listed with an explicit zero, as the exchange lists some
            main[ticker] = {"main_balance": "0"}
        else:
            main[ticker] = {"main_balance": decimal_text(rng.randint(1, 10**14), i % 9 + 2)}
        if i % 4 == 3:  # zero on the trading side: only a request for this ticker shows it
            trading[ticker] = {"available": "0", "freeze": "0"}
        else:
            trading[ticker] = {
                "available": decimal_text(rng.randint(0, 10**12), 8),
                "freeze": "0" if i % 3 else decimal_text(rng.randint(1, 10**8), 8),
            }
    return main, trading


def _watcher_links(seed: int, profile: Profile) -> dict[str, list[dict[str, Any]]]:
    rng = _rng(seed, "mining")
    accounts = (f"{profile.miner}-miner", f"{profile.miner}-miner-eu")
    out: dict[str, list[dict[str, Any]]] = {}
    for n, account in enumerate(accounts):
        links = []
        for i in range(2 + n):
            link_id = _uuid(rng)
            created = EPOCH - rng.randint(DAY_S, 300 * DAY_S)
            links.append(
                {
                    "id": link_id,
                    "accounts": [account] if i else list(accounts),
                    "name": f"{account} watcher {i + 1}",
                    "link": f"{profile.site}/mining-pool/watcher-link/{link_id}",
                    "permissions": ["dashboard", "workers", "payouts"][: i + 1],
                    # One link never expires.
                    "liveUntil": None if i == 0 else created + 365 * DAY_S,
                    "createdAt": created,
                }
            )
        out[account] = links
    return out


class Dataset:
    """Everything one simulated account holds."""

    def __init__(
        self, seed: int, scale: Scale, clock: SimClock, profile: Profile = Profile()
    ) -> None:
        self.seed = seed
        self.scale = scale
        self.clock = clock
        self.profile = profile
        self.funding = FundingHistory(seed, scale, clock, profile)
        self.investments = Investments(seed, scale)
        self.main_balance, self.trading_balance = _balances(seed, self.investments.tickers)
        self.watcher_links = _watcher_links(seed, profile)

    @property
    def hedge_mode(self) -> bool:
        return self.funding.hedge_mode

    @property
    def mining_accounts(self) -> tuple[str, ...]:
        return tuple(self.watcher_links)
