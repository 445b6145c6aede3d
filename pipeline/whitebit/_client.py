"""The asynchronous WhiteBIT v4 client: one typed method per operation of `spec`.

Every call is signed with a fresh nonce, paced to its rate budget, retried per `RetryPolicy`, and
its envelope checked against the spec's shape before it is returned (records pass as received:
the warehouse judges them; numbers with a fraction arrive as exact `Decimal`s, `_exact`). Fields
the spec does not name go into the ``report`` a call is given, or to the log, and so does the
exchange's time of the answer (its ``Date``: ``report.observed_at``). The exchange's clock, as
its answers tell it, is the client's (`_clock`). Walks over many pages live in `_walks`,
`_window` and `_timewindows`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any, Self, cast

import httpx
import orjson
from httpx_aiohttp import AiohttpTransport
from tenacity import AsyncRetrying, RetryCallState

from pipeline import spec
from pipeline.spec import WALL_CLOCK

from ._auth import Credentials, Signer, nonce_source, redacted
from ._clock import ExchangeClock
from ._config import DEFAULT_BASE_URL, DEFAULT_MAX_CONCURRENCY, DEFAULT_TIMEOUT_S
from ._errors import APIError, ContractError, error_for_answer, is_error_body, transport_error
from ._histories import Histories
from ._pacing import Pacer
from ._params import check_params, checked_base_url
from ._parse import parse
from ._report import WalkReport
from ._retry import RetryPolicy
from ._types import (
    FundingPage,
    HedgeMode,
    InvestmentsPage,
    MainBalance,
    TradingBalance,
    WatcherLink,
)

log = logging.getLogger("pipeline.whitebit")
#: The attribute of a retry's log record that holds its wait in seconds (a float), for a
#: console to show long waits by.
RETRY_WAIT_FIELD = "retry_wait_s"


def _present(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


class AsyncWhiteBIT(Histories):
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
        if transport is None:
            limits = httpx.Limits(
                max_connections=max_concurrency, max_keepalive_connections=max_concurrency
            )
            transport = AiohttpTransport(limits=limits)
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
        report: WalkReport | None = None,
    ) -> InvestmentsPage:
        """One page of fixed-term investments (B2B partners only); see `walk`."""
        params = _present(
            id=investment_id, ticker=ticker, status=status, limit=limit, offset=offset
        )
        return cast(
            InvestmentsPage, await self.call(spec.INVESTMENTS_HISTORY, params, report=report)
        )

    async def hedge_mode(self, *, report: WalkReport | None = None) -> HedgeMode:
        """Whether hedge mode is on. Like every single call, it notes in ``report`` (when
        given) its retries and the fields of the answer the spec does not name."""
        return cast(HedgeMode, await self.call(spec.HEDGE_MODE, {}, report=report))

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
        report: WalkReport | None = None,
    ) -> FundingPage:
        """One page of funding payments, newest first; see `walk`."""
        params = _present(market=market, limit=limit, offset=offset)
        return cast(FundingPage, await self.call(spec.FUNDING_HISTORY, params, report=report))

    async def main_balance(
        self, *, ticker: str | None = None, report: WalkReport | None = None
    ) -> dict[str, MainBalance]:
        """Refused (`ContractError`) when the answer lists a ticker twice."""
        answer = await self.call(spec.MAIN_BALANCE, _present(ticker=ticker), report=report)
        return cast("dict[str, MainBalance]", answer)

    async def trading_balance(
        self, *, ticker: str | None = None, report: WalkReport | None = None
    ) -> dict[str, TradingBalance]:
        """Without a ticker, only non-zero balances are listed. Refused (`ContractError`) when
        the answer lists a ticker twice."""
        answer = await self.call(spec.TRADING_BALANCE, _present(ticker=ticker), report=report)
        return cast("dict[str, TradingBalance]", answer)

    async def watcher_links(
        self, account: str, *, report: WalkReport | None = None
    ) -> list[WatcherLink]:
        answer = await self.call(spec.WATCHER_LINKS, {"account": account}, report=report)
        return cast("list[WatcherLink]", answer["data"])

    # --- one call: sign, pace, send, check, retry ---------------------------------------

    async def call(
        self,
        operation: spec.Operation,
        params: Mapping[str, Any],
        *,
        report: WalkReport | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Call one operation, retried as `RetryPolicy` says (the client's, or ``retry``);
        ``report`` counts retries and 429s, and collects the fields of the answers that the spec
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
            self._before_retry(operation, report, state.attempt_number, error, state.upcoming_sleep)

        # Every attempt, the first too, goes through this one loop; the policy alone decides.
        retrying = AsyncRetrying(retry=again, wait=wait, before_sleep=before_sleep, reraise=True)
        try:
            return await retrying(self._attempt, operation, params, report)
        except APIError as error:
            error.attempts = retrying.statistics["attempt_number"]
            raise

    def _before_retry(
        self,
        operation: spec.Operation,
        report: WalkReport | None,
        attempt: int,
        error: BaseException | None,
        delay: float,
    ) -> None:
        if report is not None:
            report.retries += 1
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
        self, operation: spec.Operation, params: Mapping[str, Any], report: WalkReport | None
    ) -> Any:
        async with self._slots:
            pacer = self._pacer()
            if pacer is not None:
                await pacer.acquire(operation)
            if report is not None and report.asked_at is None:
                report.asked_at = WALL_CLOCK.moment()
                report.observed_from = self._clock.latest
            if not operation.private:
                request = self._http.build_request("GET", self._urls[operation.name])
                response = await self._send(operation, request)
            elif self._in_order is None:
                response = await self._send_signed(operation, params)
            else:
                async with self._in_order:
                    response = await self._send_signed(operation, params)
        return self._answer(operation, params, response, report)

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
        report: WalkReport | None,
    ) -> Any:
        status, content = response.status_code, response.content
        log.debug("%s answered %d (%d bytes)", operation.path, status, len(content))
        answered_at = self._clock.observe(response.headers.get("date"))
        if 200 <= status < 300:
            unknown = report.unknown_fields if report is not None else {}
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
                if report is not None:
                    _answered(report, answered_at)
                return doc
        elif status == 429 and report is not None:
            report.rate_limited += 1
        raise error_for_answer(operation, status, response.headers, content)


def _answered(report: WalkReport, dated: datetime | None) -> None:
    """A successful answer's times in its report: the exchange's first and last, this
    machine's last."""
    report.answered_at = WALL_CLOCK.moment()
    if dated is None:
        return
    if report.observed_at is None:
        report.observed_at = dated
    if report.observed_from is None or report.observed_from > dated:
        report.observed_from = dated  # no answer before it said the exchange's time
    if report.observed_until is None or report.observed_until < dated:
        report.observed_until = dated


def _failure(state: RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome else None


def _loads(content: bytes) -> Any:
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
