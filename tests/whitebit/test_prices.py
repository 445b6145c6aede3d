"""The client's public prices against the simulator over loopback HTTP: the markets list, one
kline answer, its refusal in one line, and a walk of more than 1,440 days of candles."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import orjson
import pytest

from pipeline import spec
from pipeline.simulator import Fault, Simulator
from pipeline.whitebit import AsyncWhiteBIT, ContractError, ValidationError
from tests.support.client import FAST_RETRIES, collect, raises
from tests.support.simulated import FROZEN_AT

DAY = 86_400
TODAY = FROZEN_AT // DAY * DAY


def _public(sim: Simulator) -> AsyncWhiteBIT:
    """A client without a key: the prices are public."""
    return AsyncWhiteBIT(base_url=sim.url, pacing=False, retry=FAST_RETRIES)


def test_the_markets_and_a_kline_answer_as_the_exchange_lists_them(sim: Simulator) -> None:
    async def run() -> None:
        async with _public(sim) as c:
            markets = await c.markets()
            assert markets == orjson.loads(sim.state.prices.markets_body)
            week = await c.kline("BTC_USDT", start=TODAY - 6 * DAY, end=TODAY)
            assert [row[0] for row in week] == list(range(TODAY - 6 * DAY, TODAY + DAY, DAY))
            # Exact strings, in the documented order: time, open, close, high, low, volumes.
            assert week == [sim.state.prices.candle("BTC_USDT", t // DAY, FROZEN_AT) for t in
                            range(TODAY - 6 * DAY, TODAY + DAY, DAY)]  # fmt: skip
            assert all(type(v) is str for row in week for v in row[1:])

    asyncio.run(run())


def test_a_refused_kline_is_one_line_naming_the_operation_its_parameters_and_the_message(
    sim: Simulator,
) -> None:
    async def run() -> None:
        async with _public(sim) as c:
            with raises(ValidationError) as unknown:
                await c.kline("XLM_USDT", start=TODAY - DAY, end=TODAY)
            with raises(ValidationError) as backwards:
                await c.kline("BTC_USDT", start=TODAY, end=TODAY - DAY)
            # The client refuses an interval the contract does not list, before any request.
            with pytest.raises(ValueError, match="interval must be one of"):
                await c.kline("BTC_USDT", interval="2d")

        said = str(unknown.value)
        assert "\n" not in said
        assert said.startswith("kline /api/v1/public/kline: HTTP 200: success false")
        assert "'market': ['Market is not available.']" in said
        assert f"market='XLM_USDT', interval='1d', start={TODAY - DAY}, end={TODAY}" in said
        assert unknown.value.attempts == 1  # a refusal is not tried again
        assert unknown.value.errors == {"market": ["Market is not available."]}
        assert backwards.value.errors == {"end": ["End field must be greater then start."]}
        assert f"start={TODAY}, end={TODAY - DAY}" in str(backwards.value)

    asyncio.run(run())


def test_a_walk_of_more_than_1440_days_returns_every_day_once(own_sim: Simulator) -> None:
    """From 2019-01-01, the first day listed, to the clock's day: some 2,820 days in two
    windows, the first answer a 502 retried; every day once, oldest first, to the exchange's
    present (a range that ends later is cut there)."""
    since = datetime(2019, 1, 1, tzinfo=UTC)
    days = list(range(int(since.timestamp()), TODAY + DAY, DAY))
    assert len(days) > spec.KLINE_MAX_CANDLES

    async def run() -> None:
        own_sim.faults.script([Fault.HTTP_502], paths=[spec.KLINE.path])
        async with _public(own_sim) as c:
            walk = c.candles("ETH_BTC", since=since, until=datetime(2030, 1, 1, tzinfo=UTC))
            candles = await collect(walk)
        assert [row[0] for row in candles] == days
        assert walk.stats.pages == 2
        assert walk.stats.retries == 1
        assert walk.stats.rows == len(days)
        assert walk.stats.notes == []

    asyncio.run(run())


def test_a_walk_refuses_an_answer_outside_its_window(own_sim: Simulator) -> None:
    """A candle repeated in an answer cannot be a day of its window once: the walk says where."""

    def repeat_first(params: dict[str, object], body: bytes) -> bytes:
        doc = orjson.loads(body)
        doc["result"].insert(1, doc["result"][0])
        return orjson.dumps(doc)

    own_sim.faults.tamper(spec.KLINE.path, repeat_first)

    async def run() -> None:
        async with _public(own_sim) as c:
            walk = c.candles(
                "BTC_USDT",
                since=datetime.fromtimestamp(TODAY - 9 * DAY, UTC),
                until=datetime.fromtimestamp(TODAY, UTC),
            )
            with raises(ContractError) as refused:
                await collect(walk)
        assert "result[1][0]" in str(refused.value)
        assert "BTC_USDT" in str(refused.value)

    asyncio.run(run())
