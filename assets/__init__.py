"""The Dagster application: every account's assets, partitions, checks, jobs, schedules and
resources, the code location (`definitions`) and the `whitebit-etl` command (`cli`, `runs`).

It sits on top of the libraries: assets are thin, each says which API walk fills which table
partition of its account (`loading` does the work) and reports what happened as run metadata and
checks (`reporting`, `checks`). The accounts come from `accounts`; `jobs` builds an asset set
for each.
"""

from .accounts import Account
from .jobs import SINGLE, AccountAssets, Jobs, build, jobs
from .partitions import MONTHLY
from .resources import WarehouseResource, WhiteBITResource

#: The assets of the single account (no accounts file): unprefixed keys, as before accounts.
funding_history = SINGLE.funding
SNAPSHOTS = SINGLE.snapshots
investments, main_balances, trading_balances, hedge_mode, watcher_links = SNAPSHOTS
ALL_ASSETS = SINGLE.assets

__all__ = [
    "ALL_ASSETS",
    "MONTHLY",
    "SINGLE",
    "SNAPSHOTS",
    "Account",
    "AccountAssets",
    "Jobs",
    "WarehouseResource",
    "WhiteBITResource",
    "build",
    "funding_history",
    "hedge_mode",
    "investments",
    "jobs",
    "main_balances",
    "trading_balances",
    "watcher_links",
]
