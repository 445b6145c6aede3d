"""The simulated exchange as a Starlette app: authentication, budgets, validation, handlers, faults.

Checks run in the order a request meets them at the real service: the gateway's rate budget and
its faults first, then the API key, the signature over the Base64 payload, the payload against
the body, ``request`` against the path, the nonce, the key's permissions, and the parameters.
Parameters are checked against, and answers drawn from, the account of the key that signed.
Every answer carries a ``Date`` header from the simulator's data clock (`SimClock`), as the real
service's carries its own time: a frozen clock answers with a frozen date.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import hashlib
import hmac
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline import spec
from pipeline.spec import SimClock

from . import _answers as answers
from . import _prices
from ._accounts import Account, Accounts
from ._answers import Answer, Spelling, respelled
from ._basics import DAY_S
from ._data import Dataset
from ._faults import Fault, FaultInjector
from ._keys import ApiKey, KeyStore, NonceRejected
from ._latency import Distant, RoundTrips
from ._ledger_answers import HANDLERS as LEDGER_HANDLERS
from ._limits import RateLimiter
from ._prices import Prices
from ._validation import SIGNING_FIELDS, Invalid, refused, validate
from ._windows import month_before

log = logging.getLogger("pipeline.simulator")

#: Where the simulator's own controls are served (no part of the exchange).
CONTROL_PREFIX = "/_simulator"


class DroppedConnection(Exception):
    """Raised inside a response to make the server cut the connection mid-body (a fault)."""


class _DroppingResponse(Response):
    """Announces the whole body, sends half, then fails: the client sees the connection drop."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send(
            {
                "type": "http.response.body",
                "body": self.body[: len(self.body) // 2],
                "more_body": True,
            }
        )
        raise DroppedConnection


class SimulatorState:
    """Everything the handlers read and the tests steer."""

    def __init__(self, accounts: Accounts, keys: KeyStore) -> None:
        self.accounts = accounts
        self.keys = keys
        #: The exchange's public prices: its markets and their candles, from the seed.
        self.prices = Prices(accounts.seed)
        self.limits = RateLimiter()
        self.faults = FaultInjector()
        #: Each answer's round trip (`_latency`): none until a latency is set.
        self.round_trips = RoundTrips(accounts.seed)
        #: Most records a paged answer holds, whatever was asked: an exchange that caps its
        #: pages answers ``limit`` as its cap, with that many records (None: no cap).
        self.page_cap: int | None = None
        #: How records name the fields the documentation names two ways (`Spelling`).
        self.spelling: Spelling = "camel"
        self.answered: Counter[tuple[str, int]] = Counter()
        #: Per path, when its first and its last answer of status 200 left (monotonic seconds):
        #: the span a walk used its budget over, as the exchange sees it.
        self.spans: dict[str, list[float]] = {}

    def account(self, key: ApiKey) -> Account:
        """The account the key acts for (its data built now if nobody asked for it before)."""
        return self.accounts[key.account]

    # The main account's, as tests that know of one account read them.
    @property
    def dataset(self) -> Dataset:
        return self.accounts.main.dataset

    @property
    def main_body(self) -> bytes:
        """The main account's main balance, as the API answers it now."""
        return orjson.dumps(self.dataset.main_balance)

    @property
    def trading_body(self) -> bytes:
        """The main account's trading balance, as the API answers it now (no zeros)."""
        zero = {"available": "0", "freeze": "0"}
        return orjson.dumps({t: b for t, b in self.dataset.trading_balance.items() if b != zero})

    def count(self, path: str, status: int) -> None:
        self.answered[(path, status)] += 1
        if status == 200:
            now = time.monotonic()
            self.spans.setdefault(path, [now, now])[1] = now

    def reset_counts(self) -> None:
        """Forget what was answered (a benchmark's scenarios start from nothing)."""
        self.answered.clear()
        self.spans.clear()
        self.limits.rejected = 0

    def answers_with(self, status: int) -> int:
        return sum(n for (_, s), n in self.answered.items() if s == status)

    def limit(self, p: dict[str, Any]) -> int:
        """A page's size: as asked, or the page cap if it is smaller."""
        asked: int = p["limit"]
        cap = self.page_cap
        return asked if cap is None else min(asked, cap)


# --- Handlers: (state, the signing key's account, validated parameters, key) -> answer ---------


