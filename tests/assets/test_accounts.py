"""The accounts file: refused at load with its line and reason; each account an asset set."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from click.testing import CliRunner

from assets import accounts as accounts_module
from assets.accounts import DEFAULT_ACCOUNT, Account, AccountsFileError
from assets.cli import main
from assets.definitions import Location, location
from assets.jobs import nightly_requests
from assets.settings import Settings, SettingsError
from pipeline import spec

ENV = {"MAIN_KEY": "k", "MAIN_SECRET": "s", "EU_KEY": "k2", "EU_SECRET": "s2"}

GOOD = """\
# Two accounts of a desk.
accounts:
  - name: main
    api_key_env: MAIN_KEY
    api_secret_env: MAIN_SECRET
    mining_accounts: [pool-a]
  - name: desk_eu
    base_url: eu
    api_key_env: EU_KEY
    api_secret_env: EU_SECRET
    markets: [BTC_PERP]
    investments: false
"""


def _file(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "accounts.yaml"
    path.write_text(text)
    return {**ENV, "WHITEBIT_ACCOUNTS_FILE": str(path)}


def load(env: dict[str, str]) -> tuple[Account, ...]:
    """The accounts of the settings of ``env``."""
    return accounts_module.load(Settings.from_env(env))


def _location(env: dict[str, str]) -> Location:
    """The code location of the settings of ``env``."""
    return location(Settings.from_env(env))


def test_a_file_gives_its_accounts_with_variable_names_never_values(tmp_path: Path) -> None:
    main, eu = load(_file(tmp_path, GOOD))
    assert (main.name, main.base_url, main.key_env, main.mining_accounts) == (
        "main", spec.GLOBAL_BASE_URL, "MAIN_KEY", ("pool-a",)
    )  # fmt: skip
    assert (eu.name, eu.base_url, eu.markets, eu.investments) == (
        "desk_eu", spec.EU_BASE_URL, ("BTC_PERP",), False
    )  # fmt: skip
    assert "k2" not in repr(eu)
    assert "s2" not in repr(eu)


def test_without_a_file_the_single_account_variables_make_one_account_named_default() -> None:
    (account,) = load({"WHITEBIT_API_KEY": "k", "WHITEBIT_API_SECRET": "s"})
    assert (account.name, account.key_env, account.secret_env, account.base_url) == (
        DEFAULT_ACCOUNT, "WHITEBIT_API_KEY", "WHITEBIT_API_SECRET", spec.GLOBAL_BASE_URL
    )  # fmt: skip
    assert account.name == "default"
    assert account.key_prefix == ["default"]  # its keys are prefixed as every account's are
    assert not account.simulated
    (given,) = load(
        {
            "WHITEBIT_API_KEY": "k",
            "WHITEBIT_API_SECRET": "s",
            "WHITEBIT_BASE_URL": "eu",
            "WHITEBIT_MINING_ACCOUNTS": "pool-a, pool-b",
            "WHITEBIT_MARKETS": "BTC_PERP",
            "WHITEBIT_HISTORIES": "funding_history, trades",
        }
    )
    assert (given.base_url, given.mining_accounts, given.markets, given.investments) == (
        spec.EU_BASE_URL, ("pool-a", "pool-b"), ("BTC_PERP",), True
    )  # fmt: skip
    assert (account.histories, given.histories) == (None, {"funding_history", "trades"})
    with pytest.raises(SettingsError, match=r"^WHITEBIT_HISTORIES: 'fills' is not a history"):
        load({"WHITEBIT_API_KEY": "k", "WHITEBIT_API_SECRET": "s", "WHITEBIT_HISTORIES": "fills"})


def test_without_any_variable_the_accounts_are_the_simulators_demo_accounts() -> None:
    main, sub = load({})
    assert (main.name, main.simulated, main.simulator_key, main.investments) == (
        "main", True, "partner", True
    )  # fmt: skip
    assert (sub.name, sub.simulated, sub.simulator_key, sub.investments) == (
        "sub_1", True, "sub_1", False
    )  # fmt: skip


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"WHITEBIT_API_KEY": "k"}, "WHITEBIT_API_SECRET not set"),
        ({"WHITEBIT_API_SECRET": "s"}, "WHITEBIT_API_KEY not set"),
        ({"WHITEBIT_API_KEY": "k", "WHITEBIT_API_SECRET": ""}, "WHITEBIT_API_SECRET not set"),
        (
            {"WHITEBIT_BASE_URL": "eu"},
            "WHITEBIT_API_KEY and WHITEBIT_API_SECRET not set (with WHITEBIT_BASE_URL set)",
        ),
        (
            {"WHITEBIT_MARKETS": "BTC_PERP"},
            "WHITEBIT_API_KEY and WHITEBIT_API_SECRET not set (with WHITEBIT_MARKETS set)",
        ),
    ],
)
def test_a_single_account_variable_without_the_key_and_the_secret_is_refused(
    env: dict[str, str], missing: str
) -> None:
    """Never the embedded simulator in a warehouse meant for a real account."""
    with pytest.raises(SettingsError) as refused:
        load(env)
    assert missing in str(refused.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("    investments: false\n", "    investments: false\n    colour: red\n"),
         "line 13: accounts.1.colour: unknown field"),
        (("name: desk_eu", "name: main"),
         "line 7: account 'main' is named twice (first on line 3)"),
        (("EU_SECRET", "UNSET_SECRET"),
         "line 10: account 'desk_eu': the variable UNSET_SECRET (api_secret_env) is not set"),
        (("name: desk_eu", "name: ../desk"),
         "line 7: accounts.1.name: '../desk' is not a safe name"),
        (("name: desk_eu", "name: Desk-EU"),
         "line 7: accounts.1.name: 'Desk-EU' is not a safe name"),
        (("base_url: eu", "base_url: ftp://x"),
         "line 8: accounts.1.base_url: 'ftp://x': give global, eu or an http(s) URL"),
        (("    api_key_env: EU_KEY\n", ""),
         "line 7: accounts.1: give both api_key_env and api_secret_env (or simulator)"),
        (("markets: [BTC_PERP]", "markets: [BTCUSDT]"),
         "line 11: accounts.1.markets: 'BTCUSDT' is not a perpetual market"),
        (("markets: [BTC_PERP]", "histories: [trades, fills]"),
         "line 11: accounts.1.histories: 'fills' is not a history (one of: funding_history, "),
        (("markets: [BTC_PERP]", "histories: [fixed_plans]"),
         "line 11: accounts.1.histories: 'fixed_plans' is not a history"),
        (("markets: [BTC_PERP]", "histories: []"),
         "line 11: accounts.1.histories: List should have at least 1 item"),
    ],
)  # fmt: skip
def test_a_wrong_file_is_refused_with_its_line_and_reason(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    env = _file(tmp_path, GOOD.replace(*change))
    with pytest.raises(AccountsFileError) as error:
        load(env)
    assert str(error.value).startswith(f"{tmp_path / 'accounts.yaml'}, ")
    assert expected in str(error.value)


@pytest.mark.parametrize(
    ("field", "variable", "value"),
    [
        ("markets", "WHITEBIT_MARKETS", "BTC_USDT"),
        ("base_url", "WHITEBIT_BASE_URL", "http://whitebit.com"),
        ("base_url", "WHITEBIT_BASE_URL", "ftp://x"),
        ("histories", "WHITEBIT_HISTORIES", "fills"),
    ],
)
def test_a_single_account_variable_is_refused_as_the_files_field_is(
    tmp_path: Path, field: str, variable: str, value: str
) -> None:
    """The variable's value, and the file's field holding the same, refused before any request
    with the same reason (a list field given as its one item)."""
    listed = value if field == "base_url" else f"[{value}]"
    pool = "    mining_accounts: [pool-a]\n"
    with pytest.raises(AccountsFileError) as in_the_file:
        load(_file(tmp_path, GOOD.replace(pool, f"{pool}    {field}: {listed}\n")))
    with pytest.raises(SettingsError) as in_the_variable:
        load({"WHITEBIT_API_KEY": "k", "WHITEBIT_API_SECRET": "s", variable: value})
    reason = str(in_the_variable.value).removeprefix(f"{variable}: ")
    assert reason != str(in_the_variable.value)
    assert str(in_the_file.value).endswith(f", line 7: accounts.0.{field}: {reason}")


def test_a_missing_or_unreadable_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AccountsFileError, match="cannot be read"):
        load({"WHITEBIT_ACCOUNTS_FILE": str(tmp_path / "nope.yaml")})
    with pytest.raises(AccountsFileError, match="not YAML"):
        load(_file(tmp_path, "accounts: [\n"))
    with pytest.raises(AccountsFileError, match="line 1: accounts: List should have at least 1"):
        load(_file(tmp_path, "accounts: []\n"))


def test_each_account_is_an_asset_set_under_its_prefix_group_and_pool(tmp_path: Path) -> None:
    found = _location(_file(tmp_path, GOOD))
    built = found.built
    main, eu = (
        {key.to_user_string(): asset for asset in b.assets for key in asset.keys} for b in built
    )
    # Every declared history is an asset of the account.
    assert set(main) == {f"main/{name}" for name in spec.HISTORIES}
    assert "main/investments" in main
    # Its key may not read the investments history: no investments asset to fail each night.
    assert set(eu) == {
        f"desk_eu/{h.name}" for h in spec.HISTORIES.values() if h.access != "investments"
    }
    assert not {"desk_eu/investments", "desk_eu/fixed_plans"} & set(eu)
    funding = main["main/funding_history"]
    assert funding.group_names_by_key[dg.AssetKey(["main", "funding_history"])] == "main"
    assert {funding.op.pool, eu["desk_eu/hedge_mode"].op.pool} == {
        "whitebit_api_main", "whitebit_api_desk_eu"
    }  # fmt: skip
    assert funding.backfill_policy == dg.BackfillPolicy.single_run()
    # The code location loads, every account's checks and jobs resolved.
    defs = found.definitions
    assert defs.resolve_job_def("funding_history_job") is not None
    # And one report of them all.
    assert {key.to_user_string() for key in defs.resolve_all_asset_keys()} == {
        *main, *eu, "account_report", "exchange/daily_candles"
    }  # fmt: skip
    assert found.jobs.watch_checks


def test_an_account_extracts_the_histories_it_names_and_is_reconciled_only_with_all(
    tmp_path: Path,
) -> None:
    chosen = "    histories: [funding_history, investments, main_balances]\n"
    found = _location(_file(tmp_path, GOOD.replace("    mining_accounts: [pool-a]\n", chosen)))
    main, eu = found.built
    # A nested history comes with its own (fixed_plans with investments).
    assert {k.to_user_string() for k in main.keys} == {
        "main/funding_history", "main/investments", "main/fixed_plans", "main/main_balances"
    }  # fmt: skip
    assert {k.path[-1] for k in eu.keys} == {
        h.name for h in spec.HISTORIES.values() if h.access != "investments"
    }
    checked = {
        (key.asset_key.to_user_string(), key.name)
        for check in found.jobs.watch_checks
        for key in check.check_keys
    }
    # The reconciliation needs every flow: the account that extracts some is not reconciled.
    assert ("desk_eu/main_balances", "balances_reconcile") in checked
    assert not {c for c in checked if c[0].startswith("main/") and c[1] == "balances_reconcile"}
    assert ("main/funding_history", "nightly_partition_fresh") in checked
    # Naming every history its key may read is extracting them all: reconciled.
    every = [h.name for h in spec.HISTORIES.values() if h.nested_in is None]
    assert not main.account.extracts_all
    assert replace(main.account, histories=frozenset(every)).extracts_all
    requests = list(nightly_requests(found.built, datetime(2026, 3, 1, 0, 30, tzinfo=UTC)))
    assert {k.to_user_string() for r in requests for k in r.asset_selection or ()} >= {
        "main/funding_history", "main/investments", "main/fixed_plans", "main/main_balances"
    }  # fmt: skip


def test_the_nightly_schedule_asks_each_account_for_its_own_two_runs(tmp_path: Path) -> None:
    built = _location(_file(tmp_path, GOOD)).built
    asked = list(nightly_requests(built, datetime(2026, 3, 1, 0, 30, tzinfo=UTC)))
    assert [(r.run_key, r.partition_key, r.tags["whitebit/account"]) for r in asked] == [
        ("main:histories:2026-02-28", "2026-02", "main"),
        ("main:snapshots:2026-03-01", None, "main"),
        ("desk_eu:histories:2026-02-28", "2026-02", "desk_eu"),
        ("desk_eu:snapshots:2026-03-01", None, "desk_eu"),
    ]
    # The snapshots its key may read: every snapshot but the investments (and their plans).
    assert {k.to_user_string() for k in asked[3].asset_selection or ()} == {
        f"desk_eu/{h.name}"
        for h in spec.HISTORIES.values()
        if not h.monthly and h.access != "investments"
    }
    assert {k.to_user_string() for k in asked[2].asset_selection or ()} == {
        f"desk_eu/{h.name}" for h in spec.HISTORIES.values() if h.monthly
    }
    # Failed by the daemon past it, should a worker's machine be lost mid-run.
    assert {r.tags["dagster/max_runtime"] for r in asked} == {str(4 * 3600)}


def test_the_example_file_loads_once_its_variables_are_set() -> None:
    example = Path(__file__).resolve().parents[2] / "accounts.example.yaml"
    named = re.findall(r"_env: (\w+)", example.read_text())
    found = _location({"WHITEBIT_ACCOUNTS_FILE": str(example), **dict.fromkeys(named, "set")})
    assert [a.name for a in found.accounts] == ["main", "hedge_sub", "desk_eu"]
    assert found.definitions.resolve_job_def("nightly") is not None


DEMO_ACCOUNTS = Path(__file__).resolve().parents[2] / "assets" / "accounts.demo.yaml"


def test_a_table_one_account_has_not_is_left_out_for_it_unless_it_is_named(
    tmp_path: Path,
) -> None:
    """The demo's accounts on the embedded simulator: only the main account's key may read the
    investments history."""
    env = {"WHITEBIT_ACCOUNTS_FILE": str(DEMO_ACCOUNTS), "WAREHOUSE_ROOT": str(tmp_path / "w")}
    runner = CliRunner()
    named = runner.invoke(main, ["materialize", "investments", "--account", "sub_1"], env=env)
    assert named.exit_code == 2
    assert "unknown asset(s) investments of account sub_1" in named.output
    nobody = runner.invoke(main, ["materialize", "nope"], env=env)
    assert nobody.exit_code == 2
    # Every asset of any account is offered, in order.
    offered = ", ".join(sorted(spec.HISTORIES))
    assert f"unknown asset(s) nope; assets: {offered}" in " ".join(nobody.output.split())
    assert "left out" not in nobody.output
    every = runner.invoke(main, ["materialize", "investments"], env=env)
    assert every.exit_code == 0, every.output
    assert "sub_1 has no investments: left out" in every.output
    with duckdb.connect(str(tmp_path / "w" / "warehouse.duckdb"), read_only=True) as con:
        found = con.execute("SELECT DISTINCT account FROM investments").fetchall()
    assert found == [("main",)]
