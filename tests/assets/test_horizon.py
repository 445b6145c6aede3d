"""The horizon of a history the exchange forgets after six months (fills, orders, conversions),
on a warehouse a real nightly wrote: what the horizon check says of the days not archived, and
what the next nights read again.

One warehouse for the module: the nightly of October 1st 2026 (00:40) read August and September
of the fills and of the deposits and withdrawals from the embedded simulator, its day pinned by
the run tag, and no night ran after it. Each test works on a copy. The code location's clock
(its runs' and checks') is set to the night or the watch being replayed (`_set`), so the
module passes whatever the machine's day.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Final

import dagster as dg
import duckdb
import pytest

from assets.accounts import Account
from assets.definitions import Location, location, rereads_of
from assets.horizon import HORIZON, horizon
from assets.jobs import RANGE_END_TAG, RANGE_START_TAG, nightly_requests
from assets.resources import SIMULATOR_DAY_TAG
from assets.settings import Settings
from pipeline import spec
from pipeline.spec import SimClock
from tests.support.cli_runs import failures
from warehouse import Warehouse, archive, partitions, rereads

#: The embedded simulator's main account (a B2B partner key).
ACCOUNT: Final = Account(
    name="main",
    base_url=spec.GLOBAL_BASE_URL,
    key_env=None,
    secret_env=None,
    mining_accounts=(),
    markets=None,
    investments=True,
    simulator_key="partner",
)
START: Final = date(2026, 8, 1)
#: The first day no night archived: the nightly ran last in its first minutes.
STOPPED: Final = date(2026, 10, 1)
TRADES: Final = spec.HISTORIES["trades"]
DEPOSITS: Final = spec.HISTORIES["deposits_withdrawals"]
KEY: Final = dg.AssetKey(["main", TRADES.name])
#: Six months after it, the exchange no longer answers October 1st.
LOST_ON: Final = date(2027, 4, 2)


def _at(day: date, hour: int = 0, minute: int = 40) -> datetime:
    return datetime.combine(day, time(hour, minute), UTC)


def _location(root: Path) -> Location:
    """The code location of the account, its clock set to `START` until a test moves it."""
    env = {"WAREHOUSE_ROOT": str(root), "WHITEBIT_START_DATE": START.isoformat()}
    return location(Settings.from_env(env), [ACCOUNT], clock=SimClock(_at(START)))


def _set(found: Location, moment: datetime) -> None:
    """Move the location's clock (a test's: `_location`) forward to ``moment``."""
    assert isinstance(found.clock, SimClock)
    found.clock.set(moment)


def _run(
    found: Location,
    instance: dg.DagsterInstance,
    day: date,
    keys: Sequence[dg.AssetKey],
    *,
    partition: str | None = None,
    tags: dict[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    """A run of the nightly job on ``day`` (00:40 UTC), against the embedded simulator of
    that day, with the checks a nightly run of those assets evaluates."""
    checks = found.assets_of(ACCOUNT.name).run_checks(keys)
    nightly = found.definitions.resolve_job_def("nightly").get_subset(
        asset_selection=set(keys), asset_check_selection=set(checks)
    )
    _set(found, _at(day))
    return nightly.execute_in_process(
        instance=instance,
        partition_key=partition,
        tags={**(tags or {}), SIMULATOR_DAY_TAG: day.isoformat()},
        raise_on_error=False,
    )


def _said(result: dg.ExecuteInProcessResult) -> list[str]:
    """What a run failed on, but the freshness checks (which judge the machine's day, not the
    night replayed) and the horizon's warnings (the months still at stake)."""
    return [t for t in failures(result, horizon_warnings=False) if "fresh" not in t]


def _horizon(found: Location, instance: dg.DagsterInstance, day: date) -> Any:
    """The fills' horizon check as the watch job evaluates it on ``day`` at 02:30."""
    watch = found.definitions.resolve_job_def("freshness")
    _set(found, _at(day, 2, 30))
    result = watch.execute_in_process(
        instance=instance, op_selection=["main__trades_horizon"], raise_on_error=False
    )
    (evaluation,) = [
        e
        for e in result.get_asset_check_evaluations()
        if (e.asset_key, e.check_name) == (KEY, HORIZON)
    ]
    return evaluation


