"""The Dagster application: assets, partitions, checks, jobs, schedules and resources, the code
location (`definitions`) and the `whitebit-etl` command (`cli`, `runs`).

It sits on top of the libraries: assets are thin, each says which API walk fills which table
partition (`loading` does the work) and reports what happened as run metadata and checks
(`reporting`, `checks`).
"""

from .funding import funding_history
from .jobs import (
    FRESHNESS_CHECKS,
    freshness_job,
    freshness_schedule,
    funding_history_job,
    nightly_job,
    nightly_schedule,
    snapshots_job,
)
from .partitions import MONTHLY
from .resources import WarehouseResource, WhiteBITResource
from .snapshots import (
    SNAPSHOTS,
    hedge_mode,
    investments,
    main_balances,
    trading_balances,
    watcher_links,
)

ALL_ASSETS = (funding_history, *SNAPSHOTS)

__all__ = [
    "ALL_ASSETS",
    "FRESHNESS_CHECKS",
    "MONTHLY",
    "SNAPSHOTS",
    "WarehouseResource",
    "WhiteBITResource",
    "freshness_job",
    "freshness_schedule",
    "funding_history",
    "funding_history_job",
    "hedge_mode",
    "investments",
    "main_balances",
    "nightly_job",
    "nightly_schedule",
    "snapshots_job",
    "trading_balances",
    "watcher_links",
]
