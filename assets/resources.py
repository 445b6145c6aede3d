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
from datetime import UTC, datetime
from typing import Final

import dagster as dg
from upath import UPath

from pipeline import spec
from pipeline.whitebit import AsyncWhiteBIT, Credentials, RetryPolicy
from warehouse import parquet
from warehouse.schemas import DEFAULT_ACCOUNT
from warehouse.settings import DEFAULT_ROOT, warehouse_root

from .accounts import SIMULATOR_SUBACCOUNTS, names

#: Seconds per day: the embedded simulator's data clock stops at the start of the UTC day, so a
#: rerun within the day sees the same data.
_DAY_S: Final = 86_400


@dataclass(frozen=True, slots=True)
class Exchange:
    """Where a run's requests go, with what, and what it should ask for."""

    credentials: Credentials
    base_url: str
    simulated: bool
    mining_accounts: tuple[str, ...]
    markets: tuple[str, ...] | None
    retry: RetryPolicy
    paced: bool = True

    def client(self) -> AsyncWhiteBIT:
        return AsyncWhiteBIT(
            self.credentials, base_url=self.base_url, retry=self.retry, pacing=self.paced
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
    #: Retries of a request that failed transiently (5xx, 429, a dropped connection, a body not
    #: of the spec's shape), each after a capped exponential backoff starting at this delay.
    max_retries: int = RetryPolicy().max_retries
    initial_retry_delay_s: float = RetryPolicy().initial_delay_s

    @property
    def simulated(self) -> bool:
        return not (self.api_key and self.api_secret)

    @contextmanager
    def exchange(self, log: logging.Logger | dg.DagsterLogManager) -> Iterator[Exchange]:
        """The exchange for one step: the configured account, or a simulator started for it."""
        markets = names(self.markets) or None
        retry = RetryPolicy(
            max_retries=self.max_retries, initial_delay_s=self.initial_retry_delay_s
        )
        if not self.simulated:
            yield Exchange(
                Credentials(self.api_key or "", self.api_secret or ""),
                self.base_url,
                simulated=False,
                mining_accounts=names(self.mining_accounts),
                markets=markets,
                retry=retry,
                paced=self.paced,
            )
            return
        from pipeline.simulator import SimClock, Simulator

        day_start = int(datetime.now(UTC).timestamp()) // _DAY_S * _DAY_S
        region = "eu" if self.base_url.rstrip("/") == spec.EU_BASE_URL else "global"
        with Simulator(
            seed=self.simulator_seed,
            clock=SimClock(day_start),
            region=region,
            subaccounts=SIMULATOR_SUBACCOUNTS,
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
                paced=self.paced,
            )


class WarehouseResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where the Parquet partitions and the DuckDB catalog live (`WAREHOUSE_ROOT`)."""

    root: str = DEFAULT_ROOT
    #: The account the files of a warehouse written before accounts belong to (the one account
    #: of the single-account variables, else the accounts file's first).
    first_account: str = DEFAULT_ACCOUNT

    @property
    def path(self) -> UPath:
        return warehouse_root(self.root)

    def writing_root(self) -> UPath:
        """The root, to write partitions under: the files of a warehouse written before accounts
        are moved under the first account first (once per process)."""
        root = self.path
        if (str(root), self.first_account) not in _ADOPTED:
            parquet.adopt_unaccounted(root, self.first_account)
            _ADOPTED.add((str(root), self.first_account))
        return root


#: (root, account) pairs whose files written before accounts were adopted by this process.
_ADOPTED: set[tuple[str, str]] = set()
