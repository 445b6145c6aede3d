"""The report page is exact where the warehouse is: amounts of 20 integer and 18 decimal digits
in funding, balances, fills, positions and flows, valued at closes of 18 decimal places, and
every table of the page equal, cell for cell and digit for digit, to its view's rows summed here
in Python (80 digits, never rounded); the headline equal to SQL over the catalog. No table of
the page is left unchecked."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_DOWN, Decimal, localcontext
from typing import Any

import duckdb
import pytest

from pipeline import spec
from tests.support.records import (
    D1,
    D2,
    EXTRACTED_AT,
    fraction,
    funding_record,
    investment,
    movement,
    order,
    position_event,
    trade,
)
from tests.warehouse.test_report import Page, sql_headline
from warehouse import Warehouse, catalog, normalize, partitions, report
from warehouse.display import text
from warehouse.monthly import MonthlyLoad, MonthlyTarget
from warehouse.schemas import EXCHANGE

BIG, SMALL = "big", "small"
#: 20 integer and 18 decimal digits; any sum the page shows stays below 10^20.
A = "12345678901234567890.123456789012345678"
B = "98765432109876543210.987654321098765432"
PNL = "43210987654321098765.432109876543210987"
DEAL = "22222222222222222222.222222222222222222"
HELD_BTC = "11111111111111111111.111111111111111111"
DEPOSIT = "33333333333333333333.333333333333333333"
OPENING_USDT = "45678901234567890123.456789012345678901"
OPENING_BTC = "10000000000000000000.000000000000000001"
TINY = "0.000000000000000001"
#: The two snapshots of the big account: D1 at 06:00 and D2 at noon.
T1 = datetime.combine(D1, time(6), UTC)
T2 = datetime.combine(D2, time(12), UTC)
#: BTC's close on the day before each snapshot (the day that values it) and on D2: 18 places,
#: so that a value is a product cut at 18. No market prices ETH, which the small account holds.
BTC_CLOSES = {D1 - timedelta(days=1): "2.000000000000000001", D1: "1.5", D2: "1.999999999999999999"}


def exact(values: Iterable[Decimal | str | int]) -> Decimal:
    with localcontext() as context:
        context.prec = 80  # never rounds: 38 digits at most, summed
        return sum((Decimal(v) for v in values), Decimal(0))


def _at(day: date, hour: int) -> datetime:
    return datetime.combine(day, time(hour), UTC)


def _write(
    wh: Warehouse, account: str, history: spec.History, answer: object, at: datetime
) -> None:
    batch = normalize.normalize(
        history,
        answer,
        extracted_at=max(at, EXTRACTED_AT),
        day=at.date(),
        observed_at=None if history.monthly else at,
    )
    assert batch.rejected == 0, batch.rejects.to_pylist()
    partitions.write_batch(wh, batch, account=account)


def fill(wh: Warehouse) -> None:
    """Big: funding of both signs, a position event, a fill, a deposit, investments and two
    snapshots whose USDT reconciles and whose BTC is off by 10^-18. Small: one payment and one
    snapshot (so that the page has its summary across accounts)."""
    seconds = int(_at(D1, 8).timestamp())
    funding = [
        funding_record(
            fundingTime=str(seconds), fundingAmount=A, fundingRate="0.000123456789012345"
        ),
        funding_record(fundingTime=str(seconds + 8 * 3600), fundingAmount="-" + B),
        funding_record(market="ETH_PERP", fundingTime=str(seconds + 86_400), fundingAmount=TINY),
    ]
    event = position_event(
        modifyDate=fraction(_at(D1, 10)), detail={"tradeFee": TINY, "realizedPnl": PNL}
    )
    fill_ = trade(time=fraction(_at(D1, 12)), amount=HELD_BTC, price="2", deal=DEAL, fee=TINY)
    order_ = order(ctime=fraction(_at(D1, 11)), ftime=fraction(_at(D1, 12)), dealStock=HELD_BTC,
                   dealMoney=DEAL, dealFee=TINY)  # fmt: skip
    deposit = movement(createdAt=int(_at(D1, 7).timestamp()), amount=DEPOSIT, fee=TINY)
    flows = {
        "USDT": [A, "-" + B, TINY, PNL, "-" + TINY, "-" + DEAL, DEPOSIT, "-" + TINY, TINY],
        "BTC": [HELD_BTC, "-" + TINY],
    }
    opening = {"USDT": OPENING_USDT, "BTC": OPENING_BTC}
    # USDT closes at what its flows say; BTC a hair above.
    closing = {"USDT": exact([opening["USDT"], *flows["USDT"]]),
               "BTC": exact([opening["BTC"], *flows["BTC"], TINY])}  # fmt: skip
    for history, answer, at in (
        (spec.FUNDING, funding, T2),
        (spec.POSITION_EVENTS, [event], T2),
        (spec.TRADES, {"BTC_USDT": [fill_]}, T2),
        (spec.ORDERS, {"BTC_USDT": [order_]}, T2),
        (spec.DEPOSITS_WITHDRAWALS, [deposit], T2),
    ):
        _write(wh, BIG, history, answer, at)
    for at, main, paid in ((T1, opening, TINY), (T2, closing, "0.000000000000000002")):
        _write(
            wh, BIG, spec.MAIN_BALANCES, {t: {"main_balance": str(v)} for t, v in main.items()}, at
        )
        _write(wh, BIG, spec.TRADING_BALANCES, {"USDT": {"available": "0.5", "freeze": TINY}}, at)
        invested = [investment(interestPaid=paid)]
        _write(wh, BIG, spec.INVESTMENTS, invested, at)
        _write(wh, BIG, spec.FIXED_PLANS, invested, at)
    _write(wh, SMALL, spec.FUNDING, [funding_record(fundingAmount="-" + TINY)], T2)
    held = {"USDT": {"main_balance": A}, "ETH": {"main_balance": "1"}}
    _write(wh, SMALL, spec.MAIN_BALANCES, held, T2)
    days = sorted(BTC_CLOSES)
    candles = MonthlyLoad(
        MonthlyTarget(
            wh, spec.DAILY_CANDLES, account=EXCHANGE, days=days, extracted_at=EXTRACTED_AT
        )
    )
    candles.take({"BTC_USDT": [
        {"time": int(_at(day, 0).timestamp()), "open": close, "close": close, "high": close,
         "low": close, "volume_stock": "1", "volume_money": close}
        for day, close in BTC_CLOSES.items()
    ]})  # fmt: skip
    candles.finish()
    catalog.refresh(wh)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, report.Report, Page]:
    root = tmp_path_factory.mktemp("exact") / "warehouse"
    wh = Warehouse.open(root)
    fill(wh)
    written = report.write(wh, out=root.parent / "report.html")
    return wh, written, Page(written.html)


# --- The tables, from the views' rows ----------------------------------------------------------

Rows = list[dict[str, Any]]
Expected = list[tuple[str, ...]]


def _rows(con: duckdb.DuckDBPyConnection, view: str, account: str | None = None) -> Rows:
    found = con.execute(
        f'SELECT * FROM "{view}"' + (" WHERE account = ?" if account else ""),  # noqa: S608
        [account] if account else None,
    )
    names = [d[0] for d in found.description or ()]
    return [dict(zip(names, row, strict=True)) for row in found.fetchall()]


def _grouped(rows: Rows, *by: str) -> dict[tuple[Any, ...], Rows]:
    groups: dict[tuple[Any, ...], Rows] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in by)].append(row)
    return groups


def _texts(rows: Iterable[Iterable[object]]) -> Expected:
    return sorted(tuple(text(v) for v in row) for row in rows)


def _funding(rows: Rows, by: str) -> Expected:
    out = []
    for (key,), group in _grouped(rows, by).items():
        amounts = [r["funding_amount"] for r in group]
        # Negated exactly: a minus sign rounds to the context's 28 digits.
        paid = exact(a.copy_negate() for a in amounts if a < 0)
        out.append((key, len(group), paid, exact(a for a in amounts if a > 0), exact(amounts)))
    return _texts(out)


def _rates(rows: Rows) -> Expected:
    out = []
    for (market,), group in _grouped(rows, "market").items():
        latest = max(group, key=lambda r: r["funding_time"])
        rates = [r["funding_rate"] for r in group]
        out.append((market, min(rates), max(rates), latest["funding_rate"], latest["funding_time"]))
    return _texts(out)


def _latest_balances(con: duckdb.DuckDBPyConnection, account: str) -> dict[str, list[Any]]:
    """Per ticker, main, trading available and frozen on the account's latest snapshot."""
    main = _rows(con, "main_balances", account)
    trading = _rows(con, "trading_balances", account)
    day = max(r["snapshot_date"] for r in main + trading)
    held: dict[str, list[Any]] = defaultdict(lambda: [None, None, None])
    for r in main:
        if r["snapshot_date"] == day:
            held[r["ticker"]][0] = r["main_balance"]
    for r in trading:
        if r["snapshot_date"] == day:
            held[r["ticker"]][1:] = [r["available"], r["frozen"]]
    return held


