"""A walk of one market's daily candles (`spec.KLINE`): a range of any length, asked in windows
of at most `spec.KLINE_MAX_CANDLES` days, oldest first.

`PricesWalk` is the walk of a declared history of candles (`spec.DailyCandles`): a
`CandlesWalk` per market, every candle a record named by `spec.CANDLE_FIELDS` under its market,
pages of a month each, newest month first (as the warehouse takes a history's months).

A window ends at its own bound: it holds no more days than one answer may, so its answer is the
whole of it, and nothing is asked past it. What the walk vouches for, window by window: every
candle's time is the 00:00 of a day inside the window, and the times rise, each day once; an
answer that breaks this is a `ContractError` naming the window and the candle. A day without a
candle (a market that did not trade) is not an error: the walk counts such days in its notes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from pipeline import spec

from ._errors import ContractError, excerpt
from ._stats import WalkStats
from ._timewindows import DAY_S
from ._walks import Walk

#: A candle's row, as the kline answers it: time, open, close, high, low, volumes.
Candle = list[Any]


class Caller(Protocol):
    """What the walk needs of a client: one checked, retried call, and the exchange's present."""

    async def call(
        self, operation: spec.Operation, params: Mapping[str, Any], *, stats: WalkStats | None
    ) -> Any: ...

    async def exchange_time(self) -> float: ...


class CandlesWalk:
    """Every daily candle of ``market`` with ``since <= time < until`` (Unix seconds; the
    range's end is cut at the exchange's present), a page per window, oldest first; run once,
    with the `WalkStats` of what it did."""

    def __init__(self, caller: Caller, market: str, *, since: int, until: int) -> None:
        if until <= since:
            raise ValueError(f"candles of {market}: until must be after since")
        self._caller, self.market = caller, market
        self.since, self.until = since, until
        self.stats = WalkStats(spec.KLINE.name)
        self._started = False

    def windows(self, now: float) -> list[tuple[int, int]]:
        """The windows asked, each ``(start, end)`` in seconds, both included: whole days from
        the first 00:00 at or after ``since``, at most `spec.KLINE_MAX_CANDLES` days each, the
        last ending before ``until`` and not after ``now``."""
        first = -(-self.since // DAY_S) * DAY_S
        last = min(self.until - 1, int(now))
        span = spec.KLINE_MAX_CANDLES * DAY_S
        return [(start, min(start + span - 1, last)) for start in range(first, last + 1, span)]

    def __aiter__(self) -> AsyncIterator[list[Candle]]:
        if self._started:
            raise RuntimeError("a walk runs once; start another for a second pass")
        self._started = True
        return self._walked()

    async def _walked(self) -> AsyncIterator[list[Candle]]:
        stats, started = self.stats, time.monotonic()
        windows = self.windows(await self._caller.exchange_time())
        # Every window asked at once (the client's concurrency bounds them), yielded in order.
        asked = [asyncio.ensure_future(self._window(start, end)) for start, end in windows]
        try:
            for (start, end), answer in zip(windows, asked, strict=True):
                candles = self._proved(start, end, await answer)
                stats.pages += 1
                stats.rows += len(candles)
                stats.slices.append(f"{self.market} {start}..{end}")
                missing = (end - start) // DAY_S + 1 - len(candles)
                if missing:
                    stats.notes.append(f"{self.market}: {missing} day(s) of {start}..{end} "
                                       "have no candle")  # fmt: skip
                yield candles
        finally:
            for task in asked:
                task.cancel()
            stats.elapsed_s = time.monotonic() - started

    async def _window(self, start: int, end: int) -> Any:
        params = {"market": self.market, "interval": "1d", "start": start, "end": end}
        return await self._caller.call(spec.KLINE, params, stats=self.stats)

    def _proved(self, start: int, end: int, answer: Any) -> list[Candle]:
        """The window's candles, once each is a day of the window, in rising order."""
        candles: list[Candle] = answer["result"]
        before = start - DAY_S
        for n, candle in enumerate(candles):
            at = candle[0] if type(candle) is list and candle else None
            if type(at) is not int or at % DAY_S or not before < at <= end:
                raise ContractError(
                    operation=spec.KLINE,
                    field=f"result[{n}][0]",
                    reason=(
                        f"the days of {self.market} from {start} to {end} asked, oldest first: "
                        "a candle that is not at a later day's 00:00 of them"
                    ),
                    body_excerpt=excerpt(repr(candle)),
                )
            before = at
        return candles


#: A month's candles: records (a candle's values named by `spec.CANDLE_FIELDS`) by market.
MonthOfCandles = dict[str, list[dict[str, Any]]]
_NAMES = tuple(f.name for f in spec.CANDLE_FIELDS)


class PricesWalk(Walk[MonthOfCandles]):
    """The daily candles of every market of ``markets`` with ``since <= time < until``: a page
    per UTC month, newest first, each holding every market's candles of that month as records
    under the market. The markets are walked at once (the client's concurrency bounds them);
    the first that fails fails the walk, naming it. A market's candles are proved as
    `CandlesWalk` proves them; the stats are the sum of the markets'."""

    def __init__(
        self,
        caller: Caller,
        history: spec.History,
        markets: Sequence[str],
        *,
        since: int,
        until: int,
    ) -> None:
        super().__init__(history, since=since, until=until)
        self._caller = caller
        self._walks = [CandlesWalk(caller, m, since=since, until=until) for m in markets]

    async def _run(self) -> AsyncGenerator[MonthOfCandles, None]:
        months: dict[str, MonthOfCandles] = {}
        # The exchange's present, once before the markets' walks ask it at once.
        await self._caller.exchange_time()
        every = await asyncio.gather(*(self._collect(walk) for walk in self._walks))
        for walk, candles in zip(self._walks, every, strict=True):
            for candle in candles:
                record = dict(zip(_NAMES, candle, strict=False))
                month = time.strftime("%Y-%m", time.gmtime(candle[0]))
                months.setdefault(month, {}).setdefault(walk.market, []).append(record)
        for month in sorted(months, reverse=True):
            yield months[month]

    async def _collect(self, walk: CandlesWalk) -> list[Candle]:
        candles: list[Candle] = []
        try:
            async for page in walk:
                candles += page
        finally:
            stats, theirs = self.stats, walk.stats
            stats.pages += theirs.pages
            stats.rows += theirs.rows
            stats.retries += theirs.retries
            stats.rate_limited += theirs.rate_limited
            stats.slices += theirs.slices
            stats.notes += theirs.notes
            stats.unknown_fields.update(theirs.unknown_fields)
        return candles
