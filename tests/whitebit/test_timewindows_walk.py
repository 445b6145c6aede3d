"""The walks of histories read in time windows, against the simulator over loopback: exactly what
its ledger holds for the range, within the exchange's windows and floor, whatever arrives while
they page; numbers exact; the exchange's time of the answer reported."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest

from pipeline import spec
from pipeline.simulator import EPOCH, Latency, Scale, SimClock, Simulator
from pipeline.whitebit import TimeWindowsWalk, WalkStats
from pipeline.whitebit._config import WINDOWS_IN_FLIGHT
from tests.support.client import Watching, client
from tests.whitebit.ledger_truth import (
    WINDOWED,
    Row,
    by_market,
    floor_of,
    rows,
    sent,
    series,
    truth,
)
from warehouse.writer import decode, encode

DAY = 86_400
ROUND_S = 8 * 3600
#: A range of whole months, all after the six-month floor at the epoch (2026-03-21).
MONTHS = (datetime(2026, 4, 1, tzinfo=UTC), datetime(2026, 9, 1, tzinfo=UTC))
PATHS = {h.operation.path: h for h in WINDOWED}


@pytest.fixture(scope="module")
def deep() -> Iterator[Simulator]:
    """Spot trading 200 days back, past the six-month floor (read only)."""
    with Simulator(seed=7, scale=Scale.parse("days=200,fills=20"), clock=SimClock(EPOCH)) as s:
        yield s


def _seconds(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp())


async def _walk(sim: Simulator, history: spec.History, **options: Any) -> tuple[list[Row], Any]:
    """The walk's rows and its stats; ``transport`` goes to the client, the rest to the walk."""
    transport = options.pop("transport", None)
    async with client(sim, transport=transport) as c:
        walk = c.walk(history, **options)
        assert isinstance(walk, TimeWindowsWalk)
        pages = [page async for page in walk]
    return rows(pages), walk.stats


def _same(found: list[Row], expected: list[Row], history: spec.History) -> None:
    """Row for row, every field: in the same order, each market's own order for records grouped
    by market (a page's markets come in any order)."""
    assert len(found) == len(expected)
    if isinstance(history.operation.answer, spec.Grouped):
        assert by_market(found) == by_market(expected)
    else:
        assert found == expected


def _months(found: list[Row], history: spec.History) -> list[str]:
    """The month of each row's time, in the order the walk yielded them."""
    field = history.operation.window.applies_to  # type: ignore[union-attr]
    return [f"{datetime.fromtimestamp(int(r[field]), UTC):%Y-%m}" for _, r in found]


@pytest.mark.parametrize("history", WINDOWED, ids=lambda h: h.name)
def test_a_range_of_months_is_what_the_ledger_holds(deep: Simulator, history: spec.History) -> None:
    requests: list[httpx.Request] = []

    async def watch(request: httpx.Request) -> None:
        if request.url.path in PATHS:  # not the ping that reads the exchange's clock first
            requests.append(request)

    since, until = MONTHS
    found, stats = asyncio.run(
        _walk(deep, history, since=since, until=until, transport=Watching(watch))
    )
    expected = truth(deep, history, _seconds(since), _seconds(until))
    assert len(expected) > 20, "the ledger holds records in these months"
    _same(found, expected, history)
    months = _months(found, history)
    assert months == sorted(months, reverse=True), "newest month first"
    assert set(months) == {"2026-04", "2026-05", "2026-06", "2026-07", "2026-08"}
    assert stats.rows == len(found)
    assert stats.cut_before is None
    assert stats.observed_at == datetime.fromtimestamp(EPOCH, UTC)
    assert stats.slices[0].endswith("..2026-08-31T23:59:59Z")
    window = history.operation.window
    assert window is not None
    for request in requests:
        params = sent(request)
        start, end = params[window.start], params[window.end]
        assert since.timestamp() <= start <= end < until.timestamp()
        first, last = (datetime.fromtimestamp(t, UTC) for t in (start, end))
        assert (first.year, first.month) == (last.year, last.month), "never across a month"
        assert start % DAY == 0, "whole UTC days"
        assert end % DAY == DAY - 1, "whole UTC days"
        if window.max_span_s is not None:
            assert end - start <= window.max_span_s


@pytest.mark.parametrize("history", WINDOWED, ids=lambda h: h.name)
def test_the_whole_history_up_to_the_present_second(deep: Simulator, history: spec.History) -> None:
    found, stats = asyncio.run(_walk(deep, history))
    _same(found, truth(deep, history, None, None), history)
    assert stats.cut_before is None  # nothing was asked before the floor: nothing to cut