def _investments(rows: Rows) -> Expected:
    day = max(r["snapshot_date"] for r in rows)
    latest = [r for r in rows if r["snapshot_date"] == day]
    state = {1: "active", 2: "closed"}
    principal = _grouped(
        [dict(r, state=state[r["status"]]) for r in latest], "plan_ticker", "state"
    )
    interest = _grouped(
        [dict(r, state=state[r["status"]]) for r in latest], "plan_interest_ticker", "state"
    )
    out = []
    for key in {*principal, *interest}:
        invested = principal.get(key, [])
        amount = exact(r["amount"] for r in invested) if invested else None
        paid = exact(r["interest_paid"] for r in interest[key]) if key in interest else None
        out.append((*key, len(invested), amount, paid))
    return _texts(out)


def _summed(
    rows: Rows, by: tuple[str, ...], counted: tuple[str, ...], summed: tuple[str, ...]
) -> Expected:
    """Per group of ``by``: the counts summed as integers, the amounts exactly."""
    return _texts(
        (
            *key,
            *(sum(r[c] for r in group) for c in counted),
            *(exact(r[a] for r in group) for a in summed),
        )
        for key, group in _grouped(rows, *by).items()
    )


def _fees(rows: Rows) -> Expected:
    out = []
    for (asset,), group in _grouped(rows, "fee_asset").items():
        by_role = {
            role: exact(r["fees"] for r in group if r["role_label"] == role)
            for role in ("maker", "taker")
        }
        fees = exact(r["fees"] for r in group)
        out.append((asset, sum(r["fills"] for r in group), *by_role.values(), fees))
    return _texts(out)


