"""The asynchronous WhiteBIT v4 client: one typed method per operation of `spec`, and the
reading of a declared history (`spec.History`): a walk of its pages, as its paging declares, or a
snapshot's answer, alone or taken together with others at one instant.

Every call is signed with a fresh nonce, paced to its rate budget, retried per `RetryPolicy`, and
its envelope checked against the spec's shape before it is returned (records pass as received:
the warehouse judges them; numbers with a fraction arrive as exact `Decimal`s, `_exact`). Fields
the spec does not name go into the ``stats`` a call is given, or to the log, and so does the
exchange's time of the answer (its ``Date``: ``stats.observed_at``). The exchange's clock, as
its answers tell it, is the client's (`_clock`). The walks over many pages are `_walks.Walk`s:
`_walks` (newest first), `_window` (offset window) and `_timewindows` (time windows); the client
chooses one from the history's declaration alone.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import TracebackType
from typing import Any, Final, Literal, Self, cast

import httpx
import orjson
from httpx_aiohttp import AiohttpTransport
from tenacity import AsyncRetrying, RetryCallState

from pipeline import spec
from pipeline.spec import WALL_CLOCK

from ._auth import Credentials, Signer, nonce_source, redacted
from ._candles import Candle, CandlesWalk, PricesWalk
from ._clock import ExchangeClock
from ._config import DEFAULT_BASE_URL, DEFAULT_MAX_CONCURRENCY, DEFAULT_TIMEOUT_S
from ._errors import APIError, ContractError, error_for_answer, is_error_body, transport_error
from ._pacing import Pacer
from ._params import check_params, checked_base_url
from ._parse import parse
from ._retry import RetryPolicy
from ._stats import WalkStats, note_round_trip
from ._timewindows import TimeWindowsWalk
from ._types import (
    FundingPage,
    HedgeMode,
    InvestmentsPage,
    MainBalance,
    TradingBalance,
    WatcherLink,
)
from ._walks import NewestFirstWalk, Records, Walk
from ._window import OffsetWindowWalk

log = logging.getLogger("pipeline.whitebit")
#: The attribute of a retry's log record that holds its wait in seconds (a float), for a
#: console to show long waits by.
RETRY_WAIT_FIELD = "retry_wait_s"


def _present(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


#: Collects of `AsyncWhiteBIT.together` before it keeps one that no second collect confirmed.
COLLECTS: Final = 4


@dataclass(frozen=True, slots=True)
class Together:
    """Snapshots taken together (`AsyncWhiteBIT.together`): each one's answer and stats (of the
    collect kept), by history name; ``span``, the times of the collects that agreed (the
    account was as the answers show at an instant after ``span.observed_from`` and before
    ``span.observed_until`` + 1 s, by the exchange's clock); how many collects it took, and
    whether two in a row agreed."""

    answers: dict[str, Any]
    stats: dict[str, WalkStats]
    span: WalkStats
    collects: int
    #: None: asked once (`one`).
    consistent: bool | None

    @classmethod
    def one(cls, history: spec.History, answer: Any, stats: WalkStats) -> Together:
        """A snapshot taken alone, as if together with nothing."""
        return cls({history.name: answer}, {history.name: stats}, stats, 1, None)


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS settings of every client of this process, made once: reading the certificate
    authorities is most of a client's making, and a night makes one per history and account."""
    return httpx.create_ssl_context()


class AsyncWhiteBIT:
    """The exchange's private REST API v4, asynchronously.

    ``async with AsyncWhiteBIT(Credentials(key, secret)) as client: await client.main_balance()``

    - ``nonce_window=True`` (default) signs with ``nonceWindow: true`` and millisecond nonces,
      so concurrent requests of one key never refuse each other. ``False`` is for keys that need
      strictly increasing nonces: the client then sends one private request at a time, in the
      order it signed them (concurrent requests could arrive out of order and be refused).
    - ``pacing=True`` paces to the spec's budgets, shared by every client of the process talking
      to the same address; pass a `Pacer` to share another or override budgets, or ``False``.
    - ``transport`` replaces the aiohttp transport; every request goes through it the same way
      (tests pass ``httpx.MockTransport``, or one that wraps aiohttp's to watch or alter traffic).
    - ``clock`` (Unix seconds) is what the walks take for the exchange's present: by default the
      exchange's own, as its answers' ``Date`` headers tell it (`exchange_time`).
    - ``local`` is this machine's clock, for when a request was asked and answered here
      (``stats.asked_at``, ``stats.answered_at``): the caller's, by default the wall clock.
    """

    def __init__(
        self,
        credentials: Credentials | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        pacing: Pacer | bool = True,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        nonce_window: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] | None = None,
        local: spec.Clock = WALL_CLOCK,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        url = checked_base_url(base_url)
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency
        self._credentials = credentials
        self._signer = Signer(credentials, nonce_window=nonce_window) if credentials else None
        self._nonces = nonce_source(credentials.api_key) if credentials else None
        self._nonce_window = nonce_window
        # Strict nonces must arrive in the order they were made: one private request at a time.
        self._in_order = None if nonce_window else asyncio.Lock()
        self._slots = asyncio.Semaphore(max_concurrency)
        self._pacing = pacing
        self._clock = ExchangeClock(clock)
        self._local = local
        if transport is None:
            limits = httpx.Limits(
                max_connections=max_concurrency, max_keepalive_connections=max_concurrency
            )
            transport = AiohttpTransport(verify=_tls(), limits=limits)
        # Requests are built by the httpx client (base URL, headers, timeouts) and sent by the
        # transport, always: httpx's client layers (auth flow, redirects, cookies, event hooks)
        # do nothing for this API, and skipping them is a measurable share of a page's CPU.
        self._transport = transport
        self._http = httpx.AsyncClient(
            base_url=url,
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": "whitebit-etl"},
        )
        self._origin = f"{url.scheme}://{url.netloc.decode()}"
        # Absolute URLs made once: httpx would parse each path again on every request.
        prefix = str(url).rstrip("/")
        self._urls = {op.name: httpx.URL(prefix + op.path) for op in spec.OPERATIONS}

    @property
    def base_url(self) -> str:
        return self._origin

    def __repr__(self) -> str:
        return f"AsyncWhiteBIT(base_url={self._origin!r}, credentials={self._credentials!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the operations (spec section 4) -------------------------------------------------

    async def ping(self, *, preflight: bool = False) -> None:
        """Raise unless the public API answers ``["pong"]``. As the ``preflight`` of a run, a
        refused connection raises at once (`ConnectionRefused`: the address is wrong or the
        exchange down), where a timeout, a 5xx or a 429 keep the policy's patience."""
        retry = replace(self.retry, retry_refused=False) if preflight else None
        await self.call(spec.PING, {}, retry=retry)

    async def investments_history(
        self,
        *,
        investment_id: str | None = None,
        ticker: str | None = None,
        status: int | None = None,
        limit: int | None = None,
        offset: int | None = None,
        stats: WalkStats | None = None,
    ) -> InvestmentsPage:
        """One page of fixed-term investments (B2B partners only); see `walk`."""
        params = _present(
            id=investment_id, ticker=ticker, status=status, limit=limit, offset=offset
        )
        return cast(InvestmentsPage, await self.call(spec.INVESTMENTS_HISTORY, params, stats=stats))

    async def hedge_mode(self, *, stats: WalkStats | None = None) -> HedgeMode:
        """Whether hedge mode is on. Like every single call, it notes in ``stats`` (when
        given) its retries and the fields of the answer the spec does not name."""
        return cast(HedgeMode, await self.call(spec.HEDGE_MODE, {}, stats=stats))

    async def reset_subaccount_key(self, api_key_id: str) -> None:
        """Give a sub-account key a new secret. Never repeated after an answer that leaves it
        unclear whether the reset ran (5xx, timeout, dropped connection): those raise."""
        await self.call(spec.RESET_SUBACCOUNT_KEY, {"apiKeyId": api_key_id})

    async def funding_history(
        self,
        *,
        market: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        stats: WalkStats | None = None,
    ) -> FundingPage:
        """One page of funding payments, newest first; see `walk`."""
        params = _present(market=market, limit=limit, offset=offset)
        return cast(FundingPage, await self.call(spec.FUNDING_HISTORY, params, stats=stats))

    async def main_balance(
        self, *, ticker: str | None = None, stats: WalkStats | None = None
    ) -> dict[str, MainBalance]:
        """Refused (`ContractError`) when the answer lists a ticker twice."""
        answer = await self.call(spec.MAIN_BALANCE, _present(ticker=ticker), stats=stats)
        return cast("dict[str, MainBalance]", answer)

    async def trading_balance(
        self, *, ticker: str | None = None, stats: WalkStats | None = None
    ) -> dict[str, TradingBalance]:
        """Without a ticker, only non-zero balances are listed. Refused (`ContractError`) when
        the answer lists a ticker twice."""
        answer = await self.call(spec.TRADING_BALANCE, _present(ticker=ticker), stats=stats)
        return cast("dict[str, TradingBalance]", answer)

    async def watcher_links(
        self, account: str, *, stats: WalkStats | None = None
    ) -> list[WatcherLink]:
        answer = await self.call(spec.WATCHER_LINKS, {"account": account}, stats=stats)
        return cast("list[WatcherLink]", answer["data"])

    # --- the exchange's public prices (sections 4.21, 4.22): no key needed --------------------

    async def markets(self, *, stats: WalkStats | None = None) -> list[dict[str, Any]]:
        """Every market enabled for trading (`spec.MARKETS`), spot and futures, as listed."""
        return cast("list[dict[str, Any]]", await self.call(spec.MARKETS, {}, stats=stats))

    async def kline(
        self,
        market: str,
        *,
        interval: str = "1d",
        start: int | None = None,
        end: int | None = None,
        limit: int | None = None,
        stats: WalkStats | None = None,
    ) -> list[Candle]:
        """One answer of candles (`spec.KLINE`), oldest first, each ``[time, open, close, high,
        low, volume stock, volume money]``; ``start`` and ``end`` in Unix seconds. A refusal
        (``success: false``) is a `ValidationError` naming the parameters sent and the
        exchange's messages. A range of more than one answer: `candles`."""
        params = _present(market=market, interval=interval, start=start, end=end, limit=limit)
        answer = await self.call(spec.KLINE, params, stats=stats)
        return cast("list[Candle]", answer["result"])

    def candles(self, market: str, *, since: datetime, until: datetime) -> CandlesWalk:
        """Every daily candle of ``market`` with ``since <= time < until`` (cut at the
        exchange's present), in windows of at most 1,440 days (`CandlesWalk`), oldest first."""
        first, end = _seconds(since, "since"), _seconds(until, "until")
        return CandlesWalk(self, market, since=cast(int, first), until=cast(int, end))

    # --- the histories (`spec.History`): walks, snapshots, the exchange's present ------------

    def walk(
        self,
        history: spec.History,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        values: Mapping[str, Sequence[str]] | None = None,
        on_window_exceeded: Literal["raise", "report"] = "raise",
    ) -> Walk[Records]:
        """Every record of a history with ``since <= time < until`` (each end open when None),
        in pages, as its paging declares; ``values`` are the account's settings by name (its
        ``markets``, ``mining_accounts``), each walk taking those its declaration names.

        A newest-first history (`NewestFirstWalk`) is walked newest first; given the values of
        its ``split_setting`` (the account's markets), each is walked on its own, concurrently,
        and merged. A history read by offset window (`OffsetWindowWalk`) gives every record of
        the range (all of a snapshot), each once, its splits taking ``values`` too. A history read
        in time windows (`TimeWindowsWalk`) is walked a window at a time, newest first; a window
        out of the offset's reach is reported as ``on_window_exceeded`` says, like an offset
        window's slice.
        """
        paging, settings = history.paging, values or {}
        first, end = _seconds(since, "since"), _seconds(until, "until")
        if isinstance(paging, spec.NewestFirst):
            return NewestFirstWalk(self, history, since=first, until=end, values=settings)
        if isinstance(paging, spec.OffsetWindow):
            return OffsetWindowWalk(
                self,
                history,
                since=first,
                until=end,
                on_window_exceeded=on_window_exceeded,
                values=settings,
            )
        if isinstance(paging, spec.TimeWindows):
            return TimeWindowsWalk(
                self, history, since=first, until=end, on_window_exceeded=on_window_exceeded
            )
        if isinstance(paging, spec.DailyCandles):
            if first is None or end is None:
                raise ValueError(f"{history.name}: a walk of candles needs since and until")
            markets = settings.get(paging.setting, ())
            return PricesWalk(self, history, markets, since=first, until=end)
        raise TypeError(f"{history.name} is not walked: it is a snapshot (see `snapshot`)")

    async def snapshot(
        self,
        history: spec.History,
        *,
        values: Mapping[str, Sequence[str]] | None = None,
        stats: WalkStats | None = None,
    ) -> Any:
        """A snapshot's answer as the exchange gave it, its history's fixed parameters sent; for
        one fanned out over the values of a setting (a mining account each, from ``values``, the
        account's settings by name), each value's records by value. ``stats`` (when given)
        takes the exchange's time of the first answer (``observed_at``), its retries and the
        fields the spec does not name."""
        op, fixed = history.operation, dict(history.params)
        if not isinstance(history.paging, spec.Fanout):
            return await self.call(op, fixed, stats=stats)
        param = history.paging.param
        fanned = list((values or {}).get(history.paging.setting, ()))
        answers = await asyncio.gather(
            *(self.call(op, {**fixed, param: value}, stats=stats) for value in fanned)
        )
        return {value: _listed(op, answer) for value, answer in zip(fanned, answers, strict=True)}

    async def whole(
        self, history: spec.History, *, values: Mapping[str, Sequence[str]] | None = None
    ) -> tuple[Any, WalkStats]:
        """A snapshot's answer as the exchange gave it (every page's records of one walked by
        offset window, a slice out of the window's reach reported), and its stats."""
        if isinstance(history.paging, spec.OffsetWindow):
            walk = self.walk(history, values=values, on_window_exceeded="report")
            records: Any = None
            async for page in walk:
                records = _joined(records, page)
            return (records if records is not None else []), walk.stats
        paging = history.paging
        if isinstance(paging, spec.Fanout) and not (values or {}).get(paging.setting):
            log.warning(f"no {paging.setting} configured: no {history.name} to list")
        stats = WalkStats(history.name)
        return await self.snapshot(history, values=values, stats=stats), stats

    async def together(
        self,
        histories: Sequence[spec.History],
        *,
        values: Mapping[str, Sequence[str]] | None = None,
        collects: int = COLLECTS,
    ) -> Together:
        """Snapshots that show the account at one instant: each asked at once (concurrently),
        then all again, until two collects in a row answer alike (each of them then held from
        the first collect's answer to the second's: so all of them at an instant between the
        two), at most ``collects`` times; then the last collect is kept, not ``consistent``."""
        names = [h.name for h in histories]
        last = max(collects, 2)
        before: tuple[list[Any], WalkStats] | None = None  # the collect before: answers, span
        # Fields the spec does not name, as any collect's answers held them: the answers agree
        # on what the warehouse reads, whatever such a field says (or whether it is there).
        unknown: set[str] = set()
        for collect in range(1, last + 1):
            got = await asyncio.gather(*(self.whole(h, values=values) for h in histories))
            answers = [answer for answer, _ in got]
            stats = {name: walked for name, (_, walked) in zip(names, got, strict=True)}
            unknown |= {p.rsplit(".", 1)[-1] for s in stats.values() for p in s.unknown_fields}
            agreed = before is not None and _without(answers, unknown) == _without(
                before[0], unknown
            )
            if agreed or collect == last:
                first = before[1] if agreed and before is not None else None
                return Together(
                    dict(zip(names, answers, strict=True)),
                    stats,
                    _span(first, stats),
                    collect,
                    consistent=agreed,
                )
            before = answers, _span(None, stats)
        raise AssertionError("unreachable: the last collect returns")

    async def exchange_time(self) -> float:
        """The exchange's present, in Unix seconds: the client's ``clock`` if it was given one,
        else the latest answer's ``Date`` plus the time since (a ping first, when no answer has
        come yet), else this machine's clock (an exchange that sends no ``Date``)."""
        if not self._clock.known and not self._clock.asked:
            self._clock.asked = True
            await self.ping()
        return self._clock.now()

    # --- one call: sign, pace, send, check, retry ---------------------------------------

    async def call(
        self,
        operation: spec.Operation,
        params: Mapping[str, Any],
        *,
        stats: WalkStats | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Call one operation, retried as `RetryPolicy` says (the client's, or ``retry``);
        ``stats`` counts retries and 429s, and collects the fields of the answers that the spec
        does not name."""
        check_params(operation, params)
        if operation.private and self._signer is None:
            raise ValueError(f"{operation.name} is private: the client needs credentials")
        policy = retry or self.retry

        def again(state: RetryCallState) -> bool:
            error = _failure(state)
            return error is not None and policy.should_retry(operation, error, state.attempt_number)

        def wait(state: RetryCallState) -> float:
            return policy.delay(state.attempt_number, _failure(state))

        def before_sleep(state: RetryCallState) -> None:
            error = _failure(state)
            self._before_retry(operation, stats, state.attempt_number, error, state.upcoming_sleep)

        # Every attempt, the first too, goes through this one loop; the policy alone decides.
        retrying = AsyncRetrying(retry=again, wait=wait, before_sleep=before_sleep, reraise=True)
        try:
            return await retrying(self._attempt, operation, params, stats)
        except APIError as error:
            error.attempts = retrying.statistics["attempt_number"]
            raise

    def _before_retry(
        self,
        operation: spec.Operation,
        stats: WalkStats | None,
        attempt: int,
        error: BaseException | None,
        delay: float,
    ) -> None:
        if stats is not None:
            stats.retries += 1
        log.info(
            "%s: attempt %d of %d failed (%s: %s); retrying in %.2f s",
            operation.name,
            attempt,
            self.retry.max_retries + 1,
            type(error).__name__,
            getattr(error, "detail", error),
            delay,
            extra={RETRY_WAIT_FIELD: delay},
        )

    async def _attempt(
        self, operation: spec.Operation, params: Mapping[str, Any], stats: WalkStats | None
    ) -> Any:
        async with self._slots:
            pacer = self._pacer()
            if pacer is not None:
                await pacer.acquire(operation)
            if stats is not None and stats.asked_at is None:
                stats.asked_at = self._local.moment()
                stats.observed_from = self._clock.latest
            sent = time.monotonic()
            if not operation.private:
                query = dict(params) or None
                request = self._http.build_request("GET", self._urls[operation.name], params=query)
                response = await self._send(operation, request)
            elif self._in_order is None:
                response = await self._send_signed(operation, params)
            else:
                async with self._in_order:
                    response = await self._send_signed(operation, params)
            if stats is not None:
                note_round_trip(stats, time.monotonic() - sent)
        return self._answer(operation, params, response, stats)

    def _pacer(self) -> Pacer | None:
        if isinstance(self._pacing, Pacer):
            return self._pacing
        return Pacer.shared(self._origin) if self._pacing else None

    async def _send_signed(
        self, operation: spec.Operation, params: Mapping[str, Any]
    ) -> httpx.Response:
        # Both exist whenever credentials do, which `call` checked.
        assert self._nonces is not None
        assert self._signer is not None
        nonce, wait = self._nonces.take()
        if wait and self._nonce_window:
            await asyncio.sleep(wait)
        content, headers = self._signer.sign(operation.path, params, nonce)
        request = self._http.build_request(
            "POST", self._urls[operation.name], content=content, headers=headers
        )
        if log.isEnabledFor(logging.DEBUG):  # redacting the headers is work of its own
            log.debug(
                "POST %s params=%s headers=%s",
                operation.path,
                dict(params),
                redacted(request.headers),
            )
        return await self._send(operation, request)

    async def _send(self, operation: spec.Operation, request: httpx.Request) -> httpx.Response:
        """The one way a request goes out: to the transport, the whole body read."""
        try:
            response = await self._transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise transport_error(operation, exc, self._origin) from exc
        return response

    def _answer(
        self,
        operation: spec.Operation,
        params: Mapping[str, Any],
        response: httpx.Response,
        stats: WalkStats | None,
    ) -> Any:
        status, content = response.status_code, response.content
        log.debug("%s answered %d (%d bytes)", operation.path, status, len(content))
        answered_at = self._clock.observe(response.headers.get("date"))
        if 200 <= status < 300:
            unknown = stats.unknown_fields if stats is not None else {}
            known = len(unknown)
            try:
                doc = parse(operation, content, unknown, params)
            except ContractError:
                if not is_error_body(_loads(content)):
                    raise
            else:
                if len(unknown) > known:  # first seen: said once, in the log too
                    log.warning(
                        "%s: the answer has fields the spec does not name (tolerated): %s",
                        operation.name,
                        ", ".join(f"{p} (e.g. {unknown[p]})" for p in list(unknown)[known:]),
                    )
                if stats is not None:
                    _answered(stats, answered_at, self._local.moment())
                return doc
        elif status == 429 and stats is not None:
            stats.rate_limited += 1
        raise error_for_answer(operation, status, response.headers, content, params)


def _answered(stats: WalkStats, dated: datetime | None, here: datetime) -> None:
    """A successful answer's times in its stats: the exchange's first and last, this
    machine's last (``here``)."""
    stats.answered_at = here
    if dated is None:
        return
    if stats.observed_at is None:
        stats.observed_at = dated
    if stats.observed_from is None or stats.observed_from > dated:
        stats.observed_from = dated  # no answer before it said the exchange's time
    if stats.observed_until is None or stats.observed_until < dated:
        stats.observed_until = dated


def _failure(state: RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome else None


def _loads(content: bytes) -> Any:
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None


def _seconds(moment: datetime | None, name: str) -> int | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware (UTC), not a naive datetime")
    return math.floor(moment.timestamp())


def _without(value: Any, names: set[str]) -> Any:
    """An answer without the fields of these names, at any depth."""
    if not names:
        return value
    if type(value) is dict:
        return {k: _without(v, names) for k, v in value.items() if k not in names}
    if type(value) is list:
        return [_without(v, names) for v in value]
    return value


def _span(first: WalkStats | None, stats: Mapping[str, WalkStats]) -> WalkStats:
    """The times of a collect (from ``first``'s start, when given, to its end): when its
    first request was sent and its last answer came, by the exchange's clock and by this
    machine's."""
    span = WalkStats("together")
    every = list(stats.values())
    starts = [first] if first is not None else every
    span.observed_at = _least([r.observed_at for r in starts])
    span.observed_from = _least([r.observed_from for r in starts])
    span.asked_at = _least([r.asked_at for r in starts])
    span.observed_until = _most([r.observed_until for r in every])
    span.answered_at = _most([r.answered_at for r in every])
    return span


def _least(times: Sequence[datetime | None]) -> datetime | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _most(times: Sequence[datetime | None]) -> datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _joined(records: Any, page: Any) -> Any:
    """Pages gathered: lists of records, or records by owner (``{owner: [record, ...]}``)."""
    if records is None:
        return page
    if isinstance(page, dict):
        for owner, more in page.items():
            records.setdefault(owner, []).extend(more)
        return records
    records.extend(page)
    return records


def _listed(operation: spec.Operation, answer: Any) -> Any:
    """The records of an answer that lists them under an envelope field."""
    shape = operation.answer
    return answer[shape.envelope] if isinstance(shape, spec.Listed) else answer
