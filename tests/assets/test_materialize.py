"""Every asset materializes with the real resources against the simulator over loopback."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.definitions import location
from assets.resources import WhiteBITResource
from assets.settings import Settings
from pipeline import spec
from pipeline.simulator import Fault, Simulator
from pipeline.spec import WALL_CLOCK
from pipeline.whitebit import AsyncWhiteBIT
from tests.support.dagster_runs import (
    ACCOUNT,
    account_assets,
    asset,
    funding_run,
    resources_for,
    without_step_retries,
)
from warehouse import Warehouse, catalog, partitions

# The session simulator's data clock stands at 2026-09-21: its funding history lies before that.
WEEK = [date(2026, 9, 10) + timedelta(days=n) for n in range(7)]
MONTH = "2026-09"
WEEK_CONFIG = funding_run(WEEK[0], WEEK[-1])["run_config"]
funding_history, hedge_mode = asset("funding_history"), asset("hedge_mode")
#: The investments and their plans: one multi-asset.
investments = asset("investments")


def _key(table: str) -> dg.AssetKey:
    return dg.AssetKey([ACCOUNT.name, table])


def _materialized(result: dg.ExecuteInProcessResult, table: str) -> list[dg.AssetMaterialization]:
    """The account's materializations of ``table`` in the run."""
    node = account_assets().tables[table].node_def.name
    return [m for m in result.asset_materializations_for_node(node) if m.asset_key == _key(table)]


def _funding_rows(root: Path) -> list[tuple[object, ...]]:
    with catalog.connect(Warehouse.open(root)) as con:
        return con.execute(
            "SELECT market, funding_time, position_side, funding_amount, funding_date "
            "FROM funding_history ORDER BY ALL"
        ).fetchall()


def _truth(sim: Simulator, days: list[date]) -> int:
    day_set = {d.isoformat() for d in days}
    from datetime import UTC, datetime

    return sum(
        1
        for r in sim.dataset.funding.newest_first()
        if datetime.fromtimestamp(int(r["fundingTime"]), UTC).date().isoformat() in day_set
    )


def test_a_backfill_of_months_is_one_run_one_walk_and_a_file_a_month(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    months = {
        "dagster/asset_partition_range_start": "2026-08",
        "dagster/asset_partition_range_end": MONTH,
    }
    result = dg.materialize(
        [funding_history], resources=resources_for(own_sim, root), instance=instance, tags=months
    )
    assert result.success
    assert len(instance.get_run_records()) == 1
    # One walk: the simulator answered one ping and the pages of one pass, no more.
    answered = own_sim.state.answered
    pings = sum(n for (path, _), n in answered.items() if path.endswith("/ping"))
    assert pings == 1
    materializations = _materialized(result, "funding_history")
    assert sorted(m.partition for m in materializations) == ["2026-08", MONTH]
    meta = materializations[0].metadata
    all_days = [date(2026, 8, 1) + timedelta(days=n) for n in range(61)]
    assert meta["days_written"].value == 61
    assert meta["dagster/row_count"].value == _truth(own_sim, all_days) > 0
    files = partitions.partition_files(Warehouse.open(root).store, "funding_history")
    assert files == [
        f"parquet/funding_history/account=default/funding_month={month}/data.parquet"
        for month in ("2026-08", MONTH)
    ]
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "unique_keys": True, "no_rejects": True, "reconciles": True, "schema_drift": True
    }  # fmt: skip
    assert meta["unknown_fields"].value == {}