KINDS = ("deposits", "withdrawals", "withdrawals_returned", "spot_trades", "conversions",
         "funding", "realized_pnl", "position_fees", "transfers_in", "transfers_out", "interest",
         "net")  # fmt: skip
FUNDING_MARKETS = ("market", "payments", "paid", "received", "net")
FUNDING_DAYS = ("day", "payments", "paid", "received", "net")
RATES = ("market", "min_rate", "max_rate", "latest_rate", "latest_funding_time")
BALANCES = ("ticker", "main_balance", "trading_available", "trading_frozen")
INVESTMENTS = ("ticker", "state", "investments", "principal", "interest_paid")
FEES = ("fee_asset", "fills", "maker_fees", "taker_fees", "fees")
ROLES = ("role", "fee_asset", "fills", "fees")
VOLUME = ("market", "base_ticker", "quote_ticker", "fills", "buys", "sells", "base_volume",
          "quote_volume")  # fmt: skip
PNL_COLUMNS = ("market", "ticker", "position_events", "realized_pnl", "trade_fees",
               "funding_payments", "funding", "net")  # fmt: skip
RESIDUALS = ("ticker", "opening_date", "closing_date", "opening", "flows", "closing", "residual")
INTERVALS = ("opening_date", "closing_date", "assets_checked", "assets_off", "reconciled")


