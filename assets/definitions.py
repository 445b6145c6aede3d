"""The Dagster code location (`workspace.yaml` loads it): assets, checks, jobs, schedule, resources.

Credentials are passed as `dagster.EnvVar`, so Dagster stores the variable names, never the
values. Without both of them, runs use the embedded simulator (and say so in their logs).
"""

from __future__ import annotations

import os

import dagster as dg

from assets import (
    ALL_ASSETS,
    FRESHNESS_CHECKS,
    WarehouseResource,
    WhiteBITResource,
    alerts,
    freshness_job,
    freshness_schedule,
    funding_history_job,
    nightly_job,
    nightly_schedule,
    snapshots_job,
)
from pipeline import spec
from warehouse.settings import DEFAULT_ROOT, ROOT_ENV


def _optional(name: str) -> dg.EnvVar | None:
    return dg.EnvVar(name) if os.environ.get(name) else None


def whitebit_resource() -> WhiteBITResource:
    """The account of the environment's credentials, or the embedded simulator without them."""
    key, secret = _optional("WHITEBIT_API_KEY"), _optional("WHITEBIT_API_SECRET")
    configured = key is not None and secret is not None
    return WhiteBITResource(
        api_key=key if configured else None,
        api_secret=secret if configured else None,
        base_url=os.environ.get("WHITEBIT_BASE_URL") or spec.GLOBAL_BASE_URL,
        mining_accounts=os.environ.get("WHITEBIT_MINING_ACCOUNTS") or None,
        markets=os.environ.get("WHITEBIT_MARKETS") or None,
    )


def resources() -> dict[str, dg.ConfigurableResource]:  # type: ignore[type-arg]
    return {
        "whitebit": whitebit_resource(),
        "warehouse": WarehouseResource(root=os.environ.get(ROOT_ENV) or DEFAULT_ROOT),
    }


defs = dg.Definitions(
    assets=list(ALL_ASSETS),
    asset_checks=list(FRESHNESS_CHECKS),
    jobs=[nightly_job, funding_history_job, snapshots_job, freshness_job],
    schedules=[nightly_schedule, freshness_schedule],
    sensors=alerts.sensors(),
    resources=resources(),
    # A run's API steps hold the pool one at a time anyway: a process per step would only add
    # its start-up to each.
    executor=dg.in_process_executor,
)
