"""The curated views of the trading history and of the account's flows, over a small warehouse
written from records as the API sends them: each figure the sum of the records it names, exact,
and the account statement's placing rules at the very edges of an interval."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, localcontext
from typing import Any

import pytest

from pipeline import spec
from tests.support.records import (
    DAY_START,
    SUBACCOUNT_ID,
    collateral_balance,
    conversion,
    fraction,
    funding_record,
    investment,
    movement,
    order,
    position_event,
    subaccount,
    trade,
    transfer,
)
from warehouse import Warehouse, catalog, normalize, partitions

MAIN, SUB = "main", "sub_1"
#: The two snapshots: noon of 2024-03-01 and of the day after, in whole seconds.
T1 = datetime.fromtimestamp(DAY_START + 12 * 3600, UTC)
T2 = T1 + timedelta(days=1)


def _sum(values: Sequence[Decimal | str]) -> Decimal:
    with localcontext() as exact:
        exact.prec = 80  # never rounds: amounts of 38 digits, summed
        return sum((Decimal(v) for v in values), Decimal(0))


def write(
    wh: Warehouse,
    history: spec.History,
    answer: object,
    *,
    account: str = MAIN,
    at: datetime = T2,
    observed: bool = True,
) -> None:
    """An answer as the warehouse writes it: a snapshot of ``at``'s day, observed at ``at``."""
    batch = normalize.normalize(
        history,
        answer,
        extracted_at=at,
        day=at.date(),
        observed_at=at if observed and not history.monthly else None,
    )
    assert batch.rejected == 0, batch.rejects.to_pylist()
    partitions.write_batch(wh, batch, account=account)


def query(wh: Warehouse, sql: str, *params: object) -> list[tuple[Any, ...]]:
    catalog.refresh(wh)
    with catalog.connect(wh) as con:
        return con.execute(sql, list(params) or None).fetchall()


# --- Trading ----------------------------------------------------------------------------------

FILLS = {
    "BTC_USDT": [
        trade(id=1, orderId=501, role=1, fee="0.000000000000000001"),
        trade(id=2, orderId=501, role=1, amount="0.25", deal="15000", fee="0.00025"),
        trade(id=3, orderId=502, side="sell", role=2, deal="30000.5", fee="30.0005",
              feeAsset="USDT"),
    ],
    "BTC_PERP": [trade(id=4, orderId=503, amount="2", deal="122000", fee="24.4", feeAsset="USDT")],
}  # fmt: skip


def _fills(wh: Warehouse) -> None:
    write(wh, spec.TRADES, FILLS)
    write(
        wh,
        spec.ORDERS,
        {
            "BTC_USDT": [
                # Its two fills, summed.
                order(id=501, dealStock="0.75", dealMoney="45000", dealFee="0.000250000000000001"),
                # One of its fills held, the order's sums a hair off it.
                order(id=502, side="sell", dealStock="0.5", dealMoney="30000.500000000000000001",
                      dealFee="30.0005", feeAsset="USDT"),
                # Placed before the first day of fills held: its fills may be elsewhere.
                order(id=504, ctime=Decimal(DAY_START - 86400), dealStock="9"),
                # Canceled before any fill: nothing to sum, nothing differs.
                order(id=505, status="CANCELED", dealStock="0", dealMoney="0", dealFee="0"),
            ],
        },
    )  # fmt: skip


def test_trading_fees_per_day_asset_market_and_role(wh: Warehouse) -> None:
    _fills(wh)
    rows = query(
        wh,
        "SELECT account, trade_date, fee_asset, market, role_label, fills, fees "
        "FROM trading_fees ORDER BY market, role",
    )
    day = date(2024, 3, 1)
    assert rows == [
        (MAIN, day, "USDT", "BTC_PERP", "taker", 1, Decimal("24.4")),
        (MAIN, day, "BTC", "BTC_USDT", "maker", 2, _sum(["0.000000000000000001", "0.00025"])),
        (MAIN, day, "USDT", "BTC_USDT", "taker", 1, Decimal("30.0005")),
    ]


def test_traded_volume_buys_and_sells_apart(wh: Warehouse) -> None:
    _fills(wh)
    rows = query(
        wh,
        "SELECT market, base_ticker, quote_ticker, fills, base_volume, quote_volume, buys, "
        "buy_base_volume, buy_quote_volume, sells, sell_base_volume, sell_quote_volume "
        "FROM traded_volume ORDER BY market",
    )
    assert rows == [
        ("BTC_PERP", "BTC", spec.SETTLEMENT_TICKER, 1, Decimal(2), Decimal(122000), 1,
         Decimal(2), Decimal(122000), 0, Decimal(0), Decimal(0)),
        ("BTC_USDT", "BTC", "USDT", 3, Decimal("1.25"), Decimal("75000.5"), 2,
         Decimal("0.75"), Decimal(45000), 1, Decimal("0.5"), Decimal("30000.5")),
    ]  # fmt: skip


