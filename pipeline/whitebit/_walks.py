"""Walks: every page of a history, fetched concurrently, yielded in order, never short.

Each kind of `spec.Paging` has its walk: `NewestFirstWalk` here (a history whose head grows while
it is read), `_window.OffsetWindowWalk` (a history split by its filters wherever a slice fills
the offset window) and `_timewindows.TimeWindowsWalk` (a history asked for a time window at a
time); the client's ``walk`` picks the one a history declares, from the declaration alone. What
they share is here too: what a walk is (`Walk`), the pages asked ahead (`_Ahead`) and the page
size an exchange may lower.

A walk is an async iterator of pages (lists of raw records in the exchange's order, or records
by their owner) with a `WalkStats` that says what it did. Pages are requested ahead of the one
being read, starting at one and doubling while pages come back full, so a short slice wastes
little: a market's stream among several up to 2 pages, a time window read ahead up to
`MAX_PAGES_AHEAD`; a history read as one stream, a slice of the offset window, or a time window
at its turn as many as the walk yields during a round trip, twice over (`Flow`), at most the
client's slots, so that at the exchange's distance it reads at the rate its budget or its reader
allows. What is buffered is bounded by that depth, so a million rows stream in flat memory.

Records pass as received, whatever their fields: one the walk cannot key or order by is kept in
its place (see `_paging`) for the warehouse to reject. An exchange that answers smaller pages than
asked (its ``limit`` lower, and as many records) is followed: the walk asks with its page size
from there on, and notes it in the stats.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from typing import Any, Generic, Literal, Protocol, TypeVar

from pipeline import spec

from ._config import (
    MAX_PAGES_WITHOUT_NEWS,
    MAX_REFETCHES,
    PER_MARKET_PREFETCH_PAGES,
)
from ._errors import ContractError, HistoryOrderError, OffsetWindowExceeded
from ._paging import NewestFirstCursor, RecordKeys
from ._proof import Short, in_range, short_by, tell_short, utc_days
from ._stats import WalkStats

T = TypeVar("T")

#: Weight of the newest gap in `Flow`'s moving average of the seconds between pages.
GAP_WEIGHT = 0.2

#: What a walk yields: a page of records, or records by their owner (a market, a sub-account),
#: ``{owner: [record, ...]}``.
Records = list[Any] | dict[str, list[Any]]
P = TypeVar("P", bound=Records, covariant=True)


class Caller(Protocol):
    """What a walk needs of a client: one checked, retried call of an operation, and how many
    calls it may have in flight. `AsyncWhiteBIT` is one; the walks import no client."""

    max_concurrency: int

    async def call(
        self,
        operation: spec.Operation,
        params: Mapping[str, Any],
        *,
        stats: WalkStats | None = None,
    ) -> Any: ...


class Walk(ABC, Generic[P]):
    """What every walk is: an async iterator of pages, run once, with the `WalkStats` of what
    it did. Its pages come from `_run`, which fills the stats in as it goes; once they are all
    yielded, the first answer that left records out is raised (`RecordsLeftOut`), then the
    first slice out of the offset's reach (`OffsetWindowExceeded`), unless
    ``on_window_exceeded`` is ``"report"``: then the stats list them alone. The range is
    ``since <= time < until`` (Unix seconds; None: open, as each walk says)."""

    def __init__(
        self,
        history: spec.History,
        *,
        since: int | None,
        until: int | None,
        on_window_exceeded: Literal["raise", "report"] = "raise",
    ) -> None:
        if on_window_exceeded not in ("raise", "report"):
            raise ValueError(
                f"on_window_exceeded must be 'raise' or 'report', not {on_window_exceeded!r}"
            )
        self._history = history
        self.since, self.until = since, until
        self.on_window_exceeded = on_window_exceeded
        self.stats = WalkStats(history.operation.name)
        self._started = False

    def __aiter__(self) -> AsyncIterator[P]:
        if self._started:
            raise RuntimeError("a walk runs once; start another for a second pass")
        self._started = True
        return self._walked()

    async def _walked(self) -> AsyncIterator[P]:
        stats, started = self.stats, time.monotonic()
        try:
            async with aclosing(self._run()) as pages:
                async for page in pages:
                    yield page
        finally:
            stats.elapsed_s = time.monotonic() - started
        stats.raise_left_out()
        if stats.incomplete_slices and self.on_window_exceeded == "raise":
            first = stats.incomplete_slices[0]
            raise OffsetWindowExceeded(
                self._history.name,
                first.slice,
                first.reachable,
                more=len(stats.incomplete_slices) - 1,
            )

    @abstractmethod
    def _run(self) -> AsyncGenerator[P, None]:
        """The walk's pages, its stats filled in as they come."""


