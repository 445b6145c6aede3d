"""Walks: every page of a paged operation, fetched concurrently, yielded in order, never short.

A walk is an async iterator of pages (lists of raw records, in the exchange's order) with a
`WalkReport` that says what it did. Pages are requested ahead of the one being read, up to the
client's concurrency (starting at one and doubling while pages come back full, so a short slice
wastes little); what is buffered is bounded by that depth, so a million rows stream in flat
memory.

Records pass as received, whatever their fields: one the walk cannot key or order by is kept in
its place (see `_paging`) for the warehouse to reject. An exchange that answers smaller pages than
asked (its ``limit`` lower, and as many records) is followed: the walk asks with its page size
from there on, and notes it in the report.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
)
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from pipeline import spec

from ._config import MAX_PAGES_WITHOUT_NEWS, MAX_REFETCHES, PER_MARKET_PREFETCH_PAGES
from ._errors import (
    ContractError,
    FundingOrderError,
    OffsetWindowExceeded,
    ValidationError,
)
from ._paging import (
    FundingCursor,
    OffsetWindow,
    investment_identities,
    plan_tickers,
    plausible_time,
)
from ._report import WalkReport
from ._types import FundingEntry, FundingPage, Investment, InvestmentsPage

T = TypeVar("T")


class Caller(Protocol):
    """What a walk needs of a client: one checked, retried call of an operation, and how many
    calls it may have in flight. `AsyncWhiteBIT` is one; the walks import no client."""

    max_concurrency: int

    async def call(
        self,
        operation: spec.Operation,
        params: Mapping[str, Any],
        *,
        report: WalkReport | None = None,
    ) -> Any: ...


#: (records, their funding times): one batch of a single funding stream.
_Batch = tuple[list[FundingEntry], list[int | None]]


class _Ahead(Generic[T]):
    """Pages requested ahead of the one being read: at most ``depth`` at a time, where depth
    starts at 1 and doubles (up to its maximum) each time the walk calls `grow`."""

    def __init__(self, fetch: Callable[[int], Coroutine[Any, Any, T]], max_depth: int) -> None:
        self._fetch = fetch
        self._max_depth = max(1, max_depth)
        self.depth = 1
        self._tasks: dict[int, asyncio.Task[T]] = {}

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
        return await (task if task is not None else self._fetch(offset))

    def grow(self) -> None:
        self.depth = min(self.depth * 2, self._max_depth)

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        # Collect what they raised, so no task error goes unretrieved.
        await asyncio.gather(*tasks, return_exceptions=True)


def _records(page: Any) -> tuple[list[Any], int]:
    """A page's records and the page size it follows: the one asked for, or the exchange's own
    when lower (the client has checked the page against the request)."""
    return page["records"], page["limit"]


def _follow_page_size(report: WalkReport, asked: int, size: int) -> None:
    note = (
        f"the exchange answered pages of {size} records when asked for {asked}: "
        f"the walk went on with pages of {size}"
    )
    if note not in report.notes:
        report.notes.append(note)


async def _next_batch(stream: AsyncIterator[_Batch]) -> _Batch | None:
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return None


class FundingWalk:
    """Funding payments with ``since <= fundingTime < until``, newest first, in pages.

    Pages overlap by one record and are checked against each other (see `_paging`): entries that
    arrive at the head mid-walk cause neither a repeat nor a gap, whatever order the concurrent
    pages were answered in. Entries newer than ``until`` are paged through but not yielded; the
    walk stops at the first short page or once a page reaches entries older than ``since``, and
    raises `FundingOrderError` when page after page brings nothing new (`MAX_PAGES_WITHOUT_NEWS`).
    """

    def __init__(
        self,
        client: Caller,
        *,
        since: int | None,
        until: int | None,
        markets: list[str] | None,
    ) -> None:
        self._client = client
        self.since, self.until = since, until
        self.markets = list(markets) if markets is not None else None
        op = spec.FUNDING_HISTORY
        limit = op.param("limit").maximum
        assert limit is not None  # the spec bounds it (1..100)
        self.page_size = limit
        self.report = WalkReport(op.name)
        self._started = False

    def __aiter__(self) -> AsyncIterator[list[FundingEntry]]:
        if self._started:
            raise RuntimeError("a walk runs once; start another for a second pass")
        self._started = True
        return self._run()

    async def _run(self) -> AsyncIterator[list[FundingEntry]]:
        report, started = self.report, time.monotonic()
        try:
            if self.markets is None:
                report.slices.append("all")
                depth = self._client.max_concurrency
                async for records, _ in self._stream(None, depth, self.until):
                    report.rows += len(records)
                    yield records
            else:
                report.slices.extend(self.markets)
                async for batch in self._merged(self.markets):
                    report.rows += len(batch)
                    yield batch
        finally:
            report.elapsed_s = time.monotonic() - started

    def _in_window(
        self, records: list[FundingEntry], times: list[int | None], until: int | None
    ) -> _Batch:
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
        self, market: str | None, depth: int, until: int | None
    ) -> AsyncGenerator[_Batch, None]:
        """One newest-first stream (all markets, or one), as non-empty batches in the window."""
        client, report, op = self._client, self.report, spec.FUNDING_HISTORY
        cursor = FundingCursor(self.page_size)
        params: dict[str, Any] = {"limit": self.page_size}
        if market is not None:
            params["market"] = market

        async def fetch(offset: int) -> tuple[list[FundingEntry], int]:
            page: FundingPage = await client.call(op, {**params, "offset": offset}, report=report)
            report.pages += 1
            return _records(page)

        ahead = _Ahead(fetch, depth)
        offset, refetched, without_news = 0, 0, 0
        of_market = f" of {market}" if market else ""
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
                    _follow_page_size(report, cursor.page_size, size)
                    cursor.page_size = params["limit"] = size
                step = cursor.read(records, offset)
                if step.action == "refetch":
                    refetched += 1
                    report.refetches += 1
                    if refetched > MAX_REFETCHES:
                        raise FundingOrderError(
                            f"funding history{of_market} at offset {offset} still does not line "
                            f"up with the page before it after {MAX_REFETCHES} fetches: the "
                            "newest-first order is not holding"
                        )
                    continue
                refetched = 0
                without_news = 0 if step.fresh or step.last else without_news + 1
                if without_news == MAX_PAGES_WITHOUT_NEWS:
                    raise FundingOrderError(
                        f"funding history{of_market}: {without_news} pages in a row, up to "
                        f"offset {offset}, brought no entry the walk had not already passed: "
                        "the exchange answers the same entries whatever the offset"
                    )
                report.duplicates_dropped += step.repeated
                offset = step.offset
                if step.action == "skip":
                    continue
                if step.fresh:
                    records, times = self._in_window(step.fresh, step.times, until)
                    if records:
                        yield records, times
                oldest = cursor.last_time
                if step.last or (
                    self.since is not None and oldest is not None and oldest < self.since
                ):
                    return
                ahead.grow()
        finally:
            await ahead.aclose()

    async def _head_time(self) -> int | None:
        """The newest funding time of the whole history, as the walk begins."""
        op = spec.FUNDING_HISTORY
        page: FundingPage = await self._client.call(op, {"limit": 1}, report=self.report)
        self.report.pages += 1
        first = page["records"][0] if page["records"] else None
        return plausible_time(
            first.get("fundingTime") if type(first) is dict else None, time.time()
        )

    async def _merged(self, markets: list[str]) -> AsyncIterator[list[FundingEntry]]:
        """Each market walked on its own, concurrently, merged newest first.

        The markets' first pages are answered at different moments; so that all of them show
        the history as it was when the walk began (as a single walk does), entries newer than
        the newest of the whole history at the start are left out."""
        until = self.until
        head = await self._head_time()
        if head is not None and (until is None or head + 1 < until):
            until = head + 1
        streams = [self._stream(m, PER_MARKET_PREFETCH_PAGES, until) for m in markets]
        pending = {i: asyncio.create_task(_next_batch(s)) for i, s in enumerate(streams)}
        buffers: list[deque[tuple[float, FundingEntry]]] = [deque() for _ in markets]
        heads: list[tuple[float, int]] = []  # (minus the head's time, market index)
        empty = set(range(len(markets)))  # markets whose next records are not in hand yet
        batch: list[FundingEntry] = []
        try:
            while True:
                for i in sorted(empty):
                    got = await pending.pop(i)
                    if got is None:
                        continue  # this market is done
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
                # Emit while every market still in the walk has its next record in hand.
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


@dataclass(slots=True)
class _Slice:
    name: str
    params: dict[str, Any]
    filled: bool = False


class InvestmentsWalk:
    """Every investment, each once, in pages.

    Each status slice is read up to the offset window (``limit`` 100, offsets 0..10000). A slice
    whose last reachable page is full may hold more, so it is split by ticker: the tickers seen
    in the rows read so far, those of the main balance, and any the caller names. A sub-slice
    that still fills the window is `OffsetWindowExceeded`: raised once the walk has yielded all
    it could (``on_window_exceeded="raise"``), or only listed in the report (``"report"``).

    Repeats across slices are dropped by id, so the walk remembers every id it yielded: its
    memory grows with the account's investments (tens of thousands), not with pages.

    Limitation: the API can filter only by id, ticker and status, and tells no totals. A ticker
    held in no balance, seen in none of the rows within reach, and not named by the caller,
    cannot be split out: its rows beyond the window of a filled slice stay out of reach.
    """

    def __init__(
        self,
        client: Caller,
        *,
        on_window_exceeded: Literal["raise", "report"],
        tickers: list[str],
    ) -> None:
        if on_window_exceeded not in ("raise", "report"):
            raise ValueError(
                f"on_window_exceeded must be 'raise' or 'report', not {on_window_exceeded!r}"
            )
        self._client = client
        self.on_window_exceeded = on_window_exceeded
        op = spec.INVESTMENTS_HISTORY
        limit, offset = op.param("limit"), op.param("offset")
        # The spec bounds both (limit 1..100, offset 0..10000).
        assert limit.maximum is not None
        assert offset.maximum is not None
        self.window = OffsetWindow(limit.maximum, offset.maximum)
        self.report = WalkReport(op.name)
        self._tickers = set(tickers)
        self._balance_tickers: set[str] | None = None
        self._seen: set[str | bytes] = set()
        self._started = False

    def __aiter__(self) -> AsyncIterator[list[Investment]]:
        if self._started:
            raise RuntimeError("a walk runs once; start another for a second pass")
        self._started = True
        return self._run()

    async def _run(self) -> AsyncIterator[list[Investment]]:
        report, started = self.report, time.monotonic()
        statuses = spec.INVESTMENTS_HISTORY.param("status").choices or ()
        try:
            filled: list[int] = []
            for status in statuses:
                whole = _Slice(f"status={status}", {"status": status})
                async for page in self._slice(whole):
                    yield page
                if whole.filled:
                    filled.append(status)
            for status in filled:
                for ticker in await self._split_tickers():
                    part = _Slice(
                        f"status={status},ticker={ticker}", {"status": status, "ticker": ticker}
                    )
                    try:
                        async for page in self._slice(part):
                            yield page
                    except ValidationError as refused:
                        if set(refused.errors) != {"ticker"}:
                            raise
                        report.notes.append(f"ticker {ticker} is unknown to the exchange: skipped")
                        continue
                    if part.filled:
                        report.incomplete_slices.append(
                            OffsetWindowExceeded(part.name, self.window.reachable)
                        )
        finally:
            report.elapsed_s = time.monotonic() - started
        if report.incomplete_slices and self.on_window_exceeded == "raise":
            first = report.incomplete_slices[0]
            raise OffsetWindowExceeded(
                first.slice, first.reachable, more=len(report.incomplete_slices) - 1
            )

    async def _split_tickers(self) -> list[str]:
        """Tickers to split a filled slice by: those seen, named, and held in the main balance."""
        if self._balance_tickers is None:
            # Its own report: the balance's unknown fields are not the investments'.
            own = WalkReport(spec.MAIN_BALANCE.name)
            balance = await self._client.call(spec.MAIN_BALANCE, {}, report=own)
            self.report.retries += own.retries
            self.report.rate_limited += own.rate_limited
            self._balance_tickers = set(balance)
        return sorted(self._tickers | self._balance_tickers)

    async def _slice(self, part: _Slice) -> AsyncIterator[list[Investment]]:
        client, report, seen = self._client, self.report, self._seen
        op = spec.INVESTMENTS_HISTORY
        report.slices.append(part.name)

        async def fetch(offset: int) -> tuple[list[Investment], int]:
            params = {**part.params, "limit": self.window.limit, "offset": offset}
            page: InvestmentsPage = await client.call(op, params, report=report)
            report.pages += 1
            return _records(page)

        ahead = _Ahead(fetch, client.max_concurrency)
        offset = 0
        try:
            while True:
                ahead.request(self.window.offsets_from(offset))
                records, size = await ahead.take(offset)
                if size < self.window.limit:
                    # Pages asked ahead with the larger size would leave gaps: asked again.
                    await ahead.aclose()
                    _follow_page_size(report, self.window.limit, size)
                    self.window = OffsetWindow(size, self.window.max_offset)
                window = self.window
                identities = investment_identities(records)
                fresh = [r for r, i in zip(records, identities, strict=True) if i not in seen]
                seen.update(identities)
                self._tickers.update(plan_tickers(records))
                report.duplicates_dropped += len(records) - len(fresh)
                if fresh:
                    report.rows += len(fresh)
                    yield fresh
                if len(records) < window.limit or offset >= window.max_offset:
                    part.filled = window.filled(offset, len(records))
                    return
                offset = min(offset + window.limit, window.max_offset)
                ahead.grow()
        finally:
            await ahead.aclose()
