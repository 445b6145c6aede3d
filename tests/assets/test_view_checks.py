"""The checks over the catalog's views: each fails on data made to break it, naming what broke,
and passes on the same data made right; the specs a table's asset declares are the results it
gets, and a failed reconciliation stops what depends on the balances."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pytest

from assets import checks, view_checks
from assets.resources import WarehouseResource
from pipeline import spec
from tests.support.records import DAY_START, movement, order, position_event, trade
from warehouse import Warehouse, catalog, normalize, partitions
from warehouse.monthly import MonthlyLoad, MonthlyTarget
from warehouse.schemas import EXCHANGE

ACCOUNT = "main"
KEY = dg.AssetKey([ACCOUNT, "table"])
T1 = datetime.fromtimestamp(DAY_START + 12 * 3600, UTC)
T2 = T1 + timedelta(days=1)
#: A moment of the morning of T1's day, to the microsecond, and one a few seconds on.
MORNING = Decimal(DAY_START + 8 * 3600) + Decimal("0.25")


def write(wh: Warehouse, history: spec.History, answer: object, *, at: datetime = T2) -> None:
    batch = normalize.normalize(
        history,
        answer,
        extracted_at=at,
        day=at.date(),
        observed_at=None if history.monthly else at,
    )
    assert batch.rejected == 0, batch.rejects.to_pylist()
    partitions.write_batch(wh, batch, account=ACCOUNT)
    catalog.refresh(wh)


@pytest.fixture
def wh(root: Path) -> Warehouse:
    return Warehouse.open(root)


def _fills_and_orders(wh: Warehouse, *, with_missing: bool) -> None:
    fills = [
        trade(id=1, orderId=501, time=MORNING),
        trade(id=2, orderId=502, time=MORNING + 10),  # its order closed before the newest close
        trade(id=3, orderId=503, time=MORNING + 100),  # filled after it: may still be open
    ]
    closed = [
        order(id=501, ctime=MORNING - 1, ftime=MORNING),
        order(id=504, ctime=MORNING + 20, ftime=MORNING + 50, dealStock="0", dealMoney="0",
              dealFee="0", status="CANCELED"),
    ]  # fmt: skip
    if not with_missing:
        closed.append(order(id=502, ctime=MORNING + 5, ftime=MORNING + 10))
    write(wh, spec.TRADES, {"BTC_USDT": fills})
    write(wh, spec.ORDERS, {"BTC_USDT": closed})


def test_fills_have_orders_names_a_missing_order_and_spares_one_still_open(wh: Warehouse) -> None:
    _fills_and_orders(wh, with_missing=True)
    result = view_checks.fills_have_orders(wh, ACCOUNT, key=KEY)
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    assert (result.description or "").startswith(
        f"1 fill(s) of {ACCOUNT} belong to 1 order(s) not in orders"
    )
    assert "order 502 (BTC_USDT, 1 fill(s)" in (result.description or "")
    assert "503" not in (result.description or "")
    assert result.metadata["orders_that_may_be_open"].value == 1
    _fills_and_orders(wh, with_missing=False)
    fixed = view_checks.fills_have_orders(wh, ACCOUNT, key=KEY)
    assert fixed.passed
    assert fixed.metadata["fills_of_orders_that_may_be_open"].value == 1


def test_orders_match_fills_names_the_sum_that_differs(wh: Warehouse) -> None:
    _fills_and_orders(wh, with_missing=False)
    assert view_checks.orders_match_fills(wh, ACCOUNT, key=KEY).passed
    off = order(id=502, ctime=MORNING + 5, ftime=MORNING + 10, dealMoney="30000.000000000000000001")
    write(wh, spec.ORDERS, {"BTC_USDT": [order(id=501, ctime=MORNING - 1, ftime=MORNING), off]})
    result = view_checks.orders_match_fills(wh, ACCOUNT, key=KEY)
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.ERROR
    assert (result.description or "").endswith(
        "order 502 (BTC_USDT, 1 fill(s)): deal_money 30000.000000000000000001 against 30000"
    )
    assert result.metadata["orders_checked"].value == 2


def test_orders_whose_fills_may_be_elsewhere_are_not_checked(wh: Warehouse) -> None:
    """An order placed before the first day of fills held: its sums are not compared."""
    write(wh, spec.TRADES, {"BTC_USDT": [trade(id=1, orderId=501, time=MORNING)]})
    early = order(id=500, ctime=MORNING - 86_400 * 2, ftime=MORNING - 60, dealStock="3")
    write(wh, spec.ORDERS, {"BTC_USDT": [early]})
    result = view_checks.orders_match_fills(wh, ACCOUNT, key=KEY)
    assert result.passed
    assert result.metadata["orders_not_checked"].value == 1


def test_unlisted_values_are_named_with_their_counts(wh: Warehouse) -> None:
    fills = [
        trade(id=n, side="hold" if n < 3 else "buy", role=9 if n == 3 else 1) for n in range(4)
    ]
    write(wh, spec.TRADES, {"BTC_USDT": fills})
    write(
        wh,
        spec.DEPOSITS_WITHDRAWALS,
        [movement(status=42), movement(transactionId="00000000-0000-4000-8000-000000000002")],
    )
    write(wh, spec.POSITION_EVENTS, [position_event(liquidationState="auto_deleverage")])
    found = {
        table: view_checks.unlisted_values(wh, table, ACCOUNT, key=KEY)
        for table in ("trades", "deposits_withdrawals", "position_events", "funding_history")
    }
    assert [r.passed for r in found.values()] == [False, False, False, True]
    assert all(r.severity == dg.AssetCheckSeverity.WARN for r in found.values())
    said = {table: r.description for table, r in found.items()}
    assert said["trades"] == (
        f"trades of {ACCOUNT} holds values its documentation does not list: "
        "side 'hold' (3); role '9' (1)"
    )
    assert said["deposits_withdrawals"] == (
        f"deposits_withdrawals of {ACCOUNT} holds values its documentation does not list: "
        "status 'method 1, status 42' (1)"
    )
    assert (said["position_events"] or "").endswith("liquidation_state 'auto_deleverage' (1)")
    # Only the partitions asked about: the day after holds none.
    later = view_checks.unlisted_values(wh, "trades", ACCOUNT, [date(2024, 3, 2)], key=KEY)
    assert later.passed


def _snapshot(wh: Warehouse, at: datetime, usdt: str) -> None:
    write(wh, spec.MAIN_BALANCES, {"USDT": {"main_balance": usdt}}, at=at)


def test_balances_reconcile_names_account_asset_days_and_amount(wh: Warehouse) -> None:
    credited = movement(createdAt=int(T1.timestamp()) + 60, amount="250", fee="1")
    write(wh, spec.DEPOSITS_WITHDRAWALS, [credited])
    _snapshot(wh, T1, "1000")
    _snapshot(wh, T2, "1249")
    passed = view_checks.balances_reconcile(wh, ACCOUNT, key=KEY)
    assert passed.passed
    assert passed.metadata["intervals_checked"].value == 1
    _snapshot(wh, T2, "1249.000000000000000001")
    result = view_checks.balances_reconcile(wh, ACCOUNT, key=KEY)
    assert not result.passed
    assert result.description == (
        f"1 holding(s) of {ACCOUNT} moved by other than the flows its records tell "
        "(residual = closing - opening - flows): USDT 2024-03-01 .. 2024-03-02: "
        "0.000000000000000001 (opening 1000, flows 249, closing 1249.000000000000000001; "
        "no record of this amount)"
    )
    # The deposit read again without it: the residual is its amount, and names it where the
    # warehouse still holds a record of that amount (the deposit, rejected).
    _snapshot(wh, T2, "1249")
    spoiled = dict(credited, amount="249", fee=0)  # a number for a string: rejected
    batch = normalize.normalize(
        spec.DEPOSITS_WITHDRAWALS, [spoiled], extracted_at=T2, day=T2.date()
    )
    assert batch.rejected == 1
    partitions.write_batch(wh, batch, account=ACCOUNT, replace=[T1.date()])
    catalog.refresh(wh)
    result = view_checks.balances_reconcile(wh, ACCOUNT, key=KEY)
    assert not result.passed
    assert result.description is not None
    assert result.description.endswith(
        f"USDT 2024-03-01 .. 2024-03-02: 249 (opening 1000, flows 0, closing 1249; records of "
        f"this amount: _rejects: deposits_withdrawals of {T1.date()} (a field of that value))"
    )
    # An interval closing on the day the check runs is not checked: that day's histories are
    # written the night after.
    assert view_checks.balances_reconcile(wh, ACCOUNT, T2.date(), key=KEY).passed


def test_holdings_valued_names_an_asset_held_with_no_price_on_its_day(wh: Warehouse) -> None:
    """BTC held at a snapshot, and moved by a withdrawal, with no candle of its day: named,
    with its days; USDT, the reference, needs none. With the candle of the day before the
    snapshot (its value_date) and the withdrawal's day, it passes."""
    at = int(T1.timestamp()) + 60
    write(wh, spec.DEPOSITS_WITHDRAWALS, [movement(createdAt=at, ticker="BTC", method=2)])
    write(wh, spec.MAIN_BALANCES, {"USDT": {"main_balance": "5"}, "BTC": {"main_balance": "1"}})
    write(wh, spec.MAIN_BALANCES, {"USDT": {"main_balance": "5"}, "BTC": {"main_balance": "2"}},
          at=T1)  # fmt: skip
    result = view_checks.holdings_valued(wh, ACCOUNT, key=KEY)
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    assert result.description == (
        f"1 asset(s) of {ACCOUNT} have no price on a day it held or moved them, and are in no "
        "value (exchange/daily_candles, asset_prices): BTC on 2 day(s), 2024-02-29 .. 2024-03-01"
    )
    load = MonthlyLoad(
        MonthlyTarget(wh, spec.DAILY_CANDLES, account=EXCHANGE, days=[T1.date() - timedelta(1),
                      T1.date()], extracted_at=T2)
    )  # fmt: skip
    load.take({"BTC_USDT": [_candle(day, "60000.5") for day in (T1.date() - timedelta(1),
                                                                 T1.date())]})  # fmt: skip
    load.finish()
    catalog.refresh(wh)
    assert view_checks.holdings_valued(wh, ACCOUNT, key=KEY).passed
    with catalog.connect(wh) as con:
        values = con.execute("SELECT value FROM account_value ORDER BY snapshot_date").fetchall()
    assert values == [(Decimal("120006"),), (Decimal("60005.5"),)]