def test_a_month_of_31_days_takes_two_windows_of_30(deep: Simulator) -> None:
    requests: list[dict[str, Any]] = []

    async def watch(request: httpx.Request) -> None:
        if request.url.path in PATHS:
            requests.append(sent(request))

    july = (datetime(2026, 7, 1, tzinfo=UTC), datetime(2026, 8, 1, tzinfo=UTC))
    found, stats = asyncio.run(
        _walk(deep, spec.CONVERSIONS, since=july[0], until=july[1], transport=Watching(watch))
    )
    assert stats.slices == [
        "2026-07-02T00:00:00Z..2026-07-31T23:59:59Z",
        "2026-07-01T00:00:00Z..2026-07-01T23:59:59Z",
    ]
    assert {(r["from"], r["to"]) for r in requests} == {
        (int(july[0].timestamp()) + DAY, int(july[1].timestamp()) - 1),
        (int(july[0].timestamp()), int(july[0].timestamp()) + DAY - 1),
    }
    _same(found, truth(deep, spec.CONVERSIONS, *map(_seconds, july)), spec.CONVERSIONS)


@pytest.mark.parametrize("history", [h for h in WINDOWED if h.forgotten], ids=lambda h: h.name)
def test_a_range_past_the_floor_is_cut_there_and_the_cut_reported(
    deep: Simulator, history: spec.History
) -> None:
    floor = floor_of(deep)
    assert series(deep, history).times[0] < floor * 1_000_000, "the ledger holds older records"
    starts: list[int] = []
    window = history.operation.window
    assert window is not None

    async def watch(request: httpx.Request) -> None:
        if request.url.path in PATHS:
            starts.append(sent(request)[window.start])

    since = datetime(2026, 1, 1, tzinfo=UTC)
    found, stats = asyncio.run(_walk(deep, history, since=since, transport=Watching(watch)))
    _same(found, truth(deep, history, floor, None), history)
    assert min(starts) == floor
    assert stats.cut_before == datetime.fromtimestamp(floor, UTC)
    assert any("2026-03-21 00:00 UTC" in note and "cut" in note for note in stats.notes)


@pytest.mark.parametrize("history", [h for h in WINDOWED if h.forgotten], ids=lambda h: h.name)
def test_a_range_wholly_before_the_floor_asks_for_nothing(
    deep: Simulator, history: spec.History
) -> None:
    old = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC))
    requests: list[httpx.Request] = []

    async def watch(request: httpx.Request) -> None:
        if request.url.path in PATHS:
            requests.append(request)

    found, stats = asyncio.run(
        _walk(deep, history, since=old[0], until=old[1], transport=Watching(watch))
    )
    assert found == []
    assert requests == []
    assert stats.cut_before == datetime.fromtimestamp(floor_of(deep), UTC)


def test_fills_of_one_market_come_under_it(deep: Simulator) -> None:
    """A plain array (asked for one market, a fixed parameter) is turned into records by market:
    the market becomes their owner, as when the exchange groups them itself."""
    one = dataclasses.replace(spec.TRADES, params={"market": "BTC_USDT"})
    found, _ = asyncio.run(_walk(deep, one, since=MONTHS[0], until=MONTHS[1]))
    expected = [r for r in truth(deep, spec.TRADES, *map(_seconds, MONTHS)) if r[0] == "BTC_USDT"]
    assert expected
    assert found == expected


def test_grouped_records_are_owned_by_the_market_they_are_listed_under(deep: Simulator) -> None:
    found, _ = asyncio.run(_walk(deep, spec.ORDERS, since=MONTHS[0], until=MONTHS[1]))
    markets = {market for market, _ in found}
    assert len(markets) > 3
    records = series(deep, spec.ORDERS)
    market_of = {
        record["id"]: str(records.value("market", i))
        for i, record in enumerate(records.parsed(range(len(records))))
    }
    assert all(market == market_of[record["id"]] for market, record in found)


@pytest.mark.parametrize(
    ("history", "fields"),
    [
        (spec.TRADES, ("time",)),
        (spec.ORDERS, ("ctime", "ftime")),
        (spec.POSITION_EVENTS, ("openDate", "modifyDate")),
    ],
    ids=lambda v: v.name if isinstance(v, spec.History) else "",
)
def test_times_with_a_fraction_arrive_as_the_digits_sent(
    deep: Simulator, history: spec.History, fields: tuple[str, ...]
) -> None:
    found, _ = asyncio.run(_walk(deep, history, since=MONTHS[0], until=MONTHS[1]))
    raw = b"".join(series(deep, history).written(range(len(series(deep, history)))))
    for _, record in found[:300]:
        for name in fields:
            value = record[name]
            assert type(value) is Decimal
            assert value.as_tuple().exponent == -6  # six decimals: microseconds, none lost
            assert f'"{name}":{value}'.encode() in raw


