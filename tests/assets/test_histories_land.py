"""End to end, from the simulator's ledger to the warehouse's files: an account's histories read in
time windows, and its deposits and withdrawals, materialized through their real Dagster assets
against a simulator over loopback, land row for row as the ledger holds them.

The other side of each comparison is the ledger's truth (read from the simulator's dataset, not
through the API) turned into rows by the product's own normalization: every column but
``extracted_at`` equal, the same count, no key twice, every row in the partition of its month.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from assets.jobs import AccountAssets
from assets.partitions import monthly
from pipeline import spec
from pipeline.simulator import EPOCH, Scale, SimClock, Simulator
from tests.support.dagster_runs import ACCOUNT, account_assets, asset, resources_for
from tests.whitebit.ledger_truth import WINDOWED, by_market, exact, series, truth
from warehouse import Warehouse, normalize, partitions, schemas
from warehouse.schemas import month_of

#: Spot and futures trading 130 days back from the epoch (2026-09-21 14:13 UTC), whose six-month
#: floor is 2026-03-21: the months below are well within it.
TRADING_SCALE = "days=130,fills=20"
#: The months run: from this one to the simulator's own (2026-09 at the epoch), up to its day.
FIRST_MONTH = "2026-06"
SINCE = datetime(2026, 6, 1, tzinfo=UTC)
#: Some 25,000 deposits and withdrawals (six a day over 4,200 days), more than one slice of
#: either method reaches: tests/whitebit/test_flows_walk.py's scale.
FLOWS_SCALE = "markets=1,days=4200,fills=960"
EXTRACTED = "extracted_at"


@pytest.fixture(scope="module")
def trading() -> Iterator[Simulator]:
    """The module's one simulator of trading. Its clock runs from the epoch, as an exchange's
    does: a walk takes for the present the latest answer's ``Date`` plus the time since, which
    runs ahead of a clock standing still between answers; records arriving at such a clock's
    head when it is moved could fall before the walk's present, where no exchange puts them."""
    with Simulator(
        seed=7,
        scale=Scale.parse(TRADING_SCALE),
        clock=SimClock(EPOCH, frozen=False),
        rate_limits=False,
    ) as s:
        yield s


def _day(sim: Simulator) -> date:
    return datetime.fromtimestamp(sim.clock.now(), UTC).date()


def _run(
    sim: Simulator,
    root: Path,
    tables: Sequence[str],
    first: str,
    last: str,
    *,
    start: date | None = None,
) -> dg.ExecuteInProcessResult:
    """A run of the months ``first .. last`` of the tables' assets (partitioned from the month
    of ``start``, else the tests' first), with the code location's resources pointed at the
    simulator (its budgets are off, so is the pacing), on the simulator's day as the run starts:
    what the assets take for today is the exchange's, not this machine's."""
    months = {
        "dagster/asset_partition_range_start": first,
        "dagster/asset_partition_range_end": last,
    }
    clock = SimClock(sim.clock.now())
    built = account_assets(ACCOUNT, clock)
    if start is not None:
        built = AccountAssets.of(ACCOUNT, monthly(start), dict(os.environ), clock)
    run = [built.tables[table] for table in tables]
    return dg.materialize(run, resources=resources_for(sim, root, paced=False), tags=months)


def _checks_passed(result: dg.ExecuteInProcessResult) -> set[str]:
    evaluations = result.get_asset_check_evaluations()
    failed = [(e.check_name, e.metadata) for e in evaluations if not e.passed]
    assert not failed
    return {e.check_name for e in evaluations}


def _landed(root: Path, history: spec.History) -> dict[str, pa.Table]:
    """The account's partition files of the history, by the month their path names."""
    wh = Warehouse.open(root)
    schema = schemas.TABLES[history.name]
    assert schema.month_path is not None
    out: dict[str, pa.Table] = {}
    for path in partitions.partition_files(wh.store, history.name, account=ACCOUNT.name):
        month = path.split(f"/{schema.month_path}=")[1].partition("/")[0]
        table = wh.store.read_table(path)
        assert table is not None
        out[month] = table
    return out


def _rejected(root: Path) -> list[str]:
    """The partition files of rejected records, of any table."""
    return partitions.partition_files(Warehouse.open(root).store, schemas.REJECTS)


def _stamped(landed: dict[str, pa.Table]) -> list[datetime]:
    """The times the files' rows were extracted at."""
    return [t for table in landed.values() for t in table[EXTRACTED].unique().to_pylist()]


