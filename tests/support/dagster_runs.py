"""Materializing the assets in-process against a simulator, with real resources: the assets of
one account, ``default`` (what the single-account variables make), as the code location builds
them."""

from __future__ import annotations

import os
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, Final

import dagster as dg

from assets.accounts import DEFAULT_ACCOUNT, Account
from assets.jobs import AccountAssets
from assets.partitions import monthly
from assets.resources import WarehouseResource, WhiteBITResource
from assets.settings import KEY_ENV, SECRET_ENV
from pipeline import spec
from pipeline.simulator import Simulator
from warehouse import WarehouseConfig
from warehouse.schemas import month_of

#: The one account of the single-account variables, with a B2B partner key.
ACCOUNT: Final = Account(
    name=DEFAULT_ACCOUNT,
    base_url=spec.GLOBAL_BASE_URL,
    key_env=KEY_ENV,
    secret_env=SECRET_ENV,
    mining_accounts=(),
    markets=None,
    investments=True,
)
#: The first month of history the tests' assets are partitioned from.
START: Final = date(2024, 1, 1)
#: The client's whole retry budget (every retry the exchange's client makes) in a fraction of
#: a second: the resource's settings for a test of how a run ends once its retries are spent.
QUICK_RETRIES: Final[dict[str, Any]] = {"initial_retry_delay_s": 0.01, "max_retry_delay_s": 0.02}


@cache
def account_assets(
    account: Account = ACCOUNT, clock: spec.Clock = spec.WALL_CLOCK
) -> AccountAssets:
    """An account's assets, as the code location builds them (the writer gets this process's
    environment, which holds no credential), going by ``clock``."""
    return AccountAssets.of(account, monthly(START), dict(os.environ), clock)


def asset(
    table: str, account: Account = ACCOUNT, clock: spec.Clock = spec.WALL_CLOCK
) -> dg.AssetsDefinition:
    """The asset that writes ``table`` for the account, its runs going by ``clock``."""
    return account_assets(account, clock).tables[table]


def snapshots(account: Account = ACCOUNT) -> list[dg.AssetsDefinition]:
    return list(account_assets(account).snapshots)


def resources_for(
    sim: Simulator, root: Path, account: Account = ACCOUNT, **whitebit: Any
) -> dict[str, object]:
    """The code location's resources, pointed at this simulator as if it were the exchange
    (``whitebit``: more settings of its resource, e.g. ``max_retries``)."""
    creds = sim.credentials
    return {
        account.resource_key: WhiteBITResource(
            api_key=creds.api_key,
            api_secret=creds.api_secret,
            base_url=sim.url,
            mining_accounts=",".join(sim.dataset.mining_accounts),
            **whitebit,
        ),
        "warehouse": WarehouseResource.of(WarehouseConfig(str(root))),
    }


def without_step_retries(asset: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """The asset as it is, less Dagster's step retry policy.

    The policy waits 30 s and more before trying a failed step again, and `dg.materialize`
    cannot switch it off (it ignores executor config); tests of how a step fails need the
    failure at once. The asset is made again from its op's parts, through Dagster's public
    constructors, with no retry policy; everything else (its function, config, resources, pool,
    specs and checks) is the asset's own. The client's own retries stay as the resource
    configures them."""
    op = asset.op
    bare = dg.OpDefinition(
        compute_fn=op.compute_fn,
        name=op.name,
        ins=op.ins,
        outs=op.outs,
        description=op.description,
        config_schema=op.config_schema,
        required_resource_keys=op.required_resource_keys,
        tags=op.tags,
        pool=op.pool,
    )
    return dg.AssetsDefinition(
        keys_by_input_name=asset.keys_by_input_name,
        keys_by_output_name=asset.keys_by_output_name,
        node_def=bare,
        specs=list(asset.specs),
        check_specs_by_output_name=asset.check_specs_by_output_name,
        can_subset=asset.can_subset,
        backfill_policy=asset.backfill_policy,
    )


def funding_run(first: date, last: date, account: Account = ACCOUNT) -> dict[str, Any]:
    """`dg.materialize` arguments for a funding run of the days ``first .. last``: the months
    that hold them, narrowed to those days (what ``whitebit-etl materialize`` asks for)."""
    narrowed = {"first_day": first.isoformat(), "last_day": last.isoformat()}
    op = asset("funding_history", account).node_def.name
    config = {"ops": {op: {"config": narrowed}}}
    if month_of(first) == month_of(last):
        return {"partition_key": month_of(first), "run_config": config}
    months = {
        "dagster/asset_partition_range_start": month_of(first),
        "dagster/asset_partition_range_end": month_of(last),
    }
    return {"tags": months, "run_config": config}
