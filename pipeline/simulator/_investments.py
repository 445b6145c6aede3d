"""What an account holds that the clock does not move: its fixed-term investments and the
watcher links of its mining accounts, all made before the epoch.

Investments are served newest first and filtered as the API filters them; their slices are
cached. Their amounts and interest fall before the epoch, so the ledger's balances at the epoch
already hold them (`_assets`); nothing about them changes after it.
"""

from __future__ import annotations

from typing import Any

import orjson

from ._basics import DAY_S, EPOCH, Profile, Scale, decimal_text, dumps, new_uuid, rng

#: Tickers an account's investment plans can be in, the first ``scale.tickers`` of them.
TICKERS = ("USDT", "BTC", "ETH", "USDC", "TRX", "SOL", "TON", "DOGE", "XRP", "LTC", "ADA", "DOT")


class Investments:
    """Fixed plans and the investments made in them, newest first, filterable as the API is."""

    def __init__(self, seed: int, scale: Scale) -> None:
        draw = rng(seed, "investments")
        self.tickers: tuple[str, ...] = TICKERS[: scale.tickers]
        plans: list[dict[str, Any]] = []
        for ticker in self.tickers:
            for n in range(4):
                status = (len(plans) % 4) + 1  # every plan status appears
                percent = (draw.randint(100, 2500), 1)
                plans.append(
                    {
                        "id": new_uuid(draw),
                        "ticker": ticker,
                        "status": status,
                        "percent": decimal_text(*percent),
                        "duration": (7, 30, 90, 180)[n] * 1440,
                        "interestTicker": ticker if n % 2 == 0 else "USDT",
                        "interestRatio": "1"
                        if n % 2 == 0
                        else decimal_text(draw.randint(1, 10**9), 12),
                        "minInvestment": decimal_text(draw.randint(1, 1000), 2),
                        "maxInvestment": decimal_text(draw.randint(10**6, 10**9), 0),
                        "maxPossibleInvestment": "0"
                        if status == 2
                        else decimal_text(draw.randint(10**5, 10**14), 6),
                    }
                )
        self.plans: tuple[dict[str, Any], ...] = tuple(plans)
        records: list[dict[str, Any]] = []
        start = EPOCH - 720 * DAY_S
        for _ in range(scale.investments):
            plan = plans[draw.randrange(len(plans))]
            created = draw.randint(start, EPOCH - 3600)
            status = 1 if draw.random() < 0.6 else 2  # active, closed
            amount = (draw.randint(10**4, 10**12), draw.randint(0, 8))
            interest = (0, 0) if draw.random() < 0.1 else (draw.randint(1, 10**18), 18)
            records.append(
                {
                    "id": new_uuid(draw),
                    "plan": plan,
                    "status": status,
                    "created": created,
                    "updated": min(EPOCH, created + draw.randint(0, 30 * DAY_S)),
                    "paymentTime": created + plan["duration"] * 60,
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
