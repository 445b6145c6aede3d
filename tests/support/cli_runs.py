"""What the reliability tests share: the nightly workload (funding history for a few days inside
the simulator's history, as one range run, and today's snapshots), the real CLI run as a child
process, the warehouse read back whole, row for row, and a warehouse of two accounts (an accounts
file of the simulator's main account and one of its sub-accounts, and each account's files)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import click.testing
import dagster as dg

from pipeline import spec
from pipeline.simulator import (
    MAIN,
    Credentials,
    Dataset,
    Scale,
    SimClock,
    Simulator,
    SpawnedSimulator,
    account_dataset,
)
from tests.support.dagster_runs import asset, funding_run, resources_for, snapshots
from tests.support.simulated import FROZEN_AT
from warehouse import Warehouse, catalog, partitions, schemas

REPO = Path(__file__).resolve().parents[2]


#: A CLI run is a few seconds; this bounds one on a machine busy with other work.
CLI_TIMEOUT_S = 300
#: A run ended by a bad answer, in the suite's parallel session: four times the 30 s promised
#: (timed alone in tests/reliability/test_terminal.py), which a machine busy with the suite
#: stays under and a run waiting on retries would not.
BUSY_LIMIT_S = 120.0


#: Funding days of the nightly workload: inside the simulator's history (it ends 2026-09-21).
FUNDING_DAYS = [date(2026, 9, 10) + timedelta(days=n) for n in range(4)]


FIRST, LAST = FUNDING_DAYS[0].isoformat(), FUNDING_DAYS[-1].isoformat()


SNAPSHOT_TABLES = [key.path[-1] for snapshot in snapshots() for key in snapshot.keys]


#: The accounts of `two_accounts_env`'s file, each with the simulator key it uses: the main
#: account's B2B partner key, and the first sub-account's key (which may read neither the
#: investments history nor the lists of sub-accounts).
TWO_ACCOUNTS = {"main": "partner", "sub_1": "sub_1"}


#: The simulator's keys that are a main account's: they list its sub-accounts and transfers.
MAIN_KEYS = ("partner", "no_b2b")


#: The snapshot tables of a sub-account's key: those no access switch holds back.
SUBACCOUNT_SNAPSHOT_TABLES = [
    t for t in SNAPSHOT_TABLES if t not in spec.HISTORIES or spec.HISTORIES[t].access is None
]


#: A table's rows as the warehouse holds them, without the one column a rerun changes.
Rows = dict[str, list[tuple[Any, ...]]]


#: Columns that say when a run ran, not what it read: runs compared may be minutes apart, on
#: either side of midnight (a snapshot is taken for the day the run takes it, at the instant the
#: exchange answers it).
WHEN_COLUMNS = ("extracted_at", "snapshot_date", "observed_at", *schemas.SEEN_COLUMNS[:4])


def warehouse_rows(root: Path | str, account: str = "default", **options: Any) -> Rows:
    """Every table of one account of the warehouse (the account of a warehouse without an
    accounts file, by default), through its DuckDB catalog, row for row, in a fixed order,
    without `WHEN_COLUMNS` and the account column."""
    rows: Rows = {}
    with catalog.connect(Warehouse.open(root, **options)) as con:
        for table in schemas.TABLES:
            columns = [c for (c, *_) in con.execute(f'DESCRIBE "{table}"').fetchall()]
            omitted = (*WHEN_COLUMNS, schemas.ACCOUNT)
            kept = ", ".join(f'"{c}"' for c in columns if c not in omitted)
            query = f'SELECT {kept} FROM "{table}" WHERE account = ? ORDER BY ALL'  # noqa: S608
            rows[table] = con.execute(query, [account]).fetchall()
    return rows


def nightly(
    sim: Simulator, root: Path, **whitebit: Any
) -> tuple[dg.ExecuteInProcessResult, dg.ExecuteInProcessResult]:
    """Funding history for `FUNDING_DAYS` and today's snapshots, in-process, real resources."""
    resources = resources_for(sim, root, **whitebit)
    funding = dg.materialize(
        [asset("funding_history")],
        resources=resources,
        raise_on_error=False,
        **funding_run(FUNDING_DAYS[0], FUNDING_DAYS[-1]),
    )
    taken = dg.materialize(snapshots(), resources=resources, raise_on_error=False)
    return funding, taken


