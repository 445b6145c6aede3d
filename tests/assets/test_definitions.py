"""The code location loads, every job resolves, the schedules ask for the right partitions."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from assets import ALL_ASSETS, SNAPSHOTS, funding_history, nightly_schedule
from assets.definitions import defs

ROOT = Path(__file__).resolve().parents[2]


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
    }
    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert keys == {
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


def test_nightly_schedule_asks_for_yesterdays_funding_and_todays_snapshots() -> None:
    tick = datetime(2026, 11, 22, 0, 30, tzinfo=UTC)
    context = dg.build_schedule_context(scheduled_execution_time=tick)
    requests = list(nightly_schedule(context))  # type: ignore[arg-type, call-overload]
    by_key = {r.partition_key: set(r.asset_selection or []) for r in requests}
    assert by_key == {
        "2026-11-21": set(funding_history.keys),
        "2026-11-22": {k for a in SNAPSHOTS for k in a.keys},
    }
    assert nightly_schedule.cron_schedule == "30 0 * * *"
    assert nightly_schedule.execution_timezone == "UTC"


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