def test_a_run_narrowed_to_days_replaces_those_days_only(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    result = dg.materialize(
        [funding_history], resources=resources_for(own_sim, root), instance=instance,
        partition_key=MONTH, run_config=WEEK_CONFIG,
    )  # fmt: skip
    assert result.success
    meta = _materialized(result, "funding_history")[0].metadata
    assert meta["days_written"].value == 7
    assert meta["dagster/row_count"].value == _truth(own_sim, WEEK)
    assert {row[4] for row in _funding_rows(root)} == set(WEEK)
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert all(checks.values()), checks


def test_days_outside_the_runs_months_are_refused_before_any_request(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    result = dg.materialize(
        [funding_history], resources=resources_for(own_sim, root), instance=instance,
        partition_key="2026-08", run_config=WEEK_CONFIG, raise_on_error=False,
    )  # fmt: skip
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    message = failure.step_failure_data.user_failure_data.description  # type: ignore[union-attr]
    assert "days 2026-09-10 .. 2026-09-16 asked for" in message
    assert "hold 2026-08-01 .. 2026-08-31" in message
    assert sum(own_sim.state.answered.values()) == 0
    assert not any(e.is_step_up_for_retry for e in result.all_events)


def test_a_rerun_replaces_and_leaves_no_duplicate(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    resources = resources_for(own_sim, root)
    dg.materialize([funding_history], resources=resources, instance=instance, partition_key=MONTH)
    first = _funding_rows(root)
    # A rerun of one day of the month, then of a week, then of the whole month again.
    for config in (funding_run(WEEK[3], WEEK[3])["run_config"], WEEK_CONFIG, {}):
        again = dg.materialize(
            [funding_history], resources=resources, instance=instance, partition_key=MONTH,
            run_config=config,
        )  # fmt: skip
        assert again.success
        assert _funding_rows(root) == first
    september = [date(2026, 9, 1) + timedelta(days=n) for n in range(30)]
    assert len(first) == len(set(first)) == _truth(own_sim, september)


def test_the_balances_are_one_step_taken_together_with_when_they_were_seen(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    """The balances and the flows pending: one asset of one step, asked together until two
    collects agreed (on a frozen clock, the first two), each table with the snapshot's bounds
    by the exchange's clock and its own answer's times by this machine's."""
    together = account_assets().tables[spec.MAIN_BALANCES.name]
    assert {k.path[-1] for k in together.keys} == {h.name for h in spec.TOGETHER}
    result = dg.materialize([together], resources=resources_for(own_sim, root), instance=instance)
    assert result.success
    for table in spec.TOGETHER:
        (event,) = _materialized(result, table.name)
        assert event.metadata["collects"].value == 2
    with catalog.connect(Warehouse.open(root)) as con:
        seen = con.execute(
            " UNION ".join(
                f"SELECT DISTINCT observed_from, observed_at, observed_until, consistent, "  # noqa: S608
                f"asked_at <= answered_at FROM {h.name}"
                for h in spec.TOGETHER
            )
        ).fetchall()
    frozen = datetime.fromtimestamp(own_sim.clock.now(), UTC).replace(microsecond=0)
    assert seen == [(frozen, frozen, frozen, True, True)]


def _files_holding(directory: Path, secret: bytes) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file() and secret in p.read_bytes()]


@pytest.mark.slow  # every asset of the location
def test_the_whole_location_materializes_with_checks_and_the_secret_stays_out(
    own_sim: Simulator,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Every asset of the code location as the environment makes it (account ``default``, its
    key in the variables the settings name) in one run of this month: each snapshot for today,
    their checks passed, and the secret set in the environment in no event log, metadata,
    Parquet or DuckDB file."""
    creds = own_sim.credentials
    root = tmp_path / "warehouse"
    for name, value in {
        "WHITEBIT_API_KEY": creds.api_key,
        "WHITEBIT_API_SECRET": creds.api_secret,
        "WHITEBIT_BASE_URL": own_sim.url,
        "WHITEBIT_MINING_ACCOUNTS": ",".join(own_sim.dataset.mining_accounts),
        "WAREHOUSE_ROOT": str(root),
    }.items():
        monkeypatch.setenv(name, value)
    found = location(Settings.from_env())
    (built,) = found.built
    configured = found.definitions.resources
    assert not configured["whitebit_default"].simulated
    month = WALL_CLOCK.today().strftime("%Y-%m")
    result = dg.materialize(
        list(built.assets), resources=configured, instance=instance, partition_key=month
    )
    assert result.success
    # Snapshots are not partitioned: they are taken for today in the month's run. Every one the
    # account's key may read, those nested in another (the investments' plans) from its walk.
    snapshot_keys = set(built.snapshot_keys)
    assert {k.to_user_string() for k in snapshot_keys} == {
        f"default/{h.name}" for h in spec.HISTORIES.values() if not h.monthly
    }
    assert {_key("investments"), _key("fixed_plans")} <= snapshot_keys
    events = result.get_asset_materialization_events()
    snapshot_events = [e for e in events if e.asset_key in snapshot_keys]
    assert {e.asset_key for e in snapshot_events} == snapshot_keys
    assert all(e.partition is None for e in snapshot_events)
    failed = [
        e
        for e in result.get_asset_check_evaluations()
        if e.asset_key in snapshot_keys and not e.passed
    ]
    assert failed == []
    # Every history partitioned by month, the month's.
    monthly = [e for e in events if e.asset_key not in snapshot_keys]
    assert {e.asset_key for e in monthly} == set(built.monthly_keys)
    assert {e.partition for e in monthly} == {month}
    assert len(list(root.rglob("*.parquet"))) >= 7
    with catalog.connect(Warehouse.open(root)) as con:
        views = {
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        }
        counts = dict(
            con.execute(
                "SELECT 'investments', count(*) FROM investments UNION ALL "
                "SELECT 'main_balances', count(*) FROM main_balances UNION ALL "
                "SELECT 'watcher_links', count(*) FROM watcher_links UNION ALL "
                "SELECT 'hedge_mode', count(*) FROM hedge_mode"
            ).fetchall()
        )
    assert {"funding_history", "daily_funding_by_market", "latest_balances"} <= views
    data = own_sim.dataset
    assert counts == {
        "investments": len(data.investments.all()),
        "main_balances": len(data.main_balance),
        "watcher_links": sum(len(v) for v in data.watcher_links.values()),
        "hedge_mode": 1,
    }
    secret = creds.api_secret.encode()
    assert _files_holding(tmp_path, secret) == []  # event log, run storage, Parquet, DuckDB
    output = capfd.readouterr()
    assert creds.api_secret not in output.out + output.err
    for record in instance.get_records_for_run(result.run_id).records:
        assert creds.api_secret not in str(record.event_log_entry)


def test_investments_metadata_reports_the_walk(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    result = dg.materialize(
        [investments], resources=resources_for(own_sim, root), instance=instance,
    )  # fmt: skip
    (materialized,) = _materialized(result, "investments")
    meta = materialized.metadata
    assert meta["pages_fetched"].value >= 1
    for status in (1, 2):
        assert any(f"status={status}" in s for s in meta["slices"].value), status
    assert "preview" in meta


def test_a_refusal_fails_once_with_the_exchanges_message(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    resources = resources_for(own_sim, root)
    resources[ACCOUNT.resource_key] = WhiteBITResource(
        api_key=own_sim.credentials.api_key, api_secret="wrong", base_url=own_sim.url
    )
    result = dg.materialize(
        [funding_history], resources=resources, instance=instance,
        partition_key=MONTH, raise_on_error=False,
    )  # fmt: skip
    assert not result.success
    assert not any(e.is_step_up_for_retry for e in result.all_events)
    failure = next(e for e in result.all_events if e.is_step_failure)
    text = str(failure.step_failure_data)
    assert "Unauthorized request" in text
    assert "wrong" not in text.replace("wrong-", "")


def test_the_resource_sets_how_the_client_retries(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance
) -> None:
    own_sim.faults.set(1.0, [Fault.HTTP_503], paths=[spec.HEDGE_MODE.path])
    result = dg.materialize(
        [without_step_retries(hedge_mode)],
        resources=resources_for(own_sim, root, max_retries=2, initial_retry_delay_s=0.01),
        instance=instance,
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "HTTP 503" in str(failure.step_failure_data)
    assert "(after 3 attempts)" in str(failure.step_failure_data)
    assert own_sim.faults.injected[Fault.HTTP_503] == 3


def test_unknown_fields_are_named_in_metadata_and_warned_of_by_schema_drift(
    own_sim: Simulator, root: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in for the client seeing a field the spec does not name: each call made with a
    # `WalkStats` records one there, as `AsyncWhiteBIT.call` does for the answers it checks.
    call = AsyncWhiteBIT.call

    async def drifting(
        self: AsyncWhiteBIT, operation: spec.Operation, params: Any, **kwargs: Any
    ) -> Any:
        answer = await call(self, operation, params, **kwargs)
        stats = kwargs.get("stats")
        if stats is not None:
            stats.unknown_fields[f"{operation.name}.newField"] = '"x"'
        return answer

    monkeypatch.setattr(AsyncWhiteBIT, "call", drifting)
    # A monthly history, the balances taken together (trading's among them), two snapshots.
    selected = [funding_history, asset("main_balances"), hedge_mode, asset("watcher_links")]
    tables = ["funding_history", "main_balances", "trading_balances", "hedge_mode", "watcher_links"]
    result = dg.materialize(
        selected, resources=resources_for(own_sim, root), instance=instance,
        partition_key=MONTH, run_config=WEEK_CONFIG, raise_on_error=False,
    )  # fmt: skip
    assert result.success  # rows load as without the field: drift only warns
    operation = {"funding_history": "funding_history", "main_balances": "main_balance",
                 "trading_balances": "trading_balance"}  # fmt: skip
    for table in tables:
        field = f"{operation.get(table, table)}.newField"
        (materialized,) = _materialized(result, table)
        assert materialized.metadata["unknown_fields"].value == {field: '"x"'}
        (drift,) = [
            e
            for e in result.get_asset_check_evaluations()
            if (e.asset_key, e.check_name) == (_key(table), "schema_drift")
        ]
        assert not drift.passed
        assert drift.severity == dg.AssetCheckSeverity.WARN
        assert f'{field} (e.g. "x")' in (drift.description or "")
    # Every other check of every table passed (the named tables' three others among them).
    others = [e for e in result.get_asset_check_evaluations() if e.check_name != "schema_drift"]
    named = [e for e in others if e.asset_key in {_key(t) for t in tables}]
    assert len(named) == 3 * len(tables)
    assert all(e.passed for e in others)