#: (records, their times): one batch of a single newest-first stream.
_Batch = tuple[list[Any], list[int | None]]


class Flow:
    """How many pages a stream asks ahead: those the walk yields during a round trip, twice
    over, plus two (Little's law: requests in flight = pages a second x the seconds each is in
    flight), at most ``most``. The round trip is the network's (`WalkStats.round_trip_s`, the
    pacer's waits left out, so that a walk its budget holds back does not take the wait for
    distance and ask ever further ahead); the seconds between two pages yielded, a moving average
    measured here, are the reader's CPU or the budget's rate. Until both are known the depth
    doubles; then it holds what one round trip needs, and so do the pages in memory."""

    def __init__(self, most: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._most = most
        self._clock = clock
        self._gap: float | None = None
        self._last: float | None = None

    def yielded(self) -> None:
        now = self._clock()
        if self._last is not None:
            gap, mean = now - self._last, self._gap
            self._gap = gap if mean is None else mean + GAP_WEIGHT * (gap - mean)
        self._last = now

    def depth(self, now: int, trip: float | None, waited: bool) -> int:
        """Pages to ask ahead, ``now`` those asked ahead now, ``trip`` the round trip, ``waited``
        whether the page just taken had to be waited for: twice those, until both are measured.
        A page that was already there says the reader, not the network, bounds the walk: no
        further ahead then (more in flight would only queue on our own CPU, and time spent queued
        looks like distance)."""
        if trip is None or self._gap is None:
            aim = 2 * now
        else:
            aim = math.ceil(2 * trip / max(self._gap, 1e-6)) + 2
        return min(self._most, aim if waited else min(aim, now))


class _Ahead(Generic[T]):
    """Pages requested ahead of the one being read: at most ``depth`` at a time, where depth
    starts at 1 and doubles (up to ``max_depth``, which the walk may change) each time the walk
    calls `grow`."""

    def __init__(self, fetch: Callable[[int], Coroutine[Any, Any, T]], max_depth: int) -> None:
        self._fetch = fetch
        self.max_depth = max(1, max_depth)
        self.depth = 1
        self._tasks: dict[int, asyncio.Task[T]] = {}
        #: Whether the last page taken was not yet answered when taken.
        self.waited = True

    def request(self, offsets: Iterable[int]) -> None:
        """Make sure the first ``depth`` of these offsets are requested; cancel any others."""
        wanted: list[int] = []
        for offset in offsets:
            if len(wanted) == self.depth:
                break
            wanted.append(offset)
        for offset in [o for o in self._tasks if o not in wanted]:
            self._tasks.pop(offset).cancel()
        for offset in wanted:
            if offset not in self._tasks:
                self._tasks[offset] = asyncio.create_task(self._fetch(offset))

    async def take(self, offset: int) -> T:
        """The page at ``offset``: the one requested ahead, or a request made now."""
        task = self._tasks.pop(offset, None)
        self.waited = task is None or not task.done()
        return await (task if task is not None else self._fetch(offset))

    def grow(self) -> None:
        self.depth = min(self.depth * 2, self.max_depth)

    def aim(self, depth: int) -> None:
        """Ask ``depth`` pages ahead from now on (at most ``max_depth``), yet never fewer than
        those already asked: cancelling a request sent wastes it."""
        self.depth = max(1, min(depth, self.max_depth), len(self._tasks))

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        # Collect what they raised, so no task error goes unretrieved.
        await asyncio.gather(*tasks, return_exceptions=True)


def _records(page: Any, under: str = "records") -> tuple[list[Any], int]:
    """A page's records (under ``records``, or the field a `spec.PageEnvelope` names) and the
    page size it follows: the one asked for, or the exchange's own when lower (the client has
    checked the page against the request)."""
    return page[under], page["limit"]


def _follow_page_size(stats: WalkStats, asked: int, size: int) -> None:
    note = (
        f"the exchange answered pages of {size} records when asked for {asked}: "
        f"the walk went on with pages of {size}"
    )
    if note not in stats.notes:
        stats.notes.append(note)


async def _next_batch(stream: AsyncIterator[_Batch]) -> _Batch | None:
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return None


class NewestFirstWalk(Walk[list[Any]]):
    """A newest-first history's records with ``since <= time < until``, newest first, in pages.

    Pages overlap by one record and are checked against each other (see `_paging`): records that
    arrive at the head mid-walk cause neither a repeat nor a gap, whatever order the concurrent
    pages were answered in. Records newer than ``until`` are paged through but not yielded; the
    walk stops once a page reaches records older than ``since``, or at a short page past which
    nothing is listed (`_stream`'s ``short``: a page that left records out is asked once more,
    then reported as `RecordsLeftOut`, raised once the walk has yielded every other record), and
    raises `HistoryOrderError` when page after page brings nothing new (`MAX_PAGES_WITHOUT_NEWS`).
    Given values of the declaration's ``split_setting`` (in ``values``, the account's settings by
    name: its markets), each is walked on its own, concurrently, and the walks merged newest
    first; records of the same second come in the order of the values. None, or none given: one
    walk of the whole history.
    """

    def __init__(
        self,
        client: Caller,
        history: spec.History,
        *,
        since: int | None,
        until: int | None,
        values: Mapping[str, Sequence[str]],
    ) -> None:
        paging = history.paging
        if not isinstance(paging, spec.NewestFirst):
            raise TypeError(f"{history.name} is not a newest-first history")
        super().__init__(history, since=since, until=until)
        self._client = client
        self._paging = paging
        self._keys = RecordKeys(paging)
        split = values.get(paging.split_setting) if paging.split_setting else None
        self.split = list(split) if split else None
        self.page_size = history.operation.bound("limit")

    async def _run(self) -> AsyncGenerator[list[Any], None]:
        stats = self.stats
        if self.split is None:
            stats.slices.append("all")
            flow = Flow(self._client.max_concurrency)
            async for records, _ in self._stream(None, 1, self.until, flow):
                stats.rows += len(records)
                yield records
        else:
            stats.slices.extend(self.split)
            async for batch in self._merged(self.split):
                stats.rows += len(batch)
                yield batch

    def _in_window(self, records: list[Any], times: list[int | None], until: int | None) -> _Batch:
        since = self.since
        first, last = times[0], times[-1]
        if (since is None or (last is not None and last >= since)) and (
            until is None or (first is not None and first < until)
        ):
            return records, times
        kept = [
            (r, t)
            for r, t in zip(records, times, strict=True)
            if t is None or ((since is None or t >= since) and (until is None or t < until))
        ]
        return [r for r, _ in kept], [t for _, t in kept]

    async def _stream(
        self, value: str | None, depth: int, until: int | None, flow: Flow | None = None
    ) -> AsyncGenerator[_Batch, None]:
        """One newest-first stream (all, or one split value), as non-empty batches in the
        window; asking ``depth`` pages ahead at most, or with a ``flow``, as many as it says."""
        client, stats, op = self._client, self.stats, self._history.operation
        cursor = NewestFirstCursor(self.page_size, self._keys)
        params: dict[str, Any] = {"limit": self.page_size}
        if value is not None:
            assert self._paging.split_param is not None  # a split value has its parameter
            params[self._paging.split_param] = value

        async def fetch(offset: int, limit: int = 0) -> tuple[list[Any], int]:
            asked = {**params, "offset": offset, **({"limit": limit} if limit else {})}
            page = await client.call(op, asked, stats=stats)
            stats.pages += 1
            return _records(page)

        async def records_at(offset: int, limit: int) -> list[Any]:
            return (await fetch(offset, limit))[0]

        def short_page(offset: int, records: list[Any]) -> Coroutine[Any, Any, Short[list[Any]]]:
            return tell_short(
                records,
                offset,
                cursor.page_size,
                fetch=records_at,
                keys=self._keys.keys,
            )

        ahead = _Ahead(fetch, depth)
        offset, refetched, without_news = 0, 0, 0
        of_value = f" ({self._paging.split_param} {value})" if value else ""
        name = self._history.name
        try:
            while True:
                ahead.request(offset + j * cursor.step for j in range(ahead.depth))
                records, size = await ahead.take(offset)
                if size < cursor.page_size:
                    # Pages asked ahead with the larger size would leave gaps: asked again.
                    await ahead.aclose()
                    if size < 2:
                        raise ContractError(
                            operation=op,
                            field="limit",
                            reason=f"pages of {size} record cannot overlap, so the walk could "
                            "not see a gap",
                            body_excerpt=f"offset {offset}, limit {size}",
                        )
                    _follow_page_size(stats, cursor.page_size, size)
                    cursor.page_size = params["limit"] = size
                proven, resume = True, None
                # Past the range's start too: a page that reaches it is full but at the end.
                if 0 < len(records) < cursor.page_size:
                    # Pages asked ahead lie past it: not sent while the end is proven.
                    await ahead.aclose()
                    told = await short_page(offset, records)
                    records, proven = told.page, told.ended
                    if told.probe is not None:
                        resume = self._left_out(told, offset, cursor.page_size, value, until)
                step = cursor.read(records, offset)
                if step.action == "refetch":
                    refetched += 1
                    stats.refetches += 1
                    if refetched > MAX_REFETCHES:
                        raise HistoryOrderError(
                            f"{name}{of_value} at offset {offset} still does not line "
                            f"up with the page before it after {MAX_REFETCHES} fetches: the "
                            "newest-first order is not holding"
                        )
                    continue
                refetched = 0
                without_news = 0 if step.fresh or step.last else without_news + 1
                if without_news == MAX_PAGES_WITHOUT_NEWS:
                    raise HistoryOrderError(
                        f"{name}{of_value}: {without_news} pages in a row, up to "
                        f"offset {offset}, brought no record the walk had not already passed: "
                        "the exchange answers the same records whatever the offset"
                    )
                stats.duplicates_dropped += step.repeated
                offset = step.offset if resume is None else resume
                if step.action == "skip":
                    continue
                if step.fresh:
                    records, times = self._in_window(step.fresh, step.times, until)
                    if records:
                        if flow is not None:
                            flow.yielded()
                        yield records, times
                oldest = cursor.last_time
                if (step.last and proven) or (
                    self.since is not None and oldest is not None and oldest < self.since
                ):
                    return
                if flow is not None:
                    ahead.max_depth = flow.depth(ahead.depth, stats.round_trip_s, ahead.waited)
                ahead.grow()
        finally:
            await ahead.aclose()

    def _left_out(
        self, told: Short[list[Any]], offset: int, size: int, value: str | None, until: int | None
    ) -> int | None:
        """Report records a page left out, unless they lie outside the walk's range (between
        the page's first record and the probe's last, as they do); where the next page starts:
        the page's last record, where the probe shows it (None: where the cursor says)."""
        keys, page, probe = self._keys, told.page, told.probe or []
        held, shown = keys.keys(page), keys.keys(probe)
        resume = offset + len(page) + shown.index(held[-1]) if held[-1] in shown else None
        now = spec.WALL_CLOCK.now()
        times = [t for r in page + probe if (t := keys.time_of(r, now)) is not None]
        if times and not in_range(min(times), max(times), self.since, until):
            return resume
        days = utc_days(r.get(keys.time_field) for r in page + probe if type(r) is dict)
        name = f"slice {value or 'all'}"
        left = short_by(self._history.name, name, days, offset, len(page), size, told.lost)
        self.stats.left_out.append(left)
        return resume

    async def _head_time(self) -> int | None:
        """The newest time of the whole history, as the walk begins."""
        op = self._history.operation
        page = await self._client.call(op, {"limit": 1}, stats=self.stats)
        self.stats.pages += 1
        first = page["records"][0] if page["records"] else None
        return self._keys.time_of(first, spec.WALL_CLOCK.now())

    async def _merged(self, values: list[str]) -> AsyncIterator[list[Any]]:
        """Each split value walked on its own, concurrently, merged newest first.

        The values' first pages are answered at different moments; so that all of them show the
        history as it was when the walk began (as a single walk does), records newer than the
        newest of the whole history at the start are left out."""
        until = self.until
        head = await self._head_time()
        if head is not None and (until is None or head + 1 < until):
            until = head + 1
        streams = [self._stream(v, PER_MARKET_PREFETCH_PAGES, until) for v in values]
        pending = {i: asyncio.create_task(_next_batch(s)) for i, s in enumerate(streams)}
        buffers: list[deque[tuple[float, Any]]] = [deque() for _ in values]
        heads: list[tuple[float, int]] = []  # (minus the head's time, value index)
        empty = set(range(len(values)))  # values whose next records are not in hand yet
        batch: list[Any] = []
        try:
            while True:
                for i in sorted(empty):
                    got = await pending.pop(i)
                    if got is None:
                        continue  # this value is done
                    records, times = got
                    pending[i] = asyncio.create_task(_next_batch(streams[i]))
                    buffers[i].extend(
                        zip(
                            (-(t if t is not None else math.inf) for t in times),
                            records,
                            strict=True,
                        )
                    )
                    heapq.heappush(heads, (buffers[i][0][0], i))
                empty.clear()
                if not heads:
                    break
                # Emit while every value still in the walk has its next record in hand.
                while heads:
                    _, i = heapq.heappop(heads)
                    batch.append(buffers[i].popleft()[1])
                    if len(batch) == self.page_size:
                        yield batch
                        batch = []
                    if buffers[i]:
                        heapq.heappush(heads, (buffers[i][0][0], i))
                    elif i in pending:
                        # Its next page may hold the next newest record: wait for it.
                        empty.add(i)
                        break
            if batch:
                yield batch
        finally:
            tasks = list(pending.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for stream in streams:
                await stream.aclose()
