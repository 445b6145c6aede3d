"""What the report shows, read from the catalog's views: exact figures (``Decimal``, as stored)
for its tables, and series for its charts (floats: a chart only draws them).

Every query is limited to one account (the reconciliation's and the value's to the page's
accounts, read once for all: `_ledger`, `_value`) and the report's range: a history by the UTC
day of its records (``funding_date``, ``trade_date``, ...), snapshots by ``snapshot_date`` (the
latest snapshot in the range stands for "now"), rejects by the day of their partition. The
trading, P&L, flows and reconciliation sections are read by `_ledger`, the value's by `_value`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Final

import duckdb
import pandas as pd

from warehouse import schemas

from ._exact import ZERO, Table
from ._ledger import Ledger, Reconciliation, read_ledger
from ._value import Worth

#: Markets drawn one by one in the funding charts, the largest net first; the others are summed
#: into one line, so that a page of hundreds of markets stays readable and small.
TOP_MARKETS: Final = 8
OTHER_MARKETS: Final = "other markets"
#: Tickers drawn one chart each in the balance history; the others are in its table.
TOP_TICKERS: Final = 12
#: A range longer than this draws funding per week, not per day.
DAILY_POINTS: Final = 400
#: A range longer than this lists funding per month in the table beside the per-day chart.
DAILY_ROWS: Final = 92
#: Every account's table the page counts, in the schema's order (the header's), with the day
#: column that places a row in the range: its partition's.
ALL_TABLES: Final = {table.name: table.partition_column for table in schemas.ACCOUNT_TABLES}


@dataclass(frozen=True, slots=True)
class Funding:
    payments: int
    #: Paid out (the negative amounts, as a positive sum), received, and their net.
    paid: Decimal
    received: Decimal
    net: Decimal
    markets: Table
    days: Table
    #: ``"day"`` or ``"week"``: the step of the charts' points.
    step: str
    cumulative: pd.DataFrame
    daily: pd.DataFrame
    rates: pd.DataFrame


@dataclass(frozen=True, slots=True)
class Balances:
    snapshot_date: date | None
    latest: Table
    history: pd.DataFrame
    tickers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Investments:
    snapshot_date: date | None
    active: int
    principal: Table
    interest: Table


@dataclass(frozen=True, slots=True)
class AccountData:
    account: str
    rows: dict[str, int]
    rejects: int
    funding: Funding
    balances: Balances
    investments: Investments
    ledger: Ledger
    #: Value, earnings and returns in the reference currency (`_value`).
    worth: Worth

    @property
    def empty(self) -> bool:
        return not any(self.rows.values()) and not self.rejects


class Reader:
    """Queries of one account over a range ``first .. last`` (inclusive)."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, account: str, first: date, last: date
    ) -> None:
        self._con, self._account, self._first, self._last = con, account, first, last

    def _run(self, sql: str, **params: object) -> duckdb.DuckDBPyConnection:
        given = {"account": self._account, "first": self._first, "last": self._last, **params}
        # DuckDB refuses a parameter the query does not use.
        return self._con.execute(sql, {k: v for k, v in given.items() if f"${k}" in sql})

    def read(self, reconciliation: Reconciliation, worth: Worth) -> AccountData:
        """The account's data, its reconciliation and worth read before for every account of
        the page (`read_reconciliations`, `read_worth`)."""
        return AccountData(
            self._account,
            self._rows(),
            self._rejects(),
            self._funding(),
            self._balances(),
            self._investments(),
            read_ledger(self._run, reconciliation),
            worth,
        )

    def _rows(self) -> dict[str, int]:
        return {table: self._count(table, day) for table, day in ALL_TABLES.items()}

    def _count(self, table: str, day: str) -> int:
        (count,) = self._run(
            f"SELECT count(*) FROM {table} "
            f"WHERE account = $account AND {day} BETWEEN $first AND $last"
        ).fetchone() or (0,)
        return int(count)

    def _rejects(self) -> int:
        (count,) = self._run(
            'SELECT count(*) FROM _rejects WHERE account = $account AND left("partition", 10) '
            "BETWEEN strftime($first::DATE, '%Y-%m-%d') AND strftime($last::DATE, '%Y-%m-%d')"
        ).fetchone() or (0,)
        return int(count)

    def _funding(self) -> Funding:
        span = (self._last - self._first).days + 1
        step = "day" if span <= DAILY_POINTS else "week"
        selected = (
            "SELECT * FROM funding_history "
            "WHERE account = $account AND funding_date BETWEEN $first AND $last"
        )
        totals = self._run(
            f"""
            SELECT count(*),
                coalesce(-sum(funding_amount) FILTER (WHERE funding_amount < 0), 0),
                coalesce(sum(funding_amount) FILTER (WHERE funding_amount > 0), 0),
                coalesce(sum(funding_amount), 0)
            FROM ({selected})
            """
        ).fetchone()
        payments, paid, received, net = totals or (0, ZERO, ZERO, ZERO)
        markets = Table.of(
            self._run(
                f"""
                SELECT market, count(*) AS payments,
                    coalesce(-sum(funding_amount) FILTER (WHERE funding_amount < 0), 0) AS paid,
                    coalesce(sum(funding_amount) FILTER (WHERE funding_amount > 0), 0)
                        AS received,
                    sum(funding_amount) AS net,
                    min(funding_rate) AS min_rate, max(funding_rate) AS max_rate,
                    arg_max(funding_rate, funding_time) AS latest_rate,
                    max(funding_time) AS latest_funding_time
                FROM ({selected})
                GROUP BY market
                ORDER BY abs(sum(funding_amount)) DESC, market
                """
            )
        )
        top = [row[0] for row in markets.rows[:TOP_MARKETS]]
        by_day = f"""
            SELECT funding_date AS day, count(*) AS payments,
                coalesce(-sum(funding_amount) FILTER (WHERE funding_amount < 0), 0) AS paid,
                coalesce(sum(funding_amount) FILTER (WHERE funding_amount > 0), 0) AS received,
                sum(funding_amount) AS net
            FROM ({selected}) GROUP BY funding_date ORDER BY funding_date
        """
        per_month = f"""
            SELECT strftime(funding_date, '%Y-%m') AS month, count(*) AS payments,
                coalesce(-sum(funding_amount) FILTER (WHERE funding_amount < 0), 0) AS paid,
                coalesce(sum(funding_amount) FILTER (WHERE funding_amount > 0), 0) AS received,
                sum(funding_amount) AS net
            FROM ({selected}) GROUP BY month ORDER BY month
        """
        days = Table.of(self._run(by_day if span <= DAILY_ROWS else per_month))
        daily = self._run(
            f"SELECT day, paid::DOUBLE AS paid, received::DOUBLE AS received, net::DOUBLE AS net "
            f"FROM ({by_day})"
        ).df()
        series = f"""
            SELECT date_trunc('{step}', funding_date)::DATE AS step,
                CASE WHEN list_contains($top, market) THEN market ELSE '{OTHER_MARKETS}' END
                    AS series,
                sum(funding_amount) AS amount,
                avg(funding_rate::DOUBLE) AS rate
            FROM ({selected}) GROUP BY ALL
        """
        cumulative = self._run(
            f"""
            SELECT series, step,
                (sum(amount) OVER (PARTITION BY series ORDER BY step))::DOUBLE AS cumulative
            FROM ({series}) ORDER BY series = '{OTHER_MARKETS}', series, step
            """,
            top=top,
        ).df()
        rates = self._run(
            f"SELECT series, step, rate FROM ({series}) "
            f"WHERE series <> '{OTHER_MARKETS}' ORDER BY series, step",
            top=top,
        ).df()
        return Funding(
            int(payments), paid, received, net, markets, days, step, cumulative, daily, rates
        )

    def _balances(self) -> Balances:
        joined = """
            SELECT coalesce(m.ticker, t.ticker) AS ticker,
                coalesce(m.snapshot_date, t.snapshot_date) AS snapshot_date,
                m.main_balance, t.available AS trading_available, t.frozen AS trading_frozen
            FROM (SELECT * FROM main_balances WHERE account = $account
                    AND snapshot_date BETWEEN $first AND $last) AS m
            FULL OUTER JOIN (SELECT * FROM trading_balances WHERE account = $account
                    AND snapshot_date BETWEEN $first AND $last) AS t
                ON m.ticker = t.ticker AND m.snapshot_date = t.snapshot_date
        """
        (latest_day,) = self._run(f"SELECT max(snapshot_date) FROM ({joined})").fetchone() or (
            None,
        )
        latest = Table.of(
            self._run(
                f"SELECT ticker, main_balance, trading_available, trading_frozen "
                f"FROM ({joined}) WHERE snapshot_date = $day ORDER BY ticker",
                day=latest_day,
            )
        )
        history = self._run(
            f"""
            SELECT ticker, snapshot_date, main_balance::DOUBLE AS main,
                (trading_available + coalesce(trading_frozen, 0))::DOUBLE
                    AS trading
            FROM ({joined}) ORDER BY ticker, snapshot_date
            """
        ).df()
        held = self._run(
            f"""
            SELECT ticker FROM ({joined}) GROUP BY ticker
            ORDER BY bool_or(coalesce(main_balance, 0) <> 0 OR coalesce(trading_available, 0) <> 0
                OR coalesce(trading_frozen, 0) <> 0) DESC, ticker
            LIMIT {TOP_TICKERS}
            """
        ).fetchall()
        return Balances(latest_day, latest, history, tuple(row[0] for row in held))

    def _investments(self) -> Investments:
        (day,) = self._run(
            "SELECT max(snapshot_date) FROM investments WHERE account = $account "
            "AND snapshot_date BETWEEN $first AND $last"
        ).fetchone() or (None,)
        latest = (
            "SELECT *, CASE WHEN status = 1 THEN 'active' ELSE 'closed' END AS state "
            "FROM investments WHERE account = $account AND snapshot_date = $day"
        )
        principal = Table.of(
            self._run(
                f"SELECT plan_ticker AS ticker, state, count(*) AS investments, "
                f"sum(amount) AS principal FROM ({latest}) GROUP BY ALL ORDER BY ticker, state",
                day=day,
            )
        )
        interest = Table.of(
            self._run(
                f"SELECT plan_interest_ticker AS interest_ticker, state, "
                f"sum(interest_paid) AS interest_paid FROM ({latest}) GROUP BY ALL "
                "ORDER BY interest_ticker, state",
                day=day,
            )
        )
        active = sum(int(row[2]) for row in principal.rows if row[1] == "active")  # type: ignore[call-overload]
        return Investments(day, active, principal, interest)
