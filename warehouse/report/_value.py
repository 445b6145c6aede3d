"""What the page shows of value, earnings and returns, in the reference currency, read from the
valuing views: each account's value at each snapshot (`account_value`), its earnings by source
per month (`monthly_earnings`) and its trade fees valued at their day's close (`trading_fees`
and `asset_prices`). Each query is read once for every account of the page (`read_worth`), and
the team's figures are the page's accounts' summed here, exactly (`team`): the views across
accounts span every account of the warehouse, the page only its own.

The months are those the range touches, whole (a month is its closing snapshot's, as the view
says); the returns chained over them. A return is a double (Modified Dietz, as the view computes
it), shown as a percentage to `RETURN_PLACES` places.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Final

import duckdb

from ._exact import Rows, Table, exact_sum

#: Places of a percentage a return is shown to: the view's double holds about 15 significant
#: digits, far past what a month's return means.
RETURN_PLACES: Final = 4
#: Where the prices come from, said where there are none.
NO_PRICES: Final = (
    "no prices in the warehouse yet: run exchange/daily_candles (nightly after the accounts, "
    "and last in whitebit-etl demo)"
)

_ACCOUNTS: Final = "list_contains($accounts, account)"
_EARNINGS: Final = (
    "opening_value",
    "net_contributions",
    "funding",
    "interest",
    "realized_pnl",
    "fees",
    "market_effect",
    "closing_value",
)
#: The sources of a month's change in value, in the order they stack.
SOURCES: Final = _EARNINGS[1:-1]
#: A month's columns, as the page reads them (`QUERIES`' earnings, the account left out).
MONTHS: Final = ("month", *_EARNINGS, "unpriced_assets", "gain", "return_base", "monthly_return")

#: Each table, one query for every account of the page.
QUERIES: Final = {
    "value": f"""
        SELECT account, snapshot_date, value_date, value, assets_valued, unpriced_assets
        FROM account_value WHERE {_ACCOUNTS} AND snapshot_date BETWEEN $first AND $last
        ORDER BY account, snapshot_date
    """,
    "earnings": f"""
        SELECT account, {", ".join(MONTHS)}
        FROM monthly_earnings
        WHERE {_ACCOUNTS}
            AND month BETWEEN strftime($first::DATE, '%Y-%m') AND strftime($last::DATE, '%Y-%m')
        ORDER BY account, month
    """,
    # A day's fees of an asset at that day's close, cut as the views cut every product; a sum
    # with a day no price values is no value (null), its days counted.
    "fees": f"""
        WITH daily AS (
            SELECT account, trade_date, coalesce(role_label, 'role ' || role) AS role,
                fee_asset, sum(fees) AS fees
            FROM trading_fees WHERE {_ACCOUNTS} AND trade_date BETWEEN $first AND $last
            GROUP BY ALL
        )
        SELECT d.account, d.role, d.fee_asset, sum(d.fees) AS fees,
            CASE WHEN count(p.price) = count(*) THEN sum(
                CASE WHEN d.fees = 0 THEN 0 ELSE exact_product(d.fees, p.price) END
            ) END AS fee_value,
            count(*) - count(p.price) AS unpriced_days
        FROM daily AS d
        LEFT JOIN asset_prices AS p ON p.asset = d.fee_asset AND p.price_date = d.trade_date
        GROUP BY ALL ORDER BY d.account, d.role, d.fee_asset
    """,
}
PRICES: Final = "SELECT any_value(reference), min(price_date), max(price_date) FROM asset_prices"
#: The accounts with an interval between two snapshots, of which alone a month has earnings:
#: the earnings' query values every flow (as the statement places them), the others' do not.
INTERVALS: Final = (
    f"SELECT account FROM account_value WHERE {_ACCOUNTS} GROUP BY account HAVING count(*) > 1"
)


@dataclass(frozen=True, slots=True)
class Prices:
    """The reference currency and the days the warehouse holds prices of."""

    reference: str
    first: date
    last: date


@dataclass(frozen=True, slots=True)
class Worth:
    """An account's (or the team's) value, earnings and returns, in ``prices.reference``; None
    for prices where the warehouse holds none."""

    prices: Prices | None
    #: Per snapshot (the team's: per value date), its value and the assets left unvalued.
    value: Table
    #: Per month, as `monthly_earnings` has it: `MONTHS`.
    months: Table
    #: Per role and fee asset: the fees, their value, and the days no price values them.
    fees: Table

    @property
    def earnings(self) -> Table:
        """Per month: the opening value, each source, the closing value, the assets left
        unvalued."""
        return Table(MONTHS[:-3], [row[:-3] for row in self.months.rows])

    @property
    def returns(self) -> Table:
        """Per month: the gain, the month's return and the returns chained, in percent."""
        monthly: list[float | None] = [row[-1] for row in self.months.rows]  # type: ignore[misc]
        return Table(
            ("month", "gain", "monthly_return_pct", "chained_return_pct"),
            [
                (row[0], row[-3], percent(r), percent(chained))
                for row, r, chained in zip(
                    self.months.rows, monthly, _chained(monthly), strict=True
                )
            ],
        )

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Every asset held or moved in the range that no price values."""
        return tuple(_union([*(row[-1] for row in self.value.rows),
                             *(row[-4] for row in self.months.rows)]))  # fmt: skip


def read_worth(
    con: duckdb.DuckDBPyConnection, accounts: Sequence[str], first: date, last: date
) -> dict[str, Worth]:
    """Each account's worth over ``first .. last``, each view read once for all."""
    reference, lo, hi = con.execute(PRICES).fetchone() or (None, None, None)
    prices = Prices(reference, lo, hi) if reference is not None else None
    params = {"accounts": list(accounts), "first": first, "last": last}
    spans = [row[0] for row in con.execute(INTERVALS, {"accounts": list(accounts)}).fetchall()]
    split: dict[str, dict[str, Table]] = {account: {} for account in accounts}
    for name, sql in QUERIES.items():
        result = con.execute(sql, params | {"accounts": spans} if name == "earnings" else params)
        columns = tuple(d[0] for d in result.description or ())[1:]
        rows = result.fetchall()
        for account in accounts:
            split[account][name] = Table(columns, [row[1:] for row in rows if row[0] == account])
    return {
        account: Worth(prices, tables["value"], tables["earnings"], tables["fees"])
        for account, tables in split.items()
    }


