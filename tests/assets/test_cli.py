"""The `whitebit-etl` command as a user types it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
from click.testing import CliRunner

from assets.cli import main
from assets.definitions import location
from assets.jobs import MAX_RUNTIME_TAG, nightly_requests, prices_request
from assets.settings import Settings
from assets.steps import ACCOUNT_TAG
from pipeline import spec
from pipeline.simulator import Simulator
from pipeline.spec import WALL_CLOCK, Clock, SimClock
from warehouse import schemas

COMMANDS = (
    "demo",
    "simulator",
    "ping",
    "materialize",
    "sql",
    "tables",
    "catalog",
    "report",
    "reset-key",
    "move-account",
)


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
    past = "2026-01-01"
    env = {**_exchange_env(own_sim), "WAREHOUSE_ROOT": str(tmp_path / "warehouse")}
    result = CliRunner().invoke(main, ["materialize", asset, "--partition", past], env=env)
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert re.search(rf"can be taken for today \(\d{{4}}-\d\d-\d\d, UTC\) only, not {past}", text)
    assert "cannot tell what it was on another day" in text
    # Refused at once: not even the ping, and no run.
    assert sum(own_sim.state.answered.values()) == 0
    assert not (tmp_path / "warehouse").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["funding_history", "--partition", "TOMORROW"], "TOMORROW is in the future"),
        (["hedge_mode", "--partition", "TOMORROW"], "TOMORROW is in the future"),
        (
            ["--from", "2025-12-31", "--to", "2026-01-02"],
            "2025-12-31 is before the first day of history, 2026-01-01 (WHITEBIT_START_DATE",
        ),
    ],
    ids=["future-history-day", "future-snapshot-day", "before-the-start-date"],
)
def test_a_day_the_exchange_cannot_tell_is_refused_in_one_line_before_any_request(
    own_sim: Simulator, tmp_path: Path, args: list[str], says: str
) -> None:
    tomorrow = (WALL_CLOCK.today() + timedelta(days=1)).isoformat()
    env = {
        **_exchange_env(own_sim),
        "WAREHOUSE_ROOT": str(tmp_path / "warehouse"),
        "WHITEBIT_START_DATE": "2026-01-01",
    }
    asked = [arg.replace("TOMORROW", tomorrow) for arg in args]
    result = CliRunner().invoke(main, ["materialize", *asked], env=env)
    assert result.exit_code == 2, result.output
    (error,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert says.replace("TOMORROW", tomorrow) in error
    assert sum(own_sim.state.answered.values()) == 0
    assert not (tmp_path / "warehouse").exists()


def test_snapshots_named_with_no_day_are_taken_today(own_sim: Simulator, tmp_path: Path) -> None:
    """As the bare command does: no day means today's snapshots, with no day to name. Today is
    the exchange's: the day of its clock (the simulator's, frozen), as its answers said it."""
    env = {**_exchange_env(own_sim), "WAREHOUSE_ROOT": str(tmp_path / "warehouse")}
    exchange_now = datetime.fromtimestamp(own_sim.clock.now(), UTC)
    result = CliRunner().invoke(main, ["materialize", "hedge_mode", "main_balances"], env=env)
    assert result.exit_code == 0, result.output
    # The main balances are taken together with the others (`spec.TOGETHER`): one asset.
    assert f"{len(spec.TOGETHER) + 1} assets: today" in result.output
    with duckdb.connect(str(tmp_path / "warehouse" / "warehouse.duckdb"), read_only=True) as con:
        for table in ("hedge_mode", "main_balances"):
            query = f"SELECT DISTINCT snapshot_date, observed_at FROM {table}"  # noqa: S608
            ((day, observed),) = con.execute(query).fetchall()
            assert observed.astimezone(UTC) == exchange_now, table
            assert day == exchange_now.date(), table
        assert con.execute("SELECT count(*) FROM funding_history").fetchone() == (0,)


def _warehouse_rows(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Each table's rows without the instants of the runs and answers and how the snapshot was
    taken (a snapshot's last column is its snapshot_date)."""
    when = (
        "COLUMNS(lambda c: c NOT IN ('extracted_at', 'observed_at', 'observed_from', "
        "'observed_until', 'asked_at', 'answered_at', 'consistent'))"
    )
    with duckdb.connect(str(root / "warehouse.duckdb"), read_only=True) as con:
        return {
            table: con.execute(f'SELECT {when} FROM "{table}" ORDER BY ALL').fetchall()  # noqa: S608
            for table in schemas.TABLES
        }