def _metadata(evaluation: Any) -> dict[str, Any]:
    return {name: value.value for name, value in evaluation.metadata.items()}


@pytest.fixture(scope="module")
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory, instance: dg.DagsterInstance) -> Path:
    """The warehouse of the last night: August and September read on October 1st."""
    root = tmp_path_factory.mktemp("stopped") / "warehouse"
    found = _location(root)
    keys = [dg.AssetKey(["main", h.name]) for h in (TRADES, DEPOSITS)]
    months = {RANGE_START_TAG: "2026-08", RANGE_END_TAG: "2026-09"}
    result = _run(found, instance, STOPPED, keys, tags=months)
    assert result.success
    assert _said(result) == []
    walked = partitions.coverage(Warehouse.open(root).store, TRADES.name, ACCOUNT.name)
    assert sorted(walked) == [START + timedelta(days=n) for n in range(61)]
    return root


@pytest.fixture
def root(stopped: Path, tmp_path: Path) -> Path:
    """A copy of the last night's warehouse, the test's own."""
    copy = tmp_path / "warehouse"
    shutil.copytree(stopped, copy)
    return copy


def test_a_nightly_stopped_five_months_and_a_half_ago_warns_naming_the_days_at_stake(
    root: Path, instance: dg.DagsterInstance
) -> None:
    found = _location(root)
    assert spec.lost_on(STOPPED) == LOST_ON
    # Eighteen days before October 1st is lost: a warning.
    early = _horizon(found, instance, date(2027, 3, 15))
    assert not early.passed
    assert early.severity == dg.AssetCheckSeverity.WARN
    assert "soon" not in (early.description or "")
    assert "trades of main: not archived: 2026-10-01 .. 2027-03-14 (165 days), lost from " in (
        early.description or ""
    )
    # Thirteen days before: still a warning (the days can be read), saying they are lost soon,
    # naming the account, the history, the days and the date.
    due = _horizon(found, instance, date(2027, 3, 20))
    assert not due.passed
    assert due.severity == dg.AssetCheckSeverity.WARN
    text = due.description or ""
    assert text.startswith(
        "trades of main: not archived and soon past the exchange's six months: "
        "2026-10-01 .. 2027-03-19 (170 days), lost from 2027-04-02."
    )
    assert (
        "whitebit-etl materialize trades --account main --from 2026-10-01 --to 2027-03-19" in text
    )
    # What the night archived is not named, and nothing is lost yet.
    assert "2026-09" not in text
    assert _metadata(due)["lost"] == []
    assert archive.reported_lost(Warehouse.open(root).store, TRADES.name, ACCOUNT.name) == set()


def test_days_past_the_six_months_are_named_lost_once_as_an_error(
    root: Path, instance: dg.DagsterInstance
) -> None:
    found = _location(root)
    store = Warehouse.open(root).store
    first = _horizon(found, instance, date(2027, 4, 10))
    text = first.description or ""
    assert not first.passed
    # The check looked on October 1st, when the exchange still answered them: a loss.
    assert first.severity == dg.AssetCheckSeverity.ERROR
    assert text.startswith(
        "trades of main: 9 day(s) lost: never archived and past the exchange's six months (its "
        "web export has them): 2026-10-01 .. 2026-10-09 (9 days), lost from 2027-04-02."
    )
    assert "not archived and soon past the exchange's six months: 2026-10-10 .. 2027-04-09" in text
    # August and September are past the six months too, but archived: not named.
    assert "2026-08" not in text
    assert "2026-09" not in text
    lost = [STOPPED + timedelta(days=n) for n in range(9)]
    assert archive.reported_lost(store, TRADES.name, ACCOUNT.name) == set(lost)

    # Evaluated again: the days at stake are named again, as a warning, the lost ones not.
    again = _horizon(found, instance, date(2027, 4, 10))
    assert not again.passed
    assert again.severity == dg.AssetCheckSeverity.WARN
    assert "lost:" not in (again.description or "")
    assert "2026-10-10 .. 2027-04-09" in (again.description or "")
    # The check's metadata still lists every gap lost, for the UI.
    assert _metadata(again)["lost"] == [str(g) for g in archive.gaps(lost)]

    # Five days later, only the five days lost since are said.
    later = _horizon(found, instance, date(2027, 4, 15))
    assert later.severity == dg.AssetCheckSeverity.ERROR
    assert "5 day(s) lost: never archived" in (later.description or "")
    assert ": 2026-10-10 .. 2026-10-14" in (later.description or "")
    assert "2026-10-01" not in (later.description or "")
    assert archive.reported_lost(store, TRADES.name, ACCOUNT.name) == {
        STOPPED + timedelta(days=n) for n in range(14)
    }


