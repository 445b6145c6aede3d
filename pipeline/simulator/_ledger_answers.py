"""Answers from the ledger: the account's fills, orders, conversions, deposits and withdrawals,
sub-accounts and transfers, positions and balances (docs/api.md, sections 4.9 to 4.20).

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
from ._assets import COLLATERAL, SETTLEMENT
from ._basics import ATOM_PLACES, TEN, atoms_text, decimal_text, time_text
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
#: Leverage the simulated collateral account trades at (margins and borrowing follow it).
LEVERAGE = 10


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


# --- Deposits and withdrawals, sub-accounts ------------------------------------------------------


def main_account_history(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    method, statuses = p["transactionMethod"], p["status"]
    if statuses is not None:
        valid = {1: spec.DEPOSIT_STATUSES, 2: spec.WITHDRAWAL_STATUSES}.get(method)
        if valid is not None and not set(statuses) <= valid.keys():
            return answers.private_error(
                400, 0, "Validation failed", {"status": ["The selected status is invalid."]}
            )
    ledger, now_us = _ledger(account), _now_us(account)
    movements, offset, limit = ledger.movements, p["offset"], state.limit(p)
    view = movements.view(method=method, ticker=p["ticker"])
    newest = range(len(movements) - 1, -1, -1) if view is None else view[::-1]
    addresses = set(p["addresses"]) if p["addresses"] is not None else None
    wanted = set(statuses) if statuses is not None else None
    if any(v is not None for v in (p["address"], p["memo"], p["uniqueId"], addresses, wanted)):
        newest = [i for i in newest if _matches(ledger, i, p, addresses, wanted, now_us)]
    page = newest[offset : offset + limit]
    records = [ledger.status(i, now_us)[0] for i in page]
    return Answer(
        200,
        b'{"limit":%d,"offset":%d,"records":%b,"total":%d}'
        % (limit, offset, _array(records), len(newest)),
    )


def _matches(
    ledger: Ledger,
    i: int,
    p: dict[str, Any],
    addresses: set[str] | None,
    statuses: set[int] | None,
    now_us: int,
) -> bool:
    address, memo, unique_id = ledger.movement_keys[i]
    return (
        (p["address"] is None or address == p["address"])
        and (p["memo"] is None or memo == p["memo"])
        and (p["uniqueId"] is None or unique_id == p["uniqueId"])
        and (addresses is None or address in addresses)
        and (statuses is None or ledger.status(i, now_us)[1] in statuses)
    )


def subaccount_list(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    listed: list[dict[str, Any]] = account.subaccounts
    if p["search"] is not None:
        term = p["search"].lower()
        listed = [s for s in listed if term in s["alias"].lower() or term in s["email"].lower()]
    offset, limit = p["offset"], state.limit(p)
    page = [orjson.dumps(s) for s in listed[offset : offset + limit]]
    return Answer(200, _page(offset, limit, b"data", page))


def subaccount_transfers(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    ledger = _ledger(account)
    transfers, offset, limit = ledger.transfers, p["offset"], state.limit(p)
    view = transfers.view(sub=account.subaccount_names[p["id"].lower()], direction=p["direction"])
    positions = transfers.newest(offset, limit, view)
    return Answer(200, _page(offset, limit, b"data", transfers.written(positions)))


# --- Collateral -------------------------------------------------------------------------------


def positions_history(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    ledger, (start, end) = _ledger(account), _span(p, spec.POSITIONS_HISTORY.window)
    events = ledger.events
    # A position id takes precedence over the market (the older docs say so).
    if p["positionId"] is not None:
        view = events.view(position=p["positionId"])
    else:
        view = events.view(market=p["market"])
    positions = events.newest(p["offset"], state.limit(p), view, start, end)
    return Answer(200, _array(events.written(positions)))


def closed_pnl(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    ledger, (start, end) = _ledger(account), _span(p, spec.CLOSED_PNL.window)
    closed = ledger.closed
    positions = closed.newest(p["offset"], state.limit(p), None, start, end)
    return Answer(200, _array(closed.written(positions)))


def open_positions(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    ledger = _ledger(account)
    perp = ledger.perp
    held = sorted(ledger.open.values(), key=lambda h: h.position_id)
    collateral = ledger.balance(COLLATERAL, SETTLEMENT)
    base_places = ledger.positions.base_places
    margins = [
        _atoms(abs(h.amount) * h.base, perp.markets[h.market].position[1] + base_places[h.market])
        // LEVERAGE
        for h in held
    ]
    free = max(0, collateral - sum(margins))  # the account's, whatever the filter
    if p["market"] is not None:
        kept = [n for n, h in enumerate(held) if perp.names[h.market] == p["market"]]
        held, margins = [held[n] for n in kept], [margins[n] for n in kept]
    records = []
    for h, margin in zip(held, margins, strict=True):
        market = perp.markets[h.market]
        qs, places = market.position[1], ledger.positions.base_places[h.market]
        mark = ledger.marks[h.market] * 10 ** (places - market.price[1]) if ledger.marks else h.base
        unrealized = _atoms(h.amount * (mark - h.base), qs + places)
        percent = unrealized * 10_000 // margin if margin else 0  # hundredths of a percent
        factor = 8 if h.amount > 0 else 12
        tpsl = None
        if h.position_id % 5 == 0:  # now and then a take-profit and a stop-loss
            tpsl = {
                "takeProfitId": h.position_id * 10 + 1,
                "takeProfit": decimal_text(h.base * (24 - factor) // 12, places),
                "stopLossId": h.position_id * 10 + 2,
                "stopLoss": decimal_text(h.base * factor // 10, places),
            }
        records.append(
            {
                "positionId": h.position_id,
                "market": market.name,
                "openDate": float(time_text(h.open_us)),
                "modifyDate": float(time_text(h.modify_us)),
                "amount": decimal_text(h.amount, qs),
                "basePrice": decimal_text(h.base, places),
                "liquidationPrice": decimal_text(h.base * factor // 10, places),
                "liquidationState": None,
                "pnl": atoms_text(h.pnl),
                "pnlPercent": decimal_text(percent, 2),
                "margin": atoms_text(margin),
                "freeMargin": atoms_text(free),
                "funding": "0",  # always on _PERP markets
                "unrealizedFunding": "0",
                "unrealizedPnl": atoms_text(unrealized),
                "tpsl": tpsl,
                "positionSide": h.side,
            }
        )
    return json_answer(200, records)


def _atoms(mantissa: int, places: int) -> int:
    return mantissa * TEN[ATOM_PLACES - places]


def collateral_balance(state: State, account: Account, p: dict[str, Any], key: ApiKey) -> Answer:
    held = account.dataset.collateral_balance
    if p["ticker"] is not None:
        held = {p["ticker"]: held.get(p["ticker"], "0")}
    # Numbers, not strings: the decimal's own digits, so nothing is lost on our side.
    return Answer(
        200, b"{%b}" % b",".join(b'"%s":%s' % (t.encode(), v.encode()) for t, v in held.items())
    )


def collateral_balance_summary(
    state: State, account: Account, p: dict[str, Any], key: ApiKey
) -> Answer:
    held = account.dataset.collateral_balance
    if p["ticker"] is not None:
        held = {p["ticker"]: held.get(p["ticker"], "0")}
    records = []
    for asset, balance in held.items():
        records.append(
            {
                "asset": asset,
                "balance": balance,
                "borrow": "0",
                "availableWithoutBorrow": balance,
                "availableWithBorrow": _times(balance, LEVERAGE),
            }
        )
    return json_answer(200, records)


def _times(text: str, factor: int) -> str:
    whole, _, fraction = text.partition(".")
    places = len(fraction)
    return decimal_text(int(whole + fraction) * factor, places)


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
    spec.MAIN_ACCOUNT_HISTORY.path: main_account_history,
    spec.SUBACCOUNT_LIST.path: subaccount_list,
    spec.SUBACCOUNT_TRANSFERS.path: subaccount_transfers,
    spec.POSITIONS_HISTORY.path: positions_history,
    spec.CLOSED_PNL.path: closed_pnl,
    spec.OPEN_POSITIONS.path: open_positions,
    spec.COLLATERAL_BALANCE.path: collateral_balance,
    spec.COLLATERAL_BALANCE_SUMMARY.path: collateral_balance_summary,
}
