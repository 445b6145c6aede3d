"""What `whitebit-etl materialize` says on the terminal when the exchange answers badly.

End to end: the real CLI (in this process, what it prints captured; in a child process where the
test watches a run that goes on), against a simulator over loopback (in this process, so each
test makes it misbehave in one way), with a warehouse and a Dagster instance of the test's own.
Each test states what the terminal must show and how long the run may take: a bad answer ends,
with a clear message or with rows and `_rejects`, within 30 s of the run's start (read from the
run's record in the instance; the command's own time is printed beside it).

The child's output goes to files under the test's temp directory, which the session's last test
scans for secrets; what a command in this process prints is scanned as it ends.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import orjson
import pytest

from pipeline import spec
from pipeline.simulator import (
    Credentials,
    Fault,
    Scale,
    SimClock,
    Simulator,
    new_field,
    repeated_key,
)
from tests.support.cli_runs import CLI_TIMEOUT_S, REPO, cli_env, invoke, warehouse_rows
from tests.support.simulated import FROZEN_AT

#: How long a bad answer may hold a run, from the run's start to its end.
RUN_LIMIT_S = 30.0
#: The funding days of these runs; a payment of the last one is spoiled where a test needs one.
FIRST, LAST = date(2026, 9, 12), date(2026, 9, 13)
SPOILED = ("ETH_PERP", "1789286400")  # 2026-09-13 08:00 UTC, long side
RANGE = ["materialize", "funding_history", "--from", FIRST.isoformat(), "--to", LAST.isoformat()]

# `whitebit-etl` as a user runs it, but with the client's retries set low through its resource's
# config (no variable of the environment sets them): one retry, after 1.1 to 1.5 s, so that a
# transient failure reaches Dagster's retry policy in seconds, and the client's wait is one long
# enough to be said.
LOW_RETRIES = """
import os, sys
import dagster as dg
from assets import definitions
from assets.cli import main
from assets.resources import WhiteBITResource
definitions.whitebit_resource = lambda account, settings: WhiteBITResource(
    api_key=dg.EnvVar("WHITEBIT_API_KEY"),
    api_secret=dg.EnvVar("WHITEBIT_API_SECRET"),
    base_url=os.environ["WHITEBIT_BASE_URL"],
    max_retries=1,
    initial_retry_delay_s=1.5,
)
main(sys.argv[1:], prog_name="whitebit-etl")
"""


@pytest.fixture
def exchange() -> Iterator[Simulator]:
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as sim:
        yield sim


@dataclass
class Ran:
    """A finished command: its exit code, what it printed, and how long it took."""

    code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _start_low_retries(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``whitebit-etl ARGS`` with `LOW_RETRIES`, in a child process the test watches."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.with_suffix(".out").open("wb") as out, log.with_suffix(".err").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-c", LOW_RETRIES, *args], cwd=REPO, env=env, stdout=out, stderr=err
        )


def _cli(args: list[str], env: dict[str, str]) -> Ran:
    started = time.monotonic()
    ran = invoke(args, env)
    return Ran(ran.exit_code, ran.stdout, ran.stderr, time.monotonic() - started)


def _run_id(ran: Ran) -> str:
    found = re.search(r"run ([0-9a-f-]{36}) (?:failed|succeeded)", ran.output)
    assert found is not None, ran.output
    return found[1]


def _events(home: Path, run_id: str, kind: dg.DagsterEventType) -> list[dg.EventLogEntry]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return list(instance.all_logs(run_id, of_type=kind))


def _run_seconds(home: Path, run_id: str) -> float:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        record = instance.get_run_record_by_id(run_id)
    assert record is not None
    assert record.start_time is not None
    assert record.end_time is not None
    return record.end_time - record.start_time


def _timed(case: str, home: Path, ran: Ran) -> float:
    """The run's time from its start to its end, printed beside the command's."""
    seconds = _run_seconds(home, _run_id(ran))
    print(f"{case}: the run took {seconds:.1f} s, the command {ran.seconds:.1f} s")
    return seconds


def _spoil(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any], bytes], bytes]:
    """A tamper that changes the long side of the `SPOILED` payment wherever a page lists it."""

    def tamper(params: dict[str, Any], body: bytes) -> bytes:
        page = orjson.loads(body)
        for record in page["records"]:
            if (record["market"], record["fundingTime"]) == SPOILED and not record[
                "positionAmount"
            ].startswith("-"):
                edit(record)
        return orjson.dumps(page)

    return tamper


def test_a_rejected_record_is_said_with_its_count_partition_reason_and_the_sql_that_lists_it(
    exchange: Simulator, tmp_path: Path
) -> None:
    exchange.faults.tamper(spec.FUNDING_HISTORY.path, _spoil(lambda r: r.update(fundingRate="NaN")))
    home = tmp_path / "dagster"
    env = cli_env(exchange, tmp_path / "warehouse", home)
    ran = _cli(RANGE, env)

    assert ran.code == 1, ran.output
    assert _timed("a rejected record", home, ran) <= RUN_LIMIT_S
    lines = [line.strip() for line in ran.stdout.splitlines()]
    check = lines.index("failed check default/funding_history.no_rejects:")
    assert lines[check + 1] == (
        "1 record(s) of default/funding_history rejected, in 1 partition(s): 2026-09-13 (1)"
    )
    assert lines[check + 2] == "first reasons:"
    assert re.fullmatch(
        r"2026-09-13 record \d+: fundingRate: not a decimal number", lines[check + 3]
    )
    command = lines[check + 4].removeprefix("list them: ")
    assert command.startswith('whitebit-etl sql "SELECT ')
    assert "failed step default__funding_history:" in lines  # the step the check stopped
    assert "tries it again" not in ran.output  # a reject is no reason to retry
    assert ran.stderr.strip().splitlines()[-1].endswith("failed (details: make ui)")
    assert exchange.credentials.api_secret not in ran.output

    # The line lists the record, as the exchange sent it.
    program, *args = shlex.split(command)
    assert program == "whitebit-etl"
    listed = _cli([*args, "--json"], env)
    assert listed.code == 0, listed.output
    (row,) = orjson.loads(listed.stdout)
    sent = orjson.loads(row["raw_json"])
    assert (sent["market"], sent["fundingTime"], sent["fundingRate"]) == (*SPOILED, "NaN")
    assert row["partition"] == "2026-09-13"


def test_a_refusal_is_said_at_once_with_the_exchanges_message_and_not_retried(
    exchange: Simulator, tmp_path: Path
) -> None:
    wrong = Credentials(exchange.credentials.api_key, "not-the-secret-of-this-key")
    home = tmp_path / "dagster"
    env = cli_env(exchange, tmp_path / "warehouse", home, credentials=wrong)
    ran = _cli(RANGE, env)

    assert ran.code == 1, ran.output
    assert _timed("a refusal", home, ran) <= RUN_LIMIT_S
    lines = [line.strip() for line in ran.stdout.splitlines()]
    step = lines.index("failed step default__funding_history:")
    assert lines[step + 1] == (
        "funding_history /api/v4/collateral-account/funding-history: "
        "HTTP 401 code 10: Unauthorized request."
    )
    assert "Traceback" not in ran.output
    assert "File " not in ran.output  # no stack: the message alone
    assert "tries it again" not in ran.output
    assert _events(home, _run_id(ran), dg.DagsterEventType.STEP_UP_FOR_RETRY) == []
    assert ran.stderr.strip().splitlines()[-1].endswith("failed (details: make ui)")


def test_a_step_dagster_retries_is_said_while_it_waits_with_the_wait_and_why(
    exchange: Simulator, tmp_path: Path
) -> None:
    exchange.faults.set(1.0, [Fault.HTTP_503])  # the exchange is down, for as long as it takes
    home = tmp_path / "dagster"
    log = tmp_path / "logs" / "retried"
    started, started_at = time.monotonic(), time.time()
    child = _start_low_retries(RANGE, cli_env(exchange, tmp_path / "warehouse", home), log)
    said: dict[str, float] = {}  # line -> when it was seen (wall clock)
    try:
        while not any("tries it again" in line for line in said):
            assert child.poll() is None, log.with_suffix(".err").read_text()
            assert time.monotonic() - started < CLI_TIMEOUT_S, "\n".join(said)
            text = log.with_suffix(".out").read_text(errors="replace")
            for line in text[: text.rfind("\n") + 1].splitlines():  # whole lines only
                said.setdefault(line.strip(), time.time())
            time.sleep(0.05)
        # The exchange stays down, so the run cannot have ended: it waits to retry (twice,
        # 0 to 60 s and then 60 to 120 s), and the line was said while it waits.
        alive = child.poll() is None
    finally:
        child.kill()
        child.wait()
    (waiting,) = [line for line in said if "waiting for the exchange" in line]
    assert waiting.startswith(
        "default__funding_history: waiting for the exchange: ping: attempt 1 of 2"
    )
    assert "HTTP 503" in waiting
    (retry,) = [line for line in said if "tries it again" in line]
    found = re.fullmatch(
        r"default__funding_history failed; Dagster tries it again in (\d+\.\d) s\. Why: "
        r"ServerError: "
        r"ping /api/v4/public/ping: HTTP 503: .* \(after 2 attempts\)",
        retry,
    )
    assert found is not None, retry
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        (event,) = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY)
    assert event.dagster_event is not None
    wait = event.dagster_event.step_retry_data.seconds_to_wait
    assert float(found[1]) == pytest.approx(wait, abs=0.051)
    # Said as soon as the event was written (this loop looks every 50 ms), while the run waits.
    assert said[retry] - event.timestamp < 2.0
    assert alive
    print(
        f"a retried step: said {said[retry] - event.timestamp:.2f} s after its event, "
        f"{said[retry] - started_at:.1f} s after the command started"
    )


# Runs once the client fails an answer that breaks the contract after one quick retry, and says
# it cannot be retried: until then the client retries it with its backoff, then Dagster does.
def test_an_answer_breaking_the_contract_fails_at_once_saying_where(
    exchange: Simulator, tmp_path: Path
) -> None:
    def null_records(params: dict[str, Any], body: bytes) -> bytes:
        return orjson.dumps(orjson.loads(body) | {"records": None})

    exchange.faults.tamper(spec.FUNDING_HISTORY.path, null_records)
    home = tmp_path / "dagster"
    env = cli_env(exchange, tmp_path / "warehouse", home)
    ran = _cli(RANGE, env)

    assert ran.code == 1, ran.output
    assert _timed("a broken contract", home, ran) <= RUN_LIMIT_S
    lines = [line.strip() for line in ran.stdout.splitlines()]
    step = lines.index("failed step default__funding_history:")
    assert "at records: expected an array, got null" in lines[step + 1]
    assert "tries it again" not in ran.output
    assert _events(home, _run_id(ran), dg.DagsterEventType.STEP_UP_FOR_RETRY) == []


# Runs once the client reports unknown fields (`WalkStats.unknown_fields`): until then a new
# field fails the answer's shape check, the client retries it, and the run cannot end in 30 s.
def test_a_new_field_in_every_funding_record_loads_every_row_and_is_warned_of(
    exchange: Simulator, tmp_path: Path
) -> None:
    clean = _cli(RANGE, cli_env(exchange, tmp_path / "clean", tmp_path / "d0"))
    assert clean.code == 0, clean.output

    def new_field(params: dict[str, Any], body: bytes) -> bytes:
        page = orjson.loads(body)
        page["records"] = [record | {"newField": "x"} for record in page["records"]]
        return orjson.dumps(page)

    exchange.faults.tamper(spec.FUNDING_HISTORY.path, new_field)
    home = tmp_path / "dagster"
    env = cli_env(exchange, tmp_path / "warehouse", home)
    ran = _cli(RANGE, env)
    assert ran.code == 0, ran.output
    assert _timed("a new field", home, ran) <= RUN_LIMIT_S
    assert warehouse_rows(tmp_path / "warehouse") == warehouse_rows(tmp_path / "clean")
    lines = [line.strip() for line in ran.stdout.splitlines()]
    drift = lines.index("warning: check default/funding_history.schema_drift:")
    assert 'records[].newField (e.g. "x")' in lines[drift + 1]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        latest = instance.get_latest_materialization_event(
            dg.AssetKey(["default", "funding_history"])
        )
    assert latest is not None
    assert latest.asset_materialization is not None
    metadata = latest.asset_materialization.metadata
    assert metadata["unknown_fields"].value == {"records[].newField": '"x"'}


# --- Every other kind of bad answer, one command each -------------------------------------------
# Each case: what the exchange does, the command, and what the terminal and the warehouse show.
# A fault-free warehouse of the same commands, made once, is what "rows load unchanged" means.

SNAPSHOTS = ["materialize", "investments", "main_balances", "hedge_mode"]


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The warehouse the commands of these cases fill from a well-behaved exchange."""
    root = tmp_path_factory.mktemp("fault-free")
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT)) as sim:
        for args in (RANGE, SNAPSHOTS):
            ran = _cli(args, cli_env(sim, root / "warehouse", root / "dagster"))
            assert ran.code == 0, ran.output
    return warehouse_rows(root / "warehouse")


