"""An account's fixed-term investments and the watcher links of its mining accounts.

Investments are served newest first and filtered as the API filters them; their slices are
cached. Those made before the epoch are drawn from the seed; what they took and paid before it is
in the balances anchored there (`_assets`). After the epoch they live by the clock:

- an investment ends at its payment time: from then on it is closed, last updated then, its whole
  term's interest paid, and its principal and the interest it had not paid are back in the main
  balance;
- one in a plan open to new money (plan status 1) is renewed as it ends: the same amount in the
  same plan, made at that instant and paid from the main balance, interest paid at its end. So
  the account keeps some investments active on any day, and a plan of a week is never active for
  longer than a week.

The ledger takes these moves of the main balance from `Investments.moves` as the clock passes.
"""

from __future__ import annotations

import heapq
import threading
from typing import Any

import orjson

from pipeline.spec import SimClock

from ._assets import CURRENCIES, usdt_amount
from ._basics import (
    DAY_S,
    EPOCH,
    TEN,
    Decimal,
    Profile,
    Scale,
    atoms,
    decimal_text,
    dumps,
    new_uuid,
    rng,
)

#: Tickers an account's investment plans can be in, the first ``scale.tickers`` of them.
TICKERS = ("USDT", "BTC", "ETH", "USDC", "TRX", "SOL", "TON", "DOGE", "XRP", "LTC", "ADA", "DOT")
#: The plan status open to new money; an investment in such a plan is renewed at its end.
OPEN = 1
#: An investment's status.
ACTIVE, CLOSED = 1, 2
#: A move of the main balance: (time in microseconds, ticker, atoms).
Move = tuple[int, str, int]


