"""The funding walk: exactly the history there was when it began, whatever happens meanwhile."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest
from httpx_aiohttp import AiohttpTransport
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline import spec
from pipeline.simulator import Fault, Latency, Scale, Simulator
from pipeline.spec import SimClock
from pipeline.whitebit import FundingEntry, HistoryOrderError, ResponseFormatError
from pipeline.whitebit._config import DEFAULT_MAX_CONCURRENCY, MAX_PAGES_AHEAD
from pipeline.whitebit._paging import NewestFirstCursor, RecordKeys
from pipeline.whitebit._walks import Flow
from tests.support.client import Watching, client, collect, raises
from tests.support.simulated import FROZEN_AT

FUNDING = spec.FUNDING_HISTORY.path
ROUND_S = 8 * 3600
assert isinstance(spec.FUNDING.paging, spec.NewestFirst)
FUNDING_KEYS = RecordKeys(spec.FUNDING.paging)


def _at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _offset(request: httpx.Request) -> int:
    return int(orjson.loads(base64.b64decode(request.headers["X-TXC-PAYLOAD"]))["offset"])


def test_the_walk_is_the_whole_history_newest_first(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim) as c:
            walk = c.walk(spec.FUNDING)
            rows = await collect(walk)
        assert rows == sim.dataset.funding.newest_first()
        stats = walk.stats
        assert (stats.rows, stats.slices, stats.retries) == (len(rows), ["all"], 0)
        needed = -(-(len(rows) - 1) // 99)  # pages overlap by one record
        # Pages requested ahead of the end are answered too, and counted: at most a few.
        assert needed <= stats.pages <= needed + DEFAULT_MAX_CONCURRENCY
        assert stats.elapsed_s > 0

    asyncio.run(main())


def test_at_a_distance_the_walk_keeps_a_round_trips_pages_in_flight() -> None:
    """Every answer 50 ms away, some 250 pages: the walk asks further ahead than a slice's few
    pages, its round trip is measured, and the rows are the same."""
    in_flight, most = 0, 0

    async def sent(_: httpx.Request) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)

    async def answered(_: httpx.Request, __: httpx.Response) -> None:
        nonlocal in_flight
        in_flight -= 1

    async def main(far: Simulator) -> None:
        watching = Watching(on_request=sent, on_response=answered)
        async with client(far, transport=watching, pacing=True) as c:
            walk = c.walk(spec.FUNDING)
            assert await collect(walk) == far.dataset.funding.newest_first()
        assert most > MAX_PAGES_AHEAD
        # At least the distance; how much more depends on how busy this machine is.
        assert walk.stats.round_trip_s is not None
        assert walk.stats.round_trip_s >= 0.05

    scale, clock = Scale.parse("markets=20,days=400"), SimClock(FROZEN_AT)
    with Simulator(seed=7, scale=scale, clock=clock, latency=Latency(0.05)) as far:
        asyncio.run(main(far))


def test_the_flow_asks_a_round_trips_pages_twice_over_while_the_reader_waits() -> None:
    """Little's law on measured figures; a page already there when taken holds the depth (the
    reader bounds the walk); the client's slots cap it."""
    now = [0.0]
    flow = Flow(64, clock=lambda: now[0])
    assert flow.depth(4, None, waited=True) == 8  # nothing measured: doubling
    for _ in range(5):
        flow.yielded()
        now[0] += 0.01  # a page every 10 ms
    assert flow.depth(4, 0.1, waited=True) == 22  # 2 x 0.1 / 0.01 + 2
    assert flow.depth(4, 0.1, waited=False) == 4  # the reader is the bound: no further
    assert flow.depth(40, 0.1, waited=False) == 22  # and less when a round trip needs less
    assert flow.depth(4, 1.0, waited=True) == 64  # the client's slots


def test_the_time_window(sim: Simulator) -> None:
    truth = sim.dataset.funding.newest_first()
    until, since = int(truth[50]["fundingTime"]), int(truth[250]["fundingTime"])

    async def main() -> None:
        async with client(sim) as c:
            walk = c.walk(spec.FUNDING, since=_at(since), until=_at(until))
            rows = await collect(walk)
        assert rows == [r for r in truth if since <= int(r["fundingTime"]) < until]
        # It stopped soon after the window (3 pages, and a few requested ahead), instead of
        # reading all 12 pages of the history.
        assert walk.stats.pages <= 8

    asyncio.run(main())