def _candle(day: date, close: str) -> dict[str, object]:
    t = int(datetime.combine(day, datetime.min.time(), UTC).timestamp())
    return {"time": t, "open": close, "close": close, "high": close, "low": close,
            "volume_stock": "1", "volume_money": close}  # fmt: skip


def test_the_specs_a_table_declares_are_the_results_it_gets(wh: Warehouse) -> None:
    declared = {
        h.name: [(c.name, c.blocking) for c in view_checks.view_specs(KEY, h)]
        for h in spec.HISTORIES.values()
    }
    assert declared["trades"] == [("fills_have_orders", False), ("unlisted_values", False)]
    assert declared["orders"] == [("orders_match_fills", False), ("unlisted_values", False)]
    assert declared["main_balances"] == [("balances_reconcile", True), ("holdings_valued", False)]
    assert declared["funding_history"] == declared["trading_balances"] == []
    assert {
        name for name, checked in declared.items() if ("unlisted_values", False) in checked
    } == {h.name for h in spec.HISTORIES.values() if any(c.unlisted == "keep" for c in h.columns)}
    # The table assets yield only the checks of what they wrote; the views are the watch job's.
    for history in spec.HISTORIES.values():
        own = {c.name for c in checks.specs(KEY, history)}
        assert not own & {name for name, _ in declared[history.name]}
    catalog.refresh(wh)
    for history in (spec.TRADES, spec.ORDERS, spec.MAIN_BALANCES, spec.FUNDING):
        results = view_checks.for_views(wh, ACCOUNT, history, key=KEY)
        assert [r.check_name for r in results] == [name for name, _ in declared[history.name]]


