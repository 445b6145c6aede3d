"""The trading history over real loopback HTTP: fills, closed orders, the deals of an order and
conversions; their pages, windows, floor, bounds and error bodies, and the request shapes of
widely used clients."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from pipeline import spec
from pipeline.simulator import EPOCH, Scale, SimClock, Simulator
from tests.simulator.ledger_reading import check_shape, every, ok, records
from tests.support.signing import post

DAY = 86_400
#: The six-month floor at the epoch (2026-09-21 14:13): 2026-03-21 00:00 UTC.
FLOOR = 1_774_051_200


def _refused(sim: Simulator, op: spec.Operation, params: dict[str, Any]) -> httpx.Response:
    r = post(sim.url, op.path, params, sim.credentials)
    assert r.status_code != 200, r.text
    return r


@pytest.fixture(scope="module")
def deep() -> Iterator[Simulator]:
    """Spot trading 200 days back: older than the six-month floor (read only)."""
    scale = Scale.parse("days=200,fills=20")
    with Simulator(seed=7, scale=scale, clock=SimClock(EPOCH)) as s:
        yield s


def test_fills_newest_first_grouped_by_market_without_one(sim: Simulator) -> None:
    page = ok(sim, spec.EXECUTED_HISTORY, {"limit": 100}, sim.credentials)
    assert isinstance(page, dict)
    assert sum(len(group) for group in page.values()) == 100  # the limit counts every market
    fills = records(page)
    for fill in fills:
        check_shape({k: v for k, v in fill.items() if k != "market"}, spec.EXECUTED_DEAL_FIELDS)
    flat = ok(sim, spec.EXECUTED_HISTORY, {"limit": 100, "offset": 0}, sim.credentials)
    assert flat == page  # the same page again
    # The page is the 100 newest fills, each market's group newest first.
    times = sorted((f["time"], f["id"]) for f in fills)
    for group in page.values():
        assert [f["time"] for f in group] == sorted((f["time"] for f in group), reverse=True)
    everything = every(sim, spec.EXECUTED_HISTORY, {}, sim.credentials)
    newest = sorted(((f["time"], f["id"]) for f in everything), reverse=True)[:100]
    assert sorted(newest) == times
    assert {f["market"].endswith("_PERP") for f in everything} == {True, False}


def test_fills_of_one_market_are_a_plain_array(sim: Simulator) -> None:
    market = "BTC_USDT"
    page = ok(sim, spec.EXECUTED_HISTORY, {"market": market, "limit": 50}, sim.credentials)
    assert isinstance(page, list)
    assert len(page) == 50
    ids = [f["id"] for f in page]
    assert ids == sorted(ids, reverse=True)
    whole = every(sim, spec.EXECUTED_HISTORY, {"market": market}, sim.credentials)
    assert whole[:50] == page
    assert len({f["id"] for f in whole}) == len(whole)
    for fill in page:
        assert Decimal(fill["deal"]) == Decimal(fill["amount"]) * Decimal(fill["price"])
        assert fill["role"] in spec.ROLES
        assert fill["feeAsset"] == (market.split("_")[0] if fill["side"] == "buy" else "USDT")


def test_fills_windows_and_the_floor(deep: Simulator) -> None:
    creds = deep.credentials
    window = {"startDate": EPOCH - 2 * DAY, "endDate": EPOCH - DAY}
    inside = every(deep, spec.EXECUTED_HISTORY, window, creds)
    assert inside
    assert all(EPOCH - 2 * DAY <= f["time"] < EPOCH - DAY + 1 for f in inside)
    # No window has a limit here; a start before the floor answers nothing older than it.
    old = every(deep, spec.EXECUTED_HISTORY, {"startDate": EPOCH - 199 * DAY}, creds)
    assert min(f["time"] for f in old) >= FLOOR
    assert every(deep, spec.EXECUTED_HISTORY, {"endDate": FLOOR - 1}, creds) == []
    assert deep.dataset.ledger.fills.times[0] < FLOOR * 1_000_000  # there is older data


def test_orders_sum_their_fills(sim: Simulator) -> None:
    # Two windows of 31 days cover the small scale's 60 days of trading.
    orders = [
        order
        for end in (EPOCH, EPOCH - 31 * DAY - 1)
        for order in every(
            sim, spec.ORDER_HISTORY, {"startDate": end - 31 * DAY, "endDate": end}, sim.credentials
        )
    ]
    fills = every(sim, spec.EXECUTED_HISTORY, {}, sim.credentials)
    by_order: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for fill in fills:
        by_order[fill["orderId"]].append(fill)
    assert {o["status"] for o in orders} >= {"FILLED", "CANCELED", "CANCELED_STP"}
    assert {o["type"] for o in orders} >= {"limit", "market", "stop limit"}
    for order in orders:
        check_shape({k: v for k, v in order.items() if k != "market"}, spec.ORDER_FIELDS)
        own = by_order.pop(order["id"], [])
        assert {f["market"] for f in own} <= {order["market"]}
        assert Decimal(order["dealStock"]) == sum(Decimal(f["amount"]) for f in own)
        assert Decimal(order["dealMoney"]) == sum(Decimal(f["deal"]) for f in own)
        assert Decimal(order["dealFee"]) == sum(Decimal(f["fee"]) for f in own)
        assert all(f["feeAsset"] == order["feeAsset"] for f in own)
        assert all(order["ctime"] < f["time"] <= order["ftime"] for f in own)
        if order["status"] == "FILLED" and order["type"] != "market":
            assert order["dealStock"] == order["amount"]
        assert ("positionSide" in order) == order["market"].endswith("_PERP")
        assert ("activationPrice" in order) == order["type"].startswith("stop")
    assert not by_order, "every fill belongs to an order of the history"


def test_order_history_windows(sim: Simulator) -> None:
    creds = sim.credentials
    # Without dates: a calendar month back from now (August has 31 days) up to now.
    default = every(sim, spec.ORDER_HISTORY, {}, creds)
    month = every(sim, spec.ORDER_HISTORY, {"startDate": EPOCH - 31 * DAY, "endDate": EPOCH}, creds)
    assert default == month
    assert all(EPOCH - 31 * DAY <= o["ftime"] < EPOCH + 1 for o in month)
    assert len(month) > 100
    # An end in the future is clamped to now; a start after the end matches nothing.
    future = {"startDate": EPOCH - DAY, "endDate": EPOCH + 10 * DAY}
    assert records(ok(sim, spec.ORDER_HISTORY, future, creds))
    empty = {"startDate": EPOCH - DAY, "endDate": EPOCH - 2 * DAY}
    assert ok(sim, spec.ORDER_HISTORY, empty, creds) == {}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"startDate": EPOCH - 32 * DAY, "endDate": EPOCH}, "startDate"),
        ({"startDate": FLOOR - 1, "endDate": FLOOR + DAY}, "startDate"),
        ({"startDate": EPOCH - 40 * DAY}, "startDate"),  # the end defaults to now
    ],
)
def test_order_history_refuses_a_long_or_old_window(
    sim: Simulator, params: dict[str, Any], field: str
) -> None:
    r = _refused(sim, spec.ORDER_HISTORY, params)
    assert (r.status_code, r.json()["code"], list(r.json()["errors"])) == (422, 30, [field])
    assert r.json()["message"] == "Validation failed"


def test_order_history_at_the_floor_and_31_days(sim: Simulator) -> None:
    creds = sim.credentials
    ok(sim, spec.ORDER_HISTORY, {"startDate": FLOOR, "endDate": FLOOR + 31 * DAY}, creds)
    ok(sim, spec.ORDER_HISTORY, {"startDate": EPOCH - 31 * DAY, "endDate": EPOCH}, creds)


def test_order_status_filters(sim: Simulator) -> None:
    creds, window = sim.credentials, {"startDate": EPOCH - 30 * DAY}

    def statuses(status: str) -> list[dict[str, Any]]:
        return every(sim, spec.ORDER_HISTORY, {**window, "status": status}, creds)

    every_one = statuses("ALL")
    filled, canceled, partial = (
        statuses("FILLED"),
        statuses("CANCELED"),
        statuses("PARTIALLY_FILLED"),
    )
    assert {o["status"] for o in filled} == {"FILLED"}
    assert "FILLED" not in {o["status"] for o in canceled}
    assert len(filled) + len(canceled) == len(every_one)
    assert partial
    assert all(Decimal(o["dealStock"]) > 0 for o in partial)
    assert {o["id"] for o in partial} < {o["id"] for o in canceled}
    # WhiteBit.Net writes the statuses in mixed case: taken as the same filter.
    assert statuses("Filled") == filled


def test_single_order_lookups(sim: Simulator) -> None:
    creds = sim.credentials
    orders = every(sim, spec.ORDER_HISTORY, {}, creds)
    named = next(o for o in orders if o["clientOrderId"])
    one = ok(sim, spec.ORDER_HISTORY, {"orderId": named["id"], "status": "CANCELED"}, creds)
    assert records(one) == [named]  # status and dates are ignored
    # The older docs and ccxt's fetchOrder send the id as a string.
    assert ok(sim, spec.ORDER_HISTORY, {"orderId": str(named["id"])}, creds) == one
    by_client = {"clientOrderId": named["clientOrderId"]}
    assert ok(sim, spec.ORDER_HISTORY, by_client, creds) == one
    # orderId wins over clientOrderId; an unknown id is an empty answer, an unknown
    # clientOrderId the documented 422.
    both = {"orderId": named["id"], "clientOrderId": "nope"}
    assert ok(sim, spec.ORDER_HISTORY, both, creds) == one
    assert ok(sim, spec.ORDER_HISTORY, {"orderId": 12345}, creds) == {}
    for op in (spec.ORDER_HISTORY, spec.EXECUTED_HISTORY):
        r = _refused(sim, op, {"clientOrderId": "no-such-order"})
        assert (r.status_code, r.json()) == (
            422,
            {
                "code": 30,
                "message": "Validation failed",
                "errors": {"orderHistory": ["OrderHistory was not found."]},
            },
        )
    fills = every(sim, spec.EXECUTED_HISTORY, by_client, creds)
    assert {f["orderId"] for f in fills} <= {named["id"]}


def test_deals_of_an_order(sim: Simulator) -> None:
    creds = sim.credentials
    orders = every(sim, spec.ORDER_HISTORY, {}, creds)
    order = next(o for o in orders if o["status"] == "FILLED" and Decimal(o["dealStock"]) > 0)
    page = ok(sim, spec.ORDER_DEALS, {"orderId": order["id"]}, creds)
    assert (page["offset"], page["limit"]) == (0, 50)
    deals = page["records"]
    for deal in deals:
        check_shape(deal, spec.ORDER_DEAL_FIELDS)
        assert deal["dealOrderId"] != order["id"]
    assert sum(Decimal(d["amount"]) for d in deals) == Decimal(order["dealStock"])
    fills = [f for f in every(sim, spec.EXECUTED_HISTORY, {}, creds) if f["orderId"] == order["id"]]
    assert [d["id"] for d in deals] == [f["id"] for f in fills]
    # Paged; ccxt sends the id as a number with a market the endpoint does not know.
    second = ok(sim, spec.ORDER_DEALS, {"orderId": order["id"], "limit": 1, "offset": 1}, creds)
    assert second["records"] == deals[1:2]
    with_market = {"orderId": order["id"], "market": order["market"]}
    assert ok(sim, spec.ORDER_DEALS, with_market, creds) == page
    # An unknown or another account's order is not an error: an empty page.
    other = sim.credentials_for("sub_1")
    assert ok(sim, spec.ORDER_DEALS, {"orderId": order["id"]}, other)["records"] == []
    assert ok(sim, spec.ORDER_DEALS, {"orderId": 1}, creds)["records"] == []


def test_deals_of_an_order_older_than_the_floor_are_gone(deep: Simulator) -> None:
    ledger = deep.dataset.ledger
    ledger.current()
    orders = every(
        deep, spec.ORDER_HISTORY, {"startDate": FLOOR, "endDate": FLOOR + DAY}, deep.credentials
    )
    assert orders
    assert ok(deep, spec.ORDER_DEALS, {"orderId": orders[-1]["id"]}, deep.credentials)["records"]
    # The ids of older orders follow the same scheme: one from the first day of trading.
    older = ledger.order_base + (ledger.spot_from + 3) * ledger.order_block * 3 + 1
    assert ok(deep, spec.ORDER_DEALS, {"orderId": older}, deep.credentials)["records"] == []


def test_conversions(sim: Simulator) -> None:
    creds = sim.credentials
    window = {"from": str(EPOCH - 30 * DAY), "to": str(EPOCH)}  # strings, as documented
    page = ok(sim, spec.CONVERT_HISTORY, {**window, "limit": 5}, creds)
    assert (page["limit"], page["offset"]) == (5, 0)
    assert page["total"] > 5
    whole = every(sim, spec.CONVERT_HISTORY, window, creds, limit=100)
    assert len(whole) == page["total"]
    assert whole[:5] == page["records"]
    ids = [int(c["id"]) for c in whole]
    assert ids == sorted(ids, reverse=True)
    for c in whole:
        check_shape(c, spec.CONVERSION_FIELDS)
        assert Decimal(c["receive"]) == Decimal(c["give"]) * Decimal(c["rate"])
        assert EPOCH - 30 * DAY <= c["date"] <= EPOCH
    given = whole[0]["path"][0]["from"]
    mine = every(sim, spec.CONVERT_HISTORY, {**window, "fromTicker": given}, creds, limit=100)
    assert mine == [c for c in whole if c["path"][0]["from"] == given]
    # Both ends default to now: nothing happened in this very second.
    assert ok(sim, spec.CONVERT_HISTORY, {}, creds)["records"] == []


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        (
            {"from": EPOCH - 31 * DAY, "to": EPOCH},
            {
                "from": ["api.validation.dateTime.maxRange"],
                "to": ["api.validation.dateTime.maxRange"],
            },
        ),
        ({"from": FLOOR - 1, "to": FLOOR + DAY}, {"from": ["validation.numeric_field_length"]}),
        ({"from": "yesterday"}, {"from": ["validation.numeric_integer"]}),
        ({"limit": 101}, {"limit": ["validation.numeric_field_length"]}),
        ({"limit": 0}, {"limit": ["validation.numeric_field_length"]}),
        ({"offset": -1}, {"offset": ["validation.length_min"]}),
        ({"fromTicker": "NOPE"}, {"fromTicker": ["fromTicker is invalid."]}),
        ({"toTicker": "NOPE"}, {"toTicker": ["toTicker is invalid."]}),
    ],
)
def test_convert_history_errors(
    sim: Simulator, params: dict[str, Any], errors: dict[str, list[str]]
) -> None:
    r = _refused(sim, spec.CONVERT_HISTORY, params)
    assert r.status_code == 422
    assert r.json() == {"code": 30, "message": "Validation failed", "errors": errors}


@pytest.mark.parametrize(
    ("op", "params", "status", "errors"),
    [
        (
            spec.EXECUTED_HISTORY,
            {"limit": 501},
            422,
            {"limit": ["Limit should not be greater than 500."]},
        ),
        (spec.EXECUTED_HISTORY, {"limit": 0}, 422, {"limit": ["Limit should be at least 1."]}),
        (spec.EXECUTED_HISTORY, {"offset": -1}, 422, {"offset": ["Offset should be at least 0."]}),
        (
            spec.EXECUTED_HISTORY,
            {"limit": "ten"},
            422,
            {"limit": ["Limit field should be an integer."]},
        ),
        (
            spec.EXECUTED_HISTORY,
            {"limit": 10.0},
            422,
            {"limit": ["Limit field should be an integer."]},
        ),
        (
            spec.EXECUTED_HISTORY,
            {"market": "btc_usdt"},
            422,
            {"market": ["Market field format is invalid."]},
        ),
        (
            spec.EXECUTED_HISTORY,
            {"market": "NOPE_USDT"},
            422,
            {"market": ["Market is not available"]},
        ),
        (
            spec.EXECUTED_HISTORY,
            {"market": 7},
            422,
            {"market": ["Market field should be a string."]},
        ),
        (spec.ORDER_HISTORY, {"status": "OPEN"}, 422, {"status": ["Status field is invalid."]}),
        (
            spec.ORDER_HISTORY,
            {"orderId": True},
            422,
            {"orderId": ["OrderId field should be an integer."]},
        ),
        (spec.ORDER_DEALS, {}, 422, {"orderId": ["OrderId field is required."]}),
        (
            spec.ORDER_DEALS,
            {"orderId": "12a"},
            422,
            {"orderId": ["OrderId field should be an integer."]},
        ),
    ],
)
def test_trade_validation_bodies(
    sim: Simulator,
    op: spec.Operation,
    params: dict[str, Any],
    status: int,
    errors: dict[str, list[str]],
) -> None:
    r = _refused(sim, op, params)
    code = 31 if "market" in errors else 30
    assert (r.status_code, r.json()) == (
        status,
        {"code": code, "message": "Validation failed", "errors": errors},
    )


def test_client_request_shapes(sim: Simulator) -> None:
    """What ccxt and the SDKs send is answered as the service answers it: numbers as strings
    for the trade engine's integers, nonces as strings or integers, unknown keys ignored (the
    generated Python SDK's ``client_order_id``, WhiteBit.Net's ``startTime``)."""
    creds = sim.credentials
    as_numbers = ok(sim, spec.EXECUTED_HISTORY, {"limit": 20, "offset": 5}, creds)
    as_text = ok(sim, spec.EXECUTED_HISTORY, {"limit": "20", "offset": "5"}, creds)
    assert as_numbers == as_text
    for nonce_as in (int, str):
        r = post(
            sim.url,
            spec.EXECUTED_HISTORY.path,
            {"limit": 20, "offset": 5},
            creds,
            nonce_as=nonce_as,
        )
        assert r.json() == as_numbers
    ignored = {"limit": 20, "offset": 5, "client_order_id": "x", "startTime": 1, "endTime": 2}
    assert ok(sim, spec.EXECUTED_HISTORY, ignored, creds) == as_numbers


def test_each_account_trades_on_its_own(sim: Simulator) -> None:
    main = every(sim, spec.EXECUTED_HISTORY, {}, sim.credentials)
    sub = every(sim, spec.EXECUTED_HISTORY, {}, sim.credentials_for("sub_1"))
    assert main
    assert sub
    assert not {f["id"] for f in main} & {f["id"] for f in sub}
    market = next(m for m in sim.dataset_for("sub_1").holdings.spot_markets)
    assert {f["market"] for f in sub} >= {market.name}