def test_orders_beside_their_fills(wh: Warehouse) -> None:
    _fills(wh)
    rows = query(
        wh,
        "SELECT order_id, fills, fills_amount, fills_deal, fills_fee, fills_held, "
        "amount_matches, deal_matches, fee_matches, matches FROM orders_with_fills "
        "ORDER BY order_id",
    )
    zero = Decimal(0)
    assert rows == [
        (501, 2, Decimal("0.75"), Decimal(45000), Decimal("0.000250000000000001"),
         True, True, True, True, True),
        (502, 1, Decimal("0.5"), Decimal("30000.5"), Decimal("30.0005"),
         True, True, False, True, False),
        (504, 0, zero, zero, zero, False, False, False, False, False),
        (505, 0, zero, zero, zero, True, True, True, True, True),
    ]  # fmt: skip


def test_realized_pnl_per_market_and_day(wh: Warehouse) -> None:
    morning = fraction(T1 - timedelta(hours=4))
    write(
        wh,
        spec.POSITION_EVENTS,
        [
            position_event(modifyDate=morning, detail={"tradeFee": "1.000000000000000001"}),
            position_event(
                modifyDate=morning + 60,
                detail={"id": 602, "tradeFee": "2", "realizedPnl": "-12345.678901234567890123"},
            ),
        ],
    )
    write(
        wh,
        spec.FUNDING,
        [
            funding_record(fundingAmount="0.5"),
            funding_record(market="ETH_PERP", fundingAmount="-0.25"),
        ],
    )
    rows = query(
        wh,
        "SELECT market, day, ticker, position_events, realized_pnl, trade_fees, "
        "funding_payments, funding, net FROM realized_pnl ORDER BY market",
    )
    pnl = Decimal("-12345.678901234567890123")
    fees = _sum(["1.000000000000000001", "2"])
    day = date(2024, 3, 1)
    assert rows == [
        ("BTC_PERP", day, "USDT", 2, pnl, fees, 1, Decimal("0.5"), _sum([pnl, -fees, "0.5"])),
        ("ETH_PERP", day, "USDT", 0, 0, 0, 1, Decimal("-0.25"), Decimal("-0.25")),
    ]


# --- The statement at the edges of an interval ------------------------------------------------


def _at(moment: datetime, seconds: float = 0) -> datetime:
    return moment + timedelta(seconds=seconds)


def _stamp(moment: datetime) -> int:
    return int(moment.timestamp())