class Investments:
    """Fixed plans and the investments made in them, newest first, filterable as the API is.

    Each is sized as the account's balances are (some 100 to 50,000 USDT worth, at its currency's
    places). Of those made before the epoch, an active one was made within its plan's duration
    before it (its payment time after it); a closed one's term ended before it, when it was last
    updated. After the epoch each ends, and is renewed, as the module says."""

    def __init__(self, seed: int, scale: Scale, clock: SimClock) -> None:
        self.seed, self.clock = seed, clock
        draw = rng(seed, "investments")
        self.tickers: tuple[str, ...] = TICKERS[: scale.tickers]
        plans: list[dict[str, Any]] = []
        #: Each plan's yearly percent and interest ratio, by its id.
        self._terms: dict[str, tuple[Decimal, Decimal]] = {}
        for ticker in self.tickers:
            price = CURRENCIES[ticker][1]
            for n in range(4):
                # Every plan status appears; the longest plan of each ticker is the open one.
                status = 4 - n
                plan_id = new_uuid(draw)
                # 1% to 25% a year; interest in USDT is at the ticker's price.
                percent, ratio = (draw.randint(100, 2500), 2), (1, 0) if n % 2 == 0 else price
                self._terms[plan_id] = percent, ratio
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
        made: list[dict[str, Any]] = []
        #: (payment time, sequence, record, amount, interest paid by then) of those active at
        #: the epoch and of their renewals, soonest first: the next to end is first.
        self._ending: list[tuple[int, int, dict[str, Any], Decimal, Decimal]] = []
        self._sequence = 0
        for _ in range(scale.investments):
            plan = plans[draw.randrange(len(plans))]
            term = plan["duration"] * 60
            active = draw.random() < 0.6
            if active:  # its term runs past the epoch
                created = EPOCH - draw.randint(60, term - 1)
                updated = created + draw.randint(0, EPOCH - created)
            else:  # its term ended within the two years before the epoch
                created = EPOCH - term - draw.randint(60, 720 * DAY_S)
                updated = created + term
            amount = usdt_amount(plan["ticker"], draw.randint(100, 50_000), draw)
            paid = draw.random() >= 0.1  # some have been paid nothing yet
            interest = self._interest(plan, amount, updated - created) if paid else (0, 0)
            record = {
                "id": new_uuid(draw),
                "plan": plan,
                "status": ACTIVE if active else CLOSED,
                "created": created,
                "updated": updated,
                "paymentTime": created + term,
                "amount": decimal_text(*amount),
                "interestPaid": decimal_text(*interest),
            }
            made.append(record)
            if active:
                self._ends(record, amount, interest)
        #: Every investment's id the clock has seen made (it grows as they are renewed).
        self.ids: set[str] = {r["id"] for r in made}
        #: Every investment the clock has seen made, as (id, status, ticker, record), by id.
        self._shown: dict[str, tuple[str, int, str, bytes]] = {
            r["id"]: (r["id"], r["status"], r["plan"]["ticker"], dumps(r)) for r in made
        }
        self._order = sorted(made, key=_newest_first)
        #: The main balance's moves after the epoch, in the order of their times, as the clock
        #: reached them (the ledger reads them from where it stopped).
        self.moves: list[Move] = []
        self._lock = threading.Lock()
        self._slices: dict[tuple[int | None, str | None], list[bytes]] = {}

    def _interest(self, plan: dict[str, Any], amount: Decimal, seconds: int) -> Decimal:
        return _interest(plan, self._terms[plan["id"]], amount, seconds)

    def _ends(self, record: dict[str, Any], amount: Decimal, paid: Decimal) -> None:
        self._sequence += 1
        heapq.heappush(self._ending, (record["paymentTime"], self._sequence, record, amount, paid))

    def current(self) -> None:
        """End (and renew) every investment whose payment time the clock has reached."""
        now = self.clock.now()
        with self._lock:
            if not self._ending or self._ending[0][0] > now:
                return
            while self._ending and self._ending[0][0] <= now:
                end, _, record, amount, paid = heapq.heappop(self._ending)
                plan, term = record["plan"], record["plan"]["duration"] * 60
                whole = self._interest(plan, amount, term)
                closed = record | {
                    "status": CLOSED,
                    "updated": end,
                    "interestPaid": decimal_text(*whole),
                }
                self._shown[record["id"]] = (record["id"], CLOSED, plan["ticker"], dumps(closed))
                at = end * 1_000_000
                self.moves.append((at, plan["ticker"], atoms(amount)))
                self.moves.append((at, plan["interestTicker"], atoms(whole) - atoms(paid)))
                if plan["status"] == OPEN:
                    renewal = record | {
                        "id": new_uuid(rng(self.seed, "renewal", record["id"])),
                        "status": ACTIVE,
                        "created": end,
                        "updated": end,
                        "paymentTime": end + term,
                        "interestPaid": "0",
                    }
                    self.moves.append((at, plan["ticker"], -atoms(amount)))
                    self._shown[renewal["id"]] = (
                        renewal["id"],
                        ACTIVE,
                        plan["ticker"],
                        dumps(renewal),
                    )
                    self._order.append(renewal)
                    self.ids.add(renewal["id"])
                    self._ends(renewal, amount, (0, 0))
            self._order.sort(key=_newest_first)
            self._slices = {}

    def select(self, *, id: str | None, ticker: str | None, status: int | None) -> list[bytes]:
        """Every investment matching the filters as the clock's present sees them, newest first
        (slices are cached until the next investment ends)."""
        self.current()
        if id is not None:
            found = self._shown.get(id)
            matches = (
                found is not None
                and (ticker is None or found[2] == ticker)
                and (status is None or found[1] == status)
            )
            return [found[3]] if found is not None and matches else []
        key = (status, ticker)
        with self._lock:
            hit = self._slices.get(key)
            if hit is None:
                shown = (self._shown[r["id"]] for r in self._order)
                hit = [
                    r[3]
                    for r in shown
                    if (ticker is None or r[2] == ticker) and (status is None or r[1] == status)
                ]
                self._slices[key] = hit
            return hit

    def all(self) -> list[dict[str, Any]]:
        """Every investment as the clock's present sees it, parsed, newest first."""
        return [orjson.loads(r) for r in self.select(id=None, ticker=None, status=None)]

    def count(self, *, status: int | None = None, ticker: str | None = None) -> int:
        return len(self.select(id=None, ticker=ticker, status=status))


def _newest_first(record: dict[str, Any]) -> tuple[int, str]:
    return -record["created"], record["id"]


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
