"""Snapshots of an account that trades every second, taken at random sub-second instants: the
balances asked together by the client (`AsyncWhiteBIT.together`), the exchange's clock moving on
between its answers, and every record the balances moved by read into a warehouse. No interval
has a residual, though records fall within every snapshot's second; a deposit left out of the
warehouse is named, its amount, interval and the snapshot that listed it pending.

Each snapshot is written under a day of its own (a day a snapshot, as the warehouse keeps them),
its instant where it was taken: the statement places records by the instants alone.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline import spec
from pipeline.simulator import EPOCH, Scale, SimClock, Simulator
from pipeline.whitebit import Together
from tests.support.client import client
from tests.warehouse.simulated_ledger import Extraction, every, every_grouped
from warehouse import Warehouse, catalog, normalize, partitions

SNAPSHOTS = 200
#: 86,400 fills a day: a fill a second, on average.
EVERY_SECOND = Scale(markets=4, days=2, investments=10, tickers=4, fills=86_400)
#: Two days after the epoch, plus a fraction: between two funding rounds.
START = EPOCH + 2 * 86_400 + 3_600 + 0.371
#: The day the first snapshot is written under; each next one a day later.
FIRST_DAY = date(2030, 1, 1)
TOGETHER = (spec.MAIN_BALANCES, spec.TRADING_BALANCES, spec.COLLATERAL_BALANCES, spec.PENDING_FLOWS)
ACCOUNT = "main"

#: 200 snapshots over loopback and 800 partitions written: end to end at scale.
pytestmark = pytest.mark.slow


@dataclass
class Taken:
    sim: Simulator
    root: Path
    extraction: Extraction
    collects: list[int]
    #: The span of the records read: from a minute before the first snapshot to after the last.
    since: int
    until: int

    def query(self, sql: str, *params: object, root: Path | None = None) -> list[tuple[Any, ...]]:
        with catalog.connect(Warehouse.open(root or self.root)) as con:
            return con.execute(sql, list(params) or None).fetchall()


def _moving_on(sim: Simulator, draw: random.Random) -> Any:
    """A tamper that lets the exchange's clock run on after each balance answer (0 to 60 ms): an
    answer's data is of one moment, its Date of a later one, as a real service's are."""

    def rewrite(params: dict[str, object], body: bytes) -> bytes:
        sim.clock.advance(draw.uniform(0, 0.06))
        return body

    return rewrite


def _written(sim: Simulator, took: Together, day: date) -> dict[str, normalize.Batch]:
    span = took.span
    assert span.observed_from is not None
    assert span.observed_until is not None
    out = {}
    for history in TOGETHER:
        stats = took.stats[history.name]
        seen = normalize.Seen(
            observed_from=span.observed_from,
            observed_until=span.observed_until,
            asked_at=stats.asked_at,
            answered_at=stats.answered_at,
            consistent=took.consistent,
        )
        out[history.name] = normalize.normalize(
            history,
            took.answers[history.name],
            extracted_at=datetime.fromtimestamp(sim.clock.now(), UTC),
            day=day,
            observed_at=stats.observed_at,
            seen=seen,
        )
    return out


async def _snapshots(sim: Simulator, draw: random.Random) -> list[tuple[Together, date]]:
    taken = []
    async with client(sim) as exchange:
        for n in range(SNAPSHOTS):
            await exchange.ping()  # as a run's preflight: the exchange's time before asking
            taken.append((await exchange.together(TOGETHER), FIRST_DAY + timedelta(days=n)))
            sim.clock.advance(draw.uniform(1.0, 3.0))
    return taken


@pytest.fixture(scope="module")
def taken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Taken]:
    root = tmp_path_factory.mktemp("placement") / "warehouse"
    draw = random.Random(43)
    with Simulator(seed=11, scale=EVERY_SECOND, clock=SimClock(START), rate_limits=False) as sim:
        for history in TOGETHER:
            sim.faults.tamper(history.operation.path, _moving_on(sim, draw))
        since = int(sim.clock.now()) - 60
        snapshots = asyncio.run(_snapshots(sim, draw))
        sim.faults.clear()
        wh = Warehouse.open(root)
        batches = [_written(sim, took, day) for took, day in snapshots]
        for history in TOGETHER:
            of_table = [b[history.name] for b in batches]
            partitions.write_partitions(
                wh,
                history.name,
                pa.concat_tables([b.rows for b in of_table]),
                account=ACCOUNT,
                replace=[day for _, day in snapshots],
            )
        extraction = Extraction(sim, wh, ACCOUNT, sim.credentials)
        until = int(sim.clock.now()) + 1
        _read_histories(extraction, since, until)
        catalog.refresh(wh)
        yield Taken(sim, root, extraction, [t.collects for t, _ in snapshots], since, until)


def _read_histories(extraction: Extraction, since: int, until: int) -> None:
    """Every record that moved the account's balances from ``since`` to ``until``; deposits and
    withdrawals all (one made days before may be credited, or given back, within them)."""
    sim, creds = extraction.sim, extraction.creds
    window = {"startDate": since, "endDate": until}
    days = sorted({datetime.fromtimestamp(t, UTC).date() for t in (since, until)})
    reads: list[tuple[spec.History, Any]] = [
        (spec.TRADES, every_grouped(sim, spec.EXECUTED_HISTORY, window, creds)),
        (spec.CONVERSIONS, every(sim, spec.CONVERT_HISTORY, {"from": since, "to": until}, creds)),
        (spec.POSITION_EVENTS, every(sim, spec.POSITIONS_HISTORY, window, creds)),
        (spec.DEPOSITS_WITHDRAWALS, every(sim, spec.MAIN_ACCOUNT_HISTORY, {}, creds)),
        (
            spec.FUNDING,
            [
                e
                for e in every(sim, spec.FUNDING_HISTORY, {}, creds)
                if since <= int(e["fundingTime"]) <= until
            ],
        ),
    ]
    subaccounts = every(sim, spec.SUBACCOUNT_LIST, {}, creds)
    transfers = {
        sub["id"]: every(sim, spec.SUBACCOUNT_TRANSFERS, {"id": sub["id"]}, creds)
        for sub in subaccounts
    }
    reads.append((spec.SUBACCOUNT_TRANSFERS_HISTORY, transfers))
    for history, answer in reads:
        extraction.write(history, answer, at=until, day=days[-1], replace=days)


def test_no_interval_of_an_account_trading_every_second_has_a_residual(taken: Taken) -> None:
    intervals = taken.query(
        "SELECT count(*), count(*) FILTER (WHERE reconciled) FROM reconciliation_intervals"
    )
    assert intervals == [(SNAPSHOTS - 1, SNAPSHOTS - 1)]
    assert taken.query("SELECT * FROM reconciliation") == []


def test_records_fell_within_the_snapshots_and_the_balances_placed_them(taken: Taken) -> None:
    """Not zero by luck: fills moved the balances within many snapshots' windows, the balances
    placed them, and the exchange's clock ran while the balances were asked, a second collect
    needed where a fill came between two answers."""
    ((fills, balances, inside),) = taken.query(
        "SELECT count(DISTINCT record_id) FILTER (WHERE source = 'trades' AND closing_date IS "
        "NOT NULL), count(DISTINCT record_id) FILTER (WHERE placed_by = 'balances'), "
        "(SELECT count(*) FROM snapshot_windows AS w WHERE EXISTS (SELECT 1 FROM trades AS t "
        "WHERE t.trade_time > w.seen_from AND t.trade_time < w.seen_until)) FROM flow_placement"
    )
    assert fills > SNAPSHOTS
    assert inside > SNAPSHOTS / 4
    assert balances > SNAPSHOTS / 10
    assert max(taken.collects) > 2  # a collect disagreed, and the balances were asked again
    ((never, unsaid),) = taken.query(
        "SELECT count(DISTINCT snapshot_date) FILTER (WHERE NOT consistent), "
        "count(*) FILTER (WHERE consistent IS NULL) FROM main_balances"
    )
    assert never < SNAPSHOTS / 20  # the last collect kept, and said so
    assert unsaid == 0


def test_each_snapshot_keeps_its_uncertainty(taken: Taken) -> None:
    rows = taken.query(
        "SELECT DISTINCT snapshot_date, observed_from, observed_at, observed_until, asked_at, "
        "answered_at FROM main_balances ORDER BY snapshot_date"
    )
    assert len(rows) == SNAPSHOTS
    for _, since, first, last, asked, answered in rows:
        assert since <= first <= last
        assert asked <= answered
        assert since.microsecond == first.microsecond == last.microsecond == 0  # Date: seconds


def test_a_deposit_left_out_is_named(taken: Taken, tmp_path: Path) -> None:
    """A deposit credited between two snapshots, pending at the one before: its history read
    again without it, the reconciliation names its asset, interval and amount, and the
    candidates its record, as the snapshot listed it pending."""
    ((transaction, ticker, credited, opening, closing),) = taken.query(
        "SELECT f.record_id, f.ticker, f.amount, i.opening_date, f.closing_date "
        "FROM flow_placement AS f JOIN reconciliation_intervals AS i "
        "ON i.account = f.account AND i.closing_date = f.closing_date "
        "WHERE f.kind = 'deposits' AND f.record_id IN "
        "(SELECT transaction_id FROM pending_flows WHERE snapshot_date = i.opening_date) "
        "ORDER BY f.closing_date, f.record_id LIMIT 1"
    )
    copy = tmp_path / "warehouse"
    shutil.copytree(taken.root, copy)
    left_out = Extraction(taken.sim, Warehouse.open(copy), ACCOUNT, taken.extraction.creds)
    left_out.edit = lambda history, answer: (
        [r for r in answer if r["transactionId"] != transaction]
        if history is spec.DEPOSITS_WITHDRAWALS
        else answer
    )
    _read_histories(left_out, taken.since, taken.until)
    catalog.refresh(Warehouse.open(copy))
    residuals = taken.query(
        "SELECT ticker, opening_date, closing_date, residual FROM reconciliation", root=copy
    )
    assert residuals == [(ticker, opening, closing, credited)]
    named = taken.query(
        "SELECT history, record_id, kind, amount FROM residual_candidates", root=copy
    )
    assert ("pending_flows", transaction, "deposits", credited) in named
