"""The offset-window walks of the main account's money in and out: deposits and withdrawals (no
date filter, 10,000 records deep, split by method, ticker and status), those pending at a
snapshot, the sub-accounts and each one's transfers; against the simulator's ledger, over
loopback HTTP."""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
import pytest

from pipeline import spec
from pipeline.simulator import Scale, SimClock, Simulator
from pipeline.whitebit import OffsetWindowExceeded, OffsetWindowWalk
from tests.support.client import client, raises
from tests.support.simulated import FROZEN_AT

#: Six deposits and withdrawals a day over 4,200 days: some 25,000, more than one slice of
#: either method reaches (10,000); two sub-accounts with some 4,300 transfers each.
FLOWS_SCALE = "markets=1,days=4200,fills=960"
DEPOSITS = spec.MAIN_ACCOUNT_HISTORY
PAGE = DEPOSITS.bound("limit")
REACH = 10_000
DAY = 86_400


@pytest.fixture(scope="module")
def flows_sim() -> Iterator[Simulator]:
    """Read only; the budgets off, so that the walks here run at the simulator's speed (the
    pacing of this history is tests/whitebit/test_flows_pacing.py's)."""
    with Simulator(
        seed=7, scale=Scale.parse(FLOWS_SCALE), clock=SimClock(FROZEN_AT), rate_limits=False
    ) as s:
        yield s


# --- the ledger, as the simulator holds it ------------------------------------------------------


def movements(sim: Simulator) -> list[dict[str, Any]]:
    """Every deposit and withdrawal as the clock sees it, oldest first."""
    ledger = sim.dataset.ledger
    ledger.current()
    now_us = int(sim.dataset.clock.now() * 1_000_000)
    return [orjson.loads(ledger.status(n, now_us)[0]) for n in range(len(ledger.movements))]


def transfers(sim: Simulator) -> dict[str, list[dict[str, Any]]]:
    """Every transfer of the main account, oldest first, by sub-account id."""
    ledger = sim.dataset.ledger
    ledger.current()
    ids = {name: sub_id for sub_id, name in sim.accounts.main.subaccount_names.items()}
    series = ledger.transfers
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for n, record in enumerate(series.parsed(range(len(series)))):
        out[ids[str(series.value("sub", n))]].append(record)
    return dict(out)


def not_final(record: dict[str, Any]) -> bool:
    final = spec.DEPOSIT_FINAL if record["method"] == 1 else spec.WITHDRAWAL_FINAL
    return record["status"] not in final


def by_id(rows: list[dict[str, Any]], name: str = "transactionId") -> dict[str, dict[str, Any]]:
    return {r[name]: r for r in rows}


def answered(sim: Simulator, op: spec.Operation) -> int:
    return sim.state.answered[(op.path, 200)]