def test_naive_datetimes_are_refused(sim: Simulator) -> None:
    async def main() -> None:
        async with client(sim) as c:
            with pytest.raises(ValueError, match="timezone-aware"):
                c.walk(spec.FUNDING, since=datetime(2026, 1, 1))

    asyncio.run(main())


@pytest.mark.parametrize("with_window", [False, True])
def test_per_market_walks_merge_newest_first(sim: Simulator, with_window: bool) -> None:
    truth = sim.dataset.funding.newest_first()
    markets = sorted(sim.dataset.funding.market_names)[:4]
    since = int(truth[700]["fundingTime"]) if with_window else None
    until = int(truth[30]["fundingTime"]) if with_window else None

    async def main() -> None:
        async with client(sim) as c:
            walk = c.walk(
                spec.FUNDING,
                values={"markets": markets},
                since=_at(since) if since else None,
                until=_at(until) if until else None,
            )
            rows = await collect(walk)
        expected = [
            r
            for r in truth
            if r["market"] in markets
            and (since is None or int(r["fundingTime"]) >= since)
            and (until is None or int(r["fundingTime"]) < until)
        ]
        assert rows == expected
        assert walk.stats.slices == markets

    asyncio.run(main())


def test_with_a_fifth_of_answers_faulted_the_rows_are_exactly_the_same(
    sim_at: Any,
) -> None:
    s = sim_at("markets=30,days=200")
    truth = s.dataset.funding.newest_first()
    s.faults.set(0.2, seed=11, slow_seconds=0.05)

    def as_meant(rows: list[Any]) -> list[Any]:
        """The rows without the field the extra-field fault adds: a new field is kept, as
        received, wherever it lands (which request gets which fault depends on the order the
        requests arrive in)."""
        return [{k: v for k, v in row.items() if k != "unexpectedField"} for row in rows]

    async def main() -> None:
        async with client(s) as c:
            walk = c.walk(spec.FUNDING)
            assert as_meant(await collect(walk)) == truth
            assert walk.stats.retries > 0
            markets = sorted(s.dataset.funding.market_names)[:5]
            per_market = await collect(c.walk(spec.FUNDING, values={"markets": markets}))
            assert as_meant(per_market) == [r for r in truth if r["market"] in markets]

    asyncio.run(main())
    assert set(s.faults.injected) == set(Fault)


def test_new_entries_mid_walk_cause_no_repeat_and_no_gap(own_sim: Simulator) -> None:
    """New rounds arrive while pages are in flight; one page is held back so a later page is
    answered before the insertion and an earlier one after it: the gap must be seen."""
    truth = own_sim.dataset.funding.newest_first()
    answered: list[int] = []

    async def hold_back(request: httpx.Request) -> None:
        if request.url.path == FUNDING and _offset(request) == 99 and not answered.count(99):
            await asyncio.sleep(0.1)

    async def on_answer(request: httpx.Request, response: httpx.Response) -> None:
        offset = _offset(request)
        if offset in (198, 495) and offset not in answered:
            own_sim.clock.advance(ROUND_S)
        answered.append(offset)

    async def main() -> None:
        async with client(own_sim, transport=Watching(hold_back, on_answer)) as c:
            walk = c.walk(spec.FUNDING)
            rows = await collect(walk)
        assert rows == truth
        assert walk.stats.refetches >= 1
        assert walk.stats.duplicates_dropped >= 7

    asyncio.run(main())
    assert len(own_sim.dataset.funding.newest_first()) == len(truth) + 14