def _expected_tables(
    con: duckdb.DuckDBPyConnection, account: str
) -> dict[tuple[str, ...], Expected]:
    """Each table an account's section shows, by its header, as its view's rows give it."""
    funding = _rows(con, "funding_history", account)
    held = _latest_balances(con, account)
    out = {
        FUNDING_MARKETS: _funding(funding, "market"),
        FUNDING_DAYS: _funding(funding, "funding_date"),
        RATES: _rates(funding),
        BALANCES: _texts((ticker, *values) for ticker, values in held.items()),
    }
    if investments := _rows(con, "investments", account):
        out[INVESTMENTS] = _investments(investments)
    if fees := _rows(con, "trading_fees", account):
        out[FEES] = _fees(fees)
        roles = [dict(r, role=r["role_label"]) for r in fees]
        out[ROLES] = _summed(roles, ("role", "fee_asset"), ("fills",), ("fees",))
        volume = _rows(con, "traded_volume", account)
        out[VOLUME] = _summed(
            volume, VOLUME[:3], ("fills", "buys", "sells"), ("base_volume", "quote_volume")
        )
    if pnl := _rows(con, "realized_pnl", account):
        out[PNL_COLUMNS] = _texts(
            (*key, *(_total(c, [r[c] for r in group]) for c in PNL_COLUMNS[2:]))
            for key, group in _grouped(pnl, "market", "ticker").items()
        )
    if flows := _rows(con, "net_flows", account):
        out[("ticker", *KINDS)] = _summed(flows, ("ticker",), (), KINDS)
    out.update(_worth(con, account))
    if residuals := _rows(con, "reconciliation", account):
        out[RESIDUALS] = _texts(tuple(r[c] for c in RESIDUALS) for r in residuals)
    else:
        intervals = _rows(con, "reconciliation_intervals", account)
        out[INTERVALS] = _texts(tuple(r[c] for c in INTERVALS) for r in intervals)
    return out


VALUE = ("snapshot_date", "value_date", "value", "assets_valued", "unpriced_assets")
EARNINGS = ("month", "opening_value", "net_contributions", "funding", "interest", "realized_pnl",
            "fees", "market_effect", "closing_value", "unpriced_assets")  # fmt: skip
RETURNS = ("month", "gain", "monthly_return_pct", "chained_return_pct")
FEE_VALUE = ("role", "fee_asset", "fees", "fee_value", "unpriced_days")


def _percent(ratio: float | None) -> str:
    return "" if ratio is None else text(Decimal(f"{ratio * 100:.4f}"))


def _returns(rows: Rows) -> Expected:
    return _texts(
        (r["month"], r["gain"], _percent(r["monthly_return"]), _percent(r["chained_return"]))
        for r in rows
    )


def _worth(con: duckdb.DuckDBPyConnection, account: str) -> dict[tuple[str, ...], Expected]:
    """The value, earnings, returns and valued fees of the account: the views' rows, and each
    day's fees of an asset times that day's close, cut toward zero at 18 places, here."""
    out = {VALUE: _texts(tuple(r[c] for c in VALUE) for r in _rows(con, "account_value", account))}
    if months := _rows(con, "monthly_earnings", account):
        out[EARNINGS] = _texts(tuple(r[c] for c in EARNINGS) for r in months)
        out[RETURNS] = _returns(months)
    prices = {(r["asset"], r["price_date"]): r["price"] for r in _rows(con, "asset_prices")}
    if fees := _rows(con, "trading_fees", account):
        valued = []
        for (role, asset), group in _grouped(fees, "role_label", "fee_asset").items():
            days = _grouped(group, "trade_date")
            values = []
            for (day,), paid in days.items():
                amount = exact(r["fees"] for r in paid)
                with localcontext() as context:
                    context.prec = 80
                    values.append((amount * prices[asset, day]).quantize(TINY_, ROUND_DOWN))
            valued.append((role, asset, exact(r["fees"] for r in group), exact(values), 0))
        out[FEE_VALUE] = _texts(valued)
    return out