def _at(clock: Clock, args: list[str], warehouse: Path, *, accounts: Path | None = None) -> str:
    """``whitebit-etl ARGS`` going by ``clock`` (the command, its runs and the embedded
    simulator in them); with ``accounts``, that accounts file (else no WHITEBIT_ variable: the
    embedded simulator's demo accounts). Returns its output."""
    env: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("WHITEBIT_", "DAGSTER_"))
    }
    env |= {"WAREHOUSE_ROOT": str(warehouse), "WHITEBIT_ACCOUNTS_FILE": None}
    if accounts is not None:
        env["WHITEBIT_ACCOUNTS_FILE"] = str(accounts)
    done = CliRunner().invoke(main, args, env=env, obj=clock)
    assert done.exit_code == 0, done.output[-3000:]
    return done.output


#: The demo's accounts: the embedded simulator's main account and its sub-account sub_1.
DEMO_ACCOUNTS = Path(__file__).resolve().parents[2] / "assets" / "accounts.demo.yaml"


def _funding_by_day(rows: list[tuple[object, ...]]) -> dict[date, list[tuple[object, ...]]]:
    """Funding rows by their funding_date (the last column)."""
    days: dict[date, list[tuple[object, ...]]] = {}
    for row in rows:
        days.setdefault(row[-1], []).append(row)  # type: ignore[arg-type]
    return days


class MidnightAfterAsking(Clock):
    """A second before ``midnight`` when the command first looks (the moment it asks), and from
    midnight on, running, for every look after: midnight passes before any of its runs goes."""

    def __init__(self, midnight: datetime) -> None:
        self.midnight = midnight
        self.asked: float | None = None
        self._after = SimClock(midnight, frozen=False)

    def now(self) -> float:
        if self.asked is None:
            self.asked = self.midnight.timestamp() - 1
            return self.asked
        return self._after.now()


def _run_request(instance: dg.DagsterInstance, run: dg.DagsterRun) -> tuple[object, ...]:
    """What a run was asked for and did: its account, partition, the assets it materialized
    (the run of a job's subset records no selection of its own) and run-time limit."""
    materialized = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    return (
        run.tags[ACCOUNT_TAG],
        run.tags.get("dagster/partition"),
        sorted(
            {e.dagster_event.asset_key.to_user_string() for e in materialized if e.dagster_event}
        ),
        run.tags.get(MAX_RUNTIME_TAG),
    )


def _request(request: dg.RunRequest) -> tuple[object, ...]:
    return (
        request.tags[ACCOUNT_TAG],
        request.partition_key,
        sorted(key.to_user_string() for key in request.asset_selection or ()),
        request.tags.get(MAX_RUNTIME_TAG),
    )


