"""Reading an account's ledger back through the API, as the warehouse will: every history paged
to its end, every balance summed over main, trading and collateral, and the flows between two
moments added up per asset from the records alone (docs/simulator.md, "The ledger").

Amounts have up to 20 integer digits and 18 decimals (DECIMAL(38,18)): Python's default decimal
context keeps 28 digits and would round a large balance, so every sum here is taken in a
context of `PRECISION` digits."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal, localcontext
from typing import Any

import orjson

from pipeline import spec
from pipeline.simulator import Credentials, Simulator
from tests.support.signing import post

Flows = dict[str, Decimal]
#: Digits of the decimal context sums are taken in: more than DECIMAL(38,18) can hold.
PRECISION = 60


def ok(sim: Simulator, op: spec.Operation, params: dict[str, Any], creds: Credentials) -> Any:
    """The answer's JSON, numbers read as exact decimals."""
    r = post(sim.url, op.path, params, creds)
    assert r.status_code == 200, (op.name, params, r.status_code, r.text[:300])
    return orjson.loads(r.content) if op is not spec.COLLATERAL_BALANCE else _exact(r.content)


def _exact(body: bytes) -> Any:
    import json

    return json.loads(body, parse_float=Decimal, parse_int=Decimal)


def records(page: Any) -> list[Any]:
    """A page's records, whatever its envelope: a plain array, ``records`` or ``data``, or an
    object of arrays keyed by market (each record then told its market)."""
    if isinstance(page, list):
        return page
    if "records" in page:
        return list(page["records"])
    if "data" in page:
        return list(page["data"])
    return [dict(r, market=market) for market, group in page.items() for r in group]


def every(
    sim: Simulator,
    op: spec.Operation,
    params: dict[str, Any],
    creds: Credentials,
    limit: int | None = None,
) -> list[Any]:
    """Every record of a history (within ``params``), newest first, paged to its end."""
    size = limit or op.bound("limit")
    out: list[Any] = []
    while True:
        page = records(ok(sim, op, {**params, "offset": len(out), "limit": size}, creds))
        out += page
        if len(page) < size:
            return out


def balances(sim: Simulator, creds: Credentials) -> Flows:
    """Per asset, main + trading (available and frozen) + collateral, at the clock's present."""
    with localcontext() as context:
        context.prec = PRECISION
        total: Flows = defaultdict(Decimal)
        for ticker, b in ok(sim, spec.MAIN_BALANCE, {}, creds).items():
            total[ticker] += Decimal(b["main_balance"])
        for ticker, b in ok(sim, spec.TRADING_BALANCE, {}, creds).items():
            total[ticker] += Decimal(b["available"]) + Decimal(b["freeze"])
        for row in ok(sim, spec.COLLATERAL_BALANCE_SUMMARY, {}, creds):
            total[row["asset"]] += Decimal(row["balance"])
        return dict(total)


def investments_state(sim: Simulator, creds: Credentials) -> tuple[Flows, Flows]:
    """Per asset, the principal of the active investments (they hold it apart from every
    balance), and the interest they have paid so far (a running total: its change is a flow);
    none for a key without B2B access, which may not list them."""
    with localcontext() as context:
        context.prec = PRECISION
        invested: Flows = defaultdict(Decimal)
        interest: Flows = defaultdict(Decimal)
        answer = post(sim.url, spec.INVESTMENTS_HISTORY.path, {"limit": 100}, creds)
        if answer.status_code == 403:
            return {}, {}
        for row in every(sim, spec.INVESTMENTS_HISTORY, {}, creds):
            if row["status"] == 1:
                invested[row["plan"]["ticker"]] += Decimal(row["amount"])
            interest[row["plan"]["interestTicker"]] += Decimal(row["interestPaid"])
        return dict(invested), dict(interest)


def movements_effect(rows: list[dict[str, Any]]) -> Flows:
    """What deposits and withdrawals, as listed now, have moved: a deposit its amount less its
    fee once successful, a withdrawal its amount and fee unless canceled."""
    with localcontext() as context:
        context.prec = PRECISION
        moved: Flows = defaultdict(Decimal)
        for row in rows:
            amount, fee = Decimal(row["amount"]), Decimal(row["fee"])
            if row["method"] == 1 and row["status"] in spec.SUCCESSFUL:
                moved[row["ticker"]] += amount - fee
            elif row["method"] == 2 and row["status"] != 4:
                moved[row["ticker"]] -= amount + fee
        return dict(moved)