def test_a_failed_reconciliation_stops_what_depends_on_the_balances(wh: Warehouse) -> None:
    _snapshot(wh, T1, "1000")
    _snapshot(wh, T2, "999")  # nothing the records tell took one
    key = dg.AssetKey([ACCOUNT, "main_balances"])

    @dg.asset(key=key, check_specs=view_checks.view_specs(key, spec.MAIN_BALANCES))
    def balances() -> dg.MaterializeResult:  # type: ignore[type-arg]
        return dg.MaterializeResult(
            check_results=view_checks.for_views(wh, ACCOUNT, spec.MAIN_BALANCES, key=key)
        )

    @dg.asset(deps=[key])
    def report() -> None:
        return None

    result = dg.materialize([balances, report], raise_on_error=False)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    evaluation = evaluations[view_checks.BALANCES_RECONCILE]
    assert not evaluation.passed
    assert evaluations[view_checks.HOLDINGS_VALUED].passed  # USDT, the reference, is 1
    assert "USDT 2024-03-01 .. 2024-03-02: -1" in (evaluation.description or "")
    materialized = {e.asset_key for e in result.get_asset_materialization_events()}
    assert dg.AssetKey("report") not in materialized


def test_the_watch_job_checks_each_account_view_and_names_a_residual(wh: Warehouse) -> None:
    """The checks over the views run in the daily watch job, through Dagster, once per account:
    a residual of an interval that closed before the day fails the blocking reconciliation."""
    _snapshot(wh, T1, "1000")
    _snapshot(wh, T2, "999")  # nothing the records tell took one
    keys = {name: dg.AssetKey([ACCOUNT, name]) for name in spec.HISTORIES}
    views = view_checks.views_check(ACCOUNT, keys, spec.WALL_CLOCK)
    assert views is not None
    assert {(k.asset_key.path[-1], k.name) for k in views.check_keys} == {
        (name, c.name) for name, key in keys.items()
        for c in view_checks.view_specs(key, spec.HISTORIES[name])
    }  # fmt: skip
    job = dg.define_asset_job("watch", selection=dg.AssetSelection.checks(views))
    defs = dg.Definitions(
        assets=[dg.AssetSpec(key) for key in keys.values()],
        asset_checks=[views],
        jobs=[job],
        resources={"warehouse": WarehouseResource(root=str(wh.location))},
    )
    result = defs.resolve_job_def("watch").execute_in_process(raise_on_error=False)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {k.name for k in views.check_keys}
    reconciled = evaluations[view_checks.BALANCES_RECONCILE]
    assert not reconciled.passed
    assert "USDT 2024-03-01 .. 2024-03-02: -1" in (reconciled.description or "")
    assert all(e.passed for name, e in evaluations.items() if name != reconciled.check_name)
