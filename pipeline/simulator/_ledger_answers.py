"""Answers from the ledger: the account's fills, orders, conversions and balances (docs/api.md,
sections 4.5, 4.6 and 4.9 to 4.12).

Each handler takes the signing key's account and its validated parameters (time windows already
resolved to seconds by `_windows`) and answers from the ledger as the clock sees it: newest
first, a page a slice of a history (`Series`), its records the JSON bytes made for them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import orjson

from pipeline import spec

from . import _answers as answers
from ._accounts import Account
from ._answers import Answer, json_answer
from ._keys import ApiKey
from ._ledger import Ledger
from ._series import Series
from ._trades import ID_STEP
from ._windows import history_floor


class State(Protocol):
    """What a handler asks of the simulator's state: a page's size under its page cap."""

    def limit(self, p: dict[str, Any]) -> int: ...


Handler = Callable[[State, Account, dict[str, Any], ApiKey], Answer]

ORDER_NOT_FOUND = answers.private_error(
    422, 30, "Validation failed", {"orderHistory": ["OrderHistory was not found."]}
)
#: The order states each ``status`` filter of order history takes (`_trades.order_state`).
_STATES: dict[str, frozenset[str] | None] = {
    "ALL": None,
    "FILLED": frozenset({"filled"}),
    "CANCELED": frozenset({"canceled", "partial"}),
    "PARTIALLY_FILLED": frozenset({"partial"}),
}


def _now_us(account: Account) -> int:
    return int(account.dataset.clock.now() * 1_000_000)


def _ledger(account: Account) -> Ledger:
    ledger = account.dataset.ledger
    ledger.current()
    return ledger


def _span(p: dict[str, Any], window: spec.TimeWindow | None) -> tuple[int | None, int | None]:
    """The window's ends in microseconds, both whole seconds included."""
    if window is None:
        return None, None
    start, end = p.get(window.start), p.get(window.end)
    return (
        None if start is None else start * 1_000_000,
        None if end is None else end * 1_000_000 + 999_999,
    )


def _array(records: Sequence[bytes]) -> bytes:
    return b"[" + b",".join(records) + b"]"


def _grouped(series: Series, positions: Sequence[int]) -> bytes:
    """The records at these positions, grouped into an object keyed by market, each group in
    the page's order, the groups in the order their first record comes."""
    groups: dict[Hashable, list[bytes]] = {}
    for i, record in zip(positions, series.written(positions), strict=True):
        groups.setdefault(series.value("market", i), []).append(record)
    return b"{%b}" % b",".join(b'"%s":%b' % (str(m).encode(), _array(r)) for m, r in groups.items())


def _page(offset: int, limit: int, under: bytes, records: Sequence[bytes]) -> bytes:
    return b'{"offset":%d,"limit":%d,"%b":%b}' % (offset, limit, under, _array(records))


# --- Trades ------------------------------------------------------------------------------------


def _order_position(ledger: Ledger, order_id: int, now_us: int) -> int | None:
    """Where an order is in the order history, if it is there and within the floor."""
    number, rest = divmod(order_id - ledger.order_base - 1, ID_STEP)
    if rest or number < 0:
        return None
    k, n = divmod(number, ledger.order_block)
    return ledger.order_at(k, n, history_floor(now_us / 1_000_000) * 1_000_000)