def flows_between(
    sim: Simulator,
    creds: Credentials,
    t1: int,
    t2: int,
    *,
    transfers: list[dict[str, Any]],
    to_sub: bool,
) -> Flows:
    """Per asset, what the account's records say moved its balances in ``(t1, t2]`` (whole
    seconds): fills and their fees, realized P&L, funding, conversions and transfers. A record
    stamped in whole seconds moved them within its second (``t1 <= createdAt < t2``).
    Deposits and withdrawals are the difference of `movements_effect` at both moments."""
    with localcontext() as context:
        context.prec = PRECISION
        moved: Flows = defaultdict(Decimal)
        window = {"startDate": t1, "endDate": t2}
        for fill in every(sim, spec.EXECUTED_HISTORY, window, creds):
            if not t1 < Decimal(str(fill["time"])) <= t2:
                continue
            base, quote = fill["market"].split("_")
            amount, deal, fee = (Decimal(fill[k]) for k in ("amount", "deal", "fee"))
            moved[fill["feeAsset"]] -= fee
            if quote != "PERP":  # a collateral fill moves its position, not its assets
                sign = 1 if fill["side"] == "buy" else -1
                moved[base] += sign * amount
                moved[quote] -= sign * deal
        for event in every(sim, spec.POSITIONS_HISTORY, window, creds):
            pnl = event["orderDetail"]["realizedPnl"]
            if pnl is not None and t1 < Decimal(str(event["modifyDate"])) <= t2:
                moved["USDT"] += Decimal(pnl)
        for entry in every(sim, spec.FUNDING_HISTORY, {}, creds):
            if int(entry["fundingTime"]) <= t1:
                break
            if int(entry["fundingTime"]) <= t2:
                moved["USDT"] += Decimal(entry["fundingAmount"])
        for c in every(sim, spec.CONVERT_HISTORY, {"from": t1, "to": t2}, creds):
            if t1 <= c["date"] < t2:
                moved[c["path"][0]["from"]] -= Decimal(c["give"])
                moved[c["path"][-1]["to"]] += Decimal(c["receive"])
        for t in transfers:
            if t1 <= t["createdAt"] < t2:
                sign = 1 if (t["direction"] == "main_to_sub") == to_sub else -1
                moved[t["currency"]] += sign * Decimal(t["amount"])
        return dict(moved)


def sum_of(*flows: Flows) -> Flows:
    """Per asset, the sum of ``flows``."""
    with localcontext() as context:
        context.prec = PRECISION
        total: Flows = defaultdict(Decimal)
        for each in flows:
            for asset, amount in each.items():
                total[asset] += amount
        return dict(total)


def change(before: Flows, after: Flows) -> Flows:
    """``after - before`` per asset, zeros left out."""
    with localcontext() as context:
        context.prec = PRECISION
        keys = set(before) | set(after)
        out = {k: after.get(k, Decimal(0)) - before.get(k, Decimal(0)) for k in keys}
        return {k: v for k, v in out.items() if v}


_DECIMAL = re.compile(r"^-?\d{1,20}(\.\d{1,18})?$")
#: Whether a value is of a field type (objects and arrays of them are checked field by field).
_TYPES: dict[spec.FieldType, Callable[[Any], bool]] = {
    spec.FieldType.DECIMAL: lambda v: isinstance(v, str) and bool(_DECIMAL.match(v)),
    spec.FieldType.TIMESTAMP_FRACTIONAL: lambda v: type(v) in (float, int) and v > 1e9,
    spec.FieldType.TIMESTAMP_STRING: lambda v: isinstance(v, str) and v.isdigit(),
    spec.FieldType.INTEGER: lambda v: type(v) is int,
    spec.FieldType.TIMESTAMP: lambda v: type(v) is int,
    spec.FieldType.STRING: lambda v: isinstance(v, str),
    spec.FieldType.BOOLEAN: lambda v: type(v) is bool,
    spec.FieldType.STRING_LIST: lambda v: isinstance(v, list) and all(type(x) is str for x in v),
}


def check_shape(record: Any, fields: tuple[spec.Field, ...]) -> None:
    """The record has the spec's fields (an optional one may be absent), none other, each of the
    spec's JSON type; decimals fit DECIMAL(38,18)."""
    names = {f.name for f in fields}
    required = {f.name for f in fields if not f.optional}
    assert required <= set(record) <= names, (sorted(set(record) ^ names), record)
    for f in fields:
        value = record.get(f.name)
        if value is None:
            assert f.nullable or f.name not in record, (f.name, record)
        elif f.type in _TYPES:
            assert _TYPES[f.type](value), (f.name, value)
        elif f.type is spec.FieldType.OBJECT_LIST:
            assert isinstance(value, list), (f.name, value)
            for item in value:
                check_shape(item, f.fields)
        else:
            check_shape(value, f.fields)
