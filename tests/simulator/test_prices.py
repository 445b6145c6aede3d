"""The exchange's public prices over real loopback HTTP: the markets list, and the daily candles
of the kline, their refusals as WhiteBIT documents them, their bounds on every fill of the
accounts, and a past day's candle standing still as the clock moves."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

import httpx
import orjson

from pipeline import spec
from pipeline.simulator import Simulator
from tests.simulator.ledger_reading import check_shape, every
from tests.support.simulated import FROZEN_AT

DAY = 86_400
TODAY = FROZEN_AT // DAY * DAY


def _get(sim: Simulator, op: spec.Operation, **query: Any) -> Any:
    r = httpx.get(sim.url + op.path, params=query)
    assert r.status_code == 200, r.text
    return orjson.loads(r.content)


def _candles(sim: Simulator, market: str, start: int, end: int) -> list[list[Any]]:
    answer = _get(sim, spec.KLINE, market=market, interval="1d", start=start, end=end)
    assert answer["success"] is True, answer
    assert answer["message"] is None
    return list(answer["result"])


def test_the_markets_price_every_asset_held_or_moved_but_one(sim: Simulator) -> None:
    markets = _get(sim, spec.MARKETS)
    for market in markets:
        check_shape(market, spec.MARKET_FIELDS)
    names = {m["name"] for m in markets}
    pairs = {(m["stock"], m["money"]) for m in markets}
    assert {m["type"] for m in markets} == {"spot"}
    assert all(f"{m['stock']}_{m['money']}" == m["name"] for m in markets)
    priced_by = defaultdict(set)
    for stock, money in pairs:
        priced_by[stock].add(money)
    held: set[str] = set()
    for role in sim.roles:
        dataset = sim.dataset_for(role)
        held |= set(dataset.holdings.assets)
        # Every market an account trades on spot is listed.
        assert {m.name for m in dataset.holdings.spot_markets} <= names, role
    assert "XLM" in held
    for asset in held - {"USDT", "XLM"}:
        direct = "USDT" in priced_by[asset]
        via = any("USDT" in priced_by[hop] for hop in priced_by[asset])
        assert direct or via, asset
    assert not priced_by["XLM"]
    assert not any("XLM" in money for money in priced_by.values())
    assert "BTC" in priced_by["ETH"]  # a path through an intermediate exists too


def test_each_refused_parameter_answers_200_with_success_false_and_its_messages(
    sim: Simulator,
) -> None:
    ahead = FROZEN_AT + 3600
    cases: list[tuple[dict[str, Any], dict[str, list[str]]]] = [
        ({"market": "XLM_USDT", "interval": "1d"}, {"market": ["Market is not available."]}),
        ({"market": "not a market", "interval": "1d"}, {"market": ["Market is not available."]}),
        ({"interval": "1d"}, {"market": ["Market field is required."]}),
        (
            {"market": "BTC_USDT", "interval": "1d", "start": TODAY, "end": TODAY - DAY},
            {"end": ["End field must be greater then start."]},
        ),
        (
            {"market": "BTC_USDT", "interval": "1d", "end": ahead},
            {"end": ["End field must not be greater than the current time."]},
        ),
        (
            {"market": "BTC_USDT", "interval": "1d", "limit": 0},
            {"limit": ["Limit field must be at least 1."]},
        ),
        (
            {"market": "BTC_USDT", "interval": "1d", "limit": 1441},
            {"limit": ["Limit field must not be greater than 1440."]},
        ),
        ({"market": "BTC_USDT", "interval": "2d"}, {"interval": ["Interval field is invalid."]}),
        (
            {"market": "BTC_USDT", "interval": "1d", "start": -5},
            {"start": ["Start field must be an integer."]},
        ),
        # A documented interval the simulator does not make, refused in its one way.
        ({"market": "BTC_USDT"}, {"interval": ["The simulator makes 1d candles only."]}),
    ]
    for query, messages in cases:
        answer = _get(sim, spec.KLINE, **query)
        assert answer == {"success": False, "message": messages, "result": None}, query


def test_a_days_candle_bounds_every_fill_of_its_market_that_day(sim: Simulator) -> None:
    """Every spot fill of two accounts, read through the API, lies within its day's low and
    high; the candle's open and close lie within them too."""
    fills: dict[str, dict[int, list[Decimal]]] = defaultdict(lambda: defaultdict(list))
    for role in (sim.roles[0], sim.subaccount_roles[0]):
        for fill in every(sim, spec.EXECUTED_HISTORY, {}, sim.credentials_for(role)):
            if not fill["market"].endswith("_PERP"):
                fills[fill["market"]][int(fill["time"]) // DAY].append(Decimal(fill["price"]))
    assert len(fills) >= 4
    checked = 0
    for market, by_day in fills.items():
        first, last = min(by_day) * DAY, max(by_day) * DAY
        candles = {c[0] // DAY: c for c in _candles(sim, market, first, last)}
        assert set(by_day) <= set(candles), market
        for day, prices in by_day.items():
            _, opened, close, high, low, *_ = candles[day]
            low_, high_ = Decimal(low), Decimal(high)
            assert low_ <= min(prices), (market, day)
            assert max(prices) <= high_, (market, day)
            assert low_ <= Decimal(opened) <= high_
            assert low_ <= Decimal(close) <= high_
            checked += len(prices)
    assert checked > 1000, checked


def test_a_past_days_candle_stands_still_as_the_clock_moves(own_sim: Simulator) -> None:
    """Past days answer the same candle on every later day; the clock's own day is the part of
    it gone by, and the day after it is whole; a window answers at most 1,440 candles, the
    newest, each day once and in order."""
    week = TODAY - 6 * DAY
    before = _candles(own_sim, "ETH_BTC", week, FROZEN_AT)
    assert [c[0] for c in before] == list(range(week, TODAY + DAY, DAY))
    own_sim.clock.advance(DAY + 5 * 3600)
    after = _candles(own_sim, "ETH_BTC", week, FROZEN_AT + DAY)
    assert after[:-2] == before[:-1]
    assert after[-2][0] == TODAY
    assert Decimal(after[-2][5]) > Decimal(before[-1][5])
    own_sim.clock.advance(3 * DAY)
    assert _candles(own_sim, "ETH_BTC", week, FROZEN_AT + DAY)[:-1] == after[:-1]
    now = own_sim.clock.now()
    everything = _candles(own_sim, "BTC_USDT", 0, int(now))
    assert len(everything) == spec.KLINE_MAX_CANDLES
    assert [c[0] for c in everything] == [
        int(now) // DAY * DAY - n * DAY for n in reversed(range(spec.KLINE_MAX_CANDLES))
    ]
