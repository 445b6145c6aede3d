"""The exchange's prices into the warehouse, against the simulator over loopback HTTP: the
candles of more than 1,440 days land row for row, the view prices an asset through BTC by the
exact product of two closes and the reference at 1, a product past 18 places is cut where the
view says, a refused kline fails in one line naming its market, and one Dagster run of the
prices asset names the held asset no market prices."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg

from assets.loading import load_monthly
from assets.prices import PRICES_KEY, UNPRICED, price_paths, prices_asset
from pipeline import spec
from pipeline.simulator import Simulator
from pipeline.whitebit import AsyncWhiteBIT, ValidationError
from tests.support.client import FAST_RETRIES, raises
from tests.support.dagster_runs import ACCOUNT, resources_for, snapshots
from tests.support.simulated import FROZEN_AT
from warehouse import Warehouse, catalog, sources
from warehouse.monthly import MonthlyLoad, MonthlyTarget
from warehouse.schemas import EXCHANGE

DAY = 86_400
TODAY = datetime.fromtimestamp(FROZEN_AT, UTC).date()
SOURCE = sources.Source.address("http://127.0.0.1")


def _public(sim: Simulator) -> AsyncWhiteBIT:
    return AsyncWhiteBIT(base_url=sim.url, pacing=False, retry=FAST_RETRIES)


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def _load(sim: Simulator, wh: Warehouse, markets: list[str], first: date) -> Any:
    target = MonthlyTarget(
        wh,
        spec.DAILY_CANDLES,
        account=EXCHANGE,
        days=_days(first, TODAY),
        extracted_at=datetime.fromtimestamp(FROZEN_AT, UTC),
    )

    async def run() -> Any:
        async with _public(sim) as client:
            return await load_monthly(
                client, target, source=SOURCE, environ={}, values={"price_markets": markets}
            )

    return asyncio.run(run())


def test_candles_land_row_for_row_and_the_view_prices_through_btc_exactly(
    sim: Simulator, tmp_path: Path
) -> None:
    """From 2019-01-01 to the clock's day (some 2,800 days: two windows a market): BTC_USDT,
    ETH_BTC and LINK_BTC land as the simulator answers them, to the last digit; with no
    ETH_USDT held, ETH's price is ETH_BTC's close times BTC_USDT's, exactly."""
    wh = Warehouse.open(tmp_path / "wh")
    markets = ["BTC_USDT", "ETH_BTC", "LINK_BTC"]
    first = date(2019, 1, 1)
    load = _load(sim, wh, markets, first)
    days = (TODAY - first).days + 1
    assert days > spec.KLINE_MAX_CANDLES
    assert load.stats.pages == 2 * len(markets)
    assert load.written.rows == days * len(markets)
    catalog.refresh(wh)
    with catalog.connect(wh) as con:
        rows = con.execute(
            "SELECT account, market, epoch(candle_time)::BIGINT, open, close, high, low, "
            "volume_stock, volume_money, candle_date FROM daily_candles ORDER BY ALL"
        ).fetchall()
        prices = {
            (asset, day): (price, path, exact)
            for asset, day, price, path, exact in con.execute(
                "SELECT asset, price_date, price, path, price_exact FROM asset_prices"
            ).fetchall()
        }
    expected = sorted(
        (EXCHANGE, m, t, *map(Decimal, c[1:]), datetime.fromtimestamp(t, UTC).date())
        for m in markets
        for t in range(int(datetime(2019, 1, 1, tzinfo=UTC).timestamp()), FROZEN_AT + 1, DAY)
        for c in [sim.state.prices.candle(m, t // DAY, FROZEN_AT)]
    )
    assert rows == expected
    closes = {(m, d): close for _, m, _, _, close, *_, d in rows}
    for day in (first, TODAY - timedelta(days=400), TODAY):
        eth = closes["ETH_BTC", day] * closes["BTC_USDT", day]
        assert prices["ETH", day] == (eth, "ETH_BTC*BTC_USDT", True)
        assert prices["BTC", day] == (closes["BTC_USDT", day], "BTC_USDT", True)
        assert prices["USDT", day] == (Decimal(1), "USDT", True)
    assert len(prices) == 4 * days  # BTC, ETH, LINK and USDT, every day


def test_a_product_past_18_places_is_cut_where_the_view_says(tmp_path: Path) -> None:
    """Closes whose product has 36 places: the view keeps 18, cut toward zero, and says the cut
    dropped digits; one of 18 places or fewer is exact. Past 20 integer digits: an error."""
    wh = Warehouse.open(tmp_path / "wh")
    day = date(2026, 3, 2)
    t = int(datetime(2026, 3, 2, tzinfo=UTC).timestamp())

    def candle(close: str) -> dict[str, Any]:
        return {"time": t, "open": close, "close": close, "high": close, "low": close,
                "volume_stock": "1", "volume_money": close}  # fmt: skip

    load = MonthlyLoad(
        MonthlyTarget(
            wh, spec.DAILY_CANDLES, account=EXCHANGE, days=[day], extracted_at=datetime.now(UTC)
        )
    )
    load.take({
        "AAA_BTC": [candle("0.123456789012345678")],
        "BBB_BTC": [candle("12")],
        "BTC_USDT": [candle("98765.999999999999999999")],
    })  # fmt: skip
    load.finish()
    catalog.refresh(wh)
    with catalog.connect(wh) as con:
        got = {
            a: (p, e)
            for a, p, e in con.execute(
                "SELECT asset, price, price_exact FROM asset_prices WHERE asset IN ('AAA', 'BBB')"
            ).fetchall()
        }
    product = Decimal("0.123456789012345678") * Decimal("98765.999999999999999999")
    assert product.as_tuple().exponent < -18
    cut = product.quantize(Decimal(10) ** -18, rounding="ROUND_DOWN")
    assert got["AAA"] == (cut, False)
    assert got["BBB"] == (Decimal(12) * Decimal("98765.999999999999999999"), True)


def test_a_refused_kline_fails_in_one_line_naming_the_market(
    sim: Simulator, tmp_path: Path
) -> None:
    wh = Warehouse.open(tmp_path / "wh")
    with raises(ValidationError) as refused:
        _load(sim, wh, ["BTC_USDT", "XLM_USDT"], TODAY - timedelta(days=3))
    said = str(refused.value)
    assert "\n" not in said
    assert "market='XLM_USDT'" in said
    assert "Market is not available." in said


def test_the_markets_chosen_and_the_asset_no_market_prices(sim: Simulator) -> None:
    async def run() -> list[dict[str, Any]]:
        async with _public(sim) as client:
            return await client.markets()

    markets = asyncio.run(run())
    paths, unpriced = price_paths(markets, ["USDT", "BTC", "ETH", "XLM"], "USDT")
    assert paths == {"BTC": ("BTC_USDT",), "ETH": ("ETH_USDT",)}
    assert unpriced == ["XLM"]
    without = [m for m in markets if m["name"] != "ETH_USDT"]
    assert price_paths(without, ["ETH"], "USDT")[0] == {"ETH": ("ETH_BTC", "BTC_USDT")}


def test_the_prices_asset_prices_what_is_held_and_names_what_no_market_prices(
    sim: Simulator, tmp_path: Path
) -> None:
    """One run: the account's balances, then the prices of what they hold (the balances' day),
    and the warning naming XLM, which the account holds at zero and no market prices."""
    root = tmp_path / "wh"
    clock = spec.SimClock(FROZEN_AT)
    together = [a for a in snapshots() if dg.AssetKey([ACCOUNT.name, "main_balances"]) in a.keys]
    prices = prices_asset(ACCOUNT, {}, clock, [k for a in together for k in a.keys])
    result = dg.materialize(
        [*together, prices],
        resources=resources_for(sim, root),
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    assert result.success
    checks = {
        c.check_name: c for c in result.get_asset_check_evaluations() if c.asset_key == PRICES_KEY
    }
    unpriced = checks[UNPRICED]
    assert not unpriced.passed
    assert unpriced.severity == dg.AssetCheckSeverity.WARN
    assert "XLM" in (unpriced.description or "")
    assert all(c.passed for name, c in checks.items() if name != UNPRICED)
    wh = Warehouse.open(root)
    with catalog.connect(wh) as con:
        priced = {a for (a,) in con.execute("SELECT DISTINCT asset FROM asset_prices").fetchall()}
        held = {a for (a,) in con.execute("SELECT DISTINCT ticker FROM holdings").fetchall()}
    assert "XLM" in held
    assert "XLM" not in priced
    assert held - {"XLM"} <= priced
