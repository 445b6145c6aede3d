"""The code location loads, every job resolves, the schedules ask for the right partitions."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from assets.checks import reached
from assets.definitions import Location, location
from assets.histories import DaysOutsideRun, HistoryConfig, run_days
from assets.prices import PRICES_KEY
from assets.settings import Settings
from assets.view_checks import view_specs
from pipeline import spec
from pipeline.spec import WALL_CLOCK

ROOT = Path(__file__).resolve().parents[2]
#: The settings of one account's variables: the account ``default``.
SINGLE_ACCOUNT = {"WHITEBIT_API_KEY": "k", "WHITEBIT_API_SECRET": "s"}


def _location(**more: str) -> Location:
    return location(Settings.from_env(SINGLE_ACCOUNT | more))


LOCATION = _location()
defs = LOCATION.definitions
(DEFAULT,) = LOCATION.built
nightly_schedule = LOCATION.jobs.nightly_schedule
#: The histories partitioned by month, and those the exchange forgets after six months.
MONTHLY = [h.name for h in spec.HISTORIES.values() if h.monthly]
FORGOTTEN = [h.name for h in spec.HISTORIES.values() if h.forgotten]
#: The op of each history partitioned by month: named after its key.
MONTHLY_OPS = {f"default__{name}" for name in MONTHLY}
#: The horizon check of each history the exchange forgets.
HORIZON_OPS = {f"default__{name}_horizon" for name in FORGOTTEN}
#: The op of each snapshot: a multi-asset named after its account and history (one nested in
#: another is written by the other's op: the investments' plans, from one walk; those taken
#: together, by one op: the balances and the flows pending).
SNAPSHOT_OPS = {
    f"default_{h.name}"
    for h in spec.HISTORIES.values()
    if not h.monthly and h.nested_in is None and h not in spec.TOGETHER
} | {"default_together"}
#: The checks over the catalog's views, one op per account, in every job of a table they check.
VIEWED = {h.name for h in spec.HISTORIES.values() if view_specs(dg.AssetKey("t"), h)}
VIEWS_OPS = {"default_views"}
#: The exchange's prices, one asset of the location.
PRICES_OP = "exchange__daily_candles"


def test_every_job_resolves_to_the_assets_it_runs() -> None:
    runs = {
        job.name: {n.name for n in job.graph.node_defs if not n.name.endswith("_fresh")}
        for job in defs.resolve_all_job_defs()
        if not job.name.startswith("__")
    }
    assert {"default_investments", "default_together"} <= SNAPSHOT_OPS
    assert "default_main_balances" not in SNAPSHOT_OPS
    assert "default_fixed_plans" not in SNAPSHOT_OPS
    assert {"trades", "orders", "conversions"} <= set(FORGOTTEN) < set(MONTHLY)
    assert runs == {
        "nightly": MONTHLY_OPS | HORIZON_OPS | SNAPSHOT_OPS | VIEWS_OPS | {PRICES_OP},
        "prices": {PRICES_OP},
        **{
            f"{name}_job": {f"default__{name}"}
            | ({f"default__{name}_horizon"} & HORIZON_OPS)
            | (VIEWS_OPS if name in VIEWED else set())
            for name in MONTHLY
        },
        "snapshots_job": SNAPSHOT_OPS | VIEWS_OPS,
        # The warehouse's own checks: the freshness checks (left out above), the horizons and
        # the views'.
        "freshness": HORIZON_OPS | VIEWS_OPS,
        "report": {"account_report"},
    }
    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert keys == {
        "account_report",
        "exchange/daily_candles",
        *(f"default/{name}" for name in spec.HISTORIES),
    }
    # The investments and their plans are one multi-asset: one walk writes both.
    assert DEFAULT.tables["investments"] is DEFAULT.tables["fixed_plans"]


def test_every_table_carries_its_checks_and_only_no_rejects_and_complete_block() -> None:
    specs = {
        (spec.asset_key.to_user_string(), spec.name): spec.blocking
        for asset in DEFAULT.assets
        for spec in asset.check_specs
    }
    tables = {key.to_user_string() for asset in DEFAULT.assets for key in asset.keys}
    assert tables == {f"default/{name}" for name in spec.HISTORIES}
    for table in tables:
        assert {name for t, name in specs if t == table} >= {
            "unique_keys", "no_rejects", "reconciles", "schema_drift"
        }  # fmt: skip
    assert {check for check, blocking in specs.items() if blocking} == {
        *((table, "no_rejects") for table in tables),
        # A history read by offset window: whether every record was within its reach.
        *((f"default/{h.name}", "complete") for h in spec.HISTORIES.values() if reached(h)),
    }
    assert ("default/investments", "complete") in specs


def test_no_job_or_schedule_resets_keys() -> None:
    # The API's one write is offered by the client and the CLI only.
    for job in defs.resolve_all_job_defs():
        for node in job.graph.node_defs:
            assert "reset" not in node.name


def test_nightly_schedule_asks_for_yesterdays_month_and_todays_snapshots(tmp_path: Path) -> None:
    # An empty warehouse: no month to read again.
    found = _location(WAREHOUSE_ROOT=str(tmp_path / "warehouse"))
    schedule = found.jobs.nightly_schedule

    def requests(tick: datetime) -> dict[str | None, tuple[str | None, set[dg.AssetKey]]]:
        context = dg.build_schedule_context(
            scheduled_execution_time=tick,
            repository_def=found.definitions.get_repository_def(),
        )
        asked = schedule.evaluate_tick(context).run_requests or []
        # The exchange's prices: a run of their own, of a schedule of its own at the same time.
        assert found.jobs.prices_schedule is not None
        (prices,) = found.jobs.prices_schedule.evaluate_tick(context).run_requests or []
        assert prices.run_key == f"exchange:prices:{tick.date()}"
        assert prices.asset_selection == [PRICES_KEY]
        return {r.partition_key: (r.run_key, set(r.asset_selection or [])) for r in asked}

    snapshots = set(DEFAULT.snapshot_keys)
    histories = {dg.AssetKey(["default", name]) for name in MONTHLY}
    assert requests(datetime(2026, 11, 22, 0, 30, tzinfo=UTC)) == {
        "2026-11": ("default:histories:2026-11-21", histories),
        None: ("default:snapshots:2026-11-22", snapshots),
    }
    # On the first of a month, yesterday's month is complete: the last night it is asked for.
    assert requests(datetime(2026, 12, 1, 0, 30, tzinfo=UTC)) == {
        "2026-11": ("default:histories:2026-11-30", histories),
        None: ("default:snapshots:2026-12-01", snapshots),
    }
    assert snapshots == {
        dg.AssetKey(["default", h.name]) for h in spec.HISTORIES.values() if not h.monthly
    }
    assert nightly_schedule.cron_schedule == "30 0 * * *"
    assert nightly_schedule.execution_timezone == "UTC"


def test_funding_is_partitioned_by_month_and_snapshots_not_at_all() -> None:
    partitions = DEFAULT.tables["funding_history"].partitions_def
    assert isinstance(partitions, dg.TimeWindowPartitionsDefinition)
    keys = partitions.get_partition_keys()
    assert keys[0] == "2024-01"
    assert keys[-1] == WALL_CLOCK.today().strftime("%Y-%m")
    assert all(asset.partitions_def is None for asset in DEFAULT.snapshots)
    # The first month is the start date's.
    (later,) = _location(WHITEBIT_START_DATE="2025-03-14").built
    moved = later.tables["funding_history"].partitions_def
    assert moved is not None
    assert moved.get_partition_keys()[0] == "2025-03"


def test_dagster_validates_the_workspace(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DAGSTER_HOME": str(tmp_path), "HOME": str(tmp_path)},
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Validation successful" in done.stderr + done.stdout


def test_a_runs_days_are_its_months_up_to_today_narrowed_by_its_config() -> None:
    def window(first: str, following: str) -> dg.TimeWindow:
        return dg.TimeWindow(
            datetime.fromisoformat(f"{first}T00:00+00:00"),
            datetime.fromisoformat(f"{following}T00:00+00:00"),
        )

    later = date(2026, 2, 11)
    march = window("2025-03-01", "2025-04-01")
    assert len(run_days(march, HistoryConfig(), later)) == 31
    narrowed = run_days(march, HistoryConfig(first_day="2025-03-12", last_day="2025-03-16"), later)
    assert [d.day for d in narrowed] == [12, 13, 14, 15, 16]
    this_month = window("2026-02-01", "2100-01-01")
    # Never a day still to come: the month so far, today's start included.
    assert run_days(this_month, HistoryConfig(), later) == [
        date(2026, 2, 1) + timedelta(days=n) for n in range(11)
    ]
    for config, says in [
        (HistoryConfig(first_day="2025-03-16", last_day="2025-03-12"), "is after last_day"),
        (HistoryConfig(first_day="2025-02-28"), "hold 2025-03-01 .. 2025-03-31"),
        (HistoryConfig(last_day="2025-3-1"), "first_day/last_day: Invalid isoformat"),
    ]:
        with pytest.raises(DaysOutsideRun) as refused:
            run_days(march, config, later)
        assert says in (refused.value.description or "")


def test_a_run_on_local_disk_loads_neither_s3fs_nor_plotly() -> None:
    """Every run's process loads the code location: s3fs comes with the first read of an object
    store, plotly with the first report page drawn, not with every process's start."""
    code = (
        "import sys, assets.definitions, warehouse.writer; "
        "assets.definitions.defs(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'s3fs', 'botocore', 'plotly'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
