"""What the report shows of an account's trading, collateral P&L, flows and reconciliation, read
from the curated views, exact (``Decimal`` as stored), over the report's range: fills and P&L
by their UTC day, flows by theirs, the reconciliation's intervals by the day that closes them.
Each table is one query over one view (`QUERIES`, and `RECONCILIATION` for every account at
once), so that a reader can run it again and get the page's figures digit for digit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Final

import duckdb

from pipeline.spec import FLOW_KINDS

from ._exact import Table, exact_sum

#: A query over the catalog with the report's parameters (``$account``, ``$first``, ``$last``).
Run = Callable[[str], duckdb.DuckDBPyConnection]

_ACCOUNT_DAYS: Final = "account = $account AND {day} BETWEEN $first AND $last"

#: Each table of the sections, the query over its view that gives it.
QUERIES: Final = {
    "fees": f"""
        SELECT fee_asset, sum(fills) AS fills,
            coalesce(sum(fees) FILTER (WHERE role_label = 'maker'), 0) AS maker_fees,
            coalesce(sum(fees) FILTER (WHERE role_label = 'taker'), 0) AS taker_fees,
            sum(fees) AS fees
        FROM trading_fees WHERE {_ACCOUNT_DAYS.format(day="trade_date")}
        GROUP BY fee_asset ORDER BY fee_asset
    """,
    # A role the documentation does not list has no label: its code stands in.
    "roles": f"""
        SELECT coalesce(role_label, 'role ' || role) AS role, fee_asset, sum(fills) AS fills,
            sum(fees) AS fees
        FROM trading_fees WHERE {_ACCOUNT_DAYS.format(day="trade_date")}
        GROUP BY ALL ORDER BY role, fee_asset
    """,
    "volume": f"""
        SELECT market, base_ticker, quote_ticker, sum(fills) AS fills, sum(buys) AS buys,
            sum(sells) AS sells, sum(base_volume) AS base_volume,
            sum(quote_volume) AS quote_volume
        FROM traded_volume WHERE {_ACCOUNT_DAYS.format(day="trade_date")}
        GROUP BY ALL ORDER BY sum(fills) DESC, market
    """,
    "pnl": f"""
        SELECT market, ticker, sum(position_events) AS position_events,
            sum(realized_pnl) AS realized_pnl, sum(trade_fees) AS trade_fees,
            sum(funding_payments) AS funding_payments, sum(funding) AS funding, sum(net) AS net
        FROM realized_pnl WHERE {_ACCOUNT_DAYS.format(day="day")}
        GROUP BY ALL ORDER BY market
    """,
    "flows": f"""
        SELECT ticker, {", ".join(f"sum({kind}) AS {kind}" for kind in FLOW_KINDS)},
            sum(net) AS net
        FROM net_flows WHERE {_ACCOUNT_DAYS.format(day="flow_date")}
        GROUP BY ticker ORDER BY ticker
    """,
}

_ACCOUNTS_DAYS: Final = (
    "list_contains($accounts, account) AND closing_date BETWEEN $first AND $last"
)

#: The reconciliation's tables, each one query for every account of the page: the statement
#: under them is made whole whichever account a query names.
RECONCILIATION: Final = {
    "intervals": f"""
        SELECT account, opening_date, closing_date, assets_checked, assets_off, reconciled
        FROM reconciliation_intervals WHERE {_ACCOUNTS_DAYS}
        ORDER BY account, closing_date
    """,
    "residuals": f"""
        SELECT account, ticker, opening_date, closing_date, opening, flows, closing, residual
        FROM reconciliation WHERE {_ACCOUNTS_DAYS}
        ORDER BY account, closing_date, ticker
    """,
}


@dataclass(frozen=True, slots=True)
class Trading:
    #: Per fee asset: fills, maker and taker fees, all fees.
    fees: Table
    #: Per role (maker, taker) and fee asset: fills and fees.
    roles: Table
    #: Per market: fills, buys, sells, base and quote volume.
    volume: Table

    @property
    def fills(self) -> int:
        return sum(int(row[1]) for row in self.fees.rows)  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class Pnl:
    #: Per collateral market, in the settlement ticker: realized P&L, fees, funding, net.
    markets: Table

    @property
    def net(self) -> Decimal:
        return exact_sum(row[-1] for row in self.markets.rows)  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class Reconciliation:
    #: Every interval checked in the range, and the residuals that are not zero.
    intervals: Table
    residuals: Table

    @property
    def checked(self) -> int:
        return len(self.intervals.rows)


@dataclass(frozen=True, slots=True)
class Ledger:
    trading: Trading
    pnl: Pnl
    #: Per asset, each kind of flow and their net.
    flows: Table
    reconciliation: Reconciliation

    @property
    def empty(self) -> bool:
        return not (
            self.trading.fees.rows
            or self.pnl.markets.rows
            or self.flows.rows
            or self.reconciliation.intervals.rows
        )


def read_ledger(run: Run, reconciliation: Reconciliation) -> Ledger:
    """The four sections' tables, each from its query (the reconciliation's read before)."""
    table = {name: Table.of(run(sql)) for name, sql in QUERIES.items()}
    return Ledger(
        Trading(table["fees"], table["roles"], table["volume"]),
        Pnl(table["pnl"]),
        table["flows"],
        reconciliation,
    )


def _any_off(intervals: Table) -> bool:
    off = intervals.columns.index("assets_off")
    return any(row[off] for row in intervals.rows)


def read_reconciliations(
    con: duckdb.DuckDBPyConnection, accounts: Sequence[str], first: date, last: date
) -> dict[str, Reconciliation]:
    """Each account's reconciliation over ``first .. last``, both tables read once for all; the
    residuals only of the accounts whose intervals say they have some (each read makes the
    whole statement again: most of the page's time on a large warehouse)."""
    params = {"accounts": list(accounts), "first": first, "last": last}
    split: dict[str, dict[str, Table]] = {account: {} for account in accounts}
    for name, sql in RECONCILIATION.items():
        if name == "residuals":
            intervals = [split[account]["intervals"] for account in accounts]
            off = [a for a, t in zip(accounts, intervals, strict=True) if _any_off(t)]
            # No account off: the table's columns, with no statement made.
            result = con.execute(sql if off else f"{sql} LIMIT 0", params | {"accounts": off})
        else:
            result = con.execute(sql, params)
        columns = tuple(d[0] for d in result.description or ())[1:]
        rows = result.fetchall()
        for account in accounts:
            split[account][name] = Table(columns, [row[1:] for row in rows if row[0] == account])
    return {
        account: Reconciliation(tables["intervals"], tables["residuals"])
        for account, tables in split.items()
    }