def _chained(returns: Iterable[float | None]) -> list[float | None]:
    """(1 + r1)(1 + r2)... - 1 at each month, as the view chains them: a month without a return
    is left out of the product, and no product is none."""
    chained: list[float | None] = []
    product: float | None = None
    for r in returns:
        if r is not None:
            product = (1 if product is None else product) * (1 + r)
        chained.append(None if product is None else product - 1)
    return chained


def percent(ratio: float | None) -> Decimal | None:
    """A return in percent, to `RETURN_PLACES` places, rounded once from the double."""
    return None if ratio is None else Decimal(f"{ratio * 100:.{RETURN_PLACES}f}")


def team(worths: Sequence[Worth]) -> Worth:
    """The page's accounts as one: each value date's values summed (the accounts counted), each
    month's figures summed, exactly; the month's return the accounts' gains over their return
    bases (Modified Dietz of the whole, as `monthly_earnings_across_accounts` computes it)."""
    days: dict[date, list[tuple[object, ...]]] = {}
    months: dict[str, list[tuple[object, ...]]] = {}
    for worth in worths:
        for row in worth.value.rows:
            days.setdefault(row[1], []).append(row)  # type: ignore[arg-type]
        for row in worth.months.rows:
            months.setdefault(str(row[0]), []).append(row)
    value = Table(
        ("value_date", "accounts", "value", "unpriced_assets"),
        [(day, len(rows), exact_sum(r[2] for r in rows), _union(r[-1] for r in rows))  # type: ignore[misc]
         for day, rows in sorted(days.items())],
    )  # fmt: skip
    summed: Rows = []
    for month, rows in sorted(months.items()):
        figures = [exact_sum(r[i] for r in rows) for i in range(1, len(_EARNINGS) + 1)]  # type: ignore[misc]
        gain = exact_sum(r[-3] for r in rows)  # type: ignore[misc]
        base = sum(r[-2] for r in rows)  # type: ignore[misc]
        summed.append((month, *figures, _union(r[-4] for r in rows), gain, base,
                       float(gain) / base if base > 0 else None))  # fmt: skip
    prices = next((w.prices for w in worths), None)
    return Worth(prices, value, Table(MONTHS, summed), Table((), []))


def _union(lists: Iterable[object]) -> list[str]:
    return sorted({str(a) for named in lists for a in named})  # type: ignore[attr-defined]
