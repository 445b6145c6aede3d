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
from collections.abc import Collection, Sequence
from typing import Any

import orjson

from pipeline import spec
from pipeline.spec import SimClock

from ._assets import CURRENCIES
from ._data import Dataset, Profile, Scale
from ._flows import Pairing, subaccount_id, subaccount_record
from ._keys import MAIN, check_region


def account_seed(seed: int, region: str, account: str) -> int:
    """The seed of one account's data: the seed itself for the global main account."""
    if region == "global" and account == MAIN:
        return seed
    text = f"whitebit-sim-account:{seed}:{region}:{account}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _pairing(seed: int, region: str, sub: str, *, seen_by_sub: bool) -> Pairing:
    sub_seed = account_seed(seed, region, sub)
    return Pairing(sub, sub_seed, subaccount_id(sub_seed), seen_by_sub)


def account_profile(
    region: str, account: str, *, seed: int = 0, subaccounts: Sequence[str] = ()
) -> Profile:
    """What sets an account apart beside its seed.

    A sub-account's mining accounts carry its name (``sub1-miner``), and hedge mode is on in
    even-numbered sub-accounts only; every account but the global main one trades markets mixed
    by its seed; an EU account's watcher links point at the EU site. The main account transfers
    to and from each of ``subaccounts``, a sub-account to and from the main account.
    """
    site = spec.EU_BASE_URL if region == "eu" else spec.GLOBAL_BASE_URL
    if account == MAIN:
        pairings = tuple(_pairing(seed, region, sub, seen_by_sub=False) for sub in subaccounts)
        return Profile(mixed_markets=region != "global", site=site, pairings=pairings)
    number = int(account.rpartition("_")[2])
    return Profile(
        miner=f"sub{number}",
        hedge_mode=number % 2 == 0,
        mixed_markets=True,
        site=site,
        pairings=(_pairing(seed, region, account, seen_by_sub=True),),
        invests=False,
    )


def account_dataset(
    seed: int,
    scale: Scale,
    clock: SimClock,
    *,
    region: str = "global",
    account: str = MAIN,
    subaccounts: Sequence[str] = (),
) -> Dataset:
    """The data of one account, as a simulator of that seed, scale and region serves it (a
    main account with ``subaccounts``)."""
    check_region(region)
    profile = account_profile(region, account, seed=seed, subaccounts=subaccounts)
    return Dataset(account_seed(seed, region, account), scale, clock, profile)


class Account:
    """One account's data, and the answers that never change rendered once from it."""

    def __init__(self, name: str, dataset: Dataset) -> None:
        self.name = name
        self.dataset = dataset
        self.hedge_body = orjson.dumps({"hedgeMode": dataset.hedge_mode})
        self.links_bodies = {a: orjson.dumps({"data": v}) for a, v in dataset.watcher_links.items()}
        own = [pairing for pairing in dataset.profile.pairings if not pairing.sub]
        #: Its sub-accounts as the sub-account list answers them, and their names by id.
        self.subaccounts: list[dict[str, Any]] = [
            subaccount_record(pairing, n) for n, pairing in enumerate(own, 1)
        ]
        self.subaccount_names = {pairing.id: pairing.name for pairing in own}
        perp = dataset.funding.market_names
        spot = {market.name for market in dataset.holdings.spot_markets}
        #: What a ``must_exist`` value may name, by `spec.Param.exists_in` (or its name).
        self._domains: dict[str, Collection[Any]] = {
            "ticker": dataset.investments.tickers,
            "id": dataset.investments.ids,
            "market": perp,
            "markets": spot | perp,
            "collateral_markets": perp,
            "currencies": CURRENCIES,
            "subaccounts": {pairing_id.lower() for pairing_id in self.subaccount_names},
        }

    def exists(self, p: spec.Param, value: Any) -> bool:
        """Whether a value names something of this account (a ticker, an investment id, a
        market, a sub-account) or of the exchange (a currency)."""
        domain = self._domains.get(p.exists_in or p.name)
        if domain is None:
            # apiKeyId and account are looked up by their handlers, which answer in their own way.
            return True
        return (value.lower() if p.exists_in == "subaccounts" else value) in domain


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
                subs = self.names[1:] if name == MAIN else ()
                dataset = account_dataset(
                    self.seed,
                    self.scale,
                    self.clock,
                    region=self.region,
                    account=name,
                    subaccounts=subs,
                )
                account = self._built[name] = Account(name, dataset)
        return account

    @property
    def built(self) -> list[str]:
        """The accounts whose data has been built so far."""
        return list(self._built)