def month_of(moment: int, back: int) -> tuple[int, int]:
    """The UTC calendar month ``back`` months before the one of ``moment``: its first second,
    and the first second of the next."""
    day = datetime.fromtimestamp(moment, UTC)
    index = day.year * 12 + day.month - 1 - back
    start, after = (datetime(i // 12, i % 12 + 1, 1, tzinfo=UTC) for i in (index, index + 1))
    return int(start.timestamp()), int(after.timestamp())


# --- walks ---------------------------------------------------------------------------------------


class Walked(NamedTuple):
    walk: OffsetWindowWalk
    pages: list[Any]

    @property
    def rows(self) -> list[Any]:
        """Every record of a walk that yields lists."""
        assert all(type(page) is list for page in self.pages)
        return [row for page in self.pages for row in page]

    def owned(self) -> dict[str, list[Any]]:
        """Every record of a walk that yields them under their owner, by owner."""
        out: dict[str, list[Any]] = defaultdict(list)
        for page in self.pages:
            assert type(page) is dict
            assert len(page) == 1
            for owner, records in page.items():
                out[owner] += records
        return dict(out)


def walked(sim: Simulator, history: spec.History, **options: Any) -> Walked:
    """The walk, done, and its pages."""
    options.setdefault("on_window_exceeded", "raise")

    async def main() -> Walked:
        async with client(sim) as c:
            walk = OffsetWindowWalk(c, history, **options)
            return Walked(walk, [page async for page in walk])

    return asyncio.run(main())


def newest_first(rows: list[dict[str, Any]]) -> bool:
    times = [r["createdAt"] for r in rows]
    return times == sorted(times, reverse=True)


def test_every_deposit_and_withdrawal_once_newest_first(flows_sim: Simulator) -> None:
    truth = movements(flows_sim)
    per_method: defaultdict[int, int] = defaultdict(int)
    for record in truth:
        per_method[record["method"]] += 1
    # Either method alone is deeper than the window reaches: the walk has to split by ticker.
    assert len(truth) >= 25_000
    assert min(per_method.values()) > REACH

    done = walked(flows_sim, spec.DEPOSITS_WITHDRAWALS)
    rows = done.rows
    assert len(rows) == len(truth)
    assert by_id(rows) == by_id(truth)  # record for record, each once
    assert newest_first(rows)
    stats = done.walk.stats
    assert stats.complete
    assert stats.rows == len(truth)
    assert stats.slices[:3] == ["all", "transactionMethod=1", "transactionMethod=2"]
    assert "transactionMethod=1,ticker=USDT" in stats.slices
    assert "transactionMethod=2,ticker=USDT" in stats.slices
    assert all(len(page) <= PAGE for page in done.pages)


def test_a_month_is_the_ledgers_month_and_the_walk_stops_past_its_start(
    flows_sim: Simulator,
) -> None:
    since, until = month_of(FROZEN_AT, back=1)
    truth = movements(flows_sim)
    month = [r for r in truth if since <= r["createdAt"] < until]
    newer = sum(r["createdAt"] >= since for r in truth)
    assert month
    assert newer < REACH

    before = answered(flows_sim, DEPOSITS)
    done = walked(flows_sim, spec.DEPOSITS_WITHDRAWALS, since=since, until=until)
    requests = answered(flows_sim, DEPOSITS) - before
    rows = done.rows
    assert by_id(rows) == by_id(month)
    assert len(rows) == len(month)
    assert newest_first(rows)
    # The pages down to the first record older than the month, and at most one asked ahead:
    # not the 25,000 records' history.
    needed = newer // PAGE + 1
    assert needed <= requests <= needed + 1
    assert requests * PAGE < len(truth) / 10
    assert done.walk.stats.slices == ["all"]


def test_a_month_deep_in_the_history_is_split_where_the_window_fills_before_it(
    flows_sim: Simulator,
) -> None:
    truth = movements(flows_sim)
    since, until = month_of(FROZEN_AT, back=60)
    newer = sum(r["createdAt"] >= since for r in truth)
    by_method = {
        m: sum(r["createdAt"] >= since and r["method"] == m for r in truth) for m in (1, 2)
    }
    assert newer > REACH > max(by_method.values())  # the unsplit slice ends before the month

    done = walked(flows_sim, spec.DEPOSITS_WITHDRAWALS, since=since, until=until)
    rows = done.rows
    month = [r for r in truth if since <= r["createdAt"] < until]
    assert month
    assert by_id(rows) == by_id(month)
    assert len(rows) == len(month)
    assert newest_first(rows)
    assert done.walk.stats.slices == ["all", "transactionMethod=1", "transactionMethod=2"]
    assert done.walk.stats.complete


def test_records_of_one_second_keep_the_exchanges_order_within_a_slice(
    flows_sim: Simulator,
) -> None:
    """The walk sorts by time only: a stable sort keeps the order the records were read in."""
    since, until = month_of(FROZEN_AT, back=1)
    done = walked(flows_sim, spec.DEPOSITS_WITHDRAWALS, since=since, until=until)
    newest = [r for r in movements(flows_sim)[::-1] if since <= r["createdAt"] < until]
    assert done.rows == newest  # one slice: the exchange's own order


def test_a_record_whose_time_is_unreadable_keeps_its_place() -> None:
    """Records whose ``createdAt`` is not a time (the warehouse rejects them) are yielded where
    the exchange lists them, within the range of their neighbours; never dropped."""
    with Simulator(seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT), rate_limits=False) as s:
        exchange = movements(s)[::-1]  # newest first, as listed
        broken = {exchange[n]["transactionId"] for n in (0, 10, 11, 50)}

        def unreadable(params: dict[str, object], body: bytes) -> bytes:
            page = orjson.loads(body)
            for record in page["records"]:
                if record["transactionId"] in broken:
                    record["createdAt"] = "not a time"
            return orjson.dumps(page)

        s.faults.tamper(DEPOSITS.path, unreadable)
        whole = walked(s, spec.DEPOSITS_WITHDRAWALS)
        # From the record listed after the one at 50 to the one listed before it.
        since, until = exchange[51]["createdAt"], exchange[49]["createdAt"] + 1
        ranged = walked(s, spec.DEPOSITS_WITHDRAWALS, since=since, until=until)
    listed = [
        dict(r, createdAt="not a time") if r["transactionId"] in broken else r for r in exchange
    ]
    assert whole.rows == listed
    # The one at 50 takes the time of the one before it: inside. Those at 0, 10 and 11 take
    # times weeks after the range: outside, yielded by the walks of their months.
    expected = [
        r["transactionId"]
        for n, r in enumerate(exchange)
        if n == 50 or (r["transactionId"] not in broken and since <= r["createdAt"] < until)
    ]
    assert [r["transactionId"] for r in ranged.rows] == expected
    assert ranged.rows[expected.index(exchange[50]["transactionId"])]["createdAt"] == "not a time"


# --- the status split ---------------------------------------------------------------------------

#: Eight a day over 5,600 days: some 27,000 deposits, 11,600 of them in USDT, more than a slice
#: reaches: split by status too (the most common, 3, holds some 7,400).
STATUS_SCALE = "markets=1,days=5600,fills=1280"


@pytest.mark.slow  # 45,000 records, built and walked: some 15 s
def test_a_ticker_too_deep_for_the_window_is_split_by_status() -> None:
    with Simulator(
        seed=7, scale=Scale.parse(STATUS_SCALE), clock=SimClock(FROZEN_AT), rate_limits=False
    ) as s:
        truth = movements(s)
        usdt = {m: sum((r["method"], r["ticker"]) == (m, "USDT") for r in truth) for m in (1, 2)}
        assert usdt[1] > REACH >= usdt[2]
        done = walked(s, spec.DEPOSITS_WITHDRAWALS)
    rows = done.rows
    assert len(rows) == len(truth)
    assert by_id(rows) == by_id(truth)
    assert newest_first(rows)
    slices = done.walk.stats.slices
    assert "transactionMethod=1,ticker=USDT,status=3" in slices
    assert not [s for s in slices if s.startswith("transactionMethod=2,ticker=USDT,")]
    # A withdrawal's status is refused beside the deposit method: skipped, and said.
    assert any("status 2 is refused" in note for note in done.walk.stats.notes)
    assert done.walk.stats.complete


# --- pending flows, sub-accounts, transfers -----------------------------------------------------


def test_pending_flows_are_the_records_not_final_at_the_clock() -> None:
    """Half a day after the epoch: deposits and withdrawals of the last two days are still on
    their way. The snapshot asks for the pending statuses of both methods at once."""
    clock = SimClock(FROZEN_AT + DAY // 2)
    with Simulator(seed=7, scale=Scale.small(), clock=clock, rate_limits=False) as s:
        pending = [r for r in movements(s) if not_final(r)]
        assert pending
        assert len(pending) < len(movements(s))
        done = walked(s, spec.PENDING_FLOWS)
    rows = done.rows
    assert rows == pending[::-1]  # newest first, as the exchange lists them
    assert done.walk.stats.slices == ["all"]


def test_sub_accounts_and_their_transfers_read_the_list_to_its_end() -> None:
    """More sub-accounts than a page of the list holds: the snapshot pages it to its end, and
    the transfers walk takes every sub-account id from it, the last page's too."""
    with Simulator(
        seed=7, scale=Scale.small(), clock=SimClock(FROZEN_AT), rate_limits=False, subaccounts=130
    ) as s:
        listed = s.accounts.main.subaccounts
        subaccounts = walked(s, spec.SUBACCOUNTS)
        truth = transfers(s)
        done = walked(s, spec.SUBACCOUNT_TRANSFERS_HISTORY)
    page = spec.SUBACCOUNT_LIST.bound("limit")
    assert len(listed) > page
    assert subaccounts.rows == listed
    # Every page, one asked ahead at most, and the probe that proves the short last page is
    # the end (the list tells no total).
    pages = math.ceil(len(listed) / page)
    assert pages + 1 <= subaccounts.walk.stats.pages <= pages + 2
    ids = [record["id"] for record in listed]
    assert sorted(done.walk.stats.slices) == sorted(f"id={i}" for i in ids)
    got = done.owned()
    assert set(got) == set(truth)
    assert set(truth) <= set(ids)
    assert {owner: by_id(records) for owner, records in got.items()} == {
        owner: by_id(records) for owner, records in truth.items()
    }


def test_transfers_come_under_their_sub_account_each_newest_first(flows_sim: Simulator) -> None:
    truth = transfers(flows_sim)
    done = walked(flows_sim, spec.SUBACCOUNT_TRANSFERS_HISTORY)
    got = done.owned()
    assert set(got) == set(truth) == set(flows_sim.accounts.main.subaccount_names)
    for owner, records in got.items():
        assert len(records) == len(truth[owner])
        assert by_id(records) == by_id(truth[owner])
        assert newest_first(records)
    # Every value of the owner split is its own slice: none without one.
    assert sorted(done.walk.stats.slices) == sorted(f"id={owner}" for owner in truth)


def test_a_month_of_transfers_stops_each_sub_account_past_its_start(
    flows_sim: Simulator,
) -> None:
    since, until = month_of(FROZEN_AT, back=2)
    truth = transfers(flows_sim)
    before = answered(flows_sim, spec.SUBACCOUNT_TRANSFERS)
    done = walked(flows_sim, spec.SUBACCOUNT_TRANSFERS_HISTORY, since=since, until=until)
    requests = answered(flows_sim, spec.SUBACCOUNT_TRANSFERS) - before
    got = done.owned()
    size = spec.SUBACCOUNT_TRANSFERS.bound("limit")
    needed = 0
    for owner, records in truth.items():
        month = [r for r in records if since <= r["createdAt"] < until]
        assert month
        assert by_id(got[owner]) == by_id(month)
        assert len(got[owner]) == len(month)
        assert newest_first(got[owner])
        needed += sum(r["createdAt"] >= since for r in records) // size + 1
    # Each sub-account's pages down to its first transfer older than the month, and at most
    # one asked ahead of each.
    assert needed <= requests <= needed + len(truth)
    assert requests * size < sum(map(len, truth.values())) / 10


def test_a_history_without_a_time_takes_no_range(flows_sim: Simulator) -> None:
    async def main() -> None:
        async with client(flows_sim) as c:
            with pytest.raises(ValueError, match="no time"):
                OffsetWindowWalk(c, spec.PENDING_FLOWS, since=0, on_window_exceeded="raise")

    asyncio.run(main())


def test_the_window_stops_where_offset_and_limit_reach_the_maximum() -> None:
    from pipeline.whitebit._paging import OffsetWindow

    window = OffsetWindow.of(DEPOSITS)
    assert (window.limit, window.max_offset, window.reachable) == (500, 9_500, REACH)
    assert window.offsets_from(9_000) == [9_000, 9_500]
    transfers_window = OffsetWindow.of(spec.SUBACCOUNT_TRANSFERS)
    assert (transfers_window.max_offset, transfers_window.reachable) == (9_900, REACH)
    # A page size the exchange lowered keeps the reach: the last offset moves up.
    assert OffsetWindow.of(DEPOSITS, 300).max_offset == 9_700
    # Without a reach, the largest offset is the bound (the investments, as before).
    assert OffsetWindow.of(spec.INVESTMENTS_HISTORY).max_offset == 10_000


#: The deposits and withdrawals split by method only: either method alone is deeper than the
#: window, so the last split still fills it.
BY_METHOD_ONLY = replace(
    spec.DEPOSITS_WITHDRAWALS,
    paging=spec.OffsetWindow(
        splits=(spec.Split("transactionMethod"),), identity="transactionId", time="createdAt"
    ),
)


def test_a_slice_still_too_deep_after_the_last_split_is_raised_after_the_rest(
    flows_sim: Simulator,
) -> None:
    truth = movements(flows_sim)
    pages: list[Any] = []

    async def main() -> OffsetWindowWalk:
        async with client(flows_sim) as c:
            walk = OffsetWindowWalk(c, BY_METHOD_ONLY, on_window_exceeded="raise")
            with raises(OffsetWindowExceeded) as info:
                # One at a time: the pages yielded before the walk raises are the point.
                async for page in walk:
                    pages.append(page)  # noqa: PERF401
            assert (info.value.slice, info.value.reachable) == ("transactionMethod=1", REACH)
            assert "1 more slice" in str(info.value)
            return walk

    walk = asyncio.run(main())
    rows = [row for page in pages for row in page]
    # Everything reachable, yielded before the walk said what it could not reach: each
    # method's newest 10,000.
    newest = {m: [r for r in truth if r["method"] == m][::-1][:REACH] for m in (1, 2)}
    assert by_id(rows) == by_id(newest[1] + newest[2])
    assert len(rows) == 2 * REACH
    assert newest_first(rows)
    assert [e.slice for e in walk.stats.incomplete_slices] == [
        "transactionMethod=1",
        "transactionMethod=2",
    ]


def test_a_range_whose_start_is_out_of_reach_is_reported(flows_sim: Simulator) -> None:
    """Nine years back: more deposits than the window reaches are newer than the month's start,
    so their slice ends before it; the withdrawals' does not."""
    truth = movements(flows_sim)
    since, until = month_of(FROZEN_AT, back=9 * 12)
    newer = {m: sum(r["createdAt"] >= since and r["method"] == m for r in truth) for m in (1, 2)}
    assert newer[1] > REACH > newer[2]
    done = walked(flows_sim, BY_METHOD_ONLY, since=since, until=until, on_window_exceeded="report")
    [incomplete] = done.walk.stats.incomplete_slices
    assert (incomplete.slice, incomplete.reachable) == ("transactionMethod=1", REACH)
    withdrawals = [r for r in truth if r["method"] == 2 and since <= r["createdAt"] < until]
    assert withdrawals
    assert by_id(done.rows) == by_id(withdrawals)
