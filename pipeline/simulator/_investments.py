"""What an account holds that the clock does not move: its fixed-term investments and the
watcher links of its mining accounts, all made before the epoch.

Investments are served newest first and filtered as the API filters them; their slices are
cached. Their amounts and interest fall before the epoch, so the ledger's balances at the epoch
already hold them (`_assets`); nothing about them changes after it.
"""

from __future__ import annotations

from typing import Any

import orjson

from ._assets import CURRENCIES, usdt_amount
from ._basics import (
    DAY_S,
    EPOCH,
    TEN,
    Decimal,
    Profile,
    Scale,
    decimal_text,
    dumps,
    new_uuid,
    rng,
)

#: Tickers an account's investment plans can be in, the first ``scale.tickers`` of them.
TICKERS = ("USDT", "BTC", "ETH", "USDC", "TRX", "SOL", "TON", "DOGE", "XRP", "LTC", "ADA", "DOT")


class Investments:
    """Fixed plans and the investments made in them, newest first, filterable as the API is.

    Each is sized as the account's balances are (some 100 to 50,000 USDT worth, at its currency's
    places), and its status is its term's at the epoch: an active one was made within its plan's
    duration before the epoch (its payment time after it), a closed one's term ended before the
    epoch, when it was last updated."""

    def __init__(self, seed: int, scale: Scale) -> None:
        draw = rng(seed, "investments")
        self.tickers: tuple[str, ...] = TICKERS[: scale.tickers]
        plans: list[dict[str, Any]] = []
        #: Each plan's yearly percent and interest ratio, by its id.
        terms: dict[str, tuple[Decimal, Decimal]] = {}
        for ticker in self.tickers:
            price = CURRENCIES[ticker][1]
            for n in range(4):
                status = (len(plans) % 4) + 1  # every plan status appears
                plan_id = new_uuid(draw)
                # 1% to 25% a year; interest in USDT is at the ticker's price.
                percent, ratio = (draw.randint(100, 2500), 2), (1, 0) if n % 2 == 0 else price
                terms[plan_id] = percent, ratio
                plans.append(
                    {
                        "id": plan_id,
                        "ticker": ticker,
                        "status": status,
                        "percent": decimal_text(*percent),
                        "duration": (7, 30, 90, 180)[n] * 1440,
                        "interestTicker": ticker if n % 2 == 0 else "USDT",
                        "interestRatio": decimal_text(*ratio),
                        "minInvestment": decimal_text(*usdt_amount(ticker, 10, draw)),
                        "maxInvestment": decimal_text(*usdt_amount(ticker, 10**6, draw)),
                        "maxPossibleInvestment": "0"
                        if status == 2
                        else decimal_text(*usdt_amount(ticker, draw.randint(10**5, 10**6), draw)),
                    }
                )
        self.plans: tuple[dict[str, Any], ...] = tuple(plans)
        records: list[dict[str, Any]] = []
        for _ in range(scale.investments):
            plan = plans[draw.randrange(len(plans))]
            term = plan["duration"] * 60
            active = draw.random() < 0.6
            if active:  # its term runs past the epoch
                created = EPOCH - draw.randint(60, term)
                updated = created + draw.randint(0, EPOCH - created)
            else:  # its term ended within the two years before the epoch
                created = EPOCH - term - draw.randint(60, 720 * DAY_S)
                updated = created + term
            amount = usdt_amount(plan["ticker"], draw.randint(100, 50_000), draw)
            paid = draw.random() >= 0.1  # some have been paid nothing yet
            interest = (
                _interest(plan, terms[plan["id"]], amount, updated - created) if paid else (0, 0)
            )
            records.append(
                {
                    "id": new_uuid(draw),
                    "plan": plan,
                    "status": 1 if active else 2,
                    "created": created,
                    "updated": updated,
                    "paymentTime": created + term,
                    "amount": decimal_text(*amount),
                    "interestPaid": decimal_text(*interest),
                }
            )
        records.sort(key=lambda r: (-r["created"], r["id"]))
        self._records = [(r["id"], r["status"], r["plan"]["ticker"], dumps(r)) for r in records]
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


def _interest(
    plan: dict[str, Any], terms: tuple[Decimal, Decimal], amount: Decimal, seconds: int
) -> Decimal:
    """The interest of ``amount`` in ``plan`` (its yearly percent and interest ratio: ``terms``)
    over ``seconds``, pro rata, in its interest currency, cut to that currency's places."""
    (pm, ps), (rm, rs), (am, scale) = (*terms, amount)
    places = CURRENCIES[plan["interestTicker"]][2]
    year = 100 * 365 * DAY_S  # a percent, a year of seconds
    return pm * rm * am * seconds * TEN[places] // (year * TEN[ps + rs + scale]), places


def watcher_links(seed: int, profile: Profile) -> dict[str, list[dict[str, Any]]]:
    draw = rng(seed, "mining")
    accounts = (f"{profile.miner}-miner", f"{profile.miner}-miner-eu")
    out: dict[str, list[dict[str, Any]]] = {}
    for n, account in enumerate(accounts):
        links = []
        for i in range(2 + n):
            link_id = new_uuid(draw)
            created = EPOCH - draw.randint(DAY_S, 300 * DAY_S)
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