def failures(result: dg.ExecuteInProcessResult, *, horizon_warnings: bool = True) -> list[str]:
    """Each failed step's text, and each failed check, for an assertion message; without
    ``horizon_warnings``, not the horizon checks' warnings (days of a history the exchange
    forgets not archived yet: what a night leaves on a warehouse not backfilled), their
    errors still."""
    found = [str(e.step_failure_data) for e in result.all_events if e.is_step_failure]
    found += [
        f"check {e.asset_key.to_user_string()}.{e.check_name} failed"
        for e in result.get_asset_check_evaluations()
        if not e.passed
        and (
            horizon_warnings
            or e.check_name != "horizon"
            or e.severity != dg.AssetCheckSeverity.WARN
        )
    ]
    return found


def cli_env(
    exchange: SpawnedSimulator | Simulator,
    root: Path | str,
    home: Path,
    credentials: Credentials | None = None,
    histories: Sequence[str] | None = None,
) -> dict[str, str]:
    """The environment a user sets for `whitebit-etl`, for this exchange (its demo key, unless
    ``credentials`` are given) and warehouse; of ``histories`` only when named (a test of a
    night's machinery need not walk every history)."""
    creds = credentials or exchange.credentials
    mining = Dataset(7, Scale.small(), SimClock(FROZEN_AT)).mining_accounts
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("WHITEBIT_") and name not in ("WAREHOUSE_ROOT", "DAGSTER_HOME")
    }
    return (
        inherited
        | {
            "WHITEBIT_API_KEY": creds.api_key,
            "WHITEBIT_API_SECRET": creds.api_secret,
            "WHITEBIT_BASE_URL": exchange.url,
            "WHITEBIT_MINING_ACCOUNTS": ",".join(mining),
            "WAREHOUSE_ROOT": str(root),
            "DAGSTER_HOME": str(home),
            "PYTHONUNBUFFERED": "1",
        }
        | ({"WHITEBIT_HISTORIES": ",".join(histories)} if histories else {})
    )


def two_accounts_env(
    exchange: SpawnedSimulator | Simulator,
    root: Path | str,
    home: Path,
    accounts_file: Path,
    accounts: Mapping[str, str] = TWO_ACCOUNTS,
    histories: Sequence[str] | None = None,
) -> dict[str, str]:
    """The environment a user sets for `whitebit-etl` to extract two accounts of this exchange
    into one warehouse: `cli_env`'s, but for the single-account variables, with the accounts
    file (written to ``accounts_file``) of `TWO_ACCOUNTS` (or of ``accounts``: name to key role)
    and the variables it names holding their keys and secrets (the file holds the names only);
    each account of ``histories`` only, when named."""
    single = ("WHITEBIT_API_KEY", "WHITEBIT_API_SECRET", "WHITEBIT_BASE_URL")
    env = {
        name: value
        for name, value in cli_env(exchange, root, home).items()
        if name not in (*single, "WHITEBIT_MINING_ACCOUNTS")
    }
    lines = ["accounts:"]
    for name, role in accounts.items():
        creds = exchange.credentials_for(role)
        key_env, secret_env = (
            f"WHITEBIT_{name.upper()}_API_KEY",
            f"WHITEBIT_{name.upper()}_API_SECRET",
        )
        env |= {key_env: creds.api_key, secret_env: creds.api_secret}
        lines += [
            f"  - name: {name}",
            f"    base_url: {exchange.url}",
            f"    api_key_env: {key_env}",
            f"    api_secret_env: {secret_env}",
            f"    mining_accounts: [{', '.join(_mining_accounts(exchange, role))}]",
            f"    investments: {str(role == 'partner').lower()}",
            f"    subaccounts: {str(role in MAIN_KEYS).lower()}",
            *([f"    histories: [{', '.join(histories)}]"] if histories else []),
        ]
    accounts_file.parent.mkdir(parents=True, exist_ok=True)
    accounts_file.write_text("\n".join(lines) + "\n")
    return env | {"WHITEBIT_ACCOUNTS_FILE": str(accounts_file)}


