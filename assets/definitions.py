"""The Dagster code location (`workspace.yaml` loads it): every account's assets, checks, jobs,
schedules and resources.

The accounts are those of `WHITEBIT_ACCOUNTS_FILE`, or the one of the single-account variables
(`assets.accounts`); a wrong file fails the load with its line and reason, before any request.
Credentials are passed as `dagster.EnvVar`, so Dagster stores the variable names, never the
values. An account without them is the embedded simulator's (and its runs say so in their logs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import dagster as dg

from assets import Account, WarehouseResource, WhiteBITResource, alerts, build, jobs, report
from assets.accounts import load
from warehouse.settings import DEFAULT_ROOT, ROOT_ENV


def whitebit_resource(account: Account) -> WhiteBITResource:
    """The exchange of an account: its credentials (by name), or the embedded simulator's key."""
    return WhiteBITResource(
        api_key=dg.EnvVar(account.key_env) if account.key_env else None,
        api_secret=dg.EnvVar(account.secret_env) if account.secret_env else None,
        base_url=account.base_url,
        mining_accounts=",".join(account.mining_accounts) or None,
        markets=",".join(account.markets) if account.markets else None,
        simulator_key=account.simulator_key or "partner",
    )


def resources(
    accounts: Sequence[Account] | None = None,
) -> dict[str, dg.ConfigurableResource]:  # type: ignore[type-arg]
    chosen = load() if accounts is None else accounts
    return {
        **{account.resource_key: whitebit_resource(account) for account in chosen},
        "warehouse": WarehouseResource(
            root=os.environ.get(ROOT_ENV) or DEFAULT_ROOT, first_account=chosen[0].name
        ),
    }


def definitions(accounts: Sequence[Account] | None = None) -> dg.Definitions:
    """The code location of these accounts (default: `assets.accounts.load`)."""
    chosen = load() if accounts is None else tuple(accounts)
    built = build(chosen)
    scheduled = jobs(built)
    page = report.report_asset(built)
    report_job = dg.define_asset_job(
        "report",
        selection=[report.REPORT_KEY],
        description="The account report page (report.html), from the warehouse as it is.",
    )
    return dg.Definitions(
        assets=[*(asset for assets in built for asset in assets.assets), page],
        asset_checks=list(scheduled.freshness_checks),
        jobs=[*scheduled.jobs, report_job],
        schedules=scheduled.schedules,
        sensors=[*alerts.sensors(), report.report_sensor(built, report_job)],
        resources=resources(chosen),
        # A run's API steps hold their account's pool one at a time anyway: a process per step
        # would only add its start-up to each.
        executor=dg.in_process_executor,
    )


defs = definitions()