def _same_rows(history: spec.History, landed: dict[str, pa.Table], expected: pa.Table) -> None:
    """Each month's file holds exactly the expected rows of that month, every column but
    ``extracted_at`` equal; no key twice in the table; each row's day and time in the month its
    path names."""
    schema = schemas.TABLES[history.name]
    partition = history.partition
    assert isinstance(partition, spec.Monthly)
    key = list(schema.key)
    expected_months = pc.strftime(expected[partition.day], format="%Y-%m")
    assert set(landed) >= set(expected_months.to_pylist())
    keys: set[tuple[Any, ...]] = set()
    for month, table in landed.items():
        days = {d.isoformat()[:7] for d in table[partition.day].to_pylist()}
        times = {t.astimezone(UTC).strftime("%Y-%m") for t in table[partition.time].to_pylist()}
        assert days <= {month}, f"{history.name}: rows of {days} in the partition of {month}"
        assert times <= {month}, f"{history.name}: times of {times} in the partition of {month}"
        mine = expected.filter(pc.equal(expected_months, month))
        names = [n for n in table.column_names if n != EXTRACTED]
        got = table.select(names).sort_by([(k, "ascending") for k in key]).to_pylist()
        want = mine.select(names).sort_by([(k, "ascending") for k in key]).to_pylist()
        assert len(got) == len(want), f"{history.name} {month}: {len(got)} rows, not {len(want)}"
        for n, (row, truth_row) in enumerate(zip(got, want, strict=True)):
            assert row == truth_row, f"{history.name} {month}, row {n}"
        keys |= {tuple(r[k] for k in key) for r in got}
    assert len(keys) == sum(t.num_rows for t in landed.values()) == expected.num_rows


def _normalized(history: spec.History, answer: object, stamped: Sequence[datetime]) -> pa.Table:
    """The ledger's records made rows by the product's normalization, stamped as the run
    stamped its own (the one column not compared)."""
    assert len(set(stamped)) == 1, "one run, one extraction time"
    at = stamped[0]
    batch = normalize.normalize(history, answer, extracted_at=at, day=at.date())
    assert batch.rejected == 0
    assert batch.duplicates == 0
    return batch.rows


# --- histories read in time windows, records arriving while they page ----------------------------


def _arrivals(sim: Simulator, every: int, step: int) -> dict[str, float]:
    """Move the simulator's clock ``step`` seconds on after every ``every``-th answer of each
    history read in time windows: records arrive at the head of the ledger while a walk's pages
    are in flight (the next page is answered by a ledger holding more). The clock's time at
    each history's first answer, before it moved, by the history's name."""
    first: dict[str, float] = {}

    def arrivals(name: str) -> Callable[[dict[str, object], bytes], bytes]:
        answered = [0]

        def arrive(params: dict[str, object], body: bytes) -> bytes:
            first.setdefault(name, sim.clock.now())
            answered[0] += 1
            if answered[0] % every == 0:
                sim.clock.advance(step)
            return body

        return arrive

    for history in WINDOWED:
        sim.faults.tamper(history.operation.path, arrivals(history.name))
    return first


def _walk_end(result: dg.ExecuteInProcessResult, history: spec.History) -> int:
    """The present the run's walk took for the exchange's: the end of its newest window."""
    node = asset(history.name).node_def.name
    materialized = result.asset_materializations_for_node(node)
    slices = materialized[0].metadata["slices"].value
    assert isinstance(slices, list)
    last = datetime.strptime(str(slices[0]).split("..")[1], "%Y-%m-%dT%H:%M:%SZ")
    return int(last.replace(tzinfo=UTC).timestamp()) + 1


# Each example is a run of five assets, each a walk and a writer process: few, drawn from a
# fixed seed, beside the heaviest arrivals (the clock two hours on after every answer).
@pytest.mark.slow  # two runs of five assets: a minute and more
@settings(max_examples=1, deadline=None, derandomize=True, database=None)
@given(every=st.integers(1, 3), step=st.sampled_from([60, 900, 7200]))
@example(every=1, step=7200)
def test_months_land_as_the_ledger_holds_them_whatever_arrives_while_they_page(
    trading: Simulator, every: int, step: int
) -> None:
    """One run of every history read in time windows, for whole months up to the simulator's
    present, while records arrive at the head: each lands what the ledger held, when its walk
    began, for those months; nothing that arrived meanwhile, nothing twice, nothing missing."""
    sim = trading
    began = sim.clock.now()
    before = {h.name: len(series(sim, h)) for h in WINDOWED}
    first_answer = _arrivals(sim, every, step)
    try:
        with tempfile.TemporaryDirectory() as home:
            root = Path(home) / "warehouse"
            tables = [h.name for h in WINDOWED]
            result = _run(sim, root, tables, FIRST_MONTH, month_of(_day(sim)))
            assert result.success
            assert "complete" in _checks_passed(result)
            landed = {h.name: _landed(root, h) for h in WINDOWED}
            assert _rejected(root) == []
    finally:
        for history in WINDOWED:
            sim.faults.tamper(history.operation.path, None)
    assert sim.clock.now() > began + step, "the clock moved on while the walks paged"
    if step >= 900:
        grew = [h for h in (spec.TRADES, spec.ORDERS) if len(series(sim, h)) > before[h.name]]
        assert grew, "records arrived while the walks paged"
    for history in WINDOWED:
        # Its walk's present: no earlier than the run's start, no later than its first answer.
        end = _walk_end(result, history)
        assert began - 1 <= end <= first_answer[history.name] + 1
        rows = truth(sim, history, int(SINCE.timestamp()), end)
        assert len(rows) > 20, "the ledger holds records in these months"
        grouped = isinstance(history.operation.answer, spec.Grouped)
        answer: object = by_market(rows) if grouped else [record for _, record in rows]
        found = landed[history.name]
        _same_rows(history, found, _normalized(history, answer, _stamped(found)))
        months = sorted(found)
        assert months[0] == FIRST_MONTH
        assert months[-1] == month_of(datetime.fromtimestamp(end - 1, UTC).date())