def test_days_lost_before_the_check_first_looked_are_a_warning_said_once(
    root: Path, instance: dg.DagsterInstance
) -> None:
    """A warehouse whose horizon was never looked at (a start date further back than the
    exchange answers): the days already past the six months were never within its reach."""
    store = Warehouse.open(root).store
    shutil.rmtree(root / archive.LOST_RECORDS)
    assert archive.reported_lost(store, TRADES.name, ACCOUNT.name) is None
    found = _location(root)
    first = _horizon(found, instance, date(2027, 4, 10))
    assert first.severity == dg.AssetCheckSeverity.WARN
    assert (first.description or "").startswith(
        "trades of main: 9 day(s) were past the exchange's six months before the warehouse "
        "first looked (its web export has them): 2026-10-01 .. 2026-10-09 (9 days), lost from "
        "2027-04-02."
    )
    # From then on it looks: a day lost since is a loss.
    later = _horizon(found, instance, date(2027, 4, 11))
    assert later.severity == dg.AssetCheckSeverity.ERROR
    assert (later.description or "").startswith("trades of main: 1 day(s) lost: never archived")


def _unsettled(root: Path, month: str) -> int:
    files = partitions.partition_files(Warehouse.open(root).store, DEPOSITS.name, account="main")
    (file,) = [f for f in files if f"={month}/" in f]
    with duckdb.connect() as con:
        found = con.execute(
            f"SELECT count(*) FROM read_parquet(?) WHERE {DEPOSITS.unsettled}",  # noqa: S608
            [str(root / file)],
        ).fetchone()
    return found[0] if found else 0


def test_the_night_after_an_outage_reads_again_the_months_at_stake_and_unsettled(
    root: Path, instance: dg.DagsterInstance
) -> None:
    found = _location(root)
    # The last night saw deposits and withdrawals of late September not final yet.
    assert _unsettled(root, "2026-09") > 0
    tick = _at(date(2026, 11, 3), 0, 30)
    context = dg.build_schedule_context(
        scheduled_execution_time=tick, repository_def=found.definitions.get_repository_def()
    )
    asked = found.jobs.nightly_schedule.evaluate_tick(context).run_requests or []
    again = {
        r.run_key: (r.partition_key, {k.path[-1] for k in r.asset_selection or ()})
        for r in asked
        if ":again:" in (r.run_key or "")
    }
    # September for its unsettled rows; October for the fills' days not archived. The
    # histories no night ever read (orders, conversions) are a person's backfill: not asked.
    assert again == {
        "main:again:2026-09:2026-11-02": ("2026-09", {DEPOSITS.name}),
        "main:again:2026-10:2026-11-02": ("2026-10", {TRADES.name}),
    }
    october = next(r for r in asked if r.partition_key == "2026-10")
    assert dg.AssetCheckKey(KEY, HORIZON) in (october.asset_check_keys or [])
    # And the month so far, as every night.
    assert any(r.run_key == "main:histories:2026-11-02" for r in asked)

    for request in asked:
        if ":again:" in (request.run_key or ""):
            result = _run(
                found,
                instance,
                tick.date(),
                request.asset_selection or [],
                partition=request.partition_key,
                tags=dict(request.tags),
            )
            assert result.success
            assert _said(result) == []
    # Mended: October is archived, September's rows are final; what is left is the month so
    # far, which the night's own run reads.
    wh = Warehouse.open(root)
    today = tick.date()
    assert rereads.months_to_reread(wh, TRADES, "main", today) == ["2026-11"]
    assert rereads.months_to_reread(wh, DEPOSITS, "main", today) == []
    assert _unsettled(root, "2026-09") == 0