def test_more_than_a_page_arriving_mid_walk(own_sim: Simulator) -> None:
    truth = own_sim.dataset.funding.newest_first()
    rounds = 3 * 100 // 7  # ~300 new entries: three pages' worth

    async def on_answer(request: httpx.Request, response: httpx.Response) -> None:
        if _offset(request) == 0:
            own_sim.clock.advance(rounds * ROUND_S)

    async def main() -> None:
        async with client(own_sim, transport=Watching(on_response=on_answer)) as c:
            walk = c.walk(spec.FUNDING)
            rows = await collect(walk)
        assert rows == truth
        assert walk.stats.duplicates_dropped >= 200

    asyncio.run(main())


def test_per_market_walks_hold_while_entries_arrive(own_sim: Simulator) -> None:
    truth = own_sim.dataset.funding.newest_first()
    markets = sorted(own_sim.dataset.funding.market_names)
    count = [0]

    async def on_answer(request: httpx.Request, response: httpx.Response) -> None:
        count[0] += 1
        if count[0] % 3 == 0:
            own_sim.clock.advance(ROUND_S)

    async def main() -> None:
        async with client(own_sim, transport=Watching(on_response=on_answer)) as c:
            assert await collect(c.walk(spec.FUNDING, values={"markets": markets})) == truth

    asyncio.run(main())


class _Rewriting(httpx.AsyncBaseTransport):
    """Passes answers through, rewriting each funding page as ``rewrite`` says."""

    def __init__(self, rewrite: Any) -> None:
        self.inner = AiohttpTransport()
        self.rewrite = rewrite

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        if request.url.path == FUNDING and response.status_code == 200:
            body = orjson.dumps(self.rewrite(orjson.loads(body)))
        return httpx.Response(response.status_code, headers={}, content=body)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_funding_time_that_is_not_digits_is_passed_through_in_place(sim: Simulator) -> None:
    truth = sim.dataset.funding.newest_first()
    odd = {150: "soon", 151: "", 420: "1790000000.5"}

    def key(r: FundingEntry) -> tuple[str, str, str]:
        return (r["market"], r["fundingTime"], r["positionAmount"])

    targets = {key(truth[i]): text for i, text in odd.items()}

    def rewrite(page: dict[str, Any]) -> dict[str, Any]:
        for r in page["records"]:
            text = targets.get(key(r))
            if text is not None:
                r["fundingTime"] = text
        return page

    expected = [dict(r) for r in truth]
    for i, text in odd.items():
        expected[i]["fundingTime"] = text

    async def main() -> None:
        async with client(sim, transport=_Rewriting(rewrite)) as c:
            assert await collect(c.walk(spec.FUNDING)) == expected

    asyncio.run(main())


def test_an_answer_out_of_order_is_refused_not_trusted(sim: Simulator) -> None:
    def swap(page: dict[str, Any]) -> dict[str, Any]:
        records = page["records"]
        if len(records) > 60 and records[10]["fundingTime"] != records[60]["fundingTime"]:
            records[10], records[60] = records[60], records[10]
        return page

    async def main() -> None:
        async with client(sim, transport=_Rewriting(swap)) as c:
            with pytest.raises(HistoryOrderError, match="not newest first"):
                await collect(c.walk(spec.FUNDING))

    asyncio.run(main())


def test_an_answer_for_another_offset_is_refused(sim: Simulator) -> None:
    def ignore_offset(page: dict[str, Any]) -> dict[str, Any]:
        return {**page, "offset": 0}  # a server that answers page one whatever was asked

    async def main() -> None:
        async with client(sim, transport=_Rewriting(ignore_offset)) as c:
            with raises(ResponseFormatError) as info:
                await collect(c.walk(spec.FUNDING))
        assert info.value.field == "offset"
        assert "asked for offset 99" in str(info.value)

    asyncio.run(main())


@pytest.mark.parametrize("repeated_from", [99, 198])
def test_a_page_answered_for_every_offset_ends_the_walk_with_an_error(
    sim: Simulator, repeated_from: int
) -> None:
    """From ``repeated_from`` on, every offset is answered with the first page's records (its
    offset echoed): at 99 each page shows the walk's last record at its end, later each holds
    only records already passed. Either way nothing new ever comes, and the walk must say so."""
    first: list[FundingEntry] = []
    asked: list[int] = []

    def repeat(page: dict[str, Any]) -> dict[str, Any]:
        asked.append(page["offset"])
        if page["offset"] == 0:
            first[:] = page["records"]
        elif page["offset"] >= repeated_from and first:
            page["records"] = first
        return page

    async def main() -> None:
        async with client(sim, transport=_Rewriting(repeat)) as c:
            with raises(HistoryOrderError) as info:
                await collect(c.walk(spec.FUNDING))
        assert "100 pages in a row" in str(info.value)
        assert "the same records whatever the offset" in str(info.value)

    asyncio.run(main())
    # It gave up after a hundred steps (and the pages requested ahead of them), not a million.
    assert len(asked) <= 100 * DEFAULT_MAX_CONCURRENCY


