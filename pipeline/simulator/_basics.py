"""What every part of the simulated data shares: the epoch, the scale, an account's profile,
exact decimals and the seeded random streams.

Amounts are exact decimals: a ``(mantissa, scale)`` pair stands for ``mantissa * 10**-scale``
and is written as the exchange writes it (`decimal_text`); the ledger sums them as integers of
10**-18 (`atoms`), never as floats. Times of records are integer microseconds (`time_text`).
"""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from pipeline.spec import GLOBAL_BASE_URL

#: Funding is paid every 8 hours; the ledger is made a round (the 8 hours up to one) at a time.
FUNDING_INTERVAL_S = 8 * 3600
DAY_S = 86_400
#: The moment the data is anchored at (2026-09-21 14:13 UTC): investments and watcher links are
#: made before it, the funding history's first ``scale.days`` end with the round it falls in,
#: and every balance is what `_assets` says it is at this moment.
EPOCH = 1_790_000_000
#: Decimal places of the ledger's integers: every amount has at most this many.
ATOM_PLACES = 18

#: Powers of ten, ``TEN[n] == 10**n`` (typed as integers, as ``10 ** n`` is not).
TEN: tuple[int, ...] = tuple(10**n for n in range(2 * ATOM_PLACES + 4))
#: An exact decimal, ``mantissa * 10**-scale``.
Decimal = tuple[int, int]


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
    #: Its transfers with other accounts of the same owner (`_flows.Pairing`): a main account's
    #: with each sub-account, a sub-account's with its main account.
    pairings: tuple[Any, ...] = ()
    #: Whether it holds fixed-term investments. A sub-account does not: its key has no B2B access
    #: to read them, so their ends would move its main balance with nothing to tell why.
    invests: bool = True


#: The main account of the global region: the profile when none is given.
MAIN_PROFILE = Profile()


@dataclass(frozen=True, slots=True)
class Scale:
    """How much data the simulated account holds."""

    markets: int
    days: int
    investments: int
    tickers: int = 4
    #: Spot fills a day: the trading volume (conversions and deposits follow it).
    fills: int = 40

    @classmethod
    def small(cls) -> Scale:
        return cls(markets=6, days=60, investments=300, tickers=4, fills=40)

    @classmethod
    def large(cls) -> Scale:
        # > 1,000,000 funding entries; > 10,100 active investments (the offset window bites),
        # yet every (status, ticker) slice stays below it, so splitting reaches them all;
        # > 500,000 fills over some 260 markets, > 10,000 deposits and withdrawals.
        return cls(markets=250, days=1400, investments=30_000, tickers=8, fills=3_000)

    @classmethod
    def parse(cls, text: str) -> Scale:
        """``small``, ``large``, or explicit sizes: ``markets=20,days=90,investments=500``."""
        text = text.strip()
        if text == "small":
            return cls.small()
        if text == "large":
            return cls.large()
        sizes: dict[str, int] = {}
        fields = {"markets", "days", "investments", "tickers", "fills"}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            name = name.strip()
            if not sep or name not in fields or not value.strip().isdigit():
                raise ValueError(
                    f"scale {text!r}: expected small, large or sizes like "
                    f"'markets=20,days=90,investments=500,tickers=4,fills=40', not {part!r}"
                )
            sizes[name] = int(value)
        base = cls.small()
        scale = cls(
            markets=sizes.get("markets", base.markets),
            days=sizes.get("days", base.days),
            investments=sizes.get("investments", base.investments),
            tickers=sizes.get("tickers", base.tickers),
            fills=sizes.get("fills", base.fills),
        )
        if scale.markets < 1 or scale.days < 1 or not 1 <= scale.tickers <= TICKER_COUNT:
            raise ValueError(f"scale {text!r}: markets and days >= 1, tickers 1..{TICKER_COUNT}")
        return scale


#: How many tickers an account's investment plans can be in (`_assets.TICKERS`).
TICKER_COUNT = 12


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


def product(*factors: Decimal, max_scale: int = ATOM_PLACES) -> Decimal:
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


def atoms(value: Decimal) -> int:
    """The decimal as an integer of 10**-18 (exact: no amount has more places)."""
    mantissa, scale = value
    if scale > ATOM_PLACES:
        raise ValueError(f"{decimal_text(*value)} has more than {ATOM_PLACES} decimal places")
    return mantissa * TEN[ATOM_PLACES - scale]


def atoms_text(value: int) -> str:
    """An integer of 10**-18 as the exchange writes the decimal."""
    return decimal_text(value, ATOM_PLACES)


def time_text(micros: int) -> str:
    """A time in microseconds as a JSON number of seconds with six places (1593342324.613711)."""
    seconds, fraction = divmod(micros, 1_000_000)
    return f"{seconds}.{fraction:06d}"


def rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def new_uuid(draw: random.Random) -> str:
    return str(uuid.UUID(int=draw.getrandbits(128), version=4))


def time_uuid(micros: int, draw: random.Random) -> str:
    """A UUID whose first 48 bits are the time in milliseconds (UUIDv7's layout): ids of one
    history sort as their times do."""
    rest = draw.getrandbits(80)
    value = (micros // 1000) << 80 | rest
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def dumps(value: Any) -> bytes:
    # orjson over-allocates its result; a copy keeps a million records small.
    return bytes(memoryview(orjson.dumps(value)))
