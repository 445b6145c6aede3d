"""Dagster resources: an account's exchange (a real account, or the embedded simulator's) and the
warehouse.

Credentials arrive through `dagster.EnvVar`, so Dagster records the variable's name, never its
value. An account with no credentials is one of the embedded simulator's: every run of it starts
the simulator and says so in its log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Final

import dagster as dg

from pipeline import spec
from pipeline.whitebit import AsyncWhiteBIT, Credentials, Pacer, RetryPolicy
from warehouse import Warehouse, WarehouseConfig, locks
from warehouse.sources import Source

from .accounts import SIMULATOR_SUBACCOUNTS, names

#: The tag of a run whose embedded simulator stands at the start of another day than today
#: (``2026-11-25``): the demo's snapshots of yesterday. A real exchange ignores it.
SIMULATOR_DAY_TAG: Final = "whitebit/simulator_day"


@dataclass(frozen=True, slots=True)
class Exchange:
    """Where a run's requests go, with what, and what it should ask for."""

    credentials: Credentials
    base_url: str
    simulated: bool
    mining_accounts: tuple[str, ...]
    markets: tuple[str, ...] | None
    retry: RetryPolicy
    #: Where the rows come from, as the warehouse records it per account (`warehouse.sources`).
    source: Source
    paced: bool = True
    pacing_dir: str | None = None

    def setting(self, name: str) -> tuple[str, ...] | None:
        """An account setting a history's paging names (its markets, its mining accounts)."""
        value: tuple[str, ...] | None = getattr(self, name)
        return value

    def settings(self) -> dict[str, tuple[str, ...]]:
        """The account's settings a history's paging may name (`spec.NewestFirst.split_setting`,
        `spec.Fanout.setting`), those that are set: every walk and snapshot is given them all,
        and takes what it names."""
        named = {"markets": self.markets, "mining_accounts": self.mining_accounts}
        return {name: value for name, value in named.items() if value}

    def client(self, clock: spec.Clock = spec.WALL_CLOCK) -> AsyncWhiteBIT:
        """A client of the exchange, telling this machine's times by ``clock`` (the run's)."""
        pacing: Pacer | bool = self.paced
        if self.paced and self.pacing_dir:
            pacing = Pacer.shared(self.base_url, directory=self.pacing_dir)
        return AsyncWhiteBIT(
            self.credentials, base_url=self.base_url, retry=self.retry, pacing=pacing, local=clock
        )


class WhiteBITResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """A WhiteBIT account to extract; the embedded simulator's when no credentials are set."""

    api_key: str | None = None
    api_secret: str | None = None
    base_url: str = spec.GLOBAL_BASE_URL
    #: Comma-separated mining-pool accounts whose watcher links are listed.
    mining_accounts: str | None = None
    #: Comma-separated ``<BASE>_PERP`` markets to walk one by one (default: all in one walk).
    markets: str | None = None
    #: Seed of the embedded simulator's data.
    simulator_seed: int = 7
    #: The embedded simulator's key the account uses (its main account's B2B partner key, or a
    #: sub-account's: ``sub_1``).
    simulator_key: str = "partner"
    #: Pace requests to the exchange's published rate budgets. Switch off only for an exchange
    #: that enforces none (the simulator with its budgets off, in benchmarks).
    paced: bool = True
    #: Where the machine's runs share each exchange address's pacing (default: a per-user
    #: directory of the system's temporary directory).
    pacing_dir: str | None = None
    #: Retries of a request that failed transiently (5xx, 429, a dropped connection, a body not
    #: of the spec's shape), each after an exponential backoff from the first delay to the cap.
    max_retries: int = RetryPolicy().max_retries
    initial_retry_delay_s: float = RetryPolicy().initial_delay_s
    max_retry_delay_s: float = RetryPolicy().max_delay_s

    @property
    def simulated(self) -> bool:
        return not (self.api_key and self.api_secret)

    @property
    def region(self) -> str:
        """The embedded simulator's region: the EU service's, or the global one's."""
        return "eu" if self.base_url.rstrip("/") == spec.EU_BASE_URL else "global"

    @property
    def source(self) -> Source:
        """Where the account's rows come from, known before any request."""
        if self.simulated:
            return Source.simulator(self.simulator_seed, self.region)
        return Source.address(self.base_url)

    @contextmanager
    def exchange(
        self, log: logging.Logger | dg.DagsterLogManager, *, simulator_day: date
    ) -> Iterator[Exchange]:
        """The exchange for one step: the configured account, or a simulator started for it,
        its clock at the start of ``simulator_day`` (UTC: the run's day, or the demo's
        yesterday; a real exchange's clock is the exchange's own)."""
        markets = names(self.markets) or None
        retry = RetryPolicy(
            max_retries=self.max_retries,
            initial_delay_s=self.initial_retry_delay_s,
            max_delay_s=self.max_retry_delay_s,
        )
        if not self.simulated:
            yield Exchange(
                Credentials(self.api_key or "", self.api_secret or ""),
                self.base_url,
                simulated=False,
                mining_accounts=names(self.mining_accounts),
                markets=markets,
                retry=retry,
                source=self.source,
                paced=self.paced,
                pacing_dir=self.pacing_dir,
            )
            return
        from pipeline.simulator import Simulator, frozen_accounts

        # Its data clock stands still at a day's start: a rerun within the day sees the same data,
        # and the steps of a process standing at the same day share it, made once.
        day_start = int(datetime.combine(simulator_day, time.min, UTC).timestamp())
        region = self.region
        data = frozen_accounts(self.simulator_seed, region, SIMULATOR_SUBACCOUNTS, day_start)
        with Simulator(
            seed=self.simulator_seed,
            region=region,
            subaccounts=SIMULATOR_SUBACCOUNTS,
            accounts=data,
        ) as sim:
            log.warning(
                "no credentials set: this run extracts the embedded WhiteBIT simulator "
                f"(seed {self.simulator_seed}, {region}, key {self.simulator_key}), "
                "not a real account."
            )
            demo = sim.credentials_for(self.simulator_key)
            dataset = sim.dataset_for(self.simulator_key)
            yield Exchange(
                Credentials(demo.api_key, demo.api_secret),
                sim.url,
                simulated=True,
                mining_accounts=names(self.mining_accounts) or dataset.mining_accounts,
                markets=markets,
                retry=retry,
                source=self.source,
                paced=self.paced,
                pacing_dir=self.pacing_dir,
            )


class WarehouseResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The warehouse: where the Parquet partitions and the DuckDB catalog live."""

    root: str
    catalog: str | None = None
    state_home: str | None = None
    lease_seconds: float = locks.DEFAULT_LEASE_SECONDS
    lease_wait_seconds: float = locks.DEFAULT_WAIT_SECONDS
    #: The currency prices are told in (`WarehouseConfig.reference`).
    reference: str = spec.REFERENCE_CURRENCY

    @classmethod
    def of(cls, config: WarehouseConfig) -> WarehouseResource:
        return cls(**config.as_json())

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse.of(
            WarehouseConfig(
                root=self.root,
                catalog=self.catalog,
                state_home=self.state_home,
                lease_seconds=self.lease_seconds,
                lease_wait_seconds=self.lease_wait_seconds,
                reference=self.reference,
            )
        )