TINY_ = Decimal(TINY)


def _total(column: str, values: list[Any]) -> int | Decimal:
    """A count summed as an integer, an amount exactly."""
    return sum(values) if column in ("position_events", "funding_payments") else exact(values)


def _shown(page: Page, section: str) -> dict[tuple[str, ...], Expected]:
    """Each table of the section, by its header: its rows as the page shows them."""
    return {
        tuple(table[0]): sorted(tuple(row) for row in table[1:]) for table in page.sections[section]
    }


def test_the_data_is_as_wide_as_decimal_38_18(page: tuple[Warehouse, report.Report, Page]) -> None:
    """Not a page of small numbers that happen to agree: 20 integer digits in every kind."""
    wh, _, _ = page
    with catalog.connect(wh) as con:
        widths = con.execute(
            "SELECT (SELECT max(abs(funding_amount)) FROM funding_history), "
            "(SELECT max(main_balance) FROM main_balances), (SELECT max(deal) FROM trades), "
            "(SELECT max(abs(amount)) FROM flow_records), "
            "(SELECT max(realized_pnl) FROM position_events)"
        ).fetchone()
    assert widths is not None
    assert all(len(text(abs(v)).split(".")[0]) == 20 for v in widths), widths


@pytest.mark.parametrize("account", [BIG, SMALL])
def test_every_table_of_an_account_is_its_views_digit_for_digit(
    page: tuple[Warehouse, report.Report, Page], account: str
) -> None:
    wh, _, shown = page
    with catalog.connect(wh) as con:
        expected = _expected_tables(con, account)
    assert _shown(shown, f"account-{account}") == expected


def test_the_summary_tables_are_the_accounts_figures(
    page: tuple[Warehouse, report.Report, Page],
) -> None:
    wh, _, shown = page
    with catalog.connect(wh) as con:
        headlines = {account: sql_headline(con, [account]) for account in (BIG, SMALL)}
        held = {account: _latest_balances(con, account) for account in (BIG, SMALL)}
    per_account = ("account", "rows", "funding_payments", "paid", "received", "net",
                   "rejected_records", "active_investments", "fills", "collateral_net",
                   "intervals_checked", "residuals")  # fmt: skip
    named = {"account": "accounts", "paid": "funding_paid", "received": "funding_received",
             "net": "funding_net"}  # fmt: skip
    across: dict[str, list[list[Any]]] = defaultdict(list)
    for balances in held.values():
        for ticker, values in balances.items():
            across[ticker].append(values)
    with catalog.connect(wh) as con:
        team = _rows(con, "value_across_accounts")
        months = _rows(con, "monthly_earnings_across_accounts")
    assert _shown(shown, "summary") == {
        ("value_date", "accounts", "value", "unpriced_assets"): _texts(
            (r["value_date"], r["accounts"], r["value"], r["unpriced_assets"]) for r in team
        ),
        EARNINGS: _texts(tuple(r[c] for c in EARNINGS) for r in months),
        RETURNS: _returns(months),
        per_account: sorted(
            tuple(headline[named.get(column, column)] for column in per_account)
            for headline in headlines.values()
        ),
        ("ticker", "main_balance", "trading_available", "trading_frozen", "accounts"): _texts(
            (ticker, *(exact(v[i] or 0 for v in values) for i in range(3)), len(values))
            for ticker, values in across.items()
        ),
    }


def test_the_headline_is_sql_over_the_views(page: tuple[Warehouse, report.Report, Page]) -> None:
    wh, written, shown = page
    with catalog.connect(wh) as con:
        expected = sql_headline(con, [BIG, SMALL])
    assert {name: value for name, _, value in written.headline.items()} == expected
    assert shown.headline == expected
    assert expected["funding_paid"] == text(exact([B, TINY]))
    assert expected["residuals"] == "1"  # BTC, off by 10^-18