@pytest.mark.slow  # a whole night of two accounts
def test_materialize_with_no_asset_and_no_day_launches_the_schedules_requests_of_the_moment(
    tmp_path: Path,
) -> None:
    """The bare command at a moment of a day: the runs it launched are the schedules' requests
    for that moment, one for one and in order (each account's month that holds yesterday of its
    histories, every day of it so far, and its snapshots of today; then the exchange's prices;
    then what each account's views say). The demo's accounts, each of a history of each paging
    and two snapshots: the requests are the test."""
    at = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    warehouse = tmp_path / "warehouse"
    accounts = tmp_path / "accounts.yaml"
    chosen = "funding_history, trades, deposits_withdrawals, hedge_mode, main_balances"
    lines = []
    for line in DEMO_ACCOUNTS.read_text().splitlines():
        lines.append(line)
        if line.startswith("    simulator: "):
            lines.append(f"    histories: [{chosen}]")
    accounts.write_text("\n".join(lines) + "\n")
    said = _at(SimClock(at, frozen=False), ["materialize"], warehouse, accounts=accounts)
    assert said.count("succeeded") == 7, said
    settings = Settings.from_env({"WHITEBIT_ACCOUNTS_FILE": str(accounts)})
    where = location(settings)
    built = where.built
    scheduled = list(nightly_requests(built, at))
    assert where.prices is not None
    prices = prices_request(where.prices, at.date())
    assert {k.path[-1] for r in scheduled for k in r.asset_selection or ()} == {
        "funding_history", "trades", "deposits_withdrawals", "hedge_mode", "main_balances"
    }  # fmt: skip
    # The night ends with what the views say, as the watch job checks it: after the prices,
    # whose values the views hold.
    views = [assets.views_request() for assets in built]
    expected = [
        *[r for r in scheduled if r.tags[ACCOUNT_TAG] == "main"],
        *[r for r in scheduled if r.tags[ACCOUNT_TAG] == "sub_1"],
        prices, *views,
    ]  # fmt: skip
    with dg.DagsterInstance.from_config(str(warehouse / "dagster")) as instance:
        records = sorted(instance.get_run_records(), key=lambda r: r.start_time or 0.0)
        launched = [_run_request(instance, record.dagster_run) for record in records]
    assert launched == [_request(request) for request in expected if request is not None]
    assert [r[:2] for r in launched] == [
        ("main", "2026-11"), ("main", None), ("sub_1", "2026-11"), ("sub_1", None),
        ("exchange", None), ("main", None), ("sub_1", None),
    ]  # fmt: skip
    assert [r[2] for r in launched][4:] == [["exchange/daily_candles"], [], []]
    rows = _warehouse_rows(warehouse)
    for account in ("main", "sub_1"):
        days = sorted({row[-1] for row in rows["funding_history"] if row[0] == account})
        # Every day of the month so far, today's funding at its start included.
        assert days == [date(2026, 11, 1) + timedelta(days=n) for n in range(25)], account
        taken = {row[-1] for row in rows["hedge_mode"] if row[0] == account}
        assert taken == {at.date()}, account