def _logged(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """What the run's steps said in its log."""
    return [e.user_message for e in instance.all_logs(run_id) if e.step_key == "main__trades"]


def _bytes(root: Path, table: str) -> dict[str, bytes]:
    files = partitions.partition_files(Warehouse.open(root).store, table, account="main")
    return {f: (root / f).read_bytes() for f in files}


def test_a_month_past_the_floor_is_never_asked_for_and_its_archive_stays(
    root: Path, instance: dg.DagsterInstance
) -> None:
    found = _location(root)
    day = date(2027, 4, 10)
    floor = spec.floor_day(day)
    assert floor == date(2026, 10, 10)
    before = _bytes(root, TRADES.name)
    assert [f.split("=")[-1].split("/")[0] for f in before] == ["2026-08", "2026-09"]

    asked = list(nightly_requests(found.built, _at(day, 0, 30), rereads_of(found.settings)))
    # Of the fills, the months from the floor's on, none before it; nor of any history the
    # exchange forgets (a deposit's month is read again while a row of it may change).
    trades = sorted(r.partition_key or "" for r in asked if KEY in (r.asset_selection or ()))
    # Again: the months from the floor's to the last; and the month so far, as every night.
    assert trades == ["2026-10", "2026-11", "2026-12", "2027-01", "2027-02", "2027-03", "2027-04"]
    forgetting = [
        r.partition_key or ""
        for r in asked
        if any(spec.HISTORIES[k.path[-1]].forgotten for k in r.asset_selection or ())
    ]
    assert min(forgetting) == "2026-10"

    # The month that holds the floor: read from the floor on, not a day before it.
    (october,) = [r for r in asked if r.partition_key == "2026-10"]
    result = _run(found, instance, day, [KEY], partition="2026-10", tags=dict(october.tags))
    # The days before the floor, lost since the last night looked, fail the run that found them.
    assert not result.success
    assert [e.check_name for e in result.get_asset_check_evaluations() if not e.passed] == [HORIZON]
    (written,) = result.asset_materializations_for_node("main__trades")
    assert written.metadata["days_written"].value == 22  # October 10th .. 31st
    walked = partitions.coverage(Warehouse.open(root).store, TRADES.name, "main")
    assert min(d for d in walked if d >= STOPPED) == floor
    said = _logged(instance, result.run_id)
    assert "walking trades for 22 day(s): 2026-10-10 .. 2026-10-31" in said
    assert any(
        t.startswith("trades of main: 2026-10-01 .. 2026-10-09 (9 day(s)) are past the exchange's")
        for t in said
    )

    # A month wholly past it, asked for by a person: nothing is asked of the exchange, and
    # what the warehouse archived of it stays byte for byte.
    result = _run(found, instance, day, [KEY], partition="2026-09")
    assert result.success
    said = _logged(instance, result.run_id)
    assert not [text for text in said if text.startswith("walking trades")]
    assert [text for text in said if text.startswith("trades of main: ")] == [
        "trades of main: 2026-09-01 .. 2026-09-30 (30 day(s)) are past the exchange's six "
        "months and were not asked for; the warehouse keeps what it archived of them (the "
        "horizon check names any it never did)"
    ]
    after = _bytes(root, TRADES.name)
    assert {f: after[f] for f in before} == before


def test_the_command_that_reads_the_days_at_stake_ends_its_sentence(tmp_path: Path) -> None:
    """On one line, as the UI's markdown and an alert show the description, with a sentence
    after it: the command ends where it ends (it ran into the next sentence)."""
    store = Warehouse.open(tmp_path / "warehouse").store
    key = dg.AssetKey(["main", TRADES.name])
    today = date(2027, 4, 10)
    found = horizon(store, TRADES.name, "main", date(2026, 9, 1), today, key=key)
    line = " ".join((found.description or "").splitlines()) + " The next night reads them too."
    said = line[line.index("whitebit-etl ") :]
    command = re.split(r"`?\.(?: |$)", said)[0]
    program, *args = shlex.split(command)
    assert program == "whitebit-etl"
    assert args[:4] == ["materialize", TRADES.name, "--account", "main"]
    assert args[4] == "--from"
    date.fromisoformat(args[5])
    assert args[6:] == ["--to", str(today - timedelta(days=1))]
