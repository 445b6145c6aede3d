"""A walk of one market's daily candles (`spec.KLINE`): a range of any length, asked in windows
of at most `spec.KLINE_MAX_CANDLES` days, oldest first.

A window ends at its own bound: it holds no more days than one answer may, so its answer is the
whole of it, and nothing is asked past it. What the walk vouches for, window by window: every
candle's time is the 00:00 of a day inside the window, and the times rise, each day once; an
answer that breaks this is a `ContractError` naming the window and the candle. A day without a
candle (a market that did not trade) is not an error: the walk counts such days in its notes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from pipeline import spec

from ._errors import ContractError, excerpt
from ._stats import WalkStats
from ._timewindows import DAY_S

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