# --- 25,000 deposits and withdrawals ------------------------------------------------------------


def _movements(sim: Simulator) -> list[Any]:
    """Every deposit and withdrawal as the ledger holds it at the clock, numbers exact, newest
    first (as the exchange lists them)."""
    ledger = sim.dataset.ledger
    ledger.current()
    now_us = int(sim.dataset.clock.now() * 1_000_000)
    count = len(ledger.movements)
    return [exact(ledger.status(n, now_us)[0]) for n in range(count - 1, -1, -1)]


@pytest.mark.slow  # 25,000 records built, walked, written into 138 months and checked
def test_25_000_deposits_and_withdrawals_land_every_one(tmp_path: Path) -> None:
    history = spec.DEPOSITS_WITHDRAWALS
    with Simulator(
        seed=7, scale=Scale.parse(FLOWS_SCALE), clock=SimClock(EPOCH), rate_limits=False
    ) as sim:
        ledger = _movements(sim)
        assert len(ledger) >= 25_000
        oldest = datetime.fromtimestamp(min(int(r["createdAt"]) for r in ledger), UTC).date()
        # The account's assets partitioned from the month of its first movement.
        built = AccountAssets.of(ACCOUNT, monthly(oldest), dict(os.environ), sim.clock)
        newest = month_of(_day(sim))
        root = tmp_path / "warehouse"
        result = _run(sim, root, [history.name], month_of(oldest), newest, start=oldest)
        assert result.success
        assert "complete" in _checks_passed(result)
        assert _movements(sim) == ledger, "the ledger stood still"
    landed = _landed(root, history)
    assert _rejected(root) == []
    assert sum(t.num_rows for t in landed.values()) == len(ledger)
    _same_rows(history, landed, _normalized(history, ledger, _stamped(landed)))
    # Every month of the range holds movements: each landed, and is recorded as materialized.
    months = {month_of(datetime.fromtimestamp(int(r["createdAt"]), UTC).date()) for r in ledger}
    node = built.tables[history.name].node_def.name
    materialized = result.asset_materializations_for_node(node)
    assert {m.partition for m in materialized} == set(landed) == months
    # More than the offset window reaches: the walk split by method, then by ticker.
    slices = materialized[0].metadata["slices"].value
    assert isinstance(slices, list)
    assert {"transactionMethod=1,ticker=USDT", "transactionMethod=2,ticker=USDT"} <= set(slices)


def test_a_deposit_that_settles_while_it_is_read_lands_settled_and_named(tmp_path: Path) -> None:
    """Pages of one record, and the clock three hours on once the first is answered: the newest
    deposit, pending, is read first, then again on the next page, credited (a deposit that
    arrived meanwhile moved it there). The night lands it once, credited, and its materialization
    names the change; the answers spell the fields as WhiteBIT's OpenAPI file does, and the rows
    are those of the usual spelling."""
    history = spec.DEPOSITS_WITHDRAWALS
    with Simulator(
        seed=7,
        scale=Scale.small(),
        # 42.5 h after the epoch: its deposit 186 is pending (15) from 41.9 h, credited at 43.0 h;
        # deposit 187 is made at 52.5 h.
        clock=SimClock(EPOCH + 42.5 * 3600),
        rate_limits=False,
        page_cap=1,
        spelling="openapi",
    ) as sim:
        pending = _movements(sim)[0]
        assert pending["status"] == 15
        began = sim.clock.now()

        def settle(params: dict[str, object], body: bytes) -> bytes:
            sim.faults.tamper(history.operation.path, None)
            sim.clock.advance(10.5 * 3600)
            return body

        sim.faults.tamper(history.operation.path, settle)
        root = tmp_path / "warehouse"
        month = month_of(_day(sim))
        result = _run(sim, root, [history.name], month, month)
        assert result.success
        assert "no_rejects" in _checks_passed(result)
        ledger = _movements(sim)
    settled = next(r for r in ledger if r["transactionId"] == pending["transactionId"])
    assert settled["status"] == 3
    assert ledger[0]["createdAt"] > settled["createdAt"], "a deposit arrived at the head"
    assert _rejected(root) == []
    landed = _landed(root, history)
    since = int(datetime.fromisoformat(f"{month}-01T00:00:00+00:00").timestamp())
    # What the ledger held when the walk began (the arrival came after its head was read), as
    # it stands now.
    month_rows = [r for r in ledger if since <= int(r["createdAt"]) < began]
    _same_rows(history, landed, _normalized(history, month_rows, _stamped(landed)))
    [materialized] = result.asset_materializations_for_node(asset(history.name).node_def.name)
    notes = materialized.metadata["notes"].value
    assert isinstance(notes, list)
    assert (
        f"transactionId {pending['transactionId']} changed while the walk read it (status 15 -> 3"
        in " ".join(notes)
    )
    assert materialized.metadata["unknown_fields"].value == {}