# --- the cursor alone: any insertions, any page order ----------------------------------------


#: Synthetic histories count their funding times up from here: a plausible moment (2023-11).
EPOCH = 1_700_000_000


def _entry(n: int, time: int) -> FundingEntry:
    """Entry ``n`` funded at ``EPOCH + time``."""
    time += EPOCH
    return {
        "market": f"M{n}_PERP",
        "fundingTime": str(time),
        "fundingRate": "0",
        "fundingAmount": str(n),  # tells entries apart even where their key fields are broken
        "positionAmount": "-1" if n % 2 else "1",
        "settlementPrice": "1",
        "rateCalculatedTime": str(time - 300),
    }


#: A stand-in exchange's story, in plain values so that a found input can be pinned as an
#: ``@example``: the page size, entries per funding time, one entry in ``broken`` broken (0: none;
#: the warehouse rejects them, the walk keeps them in place), the history's initial size, bursts
#: of new entries at the head as (before which page, how many), and the moments pages are answered
#: from (each an index into the history's versions since the walk began, modulo their number).
_STORIES = {
    "page_size": st.integers(2, 9),
    "tie": st.integers(1, 12),
    "broken": st.sampled_from([0, 0, 3, 8]),
    "initial": st.integers(0, 80),
    "bursts": st.lists(st.tuples(st.integers(0, 40), st.integers(1, 27)), max_size=6),
    "moments": st.lists(st.integers(0, 6), max_size=60),
}