@pytest.mark.slow
def test_demos_a_day_apart_across_midnight_rerun_the_first_range_unchanged(
    tmp_path: Path,
) -> None:
    """A demo that asks a second before UTC midnight, whose runs all go after it: its days and
    its snapshots' days are those of the moment it asked, and nothing is refused. The next day,
    the first demo's range is run again and the demo too: the simulator answers the days it
    answered before, so nothing is refused for shrinking, and a rerun changes nothing else but
    extracted_at."""
    midnight = datetime(2026, 11, 25, tzinfo=UTC)
    warehouse = tmp_path / "warehouse"
    clock = MidnightAfterAsking(midnight)
    said = _at(clock, ["demo"], warehouse)
    assert clock.asked == midnight.timestamp() - 1
    assert "Rows per table and account" in said
    assert "balances_across_accounts" in said  # the query across the two accounts
    assert "FROM account_value" in said  # and what each is worth, the exchange's prices read
    assert re.search(r"daily_candles, the exchange's: [1-9]\d* rows of [1-9]\d* markets", said)
    assert "make ui" in said
    # The demo ends by writing the report of both accounts, and says where.
    assert "Report of main, sub_1" in said
    page = (warehouse / "report.html").read_text()
    assert 'data-headline="accounts" data-exact="main, sub_1"' in page
    first = _warehouse_rows(warehouse)
    assert len(first["funding_history"]) > 500
    assert all(first[t] for t in schemas.TABLES if t != "_rejects")
    # The runs went through Dagster, into the instance `make ui` opens; every one after midnight.
    with dg.DagsterInstance.from_config(str(warehouse / "dagster")) as instance:
        runs = [record.dagster_run.run_id for record in instance.get_run_records()]
    assert len(runs) > 4
    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        stamped = con.execute("SELECT min(extracted_at) FROM funding_history").fetchall()
    assert stamped[0][0] >= midnight
    first_days = _funding_by_day(first["funding_history"])
    # The range ends on the day the demo asked on, whose funding at its start is in the
    # balances of the demo's last snapshots: those of that day's start and of the day before's.
    end = date(2026, 11, 24)
    assert sorted(first_days) == [end - timedelta(days=n) for n in range(30, -1, -1)]
    taken = {r[-1] for r in first["hedge_mode"]}
    assert taken == {end - timedelta(days=1), end}, taken
    whole = {day: rows for day, rows in first_days.items() if day != end}

    assert {r[0] for r in first["funding_history"]} == {"main", "sub_1"}
    next_day = SimClock(datetime(2026, 11, 25, 12, tzinfo=UTC))
    rerun = ["materialize", "funding_history", "--from", str(min(first_days)), "--to", str(end)]
    said = _at(next_day, rerun, warehouse, accounts=DEMO_ACCOUNTS)
    # The same range a day later: the same rows, only extracted_at is new.
    again = _funding_by_day(_warehouse_rows(warehouse)["funding_history"])
    assert again == first_days
    said += _at(next_day, ["demo"], warehouse)
    assert "refus" not in said
    second = _funding_by_day(_warehouse_rows(warehouse)["funding_history"])
    assert {day: second[day] for day in whole} == whole
    assert set(first_days[end]) <= set(second[end])
    assert max(second) == end + timedelta(days=1)  # the second demo's range went a day further
    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        stamped = con.execute("SELECT DISTINCT extracted_at FROM funding_history").fetchall()
    assert stamped == [(next_day.moment(),)]


@pytest.mark.parametrize("command", [["materialize"], ["ping"], ["report"]])
def test_a_key_without_its_secret_is_refused_in_one_line_naming_the_secret(
    command: list[str], tmp_path: Path
) -> None:
    """Never the embedded simulator in a warehouse meant for a real account."""
    env = {"WHITEBIT_API_KEY": "a-key", "WAREHOUSE_ROOT": str(tmp_path / "warehouse")}
    result = CliRunner().invoke(main, command, env=env)
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: WHITEBIT_API_SECRET not set (with WHITEBIT_API_KEY set)")
    assert not (tmp_path / "warehouse").exists()


def test_demo_refuses_to_run_with_real_credentials() -> None:
    result = CliRunner().invoke(
        main, ["demo"], env={"WHITEBIT_API_KEY": "k", "WHITEBIT_API_SECRET": "s"}
    )
    assert result.exit_code == 1
    assert "embedded simulator's accounts only" in result.output
    result = CliRunner().invoke(main, ["demo"], env={"WHITEBIT_ACCOUNTS_FILE": "accounts.yaml"})
    assert result.exit_code == 1
    assert "WHITEBIT_ACCOUNTS_FILE set" in result.output


def test_the_commands_the_demo_hints_run_in_a_plain_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45, problem 5: `make demo` runs the demo through `uv run`, which puts .venv/bin first
    on the PATH, and the demo's closing hint said `whitebit-etl sql ...`: `command not found` in
    the user's shell. It names the command as the user's shell finds it, from where it ran."""
    from assets.cli._common import this_command

    script = Path(sys.prefix) / "bin" / "whitebit-etl"
    here = Path(sys.prefix).parent
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    monkeypatch.setenv("PATH", f"{script.parent}:{os.environ['PATH']}")  # as `uv run` sets it
    monkeypatch.chdir(here)
    hint = this_command()
    assert hint == str(script.relative_to(here))  # .venv/bin/whitebit-etl after `make`
    plain = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    shown = subprocess.run(
        ["sh", "-c", f"{hint} tables hedge_mode"], cwd=here, env=plain, capture_output=True,
        text=True, check=False, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "hedge_mode" in shown.stdout
