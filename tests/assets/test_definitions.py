"""The code location loads, every job resolves, the schedules ask for the right partitions."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from assets import ALL_ASSETS, SINGLE, SNAPSHOTS, funding_history, jobs
from assets.definitions import defs
from assets.funding import DaysOutsideRun, FundingConfig, run_days
from assets.partitions import today

ROOT = Path(__file__).resolve().parents[2]
nightly_schedule = jobs([SINGLE]).nightly_schedule


def test_every_job_resolves_to_the_assets_it_runs() -> None:
    snapshots = {"investments", "main_balances", "trading_balances", "hedge_mode", "watcher_links"}
    runs = {
        job.name: {n.name for n in job.graph.node_defs if not n.name.endswith("_fresh")}
        for job in defs.resolve_all_job_defs()
        if not job.name.startswith("__")
    }
    assert runs == {
        "nightly": {"funding_history", *snapshots},
        "funding_history_job": {"funding_history"},
        "snapshots_job": snapshots,
        "freshness": set(),
        "report": {"account_report"},
    }
    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert keys == {
        "account_report",
        "funding_history",
        "investments",
        "fixed_plans",
        "main_balances",
        "trading_balances",
        "hedge_mode",
        "watcher_links",
    }


def test_every_table_carries_its_checks_and_only_no_rejects_and_complete_block() -> None:
    specs = {
        (spec.asset_key.to_user_string(), spec.name): spec.blocking
        for asset in ALL_ASSETS
        for spec in asset.check_specs
    }
    tables = {key.to_user_string() for asset in ALL_ASSETS for key in asset.keys}
    assert len(tables) == 7
    for table in tables:
        assert {name for t, name in specs if t == table} >= {
            "unique_keys", "no_rejects", "reconciles", "schema_drift"
        }  # fmt: skip
    assert {check for check, blocking in specs.items() if blocking} == {
        *((table, "no_rejects") for table in tables),
        ("investments", "complete"),
    }


def test_no_job_or_schedule_resets_keys() -> None:
    # The API's one write is offered by the client and the CLI only.
    for job in defs.resolve_all_job_defs():
        for node in job.graph.node_defs:
            assert "reset" not in node.name


def test_nightly_schedule_asks_for_yesterdays_month_and_todays_snapshots() -> None:
    def requests(tick: datetime) -> dict[str | None, tuple[str | None, set[dg.AssetKey]]]:
        context = dg.build_schedule_context(scheduled_execution_time=tick)
        asked = nightly_schedule(context)  # type: ignore[arg-type, call-overload]
        return {r.partition_key: (r.run_key, set(r.asset_selection or [])) for r in asked}

    snapshots = {k for a in SNAPSHOTS for k in a.keys}
    assert requests(datetime(2026, 11, 22, 0, 30, tzinfo=UTC)) == {
        "2026-11": ("funding_history:2026-11-21", set(funding_history.keys)),
        None: ("snapshots:2026-11-22", snapshots),
    }
    # On the first of a month, yesterday's month is complete: the last night it is asked for.
    assert requests(datetime(2026, 12, 1, 0, 30, tzinfo=UTC)) == {
        "2026-11": ("funding_history:2026-11-30", set(funding_history.keys)),
        None: ("snapshots:2026-12-01", snapshots),
    }
    assert nightly_schedule.cron_schedule == "30 0 * * *"
    assert nightly_schedule.execution_timezone == "UTC"


def test_funding_is_partitioned_by_month_and_snapshots_not_at_all() -> None:
    partitions = funding_history.partitions_def
    assert isinstance(partitions, dg.TimeWindowPartitionsDefinition)
    keys = partitions.get_partition_keys()
    assert keys[0] == "2024-01"
    assert keys[-1] == today().strftime("%Y-%m")
    assert all(asset.partitions_def is None for asset in SNAPSHOTS)


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

    march = window("2025-03-01", "2025-04-01")
    assert len(run_days(march, FundingConfig())) == 31
    narrowed = run_days(march, FundingConfig(first_day="2025-03-12", last_day="2025-03-16"))
    assert [d.day for d in narrowed] == [12, 13, 14, 15, 16]
    now = today()
    this_month = window(now.replace(day=1).isoformat(), "2100-01-01")
    # Never a day still to come (the day now, which is a day later once midnight has passed).
    assert now <= run_days(this_month, FundingConfig())[-1] <= today()
    for config, says in [
        (FundingConfig(first_day="2025-03-16", last_day="2025-03-12"), "is after last_day"),
        (FundingConfig(first_day="2025-02-28"), "hold 2025-03-01 .. 2025-03-31"),
        (FundingConfig(last_day="2025-3-1"), "first_day/last_day: Invalid isoformat"),
    ]:
        with pytest.raises(DaysOutsideRun) as refused:
            run_days(march, config)
        assert says in (refused.value.description or "")


def test_a_run_on_local_disk_loads_neither_s3fs_nor_plotly() -> None:
    """Every run's process imports the definitions: s3fs comes with the first read of an object
    store, plotly with the first report page drawn, not with every process's start."""
    code = (
        "import sys, assets.definitions, warehouse.writer; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'s3fs', 'botocore', 'plotly'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
