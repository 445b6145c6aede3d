"""A secret set in the environment reaches no event log, no metadata, no Parquet, no DuckDB."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.definitions import location
from assets.settings import Settings
from pipeline.simulator import Simulator
from pipeline.spec import WALL_CLOCK


def _files_holding(directory: Path, secret: bytes) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file() and secret in p.read_bytes()]


def test_the_environments_secret_stays_out_of_dagster_and_the_warehouse(
    own_sim: Simulator,
    tmp_path: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    creds = own_sim.credentials
    warehouse = tmp_path / "warehouse"
    for name, value in {
        "WHITEBIT_API_KEY": creds.api_key,
        "WHITEBIT_API_SECRET": creds.api_secret,
        "WHITEBIT_BASE_URL": own_sim.url,
        "WHITEBIT_MINING_ACCOUNTS": ",".join(own_sim.dataset.mining_accounts),
        "WAREHOUSE_ROOT": str(warehouse),
    }.items():
        monkeypatch.setenv(name, value)
    # The code location as the environment makes it: account default, its key by name.
    found = location(Settings.from_env())
    (built,) = found.built
    configured = found.definitions.resources
    assert not configured["whitebit_default"].simulated
    result = dg.materialize(
        list(built.assets), resources=configured, instance=instance,
        partition_key=WALL_CLOCK.today().strftime("%Y-%m"),
    )  # fmt: skip
    assert result.success
    assert len(list(warehouse.rglob("*.parquet"))) >= 7
    assert (warehouse / "warehouse.duckdb").exists()
    secret = creds.api_secret.encode()
    assert _files_holding(tmp_path, secret) == []  # event log, run storage, Parquet, DuckDB
    output = capfd.readouterr()
    assert creds.api_secret not in output.out + output.err
    for record in instance.get_records_for_run(result.run_id).records:
        assert creds.api_secret not in str(record.event_log_entry)