def _flows(wh: Warehouse) -> dict[str, dict[str, Decimal]]:
    """Records around T1 and T2, each at an edge of a rule; the flows each column of the
    statement must hold for (T1, T2], by ticker."""
    usdt_perp = "BTC_PERP"
    write(
        wh,
        spec.TRADES,
        {"BTC_USDT": [
            # Exactly at T1: the opening balances hold it already.
            trade(id=11, time=fraction(T1), amount="1", deal="100", fee="0.001"),
            # Exactly at T2: the closing balances hold it.
            trade(id=12, time=fraction(T2), side="sell", amount="0.5", deal="60", fee="0.06",
                  feeAsset="USDT"),
        ]},
    )  # fmt: skip
    write(
        wh,
        spec.FUNDING,
        [
            funding_record(market=usdt_perp, fundingTime=str(_stamp(T1)), fundingAmount="-1"),
            funding_record(market=usdt_perp, fundingTime=str(_stamp(T2)), fundingAmount="3.5"),
        ],
    )
    write(
        wh,
        spec.POSITION_EVENTS,
        [
            position_event(
                modifyDate=fraction(_at(T1, 0.000001)),
                detail={"tradeFee": "2", "realizedPnl": "10"},
            )
        ],
    )
    write(
        wh,
        spec.CONVERSIONS,
        [
            # Stamped T1: made within the second after T1, so in the interval.
            conversion(id="1", date=_stamp(T1), give="10", receive="0.0001"),
            # Stamped T2: made after T2.
            conversion(id="2", date=_stamp(T2), give="7", receive="0.00007"),
        ],
    )
    uuid = "00000000-0000-4000-8000-0000000000{:02d}".format
    made = {  # id: (created, method, amount, fee, status now)
        "A": (_at(T1, -3600), 1, "50", "1", 3),  # pending at T1, credited by T2
        "B": (_at(T1, -7200), 1, "5", "0", 3),  # credited before T1
        "C": (_at(T1, 60), 1, "8", "0", 15),  # pending at T2 still
        "D": (_at(T1, 120), 1, "20", "0", 7),  # made and credited in the interval
        "W1": (_at(T1, 300), 2, "30", "0.5", 3),  # sent
        "W2": (_at(T1, -100), 2, "12", "0.1", 4),  # made before T1, canceled by T2
        "W3": (_at(T1, 400), 2, "3", "0.25", 4),  # made and canceled in the interval
        "W4": (_at(T2, -1), 2, "1", "0", 1),  # made in the last second, pending at T2
    }
    records = {
        name: movement(transactionId=uuid(n), createdAt=_stamp(created), method=method,
                       amount=amount, fee=fee, status=status)
        for n, (name, (created, method, amount, fee, status)) in enumerate(made.items())
    }  # fmt: skip
    write(wh, spec.DEPOSITS_WITHDRAWALS, list(records.values()))
    pending_then = [dict(records["A"], status=15), dict(records["W2"], status=1)]
    write(wh, spec.PENDING_FLOWS, pending_then, at=T1)
    write(wh, spec.PENDING_FLOWS, [records["C"], records["W4"]], at=T2)
    write(wh, spec.SUBACCOUNTS, [subaccount()], at=T1)
    write(wh, spec.SUBACCOUNTS, [subaccount()], at=T2)
    write(
        wh,
        spec.SUBACCOUNT_TRANSFERS_HISTORY,
        {SUBACCOUNT_ID: [
            transfer(createdAt=_stamp(T1) + 500),
            transfer(transactionId=uuid(90), id=uuid(90), direction="sub_to_main",
                     currency="BTC", amount="0.01", createdAt=_stamp(T2)),
        ]},
    )  # fmt: skip
    write(wh, spec.INVESTMENTS, [investment(interestPaid="1.5")], at=T1)
    write(wh, spec.INVESTMENTS, [investment(interestPaid="2.000000000000000001")], at=T2)
    usdt = {
        "deposits": _sum(["49", "20"]),
        "withdrawals": _sum(["-30.5", "-3.25", "-1"]),
        "withdrawals_returned": _sum(["12.1", "3.25"]),
        "spot_trades": _sum(["60", "-0.06"]),
        "conversions": Decimal(-10),
        "funding": Decimal("3.5"),
        "realized_pnl": Decimal(10),
        "position_fees": Decimal(-2),
        "transfers_out": Decimal(-40),
        "interest": Decimal("0.500000000000000001"),
    }
    btc = {"spot_trades": Decimal("-0.5"), "conversions": Decimal("0.0001")}
    return {"USDT": usdt, "BTC": btc}


def _balances(wh: Warehouse, account: str, at: datetime, main: dict[str, Decimal]) -> None:
    write(wh, spec.MAIN_BALANCES, {t: {"main_balance": str(v)} for t, v in main.items()},
          account=account, at=at)  # fmt: skip
    if account == MAIN:
        trading = {"USDT": {"available": "500", "freeze": "0.000000000000000001"}}
        write(wh, spec.TRADING_BALANCES, trading, at=at)
        write(wh, spec.COLLATERAL_BALANCES, [collateral_balance()], at=at)


def test_the_statement_places_each_record_by_its_rule(wh: Warehouse) -> None:
    flows = _flows(wh)
    opening = {"USDT": Decimal(1000), "BTC": Decimal(1)}
    closing = {t: _sum([opening[t], *flows[t].values()]) for t in opening}
    _balances(wh, MAIN, T1, opening)
    _balances(wh, MAIN, T2, closing)
    _balances(wh, SUB, T1, {"USDT": Decimal(0), "BTC": Decimal("0.02")})
    _balances(wh, SUB, T2, {"USDT": Decimal(40), "BTC": Decimal("0.02")})
    columns = ("deposits", "withdrawals", "withdrawals_returned", "spot_trades", "conversions",
               "funding", "realized_pnl", "position_fees", "transfers_in", "transfers_out",
               "interest")  # fmt: skip
    rows = query(
        wh,
        f"SELECT account, ticker, opening_date, closing_date, opening_at, closing_at, "  # noqa: S608
        f"{', '.join(columns)}, opening, closing, residual FROM account_statement "
        "ORDER BY account, ticker",
    )
    held = {"USDT": _sum(["500.000000000000000001", "5000", "1000"])}  # trading, collateral, plan
    interval = (T1.date(), T2.date(), T1, T2)
    zero = Decimal(0)
    assert rows == [
        (MAIN, "BTC", *interval, *(flows["BTC"].get(c, zero) for c in columns),
         opening["BTC"], closing["BTC"], zero),
        (MAIN, "USDT", *interval, *(flows["USDT"].get(c, zero) for c in columns),
         _sum([opening["USDT"], held["USDT"]]), _sum([closing["USDT"], held["USDT"]]), zero),
        (SUB, "BTC", *interval, *(zero for _ in columns), Decimal("0.02"), Decimal("0.02"), zero),
        (SUB, "USDT", *interval, *(Decimal(40) if c == "transfers_in" else zero for c in columns),
         zero, Decimal(40), zero),
    ]  # fmt: skip
    assert query(wh, "SELECT count(*) FROM reconciliation") == [(0,)]


