"""The simulated accounts: each one's data, derived from the seed, the region and its name, and
the answers rendered once from it.

The main account of the global region keeps the data the seed alone gives, so tests and
benchmarks that build a `Dataset` from the seed see what the simulator answers. Every other
account (a sub-account, or any account of the EU region) draws its data from a seed derived with
hashlib from (seed, region, account), which Python's salted ``hash`` could not give from one run
to the next.

Datasets are built on first use, under a lock: at the large scale one takes about a quarter of a
second and 40 MB to build, and its million funding entries about 3 s and 250 MB once asked for,
so an account nobody asks for should cost nothing. The main account's is built at once, as it
always was.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import orjson

from pipeline import spec

from ._clock import SimClock
from ._data import Dataset, Profile, Scale
from ._keys import MAIN, check_region


def account_seed(seed: int, region: str, account: str) -> int:
    """The seed of one account's data: the seed itself for the global main account."""
    if region == "global" and account == MAIN:
        return seed
    text = f"whitebit-sim-account:{seed}:{region}:{account}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def account_profile(region: str, account: str) -> Profile:
    """What sets an account apart beside its seed.

    A sub-account's mining accounts carry its name (``sub1-miner``), and hedge mode is on in
    even-numbered sub-accounts only; every account but the global main one trades markets mixed
    by its seed; an EU account's watcher links point at the EU site.
    """
    site = spec.EU_BASE_URL if region == "eu" else spec.GLOBAL_BASE_URL
    if account == MAIN:
        return Profile(mixed_markets=region != "global", site=site)
    number = int(account.rpartition("_")[2])
    return Profile(miner=f"sub{number}", hedge_mode=number % 2 == 0, mixed_markets=True, site=site)


def account_dataset(
    seed: int, scale: Scale, clock: SimClock, *, region: str = "global", account: str = MAIN
) -> Dataset:
    """The data of one account, as a simulator of that seed, scale and region serves it."""
    check_region(region)
    return Dataset(
        account_seed(seed, region, account), scale, clock, account_profile(region, account)
    )


class Account:
    """One account's data, and the answers that never change rendered once from it."""

    def __init__(self, name: str, dataset: Dataset) -> None:
        self.name = name
        self.dataset = dataset
        self.hedge_body = orjson.dumps({"hedgeMode": dataset.hedge_mode})
        self.main_body = orjson.dumps(dataset.main_balance)
        trading = {
            t: b
            for t, b in dataset.trading_balance.items()
            if b != {"available": "0", "freeze": "0"}
        }
        self.trading_body = orjson.dumps(trading)
        self.links_bodies = {a: orjson.dumps({"data": v}) for a, v in dataset.watcher_links.items()}

    def exists(self, p: spec.Param, value: Any) -> bool:
        """Whether a ticker, an investment id or a market names something of this account."""
        data = self.dataset
        if p.name == "ticker":
            return value in data.investments.tickers
        if p.name == "id":
            return value in data.investments.ids
        if p.name == "market":
            return value in data.funding.market_names
        # apiKeyId and account are looked up by their handlers, which answer in their own way.
        return True


class Accounts:
    """Every account of one simulator, by name, each built on first use."""

    def __init__(
        self,
        seed: int,
        scale: Scale,
        clock: SimClock,
        *,
        region: str = "global",
        names: Sequence[str] = (MAIN,),
    ) -> None:
        self.seed, self.scale, self.clock = seed, scale, clock
        self.region = check_region(region)
        self.names: tuple[str, ...] = tuple(names)
        self._lock = threading.Lock()
        self._built: dict[str, Account] = {}
        self.main = self[MAIN]

    def __getitem__(self, name: str) -> Account:
        account = self._built.get(name)
        if account is not None:
            return account
        if name not in self.names:
            raise KeyError(name)
        with self._lock:  # one build per account, whichever thread asks first
            account = self._built.get(name)
            if account is None:
                dataset = account_dataset(
                    self.seed, self.scale, self.clock, region=self.region, account=name
                )
                account = self._built[name] = Account(name, dataset)
        return account

    @property
    def built(self) -> list[str]:
        """The accounts whose data has been built so far."""
        return list(self._built)