@dataclass(frozen=True)
class Case:
    """One way of answering badly, and what the terminal and the warehouse must then show."""

    steer: Callable[[Simulator], None]
    args: list[str]
    #: The exit code, and what the output must hold (each a fragment of one line).
    code: int
    says: tuple[str, ...]
    #: Records of the command's tables in `_rejects`: every other row loads as without the fault.
    rejected: int = 0
    #: Tables whose step failed: they stay as they were (empty here).
    failed: tuple[str, ...] = ()


#: The tables each command fills.
FILLS = {
    tuple(RANGE): ("funding_history",),
    tuple(SNAPSHOTS): ("investments", "fixed_plans", "main_balances", "hedge_mode"),
}


def _tamper(path: str, rewrite: Callable[[dict[str, Any], bytes], bytes]) -> Callable[..., None]:
    return lambda sim: sim.faults.tamper(path, rewrite)


def _cap(sim: Simulator) -> None:
    sim.page_cap = 50


FUNDING = spec.FUNDING_HISTORY.path
CASES = {
    "a missing field": Case(
        _tamper(FUNDING, _spoil(lambda r: r.pop("settlementPrice"))),
        RANGE,
        1,
        ("failed check default/funding_history.no_rejects:", "settlementPrice: missing"),
        rejected=1,
    ),
    "a number where a string belongs": Case(
        _tamper(FUNDING, _spoil(lambda r: r.update(fundingAmount=0.5))),
        RANGE,
        1,
        (
            "failed check default/funding_history.no_rejects:",
            "fundingAmount: number where a decimal string belongs",
        ),
        rejected=1,
    ),
    "a decimal comma": Case(
        _tamper(FUNDING, _spoil(lambda r: r.update(fundingRate="1,5"))),
        RANGE,
        1,
        ("failed check default/funding_history.no_rejects:", "fundingRate: not a decimal number"),
        rejected=1,
    ),
    "a path-escaping market": Case(
        _tamper(FUNDING, _spoil(lambda r: r.update(market="../../etc"))),
        RANGE,
        1,
        ("failed check default/funding_history.no_rejects:", "market:"),
        rejected=1,
    ),
    "records an object": Case(
        _tamper(FUNDING, lambda p, body: orjson.dumps(orjson.loads(body) | {"records": {}})),
        RANGE,
        1,
        ("failed step default__funding_history:", "at records: expected an array, got an object"),
        failed=("funding_history",),
    ),
    "an HTML page with a success status": Case(
        _tamper(FUNDING, lambda p, body: b"<html><body>Maintenance</body></html>"),
        RANGE,
        1,
        ("failed step default__funding_history:", "not JSON at all"),
        failed=("funding_history",),
    ),
    # Whole answers the JSON parser refuses: no network fault makes them, so they fail at once.
    "a byte that is not UTF-8 in a market name": Case(
        _tamper(FUNDING, lambda p, body: body.replace(b'"market":"', b'"market":"\xff', 1)),
        RANGE,
        1,
        (
            "failed step default__funding_history:",
            "the JSON parser refuses: not valid UTF-8 (invalid start byte)",
        ),
        failed=("funding_history",),
    ),
    "a hedge-mode answer nested 100,000 arrays deep": Case(
        _tamper(spec.HEDGE_MODE.path, lambda p, body: b"[" * 100_000 + b"]" * 100_000),
        SNAPSHOTS,
        1,
        (
            "failed step default_hedge_mode:",
            "at byte 1025 of 200000: a whole answer the JSON parser refuses: depth limit exceeded",
        ),
        failed=("hedge_mode",),
    ),
    "pages capped at 50": Case(_cap, RANGE, 0, ()),
    "a new field in the funding envelope": Case(
        _tamper(FUNDING, new_field("cursor", "abc", "top")),
        RANGE,
        0,
        ("warning: check default/funding_history.schema_drift:", 'cursor (e.g. "abc")'),
    ),
    "a new field in every investment": Case(
        _tamper(spec.INVESTMENTS_HISTORY.path, new_field("bonus", "0.1", "records")),
        SNAPSHOTS,
        0,
        ("warning: check default/investments.schema_drift:", 'records[].bonus (e.g. "0.1")'),
    ),
    "a new field in each main balance": Case(
        _tamper(spec.MAIN_BALANCE.path, new_field("locked", "0", "values")),
        SNAPSHOTS,
        0,
        ("warning: check default/main_balances.schema_drift:", '.locked (e.g. "0")'),
    ),
    "a new field in the hedge-mode answer": Case(
        _tamper(spec.HEDGE_MODE.path, new_field("since", 1789286400, "top")),
        SNAPSHOTS,
        0,
        ("warning: check default/hedge_mode.schema_drift:", "since (e.g. 1789286400)"),
    ),
    "a ticker listed twice": Case(
        _tamper(spec.MAIN_BALANCE.path, repeated_key({"main_balance": "1"})),
        SNAPSHOTS,
        1,
        ("failed step default_together:", "a ticker listed more than once"),
        failed=tuple(h.name for h in spec.TOGETHER),  # taken together: one step
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_each_bad_answer_ends_in_time_saying_what_it_was(
    name: str, exchange: Simulator, tmp_path: Path, fault_free: Any
) -> None:
    case = CASES[name]
    empty: dict[str, list[Any]] = {table: [] for table in fault_free}
    case.steer(exchange)
    home = tmp_path / "dagster"
    env = cli_env(exchange, tmp_path / "warehouse", home)
    ran = _cli(case.args, env)

    assert ran.code == case.code, ran.output
    assert _timed(name, home, ran) <= RUN_LIMIT_S
    lines = [line.strip() for line in ran.stdout.splitlines()]
    for fragment in case.says:
        assert any(fragment in line for line in lines), (fragment, ran.output)
    assert "Traceback" not in ran.output
    assert "tries it again" not in ran.output  # nothing here can change by waiting
    if case.failed:  # its progress bar ends as the run did
        assert any(re.search(r": failed\b.* \d+/\d+", line) for line in lines), ran.output
    catalog = tmp_path / "warehouse" / "warehouse.duckdb"
    rows = warehouse_rows(tmp_path / "warehouse") if catalog.exists() else empty
    for table in FILLS[tuple(case.args)]:
        if table in case.failed:
            assert rows[table] == [], table  # the step failed: nothing of it was written
        else:
            # Every sound row loads as without the fault; each rejected one is in _rejects.
            missing = [row for row in fault_free[table] if row not in rows[table]]
            assert len(missing) == (case.rejected if table == "funding_history" else 0), table
            assert [row for row in rows[table] if row not in fault_free[table]] == [], table
    assert len(rows["_rejects"]) == case.rejected
    if not catalog.exists():  # no step wrote: only a failed one ran
        assert set(FILLS[tuple(case.args)]) == set(case.failed)
