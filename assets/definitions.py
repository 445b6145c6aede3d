"""The Dagster code location (`workspace.yaml` loads it, and so does the command line): every
account's assets, checks, jobs, schedules and resources, made from the settings.

The settings are read when the location loads (`defs`), never when the module is imported; a
setting or an accounts file that is wrong fails the load with its variable (or line) and reason,
before any request. Credentials are passed as `dagster.EnvVar`, so Dagster stores the variable
names, never the values. An account without them is the embedded simulator's (and its runs say
so in their logs).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from functools import cache

import dagster as dg
import duckdb

from pipeline import spec
from warehouse import Warehouse, rereads
from warehouse.store import StoreError

from . import alerts, report
from .accounts import Account, load
from .jobs import AccountAssets, Jobs, Rereads, jobs
from .partitions import monthly
from .prices import prices_asset
from .resources import WarehouseResource, WhiteBITResource
from .settings import Settings


def whitebit_resource(account: Account, settings: Settings) -> WhiteBITResource:
    """The exchange of an account: its credentials (by name), or the embedded simulator's key."""
    return WhiteBITResource(
        api_key=dg.EnvVar(account.key_env) if account.key_env else None,
        api_secret=dg.EnvVar(account.secret_env) if account.secret_env else None,
        base_url=account.base_url,
        mining_accounts=",".join(account.mining_accounts) or None,
        markets=",".join(account.markets) if account.markets else None,
        simulator_key=account.simulator_key or "partner",
        pacing_dir=str(settings.pacing_dir) if settings.pacing_dir else None,
    )


def rereads_of(settings: Settings) -> Rereads:
    """The months a night reads again, from the settings' warehouse; a warehouse that cannot
    be read then costs the night those runs only (said in the log), never its others."""
    warehouse = cache(lambda: Warehouse.of(settings.warehouse_config()))

    def months(account: Account, history: spec.History, today: date) -> Sequence[str]:
        try:
            return rereads.months_to_reread(warehouse(), history, account.name, today)
        except (StoreError, OSError, duckdb.Error) as exc:
            logging.getLogger(__name__).warning(
                f"{history.name} of {account.name}: the months to read again are unknown "
                f"tonight ({exc}); the month so far is read as every night"
            )
            return ()

    return months


def credential_variables(accounts: Sequence[Account]) -> tuple[str, ...]:
    """The variables holding the accounts' keys and secrets."""
    return tuple(v for a in accounts for v in (a.key_env, a.secret_env) if v is not None)


@dataclass(frozen=True, slots=True)
class Location:
    """The code location: its definitions, and what they were built from."""

    settings: Settings
    accounts: tuple[Account, ...]
    built: tuple[AccountAssets, ...]
    jobs: Jobs
    definitions: dg.Definitions
    #: The exchange's prices (`assets.prices`); None without an account.
    prices: dg.AssetsDefinition | None
    #: The clock its runs, checks and schedules go by.
    clock: spec.Clock

    def assets_of(self, name: str) -> AccountAssets:
        return next(assets for assets in self.built if assets.account.name == name)


def location(
    settings: Settings,
    accounts: Sequence[Account] | None = None,
    *,
    clock: spec.Clock = spec.WALL_CLOCK,
) -> Location:
    """The code location of the settings' accounts (or of ``accounts``), going by ``clock``
    (this machine's, unless a command or a test sets another)."""
    chosen = load(settings) if accounts is None else tuple(accounts)
    partitions = monthly(settings.check_start(clock.today()).start_date)
    # The writer processes get the environment without any credential.
    writer_env = settings.child_env(without=credential_variables(chosen))
    built = tuple(
        AccountAssets.of(account, partitions, writer_env, clock, settings.start_date)
        for account in chosen
    )
    # The exchange's prices, read through the first account's exchange (no key used).
    held = [key for assets in built for key in assets.keys]
    prices = prices_asset(chosen[0], writer_env, clock, held) if chosen else None
    scheduled = jobs(
        built, settings.nightly_cron, clock, rereads_of(settings), prices, settings.prices_cron
    )
    page = report.report_asset(built)
    report_job = dg.define_asset_job(
        "report",
        selection=[report.REPORT_KEY],
        description="The account report page (report.html), from the warehouse as it is.",
    )
    resources: dict[str, dg.ConfigurableResource] = {  # type: ignore[type-arg]
        account.resource_key: whitebit_resource(account, settings) for account in chosen
    }
    resources["warehouse"] = WarehouseResource.of(settings.warehouse_config())
    definitions = dg.Definitions(
        assets=[
            *(asset for assets in built for asset in assets.assets),
            *([prices] if prices else []),
            page,
        ],
        asset_checks=list(scheduled.watch_checks),
        jobs=[*scheduled.jobs, report_job],
        schedules=scheduled.schedules,
        sensors=[*alerts.sensors(settings, chosen), report.report_sensor(built, report_job)],
        resources=resources,
        # A run's API steps hold their account's pool one at a time anyway: a process per step
        # would only add its start-up to each.
        executor=dg.in_process_executor,
    )
    return Location(settings, chosen, built, scheduled, definitions, prices, clock)


@dg.definitions
def defs() -> dg.Definitions:
    """The code location as `workspace.yaml` loads it: the settings of the environment."""
    return location(Settings.from_env()).definitions
