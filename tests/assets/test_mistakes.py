"""A user's usual mistakes, each through the real command: every one ends with its one line
(``Error: ...``) and its exit status, never a traceback, never a secret it was given, and writes
nothing it was not asked to. The table runs in this process (the command's own code, as the
console script calls it); a few run as the child process a user starts, where a traceback would
show on stderr."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from assets.cli import main
from tests.support.cli_runs import CLI_TIMEOUT_S
from tests.support.s3 import S3Server, fresh_s3_filesystems
from warehouse import Warehouse, layout, schemas, sources

TODAY = datetime.now(UTC).date()
#: Secrets a case hands the command; none may come out.
SECRET, KEY_ID = "sekrit-0123456789", "AKIAXXXXEXAMPLE"


@dataclass(frozen=True)
class Mistake:
    """A command with a mistake in it, and how it must end."""

    args: list[str]
    #: Variables set for the command (on top of a clean environment).
    env: dict[str, str]
    status: int
    #: The one error line, as a regular expression.
    line: str
    #: Files the case writes in its directory before the command (path -> bytes).
    files: dict[str, bytes] = field(default_factory=dict)
    #: What must not exist afterwards (relative to the case's directory).
    not_created: tuple[str, ...] = ()
    #: At most this many seconds.
    within_s: float = CLI_TIMEOUT_S
    #: The error line is all the command prints (a setting refused before anything ran).
    alone: bool = False


def _accounts_two_of_one() -> bytes:
    """An accounts file of two accounts, the second's variables never exported (the README's
    steps followed for the main account only)."""
    return (
        b"accounts:\n"
        b"  - name: main\n    api_key_env: MAIN_KEY\n    api_secret_env: MAIN_SECRET\n"
        b"  - name: other\n    api_key_env: OTHER_KEY\n    api_secret_env: OTHER_SECRET\n"
    )


def _accounts_naming(field: str, value: str) -> bytes:
    """An accounts file of one account whose ``field`` (a variable's name) is ``value``."""
    names = {"api_key_env": "MAIN_KEY", "api_secret_env": "MAIN_SECRET", field: value}
    lines = ["accounts:", "  - name: main", *(f"    {k}: {v}" for k, v in names.items())]
    return "\n".join([*lines, ""]).encode()


def _no_rows() -> bytes:
    """A partition of the funding history with no row: a warehouse that holds an account."""
    out = io.BytesIO()
    pq.write_table(schemas.TABLES[FUNDING].arrow_schema.empty_table(), out)
    return out.getvalue()


FUNDING = "funding_history"
S3_ROOT = f"s3://{KEY_ID}:{SECRET}@team-bucket/x"
REAL = {"WHITEBIT_BASE_URL": "https://whitebit.com"}
#: A secret as a user pastes it where its variable's name belongs: spaces and '/' in it. Its own
#: (no client is ever given it): the files a case writes hold it, and the session's secrets scan
#: reads them for the secrets the tests gave a client.
PASTED = "pasted-0123456789/Ab+c d=="
PASTED_HEAD = PASTED.split("/")[0]
#: The single account's credentials, and an exchange address in the clear.
SINGLE = {"WHITEBIT_API_KEY": KEY_ID, "WHITEBIT_API_SECRET": SECRET}
PLAIN = {**SINGLE, "WHITEBIT_BASE_URL": "http://whitebit.com"}
IN_THE_CLEAR = (
    r"^Error: WHITEBIT_BASE_URL: 'http://whitebit.com': refusing plain http:// to whitebit.com: "
    r"signed requests would cross the network unencrypted; use https://"
)
KEY_UUID = "3f2504e0-4f89-11d3-9a0c-0305e82c3301"

MISTAKES: dict[str, Mistake] = {
    "a key without its secret": Mistake(
        ["materialize", "hedge_mode"],
        {"WHITEBIT_API_KEY": KEY_ID, **REAL},
        1,
        r"^Error: WHITEBIT_API_SECRET not set \(with WHITEBIT_API_KEY, WHITEBIT_BASE_URL set\)",
        not_created=("data", "data-demo"),
    ),
    "a secret without its key": Mistake(
        ["ping"],
        {"WHITEBIT_API_SECRET": SECRET},
        1,
        r"^Error: WHITEBIT_API_KEY not set \(with WHITEBIT_API_SECRET set\)",
    ),
    "credentials in an s3 root given": Mistake(
        ["catalog", "--root", S3_ROOT],
        {},
        1,
        r"^Error: a s3:// root names a bucket only; credentials come from",
    ),
    "credentials in WAREHOUSE_ROOT, sql": Mistake(
        ["sql", "SELECT 1"], {"WAREHOUSE_ROOT": S3_ROOT}, 1, r"^Error: a s3:// root names"
    ),
    "credentials in WAREHOUSE_ROOT, materialize": Mistake(
        ["materialize", "hedge_mode"], {"WAREHOUSE_ROOT": S3_ROOT}, 1, r"^Error: a s3:// root"
    ),
    "credentials in WAREHOUSE_ROOT, report": Mistake(
        ["report"], {"WAREHOUSE_ROOT": S3_ROOT}, 1, r"^Error: a s3:// root names"
    ),
    "credentials in the base URL": Mistake(
        ["ping"],
        {
            "WHITEBIT_API_KEY": "k",
            "WHITEBIT_API_SECRET": SECRET,
            "WHITEBIT_BASE_URL": f"https://{KEY_ID}:{SECRET}@whitebit.com",
        },
        1,
        r"^Error: WHITEBIT_BASE_URL: https://whitebit.com carries user info before '@'",
    ),
    "an accounts file with a variable not exported, ping": Mistake(
        ["ping"],
        {"WHITEBIT_ACCOUNTS_FILE": "accounts.yaml", "MAIN_KEY": KEY_ID, "MAIN_SECRET": SECRET},
        1,
        r"^Error: accounts.yaml, line 6: account 'other': the variable OTHER_KEY \(api_key_env\) "
        r"is not set$",
        files={"accounts.yaml": _accounts_two_of_one()},
    ),
    "an accounts file with a variable not exported, reset-key": Mistake(
        ["reset-key", "--account", "main", "--api-key-id", KEY_UUID],
        {"WHITEBIT_ACCOUNTS_FILE": "accounts.yaml", "MAIN_KEY": KEY_ID, "MAIN_SECRET": SECRET},
        1,
        r"^Error: accounts.yaml, line 6: account 'other': the variable OTHER_KEY",
        files={"accounts.yaml": _accounts_two_of_one()},
    ),
    # Issue 45, problem 2: a secret where its variable's name belongs is not repeated.
    "a secret where the name of its variable belongs": Mistake(
        ["ping"],
        {"WHITEBIT_ACCOUNTS_FILE": "accounts.yaml", "MAIN_KEY": KEY_ID},
        1,
        r"^Error: accounts.yaml, line 4: accounts.0.api_secret_env: not a variable name ",
        files={"accounts.yaml": _accounts_naming("api_secret_env", PASTED)},
        alone=True,
    ),
    "a key where the name of its variable belongs": Mistake(
        ["materialize", "hedge_mode"],
        {"WHITEBIT_ACCOUNTS_FILE": "accounts.yaml", "MAIN_SECRET": SECRET},
        1,
        r"^Error: accounts.yaml, line 3: accounts.0.api_key_env: not a variable name ",
        files={"accounts.yaml": _accounts_naming("api_key_env", f"{KEY_ID} x")},
        not_created=("data",),
        alone=True,
    ),
    "a secret with a colon where the name of its variable belongs": Mistake(
        ["ping"],
        {"WHITEBIT_ACCOUNTS_FILE": "accounts.yaml", "MAIN_KEY": KEY_ID},
        1,
        r"^Error: accounts.yaml, line 4, column \d+: not YAML: mapping values are not allowed",
        files={"accounts.yaml": _accounts_naming("api_secret_env", f"{PASTED_HEAD}: x/y")},
        alone=True,
    ),
    # Issue 45, problem 4: every setting checked at the edge, in one line, before any request.
    "a first day of history in the future": Mistake(
        ["materialize", "funding_history"],
        {"WHITEBIT_START_DATE": str(TODAY + timedelta(days=40))},
        1,
        rf"^Error: WHITEBIT_START_DATE: '{TODAY + timedelta(days=40)}' is in the future: give "
        rf"the first day of history, YYYY-MM-DD, today \({TODAY}, UTC\) or before$",
        not_created=("data",),
        alone=True,
    ),
    "a nightly schedule that is not cron": Mistake(
        ["materialize", "hedge_mode"],
        {"WHITEBIT_NIGHTLY_CRON": "every night"},
        1,
        r"^Error: WHITEBIT_NIGHTLY_CRON: 'every night' is not a cron schedule: give five fields",
        not_created=("data",),
        alone=True,
    ),
    "a prices schedule that is not cron": Mistake(
        ["materialize", "hedge_mode"],
        {"WHITEBIT_PRICES_CRON": "0 25 * * *"},
        1,
        r"^Error: WHITEBIT_PRICES_CRON: '0 25 \* \* \*' is not a cron schedule: give five fields",
        not_created=("data",),
        alone=True,
    ),
    "a PostgreSQL that refuses the connection": Mistake(
        ["materialize", "hedge_mode"],
        {"DAGSTER_POSTGRES_URL": f"postgresql+psycopg2://u:{SECRET}@127.0.0.1:1/dagster"},
        1,
        r"^Error: DAGSTER_POSTGRES_URL: the PostgreSQL at 127.0.0.1:1 cannot be reached "
        r"\(.*Connection refused\): is it up",
        alone=True,
        within_s=30,
    ),
    "a PostgreSQL URL of libpq's form": Mistake(
        ["materialize", "hedge_mode"],
        {"DAGSTER_POSTGRES_URL": f"postgres://u:{SECRET}@127.0.0.1:1/dagster"},
        1,
        r"^Error: DAGSTER_POSTGRES_URL: a postgres:// URL \(the rest not shown: it holds a "
        r"password\): give postgresql\+psycopg2://user:password@host:5432/dagster",
        not_created=("data",),
        alone=True,
    ),
    "ping in the clear": Mistake(["ping"], PLAIN, 1, IN_THE_CLEAR, alone=True),
    "reset-key in the clear": Mistake(
        ["reset-key", "--api-key-id", KEY_UUID, "--yes"], PLAIN, 1, IN_THE_CLEAR, alone=True
    ),
    "materialize in the clear": Mistake(
        ["materialize", "hedge_mode"], PLAIN, 1, IN_THE_CLEAR, not_created=("data",), alone=True
    ),
    "a spot market in WHITEBIT_MARKETS": Mistake(
        ["materialize", "funding_history"],
        {**SINGLE, "WHITEBIT_MARKETS": "BTC_PERP, BTC_USDT"},
        1,
        r"^Error: WHITEBIT_MARKETS: 'BTC_USDT' is not a perpetual market \(<BASE>_PERP\)$",
        not_created=("data",),
        alone=True,
    ),
    "a key reset without the key's id": Mistake(
        ["reset-key", "--yes"],
        {},
        2,
        r"^Error: Invalid value for '--api-key-id': none given; a sub-account key's id is the id "
        r"the exchange lists .*: POST /api/v4/sub-account/api-key/list with the sub-account's "
        r"subAccountId .*SELECT alias, subaccount_id FROM subaccounts",
    ),
    "a key reset of an id the exchange does not know": Mistake(
        ["reset-key", "--yes", "--api-key-id", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"],
        {},
        1,
        r"^Error: reset_subaccount_key /api/v4/sub-account/api-key/reset: HTTP 404: API key not "
        r"found: no key of a sub-account of this account has the id 3f2504e0-.*; a sub-account "
        r"key's id is .*POST /api/v4/sub-account/api-key/list",
    ),
    "an accounts file that is not text": Mistake(
        ["ping"],
        {"WHITEBIT_ACCOUNTS_FILE": "accounts.yaml"},
        1,
        r"^Error: accounts.yaml: not UTF-8 text \(byte 0 is 0xff\)",
        files={"accounts.yaml": b"\xff\xfe\x00accounts"},
    ),
    "a month not begun yet": Mistake(
        ["materialize", "funding_history", "--partition", str(TODAY + timedelta(days=40))],
        {},
        2,
        rf"^Error: Invalid value for --to/--partition: {TODAY + timedelta(days=40)} is in the "
        rf"future: the last day the exchange can tell is today \({TODAY}, UTC\)",
        not_created=("data", "data-demo"),
    ),
    "a day of this month still to come": Mistake(
        ["materialize", "funding_history", "--partition", str(TODAY + timedelta(days=1))],
        {},
        2,
        rf"^Error: Invalid value for --to/--partition: {TODAY + timedelta(days=1)} is in the "
        "future",
        not_created=("data", "data-demo"),
    ),
    "a snapshot of tomorrow": Mistake(
        ["materialize", "hedge_mode", "--partition", str(TODAY + timedelta(days=1))],
        {},
        2,
        r"is in the future: the last day the exchange can tell is today",
        not_created=("data", "data-demo"),
    ),
    "a day before the start date": Mistake(
        ["materialize", "funding_history", "--partition", "2023-06-01"],
        {},
        2,
        r"^Error: Invalid value for --from/--partition: 2023-06-01 is before the first day of "
        r"history, 2024-01-01 \(WHITEBIT_START_DATE moves it\)$",
        not_created=("data", "data-demo"),
    ),
    "a range reaching before the start date": Mistake(
        ["materialize", "funding_history", "--from", "2023-01-01", "--to", "2024-01-31"],
        {},
        2,
        r"2023-01-01 is before the first day of history, 2024-01-01 \(WHITEBIT_START_DATE",
        not_created=("data", "data-demo"),
    ),
    "an empty query": Mistake(["sql", ""], {}, 2, r"^Error: QUERY is empty"),
    "a query where there is no warehouse": Mistake(
        ["sql", "SELECT 1"],
        {},
        1,
        r"^Error: no warehouse at .*/data-demo: nothing has been extracted there yet",
        not_created=("data-demo", "warehouse.duckdb", "data-demo/warehouse.duckdb"),
    ),
    "a catalog of a root that does not exist": Mistake(
        ["catalog", "--root", "no/such/dir"],
        {},
        1,
        r"^Error: no warehouse at .*no/such/dir: nothing has been extracted there yet",
        not_created=("no",),
    ),
    "a catalog file that does not exist": Mistake(
        ["sql", "--catalog", "nocat.duckdb", "SELECT 1"],
        {},
        1,
        r"^Error: no catalog at .*nocat.duckdb: build it with `whitebit-etl catalog",
        not_created=("nocat.duckdb",),
    ),
    "a report's range that ends before it starts": Mistake(
        ["report", "--from", "2025-03-02", "--to", "2025-03-01"],
        {},
        1,
        r"^Error: the range ends \(2025-03-01\) before it starts \(2025-03-02\)$",
        files={
            f"data-demo/{layout.partition_file(FUNDING, ('main', date(2025, 3, 1)))}": _no_rows()
        },
        not_created=("data-demo/report.html",),
    ),
    "an s3 root with no credentials": Mistake(
        ["catalog", "--root", "s3://team-bucket/x"],
        {"AWS_ENDPOINT_URL": "http://127.0.0.1:1"},
        1,
        r"^Error: s3://team-bucket/x: the listing of team-bucket/x/parquet failed: "
        r"NoCredentialsError",
        # About 5 s alone (botocore asks the instance metadata service first); a bound that a
        # retried lookup (minutes) would miss, and a machine busy with the suite does not.
        within_s=120,
    ),
    # A write the disk refuses, as it refuses it to root too: a file where a directory must be.
    "a file where the warehouse's directory must be": Mistake(
        ["materialize", "hedge_mode", "--account", "main"],
        {"WAREHOUSE_ROOT": "wh", "DAGSTER_HOME": "home"},
        1,
        r"^Error: run [0-9a-f-]+ failed: cannot write /\S+/wh/parquet/\.locks/sources\.lock: "
        r"not a directory \(/\S+/wh/parquet/\.locks\) \(details: make ui\)$",
        files={"wh/parquet": b""},
    ),
    "a file where the Dagster home must be": Mistake(
        ["materialize", "hedge_mode"],
        {"DAGSTER_HOME": "home/dagster"},
        1,
        r"^Error: cannot write home/dagster: not a directory$",
        files={"home": b""},
        not_created=("data", "data-demo"),
    ),
    "a ping of an exchange that refuses the connection": Mistake(
        ["ping"],
        {
            "WHITEBIT_API_KEY": "k",
            "WHITEBIT_API_SECRET": SECRET,
            "WHITEBIT_BASE_URL": "https://127.0.0.1:1",
        },
        1,
        r"^Error: ping /api/v4/public/ping: https://127.0.0.1:1 refused the connection: .* "
        r"\(after 3 attempts\); a ping tries 3 times within seconds, a run for minutes$",
        # A run's retries for an outage (30 s) are not a ping's.
        within_s=5,
    ),
    "an exchange that refuses the connection": Mistake(
        ["materialize", "hedge_mode"],
        {
            "WHITEBIT_API_KEY": "k",
            "WHITEBIT_API_SECRET": SECRET,
            "WHITEBIT_BASE_URL": "http://127.0.0.1:1",
        },
        1,
        r"^Error: run [0-9a-f-]+ failed \(details: make ui\)$",
        # Refused at once and not tried again: seconds alone, where a timeout would take minutes.
        within_s=120,
    ),
}


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def _clean_env(**given: str) -> dict[str, str]:
    """The environment of a user who set only ``given``: none of the product's variables,
    no AWS credentials."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("WHITEBIT_", "WAREHOUSE_", "AWS_", "DAGSTER_"))
    }
    return {**kept, "NO_COLOR": "1", "COLUMNS": "200", **given}


@dataclass(frozen=True)
class Ended:
    status: int
    text: str
    #: An exception that left the command (a traceback, for a user).
    escaped: BaseException | None = None


def _invoke(args: list[str], given: dict[str, str], cwd: Path) -> tuple[Ended, float]:
    """The command in this process, with the environment of a user who set only ``given``."""
    unset: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("WHITEBIT_", "WAREHOUSE_", "AWS_"))
    }
    # A filesystem an earlier test of this process made for its S3 server is not the user's.
    fresh_s3_filesystems()
    started = datetime.now(UTC)
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        done = CliRunner().invoke(main, args, env={**unset, "COLUMNS": "200", **given})
    finally:
        os.chdir(previous)
    escaped = done.exception if not isinstance(done.exception, SystemExit) else None
    took = (datetime.now(UTC) - started).total_seconds()
    return Ended(done.exit_code, done.output, escaped), took


def _run(
    args: list[str], env: dict[str, str], cwd: Path
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = datetime.now(UTC)
    done = subprocess.run(
        [sys.executable, "-m", "assets.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    took = (datetime.now(UTC) - started).total_seconds()
    return Ended(done.returncode, done.stdout + done.stderr), took


def _ends_as_said(done: Ended, status: int, line: str) -> None:
    assert done.escaped is None, repr(done.escaped)
    assert "Traceback" not in done.text, done.text
    assert done.status == status, done.text
    errors = [row for row in done.text.splitlines() if row.startswith("Error:")]
    assert len(errors) == 1, done.text
    assert re.search(line, errors[0]), errors[0]
    assert SECRET not in done.text, done.text
    assert KEY_ID not in done.text, done.text


def _prepared(mistake: Mistake, directory: Path) -> Path:
    for file, content in mistake.files.items():
        (directory / file).parent.mkdir(parents=True, exist_ok=True)
        (directory / file).write_bytes(content)
    return directory


@pytest.mark.parametrize("name", list(MISTAKES))
def test_a_mistake_ends_in_its_one_line(name: str, tmp_path: Path) -> None:
    mistake = MISTAKES[name]
    done, took = _invoke(mistake.args, mistake.env, _prepared(mistake, tmp_path))
    _ends_as_said(done, mistake.status, mistake.line)
    assert PASTED_HEAD not in done.text
    if mistake.alone:
        assert len(done.text.strip().splitlines()) == 1, done.text
    assert took < mistake.within_s
    for path in mistake.not_created:
        assert not (tmp_path / path).exists(), path


@pytest.mark.parametrize(
    "name",
    [
        "a key without its secret",
        "an accounts file that is not text",
        "an empty query",
        "a file where the warehouse's directory must be",
    ],
)
def test_the_started_command_prints_no_traceback_either(name: str, tmp_path: Path) -> None:
    mistake = MISTAKES[name]
    done, _ = _run(mistake.args, _clean_env(**mistake.env), _prepared(mistake, tmp_path))
    _ends_as_said(done, mistake.status, mistake.line)


def test_a_busy_port_for_the_simulator(busy_port: int, tmp_path: Path) -> None:
    done, _ = _run(["simulator", "--port", str(busy_port)], _clean_env(), tmp_path)
    _ends_as_said(
        done,
        1,
        rf"^Error: cannot listen on 127.0.0.1:{busy_port}: .* --port 0 picks a free one\)$",
    )


EVERY_COMMAND = [
    ["ping"],
    ["materialize", "hedge_mode"],
    ["reset-key", "--api-key-id", KEY_UUID, "--yes"],
    ["sql", "SELECT 1"],
    ["tables"],
    ["catalog"],
    ["report"],
    ["demo"],
]


@pytest.mark.parametrize("args", EVERY_COMMAND, ids=lambda args: args[0])
@pytest.mark.parametrize(
    "where",
    [
        {"WAREHOUSE_ROOT": S3_ROOT},
        {"WAREHOUSE_ROOT": f"s3://{KEY_ID}:{SECRET}@team-bucket/x", **REAL},
        {
            "WHITEBIT_API_KEY": "k",
            "WHITEBIT_API_SECRET": SECRET,
            "WHITEBIT_BASE_URL": f"https://{KEY_ID}:{SECRET}@whitebit.com",
        },
    ],
    ids=["root", "root-and-url", "url"],
)
def test_no_command_prints_credentials_it_was_given(
    args: list[str], where: dict[str, str], tmp_path: Path
) -> None:
    done, _ = _invoke(args, where, tmp_path)
    assert done.escaped is None, repr(done.escaped)
    assert "Traceback" not in done.text
    assert SECRET not in done.text, done.text
    assert KEY_ID not in done.text, done.text


def test_a_bucket_that_does_not_exist_is_one_line_within_ten_seconds(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """The nightly's every run against a root whose bucket is missing: said once, before any run
    (each step of each run said it: 64 s and 116 lines)."""
    given = {
        **s3_server.env,
        "WAREHOUSE_ROOT": "s3://no-such-bucket/warehouse",
        "DAGSTER_HOME": "home",
        "XDG_STATE_HOME": "state",
    }
    done, took = _invoke(["materialize"], given, tmp_path)
    assert done.escaped is None, repr(done.escaped)
    assert done.text.strip().splitlines() == [
        "Error: s3://no-such-bucket/warehouse: the bucket no-such-bucket does not exist"
    ]
    assert done.status == 1
    assert took < 10
    assert not (tmp_path / "home").exists()
    assert s3_server.key_id not in done.text


def test_an_accounts_refused_source_is_said_once_for_all_its_steps_and_runs(
    tmp_path: Path,
) -> None:
    """Every step of an account whose warehouse rows came from another exchange fails alike: the
    message once, the steps named together, the next run's named as said (it was printed once
    per step, 16 times)."""
    other = sources.Source.simulator(8, "global")
    sources.record(Warehouse.open(tmp_path / "data-demo"), "main", other)
    args = ["materialize", "funding_history", "trades", "hedge_mode", "investments"]
    done, _ = _invoke([*args, "--account", "main"], {}, tmp_path)
    assert done.escaped is None, repr(done.escaped)
    assert done.status == 1, done.text
    assert done.text.count(f"was filled from {other}") == 1, done.text
    lines = done.text.splitlines()
    assert "failed steps main__funding_history, main__trades:" in lines, done.text
    assert "failed steps main_hedge_mode, main_investments: as said above" in lines, done.text
    assert lines[-1].startswith("Error: runs failed: ")