def executed_history(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    ledger, (start, end) = _ledger(account), _span(p, spec.EXECUTED_HISTORY.window)
    fills, offset, limit = ledger.fills, p["offset"], state.limit(p)
    if p["clientOrderId"] is not None:
        order = ledger.client_orders.get(p["clientOrderId"])
        floor = history_floor(account.dataset.clock.now()) * 1_000_000
        if order is None or order >= len(ledger.orders) or ledger.orders.times[order] < floor:
            return ORDER_NOT_FOUND
        first, count = divmod(ledger.order_fills[order], 256)
        if p["market"] is not None and ledger.orders.value("market", order) != p["market"]:
            return ORDER_NOT_FOUND
        own = list(range(first + count - 1, first - 1, -1))
        positions = [i for i in own if _within(fills.times[i], start, end)][offset : offset + limit]
    else:
        positions = fills.newest(offset, limit, fills.view(market=p["market"]), start, end)
    if p["market"] is not None:
        return Answer(200, _array(fills.written(positions)))
    return Answer(200, _grouped(fills, positions))


def _within(time_us: int, start: int | None, end: int | None) -> bool:
    return (start is None or time_us >= start) and (end is None or time_us <= end)


def order_history(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    ledger, now_us = _ledger(account), _now_us(account)
    orders = ledger.orders
    if p["orderId"] is not None or p["clientOrderId"] is not None:
        if p["orderId"] is not None:
            found = _order_position(ledger, p["orderId"], now_us)
        else:
            found = ledger.client_orders.get(p["clientOrderId"])
            floor = history_floor(now_us / 1_000_000) * 1_000_000
            if found is None or found >= len(orders) or orders.times[found] < floor:
                return ORDER_NOT_FOUND
        if found is not None and p["market"] not in (None, orders.value("market", found)):
            found = None
        return Answer(200, _grouped(orders, [] if found is None else [found]))
    start, end = _span(p, spec.ORDER_HISTORY.window)
    view = orders.view(market=p["market"], state=_STATES[p["status"]])
    positions = orders.newest(p["offset"], state.limit(p), view, start, end)
    return Answer(200, _grouped(orders, positions))


def order_deals(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    ledger = _ledger(account)
    offset, limit = p["offset"], state.limit(p)
    found = _order_position(ledger, p["orderId"], _now_us(account))
    records: list[bytes] = []
    if found is not None:
        first, count = divmod(ledger.order_fills[found], 256)
        positions = list(range(first + count - 1, first - 1, -1))[offset : offset + limit]
        records = [_deal(orjson.loads(fill)) for fill in ledger.fills.written(positions)]
    return Answer(200, _page(offset, limit, b"records", records))


def _deal(fill: dict[str, Any]) -> bytes:
    """A fill as the deals of its order list it: the counterparty's order instead of the side."""
    fill_id = fill["id"]
    return orjson.dumps(
        {
            "time": fill["time"],
            "fee": fill["fee"],
            "price": fill["price"],
            "amount": fill["amount"],
            "id": fill_id,
            # The counterparty's order: another account's, drawn from the fill's id.
            "dealOrderId": 9 * 10**12 + fill_id * 2_654_435_761 % 10**12,
            "clientOrderId": fill["clientOrderId"],
            "role": fill["role"],
            "deal": fill["deal"],
            "feeAsset": fill["feeAsset"],
            "rpi": fill["role"] == 1 and fill_id % 11 == 0,
        }
    )


def convert_history(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    ledger, (start, end) = _ledger(account), _span(p, spec.CONVERT_HISTORY.window)
    conversions, offset, limit = ledger.conversions, p["offset"], state.limit(p)
    view = conversions.view(**{"from": p["fromTicker"], "to": p["toTicker"], "quote": p["quoteId"]})
    positions = conversions.newest(offset, limit, view, start, end)
    total = conversions.count(view, start, end)
    return Answer(
        200,
        b'{"records":%b,"total":%d,"limit":%d,"offset":%d}'
        % (_array(conversions.written(positions)), total, limit, offset),
    )


# --- Balances -----------------------------------------------------------------------------------


def main_balance(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    balances = account.dataset.main_balance
    ticker = p["ticker"]
    if ticker is None:
        return json_answer(200, balances)
    # An unknown ticker is a zero balance, not an error.
    return json_answer(200, {ticker: balances.get(ticker, {"main_balance": "0"})})


def trading_balance(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    balances = account.dataset.trading_balance
    ticker = p["ticker"]
    if ticker is None:  # without a ticker, only non-zero balances are listed
        zero = {"available": "0", "freeze": "0"}
        return json_answer(200, {t: b for t, b in balances.items() if b != zero})
    return json_answer(200, {ticker: balances.get(ticker, {"available": "0", "freeze": "0"})})


HANDLERS: dict[str, Handler] = {
    spec.MAIN_BALANCE.path: main_balance,
    spec.TRADING_BALANCE.path: trading_balance,
    spec.EXECUTED_HISTORY.path: executed_history,
    spec.ORDER_HISTORY.path: order_history,
    spec.ORDER_DEALS.path: order_deals,
    spec.CONVERT_HISTORY.path: convert_history,
}
