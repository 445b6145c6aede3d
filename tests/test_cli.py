"""The `whitebit-etl` command as a user types it."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from assets.cli import main
from assets.partitions import today
from pipeline.simulator import Simulator
from warehouse import schemas

COMMANDS = ("demo", "simulator", "ping", "materialize", "sql", "tables", "reset-key")


def _exchange_env(sim: Simulator) -> dict[str, str]:
    return {
        "WHITEBIT_API_KEY": sim.credentials.api_key,
        "WHITEBIT_API_SECRET": sim.credentials.api_secret,
        "WHITEBIT_BASE_URL": sim.url,
    }


def test_every_command_has_help() -> None:
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0
    for command in COMMANDS:
        assert command in top.output
        sub = runner.invoke(main, [command, "--help"])
        assert sub.exit_code == 0, sub.output
        assert "Usage:" in sub.output


def test_ping_says_pong(own_sim: Simulator) -> None:
    result = CliRunner().invoke(main, ["ping"], env=_exchange_env(own_sim))
    assert result.exit_code == 0, result.output
    assert f"pong from {own_sim.url}" in result.output


@pytest.mark.parametrize("value", ["123", "not-a-uuid", "00000000-0000-4000-8000-00000000000"])
def test_reset_key_refuses_what_is_not_a_uuid(value: str) -> None:
    result = CliRunner().invoke(main, ["reset-key", "--api-key-id", value, "--yes"])
    assert result.exit_code == 2
    assert "is not a UUID" in result.output


def test_reset_key_asks_first_and_does_nothing_when_declined(own_sim: Simulator) -> None:
    key_id = own_sim.keys.subaccount_ids[0]
    before = own_sim.credentials_for("sub_1").api_secret
    result = CliRunner().invoke(
        main, ["reset-key", "--api-key-id", key_id], input="n\n", env=_exchange_env(own_sim)
    )
    assert result.exit_code == 1
    assert "Reset the secret of sub-account key" in result.output
    assert own_sim.credentials_for("sub_1").api_secret == before


def test_reset_key_with_yes_resets(own_sim: Simulator) -> None:
    key_id = own_sim.keys.subaccount_ids[1]
    before = own_sim.credentials_for("sub_2").api_secret
    result = CliRunner().invoke(
        main, ["reset-key", "--api-key-id", key_id, "--yes"], env=_exchange_env(own_sim)
    )
    assert result.exit_code == 0, result.output
    assert f"key {key_id} reset" in result.output
    assert own_sim.credentials_for("sub_2").api_secret != before


def test_reset_key_of_an_unknown_key_says_so(own_sim: Simulator) -> None:
    result = CliRunner().invoke(
        main,
        ["reset-key", "--api-key-id", "3fa85f64-5717-4562-b3fc-2c963f66afa6", "--yes"],
        env=_exchange_env(own_sim),
    )
    assert result.exit_code == 1
    assert "API key not found" in result.output
    assert own_sim.credentials.api_secret not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--partition", "2026-01-01", "--from", "2026-01-01", "--to", "2026-01-02"], "not both"),
        (["--from", "2026-01-01"], "both --from and --to"),
        (["--from", "2026-01-05", "--to", "2026-01-01"], "is before"),
        (["nope", "--partition", "2026-01-01"], "unknown asset"),
        (["funding_history"], "name a day"),
        (["--partition", "yesterday"], "Invalid value"),
    ],
)
def test_materialize_explains_bad_arguments(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["materialize", *args])
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize("asset", ["hedge_mode", "investments"])
def test_a_past_snapshot_is_refused_before_any_request(
    own_sim: Simulator, tmp_path: Path, asset: str
) -> None:
    yesterday = (today() - timedelta(days=1)).isoformat()
    env = {**_exchange_env(own_sim), "WAREHOUSE_ROOT": str(tmp_path / "warehouse")}
    result = CliRunner().invoke(main, ["materialize", asset, "--partition", yesterday], env=env)
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert f"can be taken for today ({today().isoformat()}, UTC) only, not {yesterday}" in text
    assert "cannot tell what it was on a past day" in text
    # Refused at once: not even the ping, and no run.
    assert sum(own_sim.state.answered.values()) == 0
    assert not (tmp_path / "warehouse").exists()


def _warehouse_rows(root: Path) -> dict[str, list[tuple[object, ...]]]:
    with duckdb.connect(str(root / "warehouse.duckdb"), read_only=True) as con:
        return {
            table: con.execute(
                f'SELECT * EXCLUDE (extracted_at) FROM "{table}" ORDER BY ALL'  # noqa: S608
            ).fetchall()
            for table in schemas.TABLES
        }


@pytest.mark.slow
def test_demo_twice_changes_nothing_but_extracted_at(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WHITEBIT_", "DAGSTER_"))}
    env["WAREHOUSE_ROOT"] = str(tmp_path / "data")
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "assets.cli", "demo"],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        runs.append(_warehouse_rows(tmp_path / "data"))
        assert "Rows per table" in done.stdout
        assert "daily_funding_by_market" in done.stdout
        assert "make ui" in done.stdout
    first, second = runs
    assert first == second
    assert len(first["funding_history"]) > 500
    assert all(first[t] for t in schemas.TABLES if t != "_rejects")
    # The runs went through Dagster, into the instance `make ui` opens.
    assert (tmp_path / "data" / "dagster" / "dagster.yaml").exists()


def test_demo_refuses_to_run_with_real_credentials() -> None:
    result = CliRunner().invoke(
        main, ["demo"], env={"WHITEBIT_API_KEY": "k", "WHITEBIT_API_SECRET": "s"}
    )
    assert result.exit_code == 1
    assert "embedded simulator only" in result.output