def test_records_arriving_at_the_head_mid_walk_change_nothing(own_sim: Simulator) -> None:
    """The clock moves on while pages are in flight, and fills, orders and positions arrive at
    the head: the walk is what the ledger held when it began, no repeat, no gap."""
    since = datetime.fromtimestamp(EPOCH - 20 * DAY, UTC)
    answered = [0]

    async def on_answer(request: httpx.Request, response: httpx.Response) -> None:
        answered[0] += 1
        if answered[0] % 2:
            own_sim.clock.advance(ROUND_S / 4)

    for history in WINDOWED:
        expected = truth(own_sim, history, _seconds(since), None)  # as the walk begins
        before = len(series(own_sim, history))
        found, stats = asyncio.run(
            _walk(own_sim, history, since=since, transport=Watching(on_response=on_answer))
        )
        _same(found, expected, history)
        assert stats.cut_before is None
        identity = history.paging.identity  # type: ignore[union-attr]
        keys = [(market, tuple(r[f] for f in identity)) for market, r in found]
        assert len(set(keys)) == len(keys)
        if history in (spec.TRADES, spec.ORDERS):
            assert len(series(own_sim, history)) > before, "records arrived meanwhile"


def test_a_window_past_the_reach_is_halved_until_it_fits(deep: Simulator) -> None:
    """Closed positions with pages of 5 and a reach of 10 records (the exchange's are 100 and
    10,000): a month holding more is split, and the walk is still what the ledger holds."""
    op = spec.CLOSED_PNL
    small = dataclasses.replace(
        op,
        params=tuple(
            dataclasses.replace(p, maximum=5) if p.name == "limit" else p for p in op.params
        ),
        max_reach=10,
    )
    history = dataclasses.replace(spec.CLOSED_POSITIONS, operation=small)
    found, stats = asyncio.run(_walk(deep, history, since=MONTHS[0], until=MONTHS[1]))
    _same(found, truth(deep, spec.CLOSED_POSITIONS, *map(_seconds, MONTHS)), history)
    assert len(stats.slices) > 5, "months were split"
    assert stats.complete
    starts = [datetime.strptime(s[:20], "%Y-%m-%dT%H:%M:%SZ") for s in stats.slices]
    assert starts == sorted(starts, reverse=True), "the newer half first"


def test_the_collateral_balance_arrives_exact(sim: Simulator) -> None:
    """JSON numbers of up to 18 decimals: as the digits sent, no float between."""
    held = sim.dataset.collateral_balance
    assert any(len(v.partition(".")[2]) > 8 for v in held.values())

    async def main() -> dict[str, Any]:
        async with client(sim) as c:
            stats = WalkStats("collateral_balance")
            answer: dict[str, Any] = await c.call(spec.COLLATERAL_BALANCE, {}, stats=stats)
        assert stats.observed_at == datetime.fromtimestamp(EPOCH, UTC)
        return answer

    answer = asyncio.run(main())
    assert answer == {t: Decimal(v) for t, v in held.items()}
    assert {t: str(v) for t, v in answer.items()} == held
    # Down the writer's pipe and back, the same digits.
    _, back = decode(encode(["take", answer]), exact=True)
    assert {t: str(v) for t, v in back.items()} == held


async def _pages(sim: Simulator, history: spec.History, in_flight: int, **options: Any) -> Any:
    transport = options.pop("transport", None)
    async with client(sim, transport=transport) as c:
        walk = TimeWindowsWalk(c, history, since=None, until=None, windows_in_flight=in_flight)
        pages = [page async for page in walk]
    return pages, walk.stats


@pytest.mark.parametrize("history", WINDOWED, ids=lambda h: h.name)
def test_windows_read_together_yield_what_one_at_a_time_does(
    deep: Simulator, history: spec.History
) -> None:
    """The whole history, six months and more of windows: page for page, in the same order,
    the same slices, as a walk of one window at a time."""
    one, one_stats = asyncio.run(_pages(deep, history, 1))
    together, stats = asyncio.run(_pages(deep, history, WINDOWS_IN_FLIGHT))
    assert together == one
    assert len(stats.slices) > WINDOWS_IN_FLIGHT
    assert stats.slices == one_stats.slices
    assert (stats.rows, stats.duplicates_dropped) == (one_stats.rows, one_stats.duplicates_dropped)


def test_at_the_exchange_distance_windows_are_in_flight_together(deep: Simulator) -> None:
    """50 ms a round trip: requests of several windows are in flight at once, and the walk
    still yields exactly the ledger's records, newest month first."""
    history, window = spec.ORDERS, spec.ORDERS.operation.window
    assert window is not None
    busy: collections.Counter[int] = collections.Counter()
    most = 0

    async def asked(request: httpx.Request) -> None:
        nonlocal most
        if request.url.path in PATHS:
            busy[sent(request)[window.start]] += 1
            most = max(most, len(+busy))

    async def answered(request: httpx.Request, _: httpx.Response) -> None:
        if request.url.path in PATHS:
            busy[sent(request)[window.start]] -= 1

    deep.latency = Latency(0.05)
    try:
        pages, stats = asyncio.run(
            _pages(deep, history, WINDOWS_IN_FLIGHT, transport=Watching(asked, answered))
        )
    finally:
        deep.latency = Latency()
    found = rows(pages)
    _same(found, truth(deep, history, None, None), history)
    months = _months(found, history)
    assert months == sorted(months, reverse=True)
    assert len(stats.slices) > WINDOWS_IN_FLIGHT
    assert most >= 3, "requests of several windows in flight at once"
