"""The time-window walk against an exchange in memory: how a range is cut into windows, the
six-month floor, a window past the offset's reach, and, under any arrivals at the head and any
order the pages are answered in, exactly the records of the range, each once."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
from collections.abc import Hashable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import spec
from pipeline.whitebit import OffsetWindowExceeded, TimeWindowsWalk, WalkStats
from pipeline.whitebit._clock import history_floor
from pipeline.whitebit._config import WINDOW_PAGES_HELD, WINDOWS_IN_FLIGHT
from pipeline.whitebit._identity import identities, identity, unseen
from pipeline.whitebit._stats import note_round_trip
from pipeline.whitebit._timewindows import Window, windows
from tests.whitebit.ledger_truth import WINDOWED, by_market, rows

DAY = 86_400
#: The in-memory exchange's present: 2026-09-21 14:13:20.5 UTC.
NOW = 1_790_000_000.5


def _at(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


# --- windows and the floor -----------------------------------------------------------------------


def test_a_month_fits_a_31_day_window_and_takes_two_of_30() -> None:
    july, august = _at("2026-07-01"), _at("2026-08-01")
    assert windows(july, august, 31 * DAY) == [Window(july, august)]
    assert windows(july, august, 30 * DAY) == [Window(july + DAY, august), Window(july, july + DAY)]
    # A window's end minus its start (both included) is the span the exchange checks.
    assert max(w.end - 1 - w.start for w in windows(july, august, 30 * DAY)) <= 30 * DAY


def test_windows_are_whole_days_within_a_month_newest_first() -> None:
    low, high = _at("2026-01-15T06:30:00"), _at("2026-04-02T12:00:00")
    cut = windows(low, high, None)
    assert [w.name for w in cut] == [
        "2026-04-01T00:00:00Z..2026-04-02T11:59:59Z",
        "2026-03-01T00:00:00Z..2026-03-31T23:59:59Z",
        "2026-02-01T00:00:00Z..2026-02-28T23:59:59Z",
        "2026-01-15T06:30:00Z..2026-01-31T23:59:59Z",
    ]
    days = windows(low, high, 10 * DAY)
    assert all(w.end - w.start <= 10 * DAY for w in days)
    assert all(newer.start == older.end for newer, older in itertools.pairwise(days))
    assert days[0].end == high
    assert days[-1].start == low
    assert all(w.start % DAY == 0 for w in days[:-1])


@pytest.mark.parametrize(
    ("now", "floor"),
    [
        ("2026-09-21T14:13:20", "2026-03-21"),
        ("2026-08-31T23:59:59", "2026-02-28"),
        ("2028-08-31T00:00:00", "2028-02-29"),
        ("2026-01-10T08:00:00", "2025-07-10"),
    ],
)
def test_the_floor_is_the_day_six_calendar_months_back(now: str, floor: str) -> None:
    assert history_floor(_at(now)) == _at(floor)


# --- an exchange in memory ----------------------------------------------------------------------


def _small(history: spec.History, limit: int, reach: int | None = None) -> spec.History:
    """The history with pages of ``limit`` records (and a ``max_reach``): many pages of few."""
    op = history.operation
    params = tuple(
        dataclasses.replace(p, maximum=limit) if p.name == "limit" else p for p in op.params
    )
    changed = dataclasses.replace(op, params=params, max_reach=reach or op.max_reach)
    return dataclasses.replace(history, operation=changed)


class Memory:
    """An exchange holding one history read in time windows, strict about its windows as the
    simulator is. Each page is answered from any version of the history since the walk began
    (``moments``: a page asked ahead may be answered early); ``bursts`` bring records at the
    head (at the present, which moves on) before the call they name, ``late`` records of those
    ages (milliseconds before the present), shown only then."""

    max_concurrency = 4

    def __init__(
        self,
        history: spec.History,
        ages: list[int],
        *,
        bursts: Mapping[int, int] | None = None,
        moments: list[int] | None = None,
        late: Mapping[int, list[int]] | None = None,
    ) -> None:
        self.history, self.op = history, history.operation
        self.window = self.op.window
        assert self.window is not None
        self.now = NOW
        self.serial = 0
        # Oldest first: (time in microseconds, record); versions of it as records arrive.
        start = [self._made(int(NOW * 1_000_000) - age * 1_000) for age in sorted(ages)[::-1]]
        self.versions: list[list[tuple[int, Any]]] = [start]
        self.bursts, self.moments = dict(bursts or {}), moments or []
        self.late = dict(late or {})
        self.calls: list[dict[str, Any]] = []

    def _made(self, time_us: int) -> tuple[int, Any]:
        self.serial += 1
        field = self.window.applies_to  # type: ignore[union-attr]
        kind = {f.name: f.type for f in self.op.record}[field]
        when: Any = time_us // 1_000_000
        if kind is spec.FieldType.TIMESTAMP_FRACTIONAL:
            when = Decimal(time_us) / 1_000_000
        record: dict[str, Any] = {"n": self.serial, field: when}
        for name in self.history.paging.identity:  # type: ignore[union-attr]
            record.setdefault(name, str(self.serial) if name == "id" else self.serial)
        return time_us, {"market": f"M{self.serial % 3}_USDT", **record}

    async def exchange_time(self) -> float:
        return self.now

    async def call(
        self, operation: spec.Operation, params: Mapping[str, Any], *, stats: Any = None
    ) -> Any:
        await asyncio.sleep(0)  # let the other pages in flight go first, now and then
        calls = len(self.calls)
        self.calls.append(dict(params))
        for _ in range(self.bursts.get(calls, 0)):
            self.now += 0.25
            self.versions.append([*self.versions[-1], self._made(int(self.now * 1_000_000))])
        for age in self.late.get(calls, ()):
            shown = [*self.versions[-1], self._made(int(NOW * 1_000_000) - age * 1_000)]
            self.versions.append(sorted(shown, key=lambda item: item[0]))
        window = self.window
        assert window is not None
        start, end = params[window.start], params[window.end]
        if window.future_end == "reject":
            assert end <= self.now + 1, "an end after the present + 1 s is refused"
            assert start <= end
        end = min(end, int(self.now))
        if window.max_span_s is not None:
            assert end - start <= window.max_span_s, "a window over the longest span"
        if window.floor is not None:
            assert start >= history_floor(self.now), "a start before the floor"
        reach = operation.max_reach
        offset, limit = params["offset"], params["limit"]
        assert limit <= operation.bound("limit")
        assert reach is None or offset + limit <= reach, "past the reach"
        moment = self.moments[calls % len(self.moments)] if self.moments else -1
        history = self.versions[moment % len(self.versions)]
        inside = [r for t, r in reversed(history) if start * 10**6 <= t < (end + 1) * 10**6]
        return self._answer(inside[offset : offset + limit], offset, limit, len(inside))

    def _answer(self, page: list[Any], offset: int, limit: int, total: int) -> Any:
        answer = self.op.answer
        if isinstance(answer, spec.Grouped):
            grouped: dict[str, list[Any]] = {}
            for record in page:
                grouped.setdefault(record["market"], []).append(record)
            return dict(sorted(grouped.items()))  # the markets in another order than the times
        if isinstance(answer, spec.PageEnvelope):
            return {answer.under: page, "total": total, "limit": limit, "offset": offset}
        return page

    def truth(self, since: int | None, until: int | None) -> list[tuple[str | None, Any]]:
        low = since if since is not None else 0
        if self.window is not None and self.window.floor is not None:
            low = max(low, history_floor(NOW))
        high = int(NOW) if until is None else min(until, int(NOW))
        grouped = isinstance(self.op.answer, spec.Grouped)
        return [
            (r["market"] if grouped else None, r)
            for t, r in reversed(self.versions[0])
            if low * 10**6 <= t < high * 10**6
        ]


async def _consume(walk: TimeWindowsWalk, pages: list[Any]) -> None:
    async for page in walk:
        pages.append(page)  # noqa: PERF401 - kept page by page, for a walk that raises at its end


async def _walk(
    exchange: Memory, *, since: int | None, until: int | None = None
) -> tuple[list[Any], WalkStats]:
    walk = TimeWindowsWalk(exchange, exchange.history, since=since, until=until)
    pages = [page async for page in walk]
    return rows(pages), walk.stats


def _same(found: list[Any], expected: list[Any], history: spec.History) -> None:
    assert len(found) == len(expected)
    if isinstance(history.operation.answer, spec.Grouped):
        assert by_market(found) == by_market(expected)
    else:
        assert found == expected


# --- exact under any arrivals and any order of answers ---------------------------------------


_HOUR_MS = 3_600_000


@settings(max_examples=150, deadline=None)
@given(
    history=st.sampled_from(WINDOWED),
    page=st.integers(2, 6),
    ages=st.lists(st.integers(0, 200 * 24 * _HOUR_MS), max_size=60),
    recent=st.lists(st.integers(0, 3_000), max_size=8),
    since=st.none() | st.integers(0, 220 * DAY),
    until=st.none() | st.integers(-2 * DAY, 100 * DAY),
    bursts=st.dictionaries(st.integers(0, 30), st.integers(1, 12), max_size=5),
    moments=st.lists(st.integers(0, 8), max_size=30),
)
def test_the_walk_is_exact_whatever_arrives_and_whenever_pages_are_answered(
    history: spec.History,
    page: int,
    ages: list[int],
    recent: list[int],
    since: int | None,
    until: int | None,
    bursts: dict[int, int],
    moments: list[int],
) -> None:
    """Records arrive at the head between calls and pages are answered from any version of the
    history since the walk began: the walk is the range as it stood when the walk began, each
    record once, newest first (``recent``: records of the last seconds, the present one too)."""
    exchange = Memory(_small(history, page), ages + recent, bursts=bursts, moments=moments)
    first = None if since is None else int(NOW) - since
    last = None if until is None else int(NOW) - until
    found, stats = asyncio.run(_walk(exchange, since=first, until=last))
    _same(found, exchange.truth(first, last), history)
    assert stats.rows == len(found)
    for call in exchange.calls:
        window = history.operation.window
        assert window is not None
        start, end = call[window.start], call[window.end]
        assert end <= int(NOW) - 1
        begin, finish = (datetime.fromtimestamp(t, UTC) for t in (start, end))
        assert (begin.year, begin.month) == (finish.year, finish.month)


def test_a_record_shown_late_inside_a_window_repeats_nothing() -> None:
    """A record the exchange shows only after its time, at the head of a window being read,
    shifts the pages after it by one: the record they show again is yielded once."""
    history = _small(spec.TRADES, 3)
    ages = [DAY * 1000 + 60_000 * n for n in range(30)]  # a day old and older, a minute apart
    exchange = Memory(history, ages, late={2: [DAY * 1000 - 1]})
    found, stats = asyncio.run(_walk(exchange, since=int(NOW) - 3 * DAY))
    _same(found, exchange.truth(int(NOW) - 3 * DAY, None), history)
    assert stats.duplicates_dropped == 1


# --- the reach ---------------------------------------------------------------------------------


def test_a_window_over_the_reach_is_halved_until_each_part_fits() -> None:
    history = _small(spec.CLOSED_POSITIONS, 3, reach=9)
    # 40 positions closed within the last two days, a few seconds apart.
    exchange = Memory(history, [DAY * 1000 + 7_000 * n for n in range(40)])
    found, stats = asyncio.run(_walk(exchange, since=int(NOW) - 3 * DAY))
    _same(found, exchange.truth(int(NOW) - 3 * DAY, None), history)
    assert len(found) == 40
    assert stats.complete
    assert len(stats.slices) > 4
    for call in exchange.calls:
        assert call["offset"] + call["limit"] <= 9


@pytest.mark.parametrize("mode", ["raise", "report"])
def test_a_second_holding_more_than_the_reach_is_reported_never_cut_silently(
    mode: Literal["raise", "report"],
) -> None:
    history = _small(spec.CLOSED_POSITIONS, 3, reach=9)
    second = int(NOW) - DAY
    ages = [int((NOW - second) * 1000) - n for n in range(12)]  # 12 in one second
    ages += [2 * DAY * 1000 + n * 60_000 for n in range(4)]  # and a few a day earlier
    exchange = Memory(history, ages)

    walk = TimeWindowsWalk(
        exchange, history, since=int(NOW) - 3 * DAY, until=None, on_window_exceeded=mode
    )
    pages: list[Any] = []

    async def main() -> None:
        pages.extend([page async for page in walk])

    if mode == "raise":
        # Raised once the walk has yielded all it could: the pages are all there.
        with pytest.raises(OffsetWindowExceeded, match="only its newest 9 rows are reachable"):
            asyncio.run(_consume(walk, pages))
    else:
        asyncio.run(main())
    found, stats = rows(pages), walk.stats
    name = Window(second, second + 1).name
    assert [exceeded.slice for exceeded in stats.incomplete_slices] == [name]
    # The reachable nine of that second, and every record of the other windows.
    expected = exchange.truth(int(NOW) - 3 * DAY, None)
    assert len(found) == len(expected) - 3
    assert [r for _, r in found if r["closeDate"] != second] == [
        r for _, r in expected if r["closeDate"] != second
    ]


def test_a_page_taken_whole_keeps_and_drops_what_record_by_record_would() -> None:
    """`_identity`'s page-at-once path gives each record the key the record-by-record one does,
    and keeps exactly the records not seen before: on a page of plain records, and on pages
    where one record lacks its identity, holds it as a float or is no object at all."""
    plain = [{"id": n, "time": Decimal(f"{n}.5")} for n in range(5)]
    odd = [
        [*plain[:2], {"time": Decimal("9.5")}],
        [*plain[:2], {"id": 1.5}],
        [*plain[:2], ["not", "an", "object"]],
        [*plain[:2], plain[1]],
    ]
    for page in [plain, *odd]:
        assert identities(page, ("id",), "BTC_USDT") == [
            identity(r, ("id",), "BTC_USDT") for r in page
        ]
    # One identity field: the key is its value; several: a tuple of theirs, either way alike.
    assert (
        identities(plain[:2], ("id", "time"), None)
        == [identity(r, ("id", "time"), None) for r in plain[:2]]
        == [(0, Decimal("0.5")), (1, Decimal("1.5"))]
    )
    seen: set[Hashable] = {3}
    assert unseen(plain, ("id",), None, seen) == [r for r in plain if r["id"] != 3]
    assert seen == set(range(5))
    assert unseen(odd[3], ("id",), None, set()) == plain[:2]
    assert unseen(plain, ("id",), None, set()) is plain  # kept as it came, not copied


# --- windows in flight ---------------------------------------------------------------------------


class Busy(Memory):
    """`Memory` whose answers take a moment, counting the windows with a call in progress and
    the calls of each window; a window whose start is in ``refused`` fails at its every call."""

    def __init__(self, *args: Any, refused: frozenset[int] = frozenset(), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.busy: collections.Counter[int] = collections.Counter()
        self.asked: collections.Counter[int] = collections.Counter()
        self.most = 0
        self.refused = refused

    async def call(
        self, operation: spec.Operation, params: Mapping[str, Any], *, stats: Any = None
    ) -> Any:
        assert self.window is not None
        start = params[self.window.start]
        self.asked[start] += 1
        self.busy[start] += 1
        self.most = max(self.most, len(+self.busy))
        try:
            await asyncio.sleep(0.001)
            if start in self.refused:
                raise Refused(f"window from {start} refused")
            return await super().call(operation, params, stats=stats)
        finally:
            self.busy[start] -= 1


class Refused(Exception):
    pass


#: Fills every 6 hours over 190 days: some 120 to a month, 60 pages of 2 a window.
_SPREAD = [6 * _HOUR_MS * n + 1_000 for n in range(190 * 4)]


def test_windows_read_together_yield_what_one_at_a_time_does_and_hold_few_pages() -> None:
    """Windows are read together, at most `WINDOWS_IN_FLIGHT`, each window read ahead holding
    at most `WINDOW_PAGES_HELD` pages (and its pages asked ahead) until its turn, while the
    window yielded takes its time; the pages are those of a walk of one window at a time, in its
    order, and so are the slices."""
    history = _small(spec.TRADES, 2)
    one, together = Busy(history, _SPREAD), Busy(history, _SPREAD)
    ahead: dict[int, int] = {}

    async def main(exchange: Busy, in_flight: int) -> tuple[list[Any], WalkStats]:
        walk = TimeWindowsWalk(
            exchange, history, since=None, until=None, windows_in_flight=in_flight
        )
        pages: list[Any] = []
        async for page in walk:
            if not pages and in_flight > 1:
                await asyncio.sleep(0.3)  # the newest window's turn lasts: the others read on
                ahead.update(exchange.asked)
            pages.append(page)
        return pages, walk.stats

    pages_one, stats_one = asyncio.run(main(one, 1))
    pages, stats = asyncio.run(main(together, WINDOWS_IN_FLIGHT))
    assert pages == pages_one
    assert rows(pages) == rows(pages_one)
    assert stats.slices == stats_one.slices
    assert len(stats.slices) >= WINDOWS_IN_FLIGHT + 2
    assert (
        stats.rows
        == stats_one.rows
        == len(_SPREAD)
        - sum(1 for age in _SPREAD if age * 1_000 > (NOW - history_floor(NOW)) * 1_000_000)
    )
    assert one.most == 1
    assert together.most == WINDOWS_IN_FLIGHT
    # While the newest window's first page was in hand: the next windows had read their share
    # and waited; none after them had been asked anything.
    starts = sorted(ahead, reverse=True)
    assert len(starts) == WINDOWS_IN_FLIGHT
    held = WINDOW_PAGES_HELD + 1 + Busy.max_concurrency  # held, one in hand, those asked ahead
    assert all(WINDOW_PAGES_HELD <= ahead[s] <= held for s in starts[1:])


def test_a_later_window_that_fails_is_raised_at_its_turn_after_every_newer_record() -> None:
    """The third window fails at once, while the newer two are still read: they are yielded
    whole, then its error raised, as a walk of one window at a time does."""
    history = _small(spec.TRADES, 2)
    third = windows(history_floor(NOW), int(NOW), None)[2].start
    outcomes = []
    for in_flight in (1, WINDOWS_IN_FLIGHT):
        exchange = Busy(history, _SPREAD, refused=frozenset({third}))
        walk = TimeWindowsWalk(
            exchange, history, since=None, until=None, windows_in_flight=in_flight
        )
        pages: list[Any] = []
        with pytest.raises(Refused, match=f"window from {third} refused"):
            asyncio.run(_consume(walk, pages))
        outcomes.append((rows(pages), walk.stats.slices))
    (one, slices_one), (together, slices) = outcomes
    assert together == one
    assert len(one) > 100, "the newer windows' records, all of them"
    assert slices == slices_one
    assert slices[-1] == Window(third, windows(history_floor(NOW), int(NOW), None)[1].start).name


# --- how far ahead ------------------------------------------------------------------------------


class Distant(Memory):
    """`Memory` a round trip away: each answer takes ``trip`` seconds, the calls in flight
    overlapping as on a network; counts them, the window's of each start apart."""

    max_concurrency = 64

    def __init__(self, *args: Any, trip: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trip = trip
        self.busy: collections.Counter[int] = collections.Counter()
        self.most = 0

    async def call(
        self, operation: spec.Operation, params: Mapping[str, Any], *, stats: Any = None
    ) -> Any:
        assert self.window is not None
        start = params[self.window.start]
        self.busy[start] += 1
        self.most = max(self.most, self.busy.total())
        try:
            await asyncio.sleep(self.trip)
            if stats is not None:  # as the client measures it: the network's part alone
                note_round_trip(stats, self.trip)
            return await super().call(operation, params, stats=stats)
        finally:
            self.busy[start] -= 1


def _needed(exchange: Memory, history: spec.History) -> int:
    """The calls of a walk that knew each window's records: its pages (the last one short or
    empty) and, after a short one, the probe past it."""
    size, window = history.operation.bound("limit"), history.operation.window
    assert window is not None
    calls = 0
    for w in windows(history_floor(NOW), int(NOW), window.max_span_s):
        held = sum(1 for t, _ in exchange.versions[0] if w.start * 10**6 <= t < w.end * 10**6)
        calls += held // size + 1 + (1 if held % size else 0)
    return calls


def test_the_walk_asks_ahead_what_a_round_trip_needs_and_no_page_past_a_window() -> None:
    """At a distance, a reader that keeps up has the walk fill the client's slots, yet no
    window asks more than a page past its predicted end; a slow reader has the window it yields
    ask ahead only what it reads during a round trip, twice over; the pages are those of a walk
    of one window at a time either way."""
    history = _small(spec.TRADES, 2)
    one, fast = Memory(history, _SPREAD), Distant(history, _SPREAD, trip=0.01)

    async def main(exchange: Memory, in_flight: int) -> list[Any]:
        walk = TimeWindowsWalk(
            exchange, history, since=None, until=None, windows_in_flight=in_flight
        )
        return [page async for page in walk]

    assert asyncio.run(main(fast, WINDOWS_IN_FLIGHT)) == asyncio.run(main(one, 1))
    assert fast.most >= 32
    cut = windows(history_floor(NOW), int(NOW), None)
    # A page past each window's predicted end, and one more where the records' times, read
    # early at full depth, predicted a page more than the window held (asking a window's depth
    # ahead instead, as before, cost 535 calls here).
    assert len(fast.calls) <= _needed(fast, history) + 2 * len(cut)

    slow = Distant(history, _SPREAD, trip=0.02)
    newest = cut[0].start
    ahead = 0

    async def read_slowly() -> None:
        nonlocal ahead
        pages = aiter(TimeWindowsWalk(slow, history, since=None, until=None))
        n = 0
        async with contextlib.aclosing(pages):  # type: ignore[type-var]
            async for _ in pages:
                await asyncio.sleep(0.01)  # the reader's own work: half a round trip a page
                n += 1
                if n > 10:
                    ahead = max(ahead, slow.busy[newest])
                if n == 40:
                    return

    asyncio.run(read_slowly())
    assert 2 <= ahead <= 2 * 2 + 2 + 2  # twice a round trip's pages, two more, and the jitter