def test_a_snapshot_without_the_exchanges_time_is_placed_at_its_extraction(wh: Warehouse) -> None:
    write(wh, spec.MAIN_BALANCES, {"USDT": {"main_balance": "1"}}, at=T1, observed=False)
    write(wh, spec.MAIN_BALANCES, {"USDT": {"main_balance": "1"}}, at=T2)
    assert query(wh, "SELECT snapshot_at FROM holdings ORDER BY snapshot_date") == [(T1,), (T2,)]
    assert query(wh, "SELECT observed_at FROM main_balances ORDER BY snapshot_date") == [
        (None,), (T2,)
    ]  # fmt: skip


def test_net_flows_per_day_hold_each_kind_and_their_net(wh: Warehouse) -> None:
    flows = _flows(wh)
    rows = query(
        wh,
        "SELECT ticker, flow_date, deposits, withdrawals_returned, spot_trades, net "
        "FROM net_flows WHERE account = ? ORDER BY ticker, flow_date",
        MAIN,
    )
    by_day = {(ticker, day): rest for ticker, day, *rest in rows}
    # Deposits and returned withdrawals are on the day they were made, whenever they settled.
    assert by_day[("USDT", T1.date())][:2] == [_sum(["49", "5", "20"]), _sum(["12.1", "3.25"])]
    assert by_day[("BTC", T2.date())][2] == _sum(["-0.5"])
    (net,) = query(wh, "SELECT sum(net) FROM net_flows WHERE account = ?", MAIN)[0]
    (records,) = query(wh, "SELECT sum(amount) FROM flow_records WHERE account = ?", MAIN)[0]
    assert net == records
    assert flows["USDT"]["interest"] in {r[0] for r in query(
        wh, "SELECT interest FROM net_flows WHERE ticker = 'USDT' AND flow_date = ?", T2.date()
    )}  # fmt: skip


def test_a_flow_names_its_record_by_its_key_as_text(wh: Warehouse) -> None:
    """A time to the second as such, one to the microsecond with its fraction, in UTC."""
    _flows(wh)
    named = query(
        wh,
        "SELECT DISTINCT source, record_id FROM flow_records "
        "WHERE source IN ('trades', 'funding_history', 'position_events', 'investments') "
        "ORDER BY ALL",
    )
    assert named == [
        ("funding_history", f"BTC_PERP {T1:%Y-%m-%dT%H:%M:%S}Z long"),
        ("funding_history", f"BTC_PERP {T2:%Y-%m-%dT%H:%M:%S}Z long"),
        ("investments", f"{T2:%Y-%m-%d} USDT"),  # interest: its snapshot day and ticker
        ("position_events", f"7001 {T1:%Y-%m-%dT%H:%M:%S}.000001Z"),
        ("trades", "11"),
        ("trades", "12"),
    ]


def test_a_view_names_the_declarations_facts() -> None:
    assert catalog.with_facts("v", "SELECT {{SETTLEMENT_TICKER}}, {{ INVESTMENT_ACTIVE }}") == (
        f"SELECT '{spec.SETTLEMENT_TICKER}', 1"
    )
    # A part of many lines is indented as the line it stands on.
    assert (
        catalog.with_facts("v", "SELECT\n    {{FLOW_SUMS}}\n    1")
        == "SELECT\n"
        + "".join(
            f"    coalesce(sum(amount) FILTER (WHERE kind = '{kind}'), 0) AS {kind},\n"
            for kind in spec.FLOW_KINDS
        )
        + "    1"
    )
    with pytest.raises(ValueError, match="curated view v: no fact 'NOPE'"):
        catalog.with_facts("v", "SELECT {{NOPE}}")
    # The texts the views compare are the documented values.
    assert spec.TRADES.columns_by_name["side"].choices == ("buy", "sell")
    assert spec.TRANSFER_DIRECTIONS == ("main_to_sub", "sub_to_main")
