"""A thin synchronous facade over `AsyncWhiteBIT`, for callers without an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, Literal, Self, TypeVar

from ._auth import Credentials
from ._client import AsyncWhiteBIT
from ._report import WalkReport
from ._types import (
    FundingEntry,
    FundingPage,
    HedgeMode,
    Investment,
    InvestmentsPage,
    MainBalance,
    TradingBalance,
    WatcherLink,
)

T = TypeVar("T")


class SyncWalk(Generic[T]):
    """A walk's pages, one at a time, on the facade's event loop; ``report`` as the walk's."""

    def __init__(self, runner: asyncio.Runner, pages: AsyncIterator[T], report: WalkReport) -> None:
        self._runner = runner
        self._pages = pages
        self.report = report

    def __iter__(self) -> Iterator[T]:
        pages = aiter(self._pages)

        async def step() -> T:
            return await anext(pages)

        try:
            while True:
                try:
                    yield self._runner.run(step())
                except StopAsyncIteration:
                    return
        finally:
            close = getattr(pages, "aclose", None)
            if close is not None:
                self._runner.run(close())


class WhiteBIT:
    """`AsyncWhiteBIT` for synchronous code: same options, same methods, blocking."""

    def __init__(self, credentials: Credentials | None = None, **options: Any) -> None:
        self._runner = asyncio.Runner()
        self._client = AsyncWhiteBIT(credentials, **options)

    def __repr__(self) -> str:
        return f"WhiteBIT({self._client!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._runner.run(self._client.aclose())
        finally:
            self._runner.close()

    def ping(self) -> None:
        self._runner.run(self._client.ping())

    def investments_history(
        self,
        *,
        investment_id: str | None = None,
        ticker: str | None = None,
        status: int | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> InvestmentsPage:
        return self._runner.run(
            self._client.investments_history(
                investment_id=investment_id,
                ticker=ticker,
                status=status,
                limit=limit,
                offset=offset,
            )
        )

    def hedge_mode(self) -> HedgeMode:
        return self._runner.run(self._client.hedge_mode())

    def reset_subaccount_key(self, api_key_id: str) -> None:
        self._runner.run(self._client.reset_subaccount_key(api_key_id))

    def funding_history(
        self, *, market: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> FundingPage:
        return self._runner.run(
            self._client.funding_history(market=market, limit=limit, offset=offset)
        )

    def main_balance(self, *, ticker: str | None = None) -> dict[str, MainBalance]:
        return self._runner.run(self._client.main_balance(ticker=ticker))

    def trading_balance(self, *, ticker: str | None = None) -> dict[str, TradingBalance]:
        return self._runner.run(self._client.trading_balance(ticker=ticker))

    def watcher_links(self, account: str) -> list[WatcherLink]:
        return self._runner.run(self._client.watcher_links(account))

    def walk_funding(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        markets: list[str] | None = None,
    ) -> SyncWalk[list[FundingEntry]]:
        walk = self._client.walk_funding(since=since, until=until, markets=markets)
        return SyncWalk(self._runner, aiter(walk), walk.report)

    def walk_investments(
        self,
        *,
        on_window_exceeded: Literal["raise", "report"] = "raise",
        tickers: list[str] | None = None,
    ) -> SyncWalk[list[Investment]]:
        walk = self._client.walk_investments(on_window_exceeded=on_window_exceeded, tickers=tickers)
        return SyncWalk(self._runner, aiter(walk), walk.report)
