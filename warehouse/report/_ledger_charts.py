"""The trading, P&L, flows and reconciliation parts of an account's section: each chart (drawn
from floats) with the exact table it is drawn from, or a table alone (the reconciliation)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipeline.spec import FLOW_KINDS
from warehouse import display

from ._charts import HEIGHT, NET, PAID, RECEIVED
from ._data import TOP_TICKERS
from ._exact import Table
from ._ledger import Ledger

MAKER, TAKER = "#8e44ad", "#16a085"
BUYS, SELLS = RECEIVED, PAID
#: Markets drawn in the volume chart, the most fills first; the table lists them all.
TOP_VOLUME_MARKETS: Final = 20


@dataclass(frozen=True, slots=True)
class Part:
    title: str
    #: The chart's name in its element id; the figure, or None for a table alone.
    name: str
    figure: go.Figure | None
    table: Table
    note: str = ""
    height: int = HEIGHT


def _floats(values: Sequence[object]) -> list[float | None]:
    """Amounts for a log axis: a zero is left out of the chart (never of the table)."""
    return [float(v) or None if isinstance(v, Decimal | int) else None for v in values]


def parts(ledger: Ledger) -> list[Part]:
    """The parts the account's data fills, in the page's order."""
    out: list[Part] = []
    trading = ledger.trading
    if trading.fees.rows:
        out += [
            Part("Trading: fees per asset", "fees", _fees(trading.fees), trading.fees,
                 "maker and taker fees in each fee asset, every market"),
            Part("Trading: volume per market", "volume", _volume(trading.volume), trading.volume,
                 "fills, buys and sells; volumes in the base and the quote ticker"),
            Part("Trading: maker against taker", "roles", _roles(trading.roles), trading.roles,
                 "fills and fees per role and fee asset"),
        ]  # fmt: skip
    if ledger.pnl.markets.rows:
        out.append(
            Part("P&L per collateral market", "pnl", _pnl(ledger.pnl.markets), ledger.pnl.markets,
                 "realized P&L less trade fees plus funding, in the settlement ticker")
        )  # fmt: skip
    if ledger.flows.rows:
        figure, height = _flows(ledger.flows)
        out.append(
            Part("Flows per asset", "flows", figure, ledger.flows,
                 "what each kind of record moved, signed as it moved the holdings; deposits and "
                 "returned withdrawals on the day they were made", height)
        )  # fmt: skip
    out.append(_reconciliation(ledger))
    return out


def _fees(fees: Table) -> go.Figure:
    figure = go.Figure()
    assets = [str(row[0]) for row in fees.rows]
    for index, role, color in ((2, "maker", MAKER), (3, "taker", TAKER)):
        figure.add_bar(x=assets, y=_floats([row[index] for row in fees.rows]), name=role,
                       marker_color=color)  # fmt: skip
    # Fee assets differ by orders of magnitude (BTC against USDT): a log axis shows them all.
    figure.update_layout(title="Fees per asset: maker and taker", barmode="group",
                         yaxis_type="log")  # fmt: skip
    return figure


def _volume(volume: Table) -> go.Figure:
    shown = volume.rows[:TOP_VOLUME_MARKETS]
    markets = [str(row[0]) for row in shown]
    figure = go.Figure()
    for index, side, color in ((4, "buys", BUYS), (5, "sells", SELLS)):
        figure.add_bar(x=markets, y=[row[index] for row in shown], name=side, marker_color=color)
    more = len(volume.rows) - len(shown)
    figure.update_layout(
        title="Fills per market: buys and sells" + (f" (and {more} more markets)" if more else ""),
        barmode="stack",
    )
    return figure


def _roles(roles: Table) -> go.Figure:
    figure = make_subplots(rows=1, cols=2, subplot_titles=("fills per role", "fees per role"))
    names = sorted({str(row[0]) for row in roles.rows})
    for asset in sorted({str(row[1]) for row in roles.rows}):
        rows = {str(row[0]): row for row in roles.rows if row[1] == asset}
        fills = [rows[name][2] if name in rows else 0 for name in names]
        fees = _floats([rows[name][3] if name in rows else 0 for name in names])
        figure.add_bar(x=names, y=fills, name=asset, legendgroup=asset, row=1, col=1)
        figure.add_bar(x=names, y=fees, name=asset, legendgroup=asset, showlegend=False,
                       row=1, col=2)  # fmt: skip
    figure.update_layout(title="Maker against taker, per fee asset", barmode="stack")
    figure.update_yaxes(type="log", row=1, col=2)
    return figure


def _pnl(markets: Table) -> go.Figure:
    names = [str(row[0]) for row in markets.rows]
    figure = go.Figure()
    for index, label, sign, color in ((3, "realized P&L", 1, RECEIVED), (4, "trade fees", -1, PAID),
                                      (6, "funding", 1, "#2980b9")):  # fmt: skip
        figure.add_bar(x=names, y=[sign * float(row[index]) for row in markets.rows],  # type: ignore[arg-type]
                       name=label, marker_color=color)  # fmt: skip
    figure.add_scatter(x=names, y=[float(row[-1]) for row in markets.rows], name="net",  # type: ignore[arg-type]
                       mode="markers", marker={"size": 12, "color": NET})  # fmt: skip
    figure.update_layout(title="P&L per collateral market: realized, fees, funding, net",
                         barmode="relative")  # fmt: skip
    return figure


def _flows(flows: Table) -> tuple[go.Figure, int]:
    """One chart per asset (those with the most kinds of flow first), a bar per kind, the kinds
    on one axis per row: assets are in units of their own, so none shares an amount axis."""
    kinds = {kind: flows.columns.index(kind) for kind in FLOW_KINDS}
    busiest = sorted(flows.rows, key=lambda row: (-sum(row[i] != 0 for i in kinds.values()),
                                                  str(row[0])))[:TOP_TICKERS]  # fmt: skip
    columns = min(3, len(busiest))
    rows = -(-len(busiest) // columns)
    figure = make_subplots(rows=rows, cols=columns, shared_yaxes=True, horizontal_spacing=0.04,
                           subplot_titles=[str(r[0]) for r in busiest])  # fmt: skip
    for n, row in enumerate(busiest):
        amounts = [float(row[i]) for i in kinds.values()]  # type: ignore[arg-type]
        figure.add_bar(
            y=list(kinds),
            x=amounts,
            orientation="h",
            showlegend=False,
            marker_color=[RECEIVED if amount > 0 else PAID for amount in amounts],
            row=n // columns + 1,
            col=n % columns + 1,
        )
    figure.update_layout(title="Flows per asset over the range, by kind",
                         margin={"l": 130})  # fmt: skip
    return figure, 120 + 300 * rows


def _reconciliation(ledger: Ledger) -> Part:
    """The residuals when there are; else every interval checked, each reconciled."""
    checked = ledger.reconciliation
    if checked.residuals.rows:
        return Part("Reconciliation", "reconciliation", None, checked.residuals,
                    f"{len(checked.residuals.rows)} residual(s) in {checked.checked} interval(s) "
                    "checked: holdings moved by other than the flows the records tell "
                    "(residual = closing - opening - flows)")  # fmt: skip
    if not checked.intervals.rows:
        note = "no interval to check: fewer than two snapshots of the main balance in the range"
    else:
        first, last = checked.intervals.rows[0][0], checked.intervals.rows[-1][1]
        note = (
            f"every interval reconciles: {checked.checked} interval(s) between snapshots "
            f"from {display.text(first)} to {display.text(last)}, each asset's holdings moved "
            "by exactly the flows its records tell"
        )
    return Part("Reconciliation", "reconciliation", None, checked.intervals, note)