def _mining_accounts(exchange: SpawnedSimulator | Simulator, role: str) -> tuple[str, ...]:
    """The mining-pool accounts of the account a key acts for (a spawned simulator is one of
    seed 7 at the small scale, as `cli_env` takes it to be)."""
    if isinstance(exchange, Simulator):
        return exchange.dataset_for(role).mining_accounts
    account = MAIN if role == "partner" else role
    return account_dataset(7, Scale.small(), SimClock(FROZEN_AT), account=account).mining_accounts


@dataclass(frozen=True)
class Kept:
    """A warehouse kept aside, put back at ``root`` before each case that spoils it: its catalog
    names the root its views read, so one built at ``root`` once stays current (a copy anywhere
    else would have its catalog rebuilt by the case's run)."""

    aside: Path
    root: Path

    @classmethod
    def of(cls, root: Path) -> Kept:
        """Keep the warehouse at ``root`` as it is now (its catalog built); its directory must be
        ``root``'s parent's only entry, for a case to check that nothing was written beside it."""
        aside = root.parent.with_name(f"{root.parent.name}-kept")
        shutil.copytree(root, aside)
        return cls(aside, root)

    def put_back(self) -> Path:
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.copytree(self.aside, self.root)
        return self.root


#: A partition file's bytes and modification time (ns): what a file untouched keeps.
Files = dict[str, tuple[bytes, int]]


def account_files(root: Path, account: str) -> Files:
    """Every partition file of one account of the warehouse, every table's."""
    store = Warehouse.open(root).store
    return {
        path: ((root / path).read_bytes(), (root / path).stat().st_mtime_ns)
        for table in schemas.TABLES
        for path in partitions.partition_files(store, table, account=account)
    }


@dataclass
class Child:
    """A child process whose output goes to ``<log>.out`` and ``<log>.err`` (files the secrets
    scan reads at the end of the session)."""

    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(
        cls,
        module: str,
        args: list[str],
        env: dict[str, str],
        log: Path,
        *,
        new_group: bool = False,
    ) -> Child:
        """Start it; with ``new_group``, as the leader of its own process group (as a shell
        starts a command, which Ctrl-C signals with all its children)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.with_suffix(".out").open("wb") as out, log.with_suffix(".err").open("wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=err,
                process_group=0 if new_group else None,
            )
        return cls(process, log)

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=CLI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise

    @property
    def output(self) -> str:
        return "".join(
            self.log.with_suffix(suffix).read_text(errors="replace") for suffix in (".out", ".err")
        )


def run_cli(args: list[str], env: dict[str, str], log: Path) -> Child:
    """``whitebit-etl ARGS``, to its end."""
    child = Child.start("assets.cli", args, env, log)
    child.wait()
    return child


def invoke(
    args: list[str], env: Mapping[str, str], clock: spec.Clock | None = None
) -> click.testing.Result:
    """``whitebit-etl ARGS`` in this process, to its end, with ``env`` its whole environment (as
    `cli_env` makes one) and going by ``clock`` when given: where the promise is what a command
    does and says, not its process. What a child prints goes to files the session's secrets scan
    reads; what this prints is checked here."""
    from assets.cli import main

    unset: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    ran = click.testing.CliRunner().invoke(main, args, env=unset | dict(env), obj=clock)
    told = [name for name, value in env.items() if "SECRET" in name and value in ran.output]
    assert told == [], f"{told} printed by whitebit-etl {' '.join(args)}"
    return ran