def _walk_story(
    page_size: int,
    tie: int,
    broken: int,
    initial: int,
    bursts: list[tuple[int, int]],
    moments: list[int],
) -> None:
    """Each page is answered from any moment since the walk began (a page requested ahead may
    be answered early), and a page fetched again is answered as of now. The walk must equal the
    history at its start."""
    serial = [0]
    top = [10_000]

    def grow(history: list[FundingEntry], count: int) -> list[FundingEntry]:
        new: list[Any] = []
        for i in range(count):
            serial[0] += 1
            entry = _entry(serial[0], top[0] + 1 + (count - 1 - i) // tie)
            new.append(
                _broken(entry, serial[0] // broken) if broken and serial[0] % broken == 0 else entry
            )
        top[0] += 1 + (count - 1) // tie if count else 0
        return new + history

    snapshots = [grow([], initial)]
    start: list[FundingEntry] | None = None
    cursor = NewestFirstCursor(page_size, FUNDING_KEYS)
    out: list[FundingEntry] = []
    offset, fresh_only = 0, False
    for page in range(2_000):
        for at, count in bursts:
            if at == page:
                snapshots.append(grow(snapshots[-1], count))
        moment = (
            len(snapshots) - 1
            if fresh_only or offset == 0 or not moments
            else moments[page % len(moments)] % len(snapshots)
        )
        records = snapshots[moment][offset : offset + page_size]
        if start is None:
            start = snapshots[moment]  # the walk begins with its first page
        step = cursor.read(records, offset)
        fresh_only = step.action == "refetch"
        if step.action == "next":
            out.extend(step.fresh)
            if step.last:
                break
        offset = step.offset
    else:
        raise AssertionError("the walk did not end")
    assert out == start


@settings(max_examples=300, deadline=None)
@given(**_STORIES)
# A full page of records no time places (both broken) while the last record passed has moved
# beyond it: the walk once asked for that page again and again.
@example(page_size=2, tie=1, broken=3, initial=38, bursts=[(0, 1), (1, 18)], moments=[])
def test_the_cursor_is_exact_under_any_insertions_and_page_order(**story: Any) -> None:
    _walk_story(**story)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None)
@given(**{**_STORIES, "page_size": st.integers(2, 4), "broken": st.sampled_from([2, 3, 8])})
def test_the_cursor_is_exact_searched_harder_where_pages_are_small_and_broken(
    **story: Any,
) -> None:
    """The same property, searched on purpose where inputs are rare and hard: small pages, many
    broken records, bursts larger than a page."""
    _walk_story(**story)


def _broken(entry: FundingEntry, kind: int) -> Any:
    """The entry with a key field broken, one way or another."""
    match kind % 4:
        case 0:
            return {k: v for k, v in entry.items() if k != "market"}
        case 1:
            return {**entry, "fundingTime": None}
        case 2:
            return {**entry, "positionAmount": -1.0}
    return f"an entry that is not an object: {entry['fundingAmount']}"


def test_the_cursor_remembers_only_the_last_funding_time() -> None:
    cursor = NewestFirstCursor(100, FUNDING_KEYS)
    history = [_entry(n, 2_000_000 - n // 250) for n in range(100_000)]  # 250 a funding time
    offset = 0
    while True:
        step = cursor.read(history[offset : offset + 100], offset)
        held = sum(len(k) for k, _ in cursor._tie)
        assert held <= 250 + 100
        if step.last:
            break
        offset = step.offset


def test_changing_yielded_records_does_not_mislead_the_cursor() -> None:
    history = [_entry(n, 5_000 - n // 30) for n in range(1_000)]  # 30 a funding time
    cursor, offset, out = NewestFirstCursor(10, FUNDING_KEYS), 0, []
    for pages in range(1, 300):
        page = [dict(r) for r in history[offset : offset + 10]]
        step = cursor.read(page, offset)  # type: ignore[arg-type]
        out.extend(dict(r) for r in step.fresh)
        for record in step.fresh:
            record["market"] = "changed by the caller"
        if step.last:
            break
        if pages in (3, 7):  # a burst at the head: the cursor must judge pages by its memory
            history = [_entry(10_000 * pages + n, 9_000 + pages) for n in range(25)] + history
        offset = step.offset
    else:
        raise AssertionError("the cursor lost its place")
    assert out == history[-1_000:]


def test_times_that_are_not_digits_take_their_neighbours() -> None:
    records = [_entry(1, 50), _entry(2, 40), _entry(3, 40), _entry(4, 30)]
    records[0]["fundingTime"], records[2]["fundingTime"] = "x", "4O"
    e = EPOCH
    assert FUNDING_KEYS.times(records, None) == [e + 40, e + 40, e + 40, e + 30]
    assert FUNDING_KEYS.times(records, e + 60) == [e + 60, e + 40, e + 40, e + 30]
    assert FUNDING_KEYS.times([], None) == []
    records[0]["fundingTime"] = ""
    assert FUNDING_KEYS.times(records, None) == [e + 40, e + 40, e + 40, e + 30]
    assert FUNDING_KEYS.times([_entry(1, 999), _entry(2, 1000)][::-1], None) == [e + 1000, e + 999]


@pytest.mark.parametrize(
    "odd",
    ["0", "99999999999", str(EPOCH * 1000), "1230767999", "-5", "1e9", str(10**30)],
)
def test_implausible_times_pass_through_and_never_stop_a_walk(odd: str) -> None:
    """A time no exchange sends (zero, milliseconds, the year 5138) is neither trusted for the
    window nor for stopping: the record stays in its place and the warehouse rejects it."""
    history = [_entry(n, 1_000 - n // 4) for n in range(40)]
    for position in (0, 9, 10, 39):  # the head, a page's end, the next page's start, the end
        records = [dict(r) for r in history]
        records[position]["fundingTime"] = odd
        cursor, offset, out = NewestFirstCursor(10, FUNDING_KEYS), 0, []
        while True:
            step = cursor.read(records[offset : offset + 10], offset)  # type: ignore[arg-type]
            out.extend(step.fresh)
            if step.last:
                break
            offset = step.offset
        assert out == records, (odd, position)
