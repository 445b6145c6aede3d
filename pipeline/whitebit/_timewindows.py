"""The walk of a history read in time windows (`spec.TimeWindows`: fills, orders, conversions,
position events, closed positions), from its declaration alone.

The range ``[since, until)`` is cut into windows (`windows`): whole UTC days, never across a
calendar month (the warehouse writes a month at a time, newest first), each at most the
operation's longest span (`spec.TimeWindow.max_span_s`: 31 days holds any month, 30 days takes
two windows for a 31-day month), yielded newest window first. A window is sent as its first and
its last second, both included, as the exchange reads them (docs/api.md, section 10.9).

- **Windows in flight.** Windows are disjoint in time, so several are read at once
  (`WINDOWS_IN_FLIGHT`, each in a task of its own, the client's slots and the pacer's budgets
  shared): the one being yielded and the next ones. A window read ahead asks up to
  `MAX_PAGES_AHEAD` pages ahead and holds at most `WINDOW_PAGES_HELD` pages until its turn, then
  waits. A window's records are yielded once every newer window's are, so they come in the order
  of a walk of one window at a time, and what each window found (its slices, the records an
  answer left out, a window out of reach) is told in that order too. A window that fails is
  raised at its turn, after every newer window's records.
- **How far ahead.** The window being yielded asks ahead as many pages as the walk yields during
  a round trip, twice over (`_walks.Flow`: both measured as it goes, the round trip without the
  pacer's waits), at most the client's slots: at the exchange's distance that keeps the walk
  reading at the rate its own CPU (or the budget) allows, on loopback it holds a few pages. No
  window asks past what it is predicted to hold, and one more (`_pages_left`: by the total its
  answers state, else by its records' times), so that a window's end costs a request or so past
  it, not the pages asked ahead; the slots it leaves go to the windows after it.
- **Now.** The walk goes by the exchange's present (`_clock`): a range reaching past it ends at
  the current second, the window's end one second before it, since position histories refuse an
  end after now + 1 s. A window that ends in the past holds what it will always hold: records
  arrive at the head of a history, after it.
- **The floor.** A history the exchange keeps for `spec.HISTORY_MONTHS` (its window has a
  ``floor``) is never asked for before it: 00:00 UTC of the day six calendar months back
  (`_clock.history_floor`), reckoned from the exchange's present before each window (a walk may
  cross midnight) and `FLOOR_MARGIN_S` ahead of it, so that a request sent a little later is not
  refused. A range reaching past it is cut there, and the cut is reported (``cut_before``, and a
  note); the warehouse keeps what it read before.
- **Pages.** Inside a window, offset pages of the operation's largest ``limit``, newest first,
  requested ahead (`_walks._Ahead`, as far as said above). Pages shift if a record is still
  arriving in the window as it is read: each record is told by its declared ``identity`` fields
  (a record without usable ones, by its content) and yielded once; windows are disjoint in time,
  so each window remembers its own identities only.
- **The end of a window** is proven (`_proof`): the answer's stated ``total`` met, or nothing
  past a short page. A page that left records out is asked once more, then reported
  (`RecordsLeftOut`, raised once the walk has yielded all it could), naming the window, the
  offset and the days; a window short of its stated total (conversions) is read once more, then
  reported alike.
- **Reach.** An operation with a ``max_reach`` (``offset + limit`` at most 10,000: closed
  positions) answers no page past it. Before a window is walked, its last reachable page is read:
  full, the window may hold more than can be reached, so it is split into two halves (by
  seconds), each walked the same way, the newer first. A window of one second that still fills
  the reach is walked as far as it reaches and reported (`OffsetWindowExceeded`: raised once the
  walk has yielded all it could, or listed in the stats), never cut silently. Windows are not
  split by market instead: without the complete list of the account's markets such a split
  could not be proved to cover every record, and shorter windows can.
- **Answers.** Records grouped by market (`spec.Grouped`) are yielded as ``{market: [record,
  ...]}``, a plain array asked for one market (a fixed parameter) turned into that form; an array
  (`spec.Array`) or a page's records (`spec.PageEnvelope`, `spec.Page`) as a list. Within a page
  the markets come in any order; across pages and windows the records come newest first. Numbers
  with a fraction are exact `Decimal`s (`_exact`).

The history's fixed parameters (`spec.History.params`) are sent with every request.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Hashable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from itertools import count
from typing import Any, Final, Literal, Protocol

import orjson

from pipeline import spec

from ._clock import history_floor
from ._config import (
    EARLIEST_TIME,
    FLOOR_MARGIN_S,
    MAX_PAGES_AHEAD,
    WINDOW_PAGES_HELD,
    WINDOWS_IN_FLIGHT,
)
from ._errors import ContractError, OffsetWindowExceeded, RecordsLeftOut, excerpt
from ._exact import decimal_text
from ._identity import identities, unseen
from ._proof import Tally, short_by, short_of_total, tell_short, utc_days
from ._walks import Caller, Flow, Records, Walk, _Ahead, _follow_page_size


class ClockedCaller(Caller, Protocol):
    """What the walk needs of a client beside its calls: the exchange's present (`AsyncWhiteBIT`
    has it)."""

    async def exchange_time(self) -> float: ...


# The windows (see the module's text): whole UTC days, never across a calendar month, each at
# most the operation's longest span, newest first.

DAY_S: Final = 86_400


@dataclass(frozen=True, slots=True)
class Window:
    """Seconds ``start`` (included) to ``end`` (excluded); sent as ``start`` and ``end - 1``."""

    start: int
    end: int

    @property
    def name(self) -> str:
        first, last = utc(self.start), utc(self.end - 1)
        return f"{first:%Y-%m-%dT%H:%M:%S}Z..{last:%Y-%m-%dT%H:%M:%S}Z"

    def halves(self) -> tuple[Window, Window]:
        """The newer half, then the older."""
        middle = self.start + (self.end - self.start) // 2
        return Window(middle, self.end), Window(self.start, middle)


def utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _month_start(seconds: int) -> int:
    day = utc(seconds)
    return int(datetime(day.year, day.month, 1, tzinfo=UTC).timestamp())


def window_days(max_span_s: int | None) -> int | None:
    """Whole days a window may hold under this span (end minus start, both included); None:
    no limit but the month."""
    if max_span_s is None:
        return None
    if max_span_s < DAY_S - 1:
        raise ValueError(f"a span of {max_span_s} s holds no whole day")
    return (max_span_s + 1) // DAY_S


def next_window(low: int, end: int, days: int | None) -> Window:
    """The newest window of ``[low, end)``: it ends at ``end`` and starts at 00:00 UTC of a day
    (or at ``low``), never before the month of its last second, at most ``days`` days long."""
    last = end - 1
    start = _month_start(last)
    if days is not None:
        start = max(start, last - last % DAY_S - (days - 1) * DAY_S)
    return Window(max(start, low), end)


def windows(low: int, high: int, max_span_s: int | None) -> list[Window]:
    """``[low, high)`` cut into windows, newest first (`next_window`)."""
    days, out, end = window_days(max_span_s), [], high
    while end > low:
        out.append(next_window(low, end, days))
        end = out[-1].start
    return out


@dataclass(frozen=True, slots=True)
class _Got:
    """One answered page: its records by owner (None: not grouped), how many, and the page size
    it follows (the one asked, or the exchange's own when it says a lower one)."""

    groups: list[tuple[str | None, list[Any]]]
    count: int
    size: int
    #: The records the answer says the window holds, where it says (`spec.PageEnvelope.total`).
    total: int | None = None

    def ends(self, offset: int) -> bool:
        """The page, answered for ``offset``, proves the window ends with it: it is empty, or
        meets the answer's total."""
        return not self.count or (self.total is not None and offset + self.count >= self.total)


@dataclass(slots=True)
class _Found:
    """What reading one window found, kept apart until its turn, so that the walk's stats tell
    the windows in the order they are yielded; and whether it is its turn (how far it may ask
    ahead)."""

    turn: bool = False
    slices: list[str] = field(default_factory=list)
    left_out: list[RecordsLeftOut] = field(default_factory=list)
    exceeded: list[OffsetWindowExceeded] = field(default_factory=list)


class _End:
    """A window's last page is in the queue: it ended, or failed (``error``)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class _Reading:
    """One window read in a task of its own, its pages held (at most ``held``) until its turn."""

    def __init__(self, pages: AsyncGenerator[Records, None], found: _Found, held: int) -> None:
        self.found = found
        self._queue: asyncio.Queue[Records | _End] = asyncio.Queue(held)
        self.task = asyncio.create_task(self._read(pages))

    async def _read(self, pages: AsyncGenerator[Records, None]) -> None:
        end = _End()
        try:
            async with aclosing(pages):
                async for records in pages:
                    await self._queue.put(records)
        except asyncio.CancelledError:
            raise  # the walk was closed: no one takes the pages
        except BaseException as error:  # raised at the window's turn, after the newer ones
            end = _End(error)
        await self._queue.put(end)

    async def pages(self) -> AsyncIterator[Records]:
        """The window's pages in the order read; what it raised, at its end."""
        while not isinstance(got := await self._queue.get(), _End):
            yield got
        if got.error is not None:
            raise got.error


class TimeWindowsWalk(Walk[Records]):
    """A history's records with ``since <= time < until``, a time window at a time, newest first.

    See the module's text for the windows, the floor, the pages, the reach and the answers.
    ``since`` None: from the floor, or for a history without one from `EARLIEST_TIME`; ``until``
    None: up to the exchange's present. ``windows_in_flight``: windows read at once (1: one
    after another).
    """

    def __init__(
        self,
        client: ClockedCaller,
        history: spec.History,
        *,
        since: int | None,
        until: int | None,
        on_window_exceeded: Literal["raise", "report"] = "raise",
        windows_in_flight: int = WINDOWS_IN_FLIGHT,
    ) -> None:
        paging, window = history.paging, history.operation.window
        if windows_in_flight < 1:
            raise ValueError(f"windows_in_flight must be at least 1, not {windows_in_flight}")
        if not isinstance(paging, spec.TimeWindows) or window is None:
            raise TypeError(f"{history.name} is not read in time windows")
        super().__init__(history, since=since, until=until, on_window_exceeded=on_window_exceeded)
        self._client = client
        self._paging, self._window = paging, window
        self._size = history.operation.bound("limit")
        self._days = window_days(window.max_span_s)
        self._depth = min(client.max_concurrency, MAX_PAGES_AHEAD)
        # At its turn a window may take every slot the others leave: they hold their pages, and
        # wait.
        self._flow = Flow(client.max_concurrency)
        self._in_flight = windows_in_flight

    async def _run(self) -> AsyncGenerator[Records, None]:
        now = math.floor(await self._client.exchange_time())
        # The window's end is sent as its last second: one before the present at the latest.
        end: int | None = now if self.until is None else min(self.until, now)
        low = self.since
        if low is None:
            low = self._floor(now) if self._window.floor else EARLIEST_TIME
        readings: deque[_Reading] = deque()
        try:
            while True:
                while end is not None and len(readings) < self._in_flight:
                    window = await self._next_window(low, end)
                    if window is None:
                        end = None
                        break
                    # A window read ahead holds its pages; the one yielded is taken as it comes.
                    found = _Found()
                    readings.append(_Reading(self._walk(window, found), found, WINDOW_PAGES_HELD))
                    end = window.start
                if not readings:
                    return
                reading = readings[0]
                reading.found.turn = True
                try:
                    async for records in reading.pages():
                        self._flow.yielded()
                        yield records
                finally:
                    self._tell(reading.found)
                readings.popleft()
        finally:
            for reading in readings:
                reading.task.cancel()
            await asyncio.gather(*(r.task for r in readings), return_exceptions=True)

    async def _next_window(self, low: int, end: int) -> Window | None:
        """The newest window of ``[low, end)`` above the floor; None: none is left."""
        bottom = low
        if self._window.floor is not None:
            # Reckoned again before each window: the floor moves at 00:00 UTC.
            floor = self._floor(await self._client.exchange_time())
            if floor > low:
                self._cut(floor, low)
                bottom = floor
        return None if end <= bottom else next_window(bottom, end, self._days)

    def _tell(self, found: _Found) -> None:
        """What a window found, into the walk's stats, at its turn."""
        stats = self.stats
        stats.slices.extend(found.slices)
        stats.left_out.extend(found.left_out)
        stats.incomplete_slices.extend(found.exceeded)

    @staticmethod
    def _floor(now: float) -> int:
        return history_floor(now + FLOOR_MARGIN_S)

    def _cut(self, floor: int, low: int) -> None:
        stats = self.stats
        stats.cut_before = utc(floor)
        note = (
            f"{self._history.name} is kept by the exchange for {spec.HISTORY_MONTHS} months, "
            f"back to {utc(floor):%Y-%m-%d %H:%M} UTC: the range from {utc(low):%Y-%m-%d %H:%M} "
            "UTC was cut there, and nothing older was asked for"
        )
        if note not in stats.notes:
            stats.notes.append(note)

    async def _walk(self, window: Window, found: _Found) -> AsyncGenerator[Records, None]:
        """One window: split into halves while its last reachable page is full; walked. What it
        finds goes to ``found``."""
        reach, first = self._history.operation.max_reach, None
        if reach is not None:
            # A short first page settles it; a full one, the last reachable page.
            first = await self._fetch(self._params(window), 0)
            if first.count >= self._size and await self._beyond_reach(window, reach):
                if window.end - window.start > 1:
                    for half in window.halves():
                        async for records in self._walk(half, found):
                            yield records
                    return
                found.exceeded.append(OffsetWindowExceeded(self._history.name, window.name, reach))
        tally = Tally()
        for _ in range(2):
            tally.whole = False
            async for records in self._pages(window, reach, first, tally, found):
                yield records
            if not tally.falls_short:
                return
            first = None  # read once more from its first page
        days = utc_days((window.start, window.end - 1))
        found.left_out.append(
            short_of_total(self._history.name, f"window {window.name}", days, tally, "window")
        )

    def _params(self, window: Window) -> dict[str, Any]:
        return {
            **self._history.params,
            self._window.start: window.start,
            self._window.end: window.end - 1,
        }

    async def _fetch(self, params: Mapping[str, Any], offset: int, limit: int = 0) -> _Got:
        page = await self._client.call(
            self._history.operation,
            {**params, "limit": limit or self._size, "offset": offset},
            stats=self.stats,
        )
        self.stats.pages += 1
        return self._read(page, params)

    async def _beyond_reach(self, window: Window, reach: int) -> bool:
        """Whether the window's last reachable page is full: more may lie beyond it."""
        got = await self._fetch(self._params(window), reach - self._size)
        return got.count >= self._size

    def _offsets(self, start: int, reach: int | None) -> Iterable[int]:
        """Offsets from ``start`` on, a page apart; with a reach, up to the last page it allows
        (that page too, where the page size does not divide it)."""
        if reach is None:
            return count(start, self._size)
        last = reach - self._size
        return [*range(start, last, self._size), last] if start <= last else []

    async def _pages(
        self, window: Window, reach: int | None, first: _Got | None, tally: Tally, found: _Found
    ) -> AsyncIterator[Records]:
        """Every page of one window, each record once (``first``: its first page, if read), to
        its proven end (see the module's text); what it found goes to ``tally``."""
        stats, params = self.stats, self._params(window)
        found.slices.append(window.name)
        seen = tally.seen

        async def fetch(offset: int) -> _Got:
            return await self._fetch(params, offset)

        ahead = _Ahead(fetch, self._depth)
        offset = 0
        try:
            while True:
                if offset == 0 and first is not None:
                    ahead.request(self._offsets(self._size, reach))
                    got = first
                else:
                    ahead.request(self._offsets(offset, reach))
                    got = await ahead.take(offset)
                if got.size < self._size:
                    # Pages asked ahead with the larger size would leave gaps: asked again.
                    await ahead.aclose()
                    _follow_page_size(stats, self._size, got.size)
                    self._size = got.size
                if got.total is not None:
                    tally.total = got.total
                fresh = self._fresh(got, seen)
                if fresh:
                    yield fresh
                if got.ends(offset):
                    tally.whole = True
                    return
                following = offset + self._size
                if got.count < self._size:
                    # Pages asked ahead lie past it: not sent while the end is proven.
                    await ahead.aclose()
                    ended, after, brought = await self._short(
                        window, offset, got, tally, reach, found
                    )
                    for records in brought:
                        yield records
                    if ended:
                        tally.whole = True
                        return
                    following = after or following
                if reach is not None:
                    if offset + self._size >= reach:
                        return  # the last reachable page (a window out of reach is reported)
                    following = min(following, reach - self._size)
                offset = following
                ahead.max_depth = (
                    self._flow.depth(ahead.depth, self.stats.round_trip_s, ahead.waited)
                    if found.turn
                    else self._depth
                )
                left = self._pages_left(window, offset, got)
                # Nothing to go by: from one page, doubling.
                ahead.aim(ahead.depth * 2 if left is None else left + 1)
        finally:
            await ahead.aclose()

    async def _short(
        self,
        window: Window,
        offset: int,
        got: _Got,
        tally: Tally,
        reach: int | None,
        found: _Found,
    ) -> tuple[bool, int | None, list[Records]]:
        """A page shorter than asked, answered for ``offset``: whether the window ends with it
        (`_walks.tell_short`), the offset to read on from (None: a page on), and the records
        new to the window that telling it brought."""
        params, identity = self._params(window), self._paging.identity
        told = await tell_short(
            got,
            offset,
            self._size,
            fetch=lambda at, limit: self._fetch(params, at, limit),
            keys=lambda answer: _keys(answer, identity),
            max_reach=reach,
        )
        brought = [new for answer in told.read if (new := self._fresh(answer, tally.seen))]
        if told.probe is not None:
            tally.short = True
            field = self._window.applies_to
            page = _all(told.page, told.probe)
            days = utc_days(r.get(field) for r in page if type(r) is dict)
            name, held = f"window {window.name}", told.page.count
            found.left_out.append(
                short_by(self._history.name, name, days, offset, held, self._size, told.lost)
            )
        return told.ended, told.after, brought

    def _pages_left(self, window: Window, offset: int, got: _Got) -> int | None:
        """Pages the window is predicted to hold from ``offset`` on, ``got`` the page before it:
        by the total its answers state, exactly; else by its records' times, the records read
        so far lying between the page's oldest time and the window's end, and the rest of the
        window taken to hold them as densely. None: the page tells neither."""
        if got.total is not None:
            return max(0, math.ceil((got.total - offset) / self._size))
        field, oldest = self._window.applies_to, None
        for _, records in got.groups:
            # Newest first: the page's oldest record is one of each market's ends.
            for record in (records[0], records[-1]) if records else ():
                when = record.get(field) if type(record) is dict else None
                if type(when) in (int, float, Decimal) and (oldest is None or when < oldest):
                    oldest = when
        if oldest is None:
            return None
        oldest_s = float(oldest)
        if oldest_s >= window.end:
            return None
        rest = max(0.0, oldest_s - window.start) / (window.end - oldest_s)
        return math.ceil(offset * rest / self._size)

    def _read(self, page: Any, params: Mapping[str, Any]) -> _Got:
        """A checked answer's records by owner, how many, and the page size it says."""
        answer, size, total = self._history.operation.answer, self._size, None
        groups: list[tuple[str | None, list[Any]]]
        if isinstance(answer, spec.Grouped):
            if type(page) is dict:
                groups = list(page.items())
            elif answer.flat_when is not None and answer.flat_when in params:
                groups = [(str(params[answer.flat_when]), page)]
            elif not page:
                groups = []  # nothing is {} or [] alike
            else:
                raise ContractError(
                    operation=self._history.operation,
                    field="(the whole answer)",
                    reason="a plain array where records grouped by market were asked for: "
                    "their market is unknown",
                    body_excerpt=excerpt(orjson.dumps(page[:2], default=decimal_text)),
                )
        elif isinstance(answer, spec.PageEnvelope | spec.Page):
            under = answer.under if isinstance(answer, spec.PageEnvelope) else "records"
            groups = [(None, page[under])]
            said = page["limit"]
            if type(said) is int and 1 <= said < size:
                size = said
            if isinstance(answer, spec.PageEnvelope) and answer.total:
                total = page["total"]
        else:
            groups = [(None, page)]
        return _Got(groups, sum(len(records) for _, records in groups), size, total)

    def _fresh(self, got: _Got, seen: set[Hashable]) -> Records | None:
        """The page's records the window has not yielded yet, in the form the walk yields."""
        identity, stats = self._paging.identity, self.stats
        kept: dict[str | None, list[Any]] = {}
        for owner, records in got.groups:
            new = unseen(records, identity, owner, seen)
            stats.duplicates_dropped += len(records) - len(new)
            if new:
                kept.setdefault(owner, []).extend(new)
        if not kept:
            return None
        stats.rows += sum(len(records) for records in kept.values())
        if isinstance(self._history.operation.answer, spec.Grouped):
            return {str(owner): records for owner, records in kept.items()}
        return kept[None]


def _all(*pages: _Got) -> list[Any]:
    return [record for got in pages for _, records in got.groups for record in records]


def _keys(got: _Got, fields: tuple[str, ...]) -> list[Hashable]:
    return [key for owner, records in got.groups for key in identities(records, fields, owner)]
