"""An account's section of the page: one function per part, in the page's order, each drawing
its charts and tables from the account's data, and each with the tables it reads, so that a part
whose table's latest run failed is marked partial, naming the run (`RunFacts.failed`).

A new part is a function here (or beside its data, as `_ledger_charts`' are) and a line in
`PARTS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from pipeline import spec
from warehouse import display

from . import _charts, _ledger_charts, _value_charts
from ._charts import Part
from ._data import ALL_TABLES, AccountData
from ._exact import Table


def funding(data: AccountData) -> list[Part]:
    funding = data.funding
    if not funding.payments:
        return []
    markets = funding.markets
    amounts = Table(markets.columns[:5], [row[:5] for row in markets.rows])
    rates = Table(
        (markets.columns[0], *markets.columns[5:]), [(row[0], *row[5:]) for row in markets.rows]
    )
    per = "day" if funding.days.columns[0] == "day" else "month"
    return [
        Part(f"Funding per market: cumulative net, per {funding.step}", "cumulative",
             _charts.cumulative(funding), amounts,
             "paid and received per market over the range; paid is the sum of the negative "
             "amounts"),
        Part("Funding per day: received, paid, net", "daily", _charts.daily(funding),
             funding.days, f"the table per {per}"),
        Part(f"Funding rate per market, mean per {funding.step}", "rates",
             _charts.rates(funding), rates, "lowest, highest and latest rate per market"),
    ]  # fmt: skip


def balances(data: AccountData) -> list[Part]:
    held = data.balances
    if not held.tickers:
        return []
    return [
        Part("Balances per ticker: main and trading", "balances", _charts.balances(held),
             held.latest, f"the table on the latest snapshot, {display.text(held.snapshot_date)}")
    ]  # fmt: skip


def investments(data: AccountData) -> list[Part]:
    invested = data.investments
    if not invested.principal.rows:
        return []
    return [
        Part("Investments: active against closed, per ticker", "investments",
             _charts.investments(invested), _joined(invested.principal, invested.interest),
             f"on the snapshot of {display.text(invested.snapshot_date)}; interest in its own "
             "ticker")
    ]  # fmt: skip


def _joined(principal: Table, interest: Table) -> Table:
    """Principal and interest per ticker and state in one table (interest by its own ticker)."""
    paid = {(row[0], row[1]): row[2] for row in interest.rows}
    keys = sorted({(row[0], row[1]) for row in principal.rows} | set(paid), key=str)
    counted = {(row[0], row[1]): row[2:] for row in principal.rows}
    return Table(
        ("ticker", "state", "investments", "principal", "interest_paid"),
        [(t, s, *(counted.get((t, s)) or (0, None)), paid.get((t, s))) for t, s in keys],
    )


@dataclass(frozen=True, slots=True)
class Drawn:
    """A function of the page's parts, and the tables its figures are read from."""

    parts: Callable[[AccountData], list[Part]]
    reads: Sequence[str]


#: The histories that move the holdings (their flows declared), which the flows are read from.
_FLOWING: Final = tuple(name for name, history in spec.HISTORIES.items() if history.flows)

#: The snapshots of the holdings, which the value is read from.
HELD: Final = ("main_balances", "trading_balances", "collateral_balances", "investments")

PARTS: Final = (
    Drawn(lambda d: _value_charts.value(d.worth), HELD),
    # Earnings and returns per month: the snapshots and every flow between them.
    Drawn(lambda d: _value_charts.earnings(d.worth), tuple(ALL_TABLES)),
    Drawn(funding, ("funding_history",)),
    Drawn(balances, ("main_balances", "trading_balances")),
    Drawn(investments, ("investments",)),
    Drawn(lambda d: _ledger_charts.trading(d.ledger), ("trades",)),
    Drawn(lambda d: _value_charts.fees(d.worth), ("trades",)),
    Drawn(lambda d: _ledger_charts.pnl(d.ledger), ("position_events", "funding_history")),
    Drawn(lambda d: _ledger_charts.flows(d.ledger), _FLOWING),
    # The statement: every snapshot of the holdings against every flow.
    Drawn(lambda d: _ledger_charts.reconciliation(d.ledger), tuple(ALL_TABLES)),
)