def _page(offset: int, limit: int, records: list[bytes]) -> bytes:
    return b'{"offset":%d,"limit":%d,"records":[%b]}' % (offset, limit, b",".join(records))


def _investments(state: SimulatorState, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    if not key.b2b:
        return answers.NO_B2B_ACCESS
    investments = account.dataset.investments
    found = investments.select(id=p["id"], ticker=p["ticker"], status=p["status"])
    offset, limit = p["offset"], state.limit(p)
    return Answer(200, _page(offset, limit, found[offset : offset + limit]))


def _hedge_mode(state: SimulatorState, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    return Answer(200, account.hedge_body)


def _reset_key(state: SimulatorState, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    if not key.can_reset_keys or key.subaccount:
        return answers.NOT_PERMITTED
    target = state.keys.subaccount(p["apiKeyId"])
    if target is None:
        return answers.API_KEY_NOT_FOUND
    state.keys.reset(target)
    log.info("sub-account key %s reset", target.key_id)
    return Answer(200, b"{}")


def _funding(state: SimulatorState, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    offset, limit = p["offset"], state.limit(p)
    records = account.dataset.funding.page(p["market"], offset, limit)
    return Answer(200, _page(offset, limit, records))


def _watcher_links(
    state: SimulatorState, account: Account, p: dict[str, Any], key: ApiKey
) -> Answer:
    name = p["account"]
    body = account.links_bodies.get(name)
    if body is None:
        return answers.private_error(
            400, 0, "Validation failed", {"user": [f"Mining pool account '{name}' not found"]}
        )
    return Answer(200, body)


Handler = Callable[[SimulatorState, Account, dict[str, Any], ApiKey], Answer]

#: What a sub-account's key may not call: the main account's management of its sub-accounts.
MAIN_ACCOUNT_ONLY = frozenset({spec.SUBACCOUNT_LIST.path, spec.SUBACCOUNT_TRANSFERS.path})

HANDLERS: dict[str, Handler] = {
    spec.INVESTMENTS_HISTORY.path: _investments,
    spec.HEDGE_MODE.path: _hedge_mode,
    spec.RESET_SUBACCOUNT_KEY.path: _reset_key,
    spec.FUNDING_HISTORY.path: _funding,
    spec.WATCHER_LINKS.path: _watcher_links,
    **LEDGER_HANDLERS,
}


# --- Authentication (docs/api.md, "Signing a private request") -------------------------------


def _nonce(value: Any) -> int | None:
    """A nonce as the exchange accepts it: a non-negative integer, or a string of digits."""
    if type(value) is int and value >= 0:
        return value
    if type(value) is str and value.isascii() and value.isdigit():
        return int(value)
    return None


def authenticate(
    state: SimulatorState, op: spec.Operation, headers: Any, body: bytes
) -> tuple[ApiKey, dict[str, Any]] | Answer:
    """The key and the parsed body of a correctly signed request, or the answer refusing it."""
    key = state.keys.by_api_key(headers.get("x-txc-apikey", ""))
    if key is None:
        return answers.UNAUTHORIZED
    payload = headers.get("x-txc-payload")
    if not payload:
        return answers.PAYLOAD_NOT_PROVIDED
    signature = headers.get("x-txc-signature", "")
    # Lowercase hex, compared as the exchange compares it: exactly.
    expected = hmac.new(key.secret, payload.encode(), hashlib.sha512).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        return answers.UNAUTHORIZED
    if not key.enabled:
        return answers.KEY_DISABLED
    # Without the JSON content type the service never reads the body as parameters.
    if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return answers.INVALID_PAYLOAD
    try:
        signed = orjson.loads(base64.b64decode(payload, validate=True))
        sent = orjson.loads(body)
    except (binascii.Error, ValueError):
        return answers.INVALID_PAYLOAD
    # Same JSON, whatever the key order: compare parsed values, not bytes.
    if not isinstance(signed, dict) or signed != sent:
        return answers.INVALID_PAYLOAD
    if "request" not in signed:
        return answers.REQUEST_NOT_PROVIDED
    if signed["request"] != op.path:
        return answers.INVALID_PAYLOAD
    if "nonce" not in signed:
        return answers.NONCE_NOT_PROVIDED
    nonce = _nonce(signed["nonce"])
    window = signed.get("nonceWindow", False)
    if nonce is None or type(window) is not bool:
        return answers.INVALID_PAYLOAD
    try:
        state.keys.accept_nonce(key, nonce, window=window)
    except NonceRejected as rejected:
        return answers.NONCE_OUTSIDE_WINDOW if rejected.outside_window else answers.NONCE_TOO_LOW
    return key, signed


# --- The ASGI side -------------------------------------------------------------------------


def _respond(answer: Answer) -> Response:
    return Response(answer.body, answer.status, media_type=answer.media_type)


def _drift(body: bytes, fault: Fault) -> bytes:
    """Change a successful answer the way an API that drifted from its spec would."""
    if fault is Fault.TRUNCATED_JSON:
        return body[: max(1, len(body) // 2)]
    doc = orjson.loads(body)
    target: Any = doc
    # The first record-like object: a record of a page, a balance, or the body itself.
    while True:
        if isinstance(target, dict):
            nested = [v for v in target.values() if isinstance(v, dict | list) and v]
            if nested and not any(isinstance(v, str) for v in target.values()):
                target = nested[0]
                continue
        if isinstance(target, list) and target and isinstance(target[0], dict | list):
            target = target[0]
            continue
        break
    if isinstance(target, list):  # ping's ["pong"]
        if fault is Fault.EXTRA_FIELD:
            target.append("extra")
        elif fault is Fault.MISSING_FIELD:
            target.clear()
        else:
            target[:] = [1]
    elif fault is Fault.EXTRA_FIELD:
        target["unexpectedField"] = "drift"
    elif fault is Fault.MISSING_FIELD:
        if target:
            target.pop(next(reversed(target)))
        else:  # {}: nothing to take away, so the answer loses its object altogether
            return b""
    else:
        name = next((k for k, v in target.items() if isinstance(v, str)), next(iter(target), None))
        if name is None:  # {}: no field to change, so the answer becomes a number
            return b"0"
        else:
            value = target[name]
            if type(value) in (int, float):  # an answer of numbers drifts the other way
                target[name] = str(value)
                return orjson.dumps(doc)
            try:
                target[name] = float(value)
            except (TypeError, ValueError):
                target[name] = 12345
    return orjson.dumps(doc)


async def _faulted(
    state: SimulatorState,
    path: str,
    run: Callable[[], Awaitable[Answer]],
    params: dict[str, Any] | None = None,
) -> Response:
    """Answer the request, with the fault the injector draws for it, if any."""
    fault = state.faults.draw(path)
    if fault is Fault.SLOW:
        await asyncio.sleep(state.faults.slow_seconds)
    elif fault in (Fault.HTTP_500, Fault.HTTP_502, Fault.HTTP_503):
        answer = answers.html_server_error(int(fault.value[-3:]))
        state.count(path, answer.status)
        return _respond(answer)
    elif fault is Fault.GATEWAY_429:
        state.count(path, 429)
        return _respond(answers.GATEWAY_RATE_LIMITED)
    answer = await run()
    state.count(path, answer.status)
    tamper = state.faults.tampered(path)
    if tamper is not None and answer.status == 200:
        answer = Answer(200, tamper(params if params is not None else {}, answer.body))
    if fault is Fault.DROP_CONNECTION:
        return _DroppingResponse(answer.body, answer.status, media_type=answer.media_type)
    if fault is not None and fault.alters_success and answer.status == 200:
        return Response(_drift(answer.body, fault), 200, media_type=answer.media_type)
    return _respond(answer)


def _private_endpoint(state: SimulatorState, op: spec.Operation) -> Callable[[Request], Any]:
    handler = HANDLERS[op.path]

    async def endpoint(request: Request) -> Response:
        host = request.client.host if request.client else "?"
        api_key = request.headers.get("x-txc-apikey")
        known = api_key if api_key and state.keys.by_api_key(api_key) else None
        if not state.limits.admit(op, host, known):
            state.count(op.path, 429)
            return _respond(answers.GATEWAY_RATE_LIMITED)

        params: dict[str, Any] = {}

        async def run() -> Answer:
            try:
                raw = await request.body()
            except ClientDisconnect:  # gone during a slow answer: nobody to answer
                return Answer(499, b"", "text/plain")
            authenticated = authenticate(state, op, request.headers, raw)
            if isinstance(authenticated, Answer):
                return authenticated
            key, signed = authenticated
            if key.subaccount and op.path in MAIN_ACCOUNT_ONLY:
                return answers.NOT_PERMITTED
            account = state.account(key)
            try:
                fields = {k: v for k, v in signed.items() if k not in SIGNING_FIELDS}
                now = account.dataset.clock.now()
                params.update(validate(op, fields, account.exists, now))
            except Invalid as invalid:
                return invalid.answer
            answer = handler(state, account, params, key)
            if state.spelling == "openapi" and answer.status == 200:
                return Answer(200, respelled(op.path, answer.body), answer.media_type)
            return answer

        return await _faulted(state, op.path, run, params)

    return endpoint


def _ping(state: SimulatorState, query: dict[str, Any]) -> Answer:
    return Answer(200, b'["pong"]')


def _markets(state: SimulatorState, query: dict[str, Any]) -> Answer:
    return Answer(200, state.prices.markets_body)


#: A documented interval the simulator makes no candles of (`_prices`): refused in this one way.
INTERVAL_NOT_MADE = "The simulator makes 1d candles only."


def _kline(state: SimulatorState, query: dict[str, Any]) -> Answer:
    """Candles of one market as `spec.KLINE` and `_prices` say: refused as the exchange refuses
    a parameter, a documented interval but ``1d`` refused in one way of the simulator's own."""
    prices, now = state.prices, state.accounts.clock.now()
    try:
        p = validate(spec.KLINE, query, lambda _, name: name in prices.markets, now)
        if p["interval"] != _prices.DAILY:
            raise refused(spec.KLINE.validation, {"interval": [INTERVAL_NOT_MADE]})
    except Invalid as invalid:
        return invalid.answer
    end, limit = p["end"], p["limit"]
    # With a limit, the exchange takes the start as end - limit * interval; without a start,
    # a day's candles reach a month back.
    if "limit" in query:
        start = end - limit * DAY_S
    else:
        start = p["start"] if p["start"] is not None else month_before(end)
    candles = [prices.candle(p["market"], day, now) for day in prices.days(start, end, limit, now)]
    return Answer(200, orjson.dumps({"success": True, "message": None, "result": candles}))


PublicHandler = Callable[[SimulatorState, dict[str, Any]], Answer]

PUBLIC_HANDLERS: dict[str, PublicHandler] = {
    spec.PING.path: _ping,
    spec.MARKETS.path: _markets,
    spec.KLINE.path: _kline,
}


def _public_endpoint(state: SimulatorState, op: spec.Operation) -> Callable[[Request], Any]:
    handler = PUBLIC_HANDLERS[op.path]

    async def endpoint(request: Request) -> Response:
        if request.method != "GET":
            return _respond(answers.public_error(405, "Method not allowed"))
        host = request.client.host if request.client else "?"
        if not state.limits.admit(op, host, None):
            state.count(op.path, 429)
            return _respond(answers.GATEWAY_RATE_LIMITED)
        query = dict(request.query_params)

        async def run() -> Answer:
            return handler(state, query)

        return await _faulted(state, op.path, run, query)

    return endpoint


class ExchangeDate:
    """ASGI middleware: every answer's ``Date`` is the data clock's second (the server's own
    date, from the wall clock, is switched off in `_server`)."""

    def __init__(self, app: ASGIApp, clock: SimClock) -> None:
        self.app, self.clock = app, clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def dated(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["date"] = email.utils.formatdate(self.clock.now(), usegmt=True)
            await send(message)

        await self.app(scope, receive, dated)


async def _not_found(request: Request, exc: Exception) -> Response:
    return Response(b"", 404)


def build_app(state: SimulatorState, control: list[Route] | None = None) -> Starlette:
    """The exchange's routes (plus the simulator's own control routes, if given)."""
    routes = [
        Route(op.path, _public_endpoint(state, op), methods=["GET", "POST"])
        for op in spec.OPERATIONS
        if not op.private
    ]
    routes += [
        Route(op.path, _private_endpoint(state, op), methods=["POST"])
        for op in spec.OPERATIONS
        if op.private
    ]
    # An unknown route, or a private one called with GET: an empty 404, as the exchange answers.
    return Starlette(
        routes=routes + (control or []),
        exception_handlers={404: _not_found, 405: _not_found},
        middleware=[
            Middleware(Distant, trips=state.round_trips, spared=CONTROL_PREFIX),
            Middleware(ExchangeDate, clock=state.accounts.clock),
        ],
    )
