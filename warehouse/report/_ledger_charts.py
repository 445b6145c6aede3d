"""The trading, P&L, flows and reconciliation parts of an account's section (`_sections`): each
chart (drawn from floats) with the exact table it is drawn from, or a table alone (the
reconciliation)."""

from __future__ import annotations

from typing import Final

import plotly.graph_objects as go

from pipeline.spec import FLOW_KINDS
from warehouse import display

from ._charts import NET, PAID, RECEIVED, Part, grid
from ._data import TOP_TICKERS
from ._exact import Table
from ._ledger import Ledger

MAKER, TAKER = "#8e44ad", "#16a085"
BUYS, SELLS = RECEIVED, PAID
#: Markets drawn in the volume chart, the most fills first; the table lists them all.
TOP_VOLUME_MARKETS: Final = 20


def trading(ledger: Ledger) -> list[Part]:
    fees, volume, roles = ledger.trading.fees, ledger.trading.volume, ledger.trading.roles
    if not fees.rows:
        return []
    more = len(volume.rows) - TOP_VOLUME_MARKETS
    return [
        Part("Trading: fees per asset, maker and taker", "fees", _fees(fees), fees,
             "a plot per fee asset (each in its own unit), every market"),
        Part("Trading: fills per market, buys and sells", "volume", _volume(volume), volume,
             "volumes in the base and the quote ticker"
             + (f"; the chart draws the {TOP_VOLUME_MARKETS} markets of the most fills, the "
                f"table all {len(volume.rows)}" if more > 0 else "")),
        Part("Trading: maker against taker", "roles", _roles(roles), roles,
             "fills per role, by fee asset; the fees per role and fee asset in the table"),
    ]  # fmt: skip


def pnl(ledger: Ledger) -> list[Part]:
    markets = ledger.pnl.markets
    if not markets.rows:
        return []
    note = "realized P&L less trade fees plus funding, in the settlement ticker"
    return [Part("P&L per collateral market", "pnl", _pnl(markets), markets, note)]


def flows(ledger: Ledger) -> list[Part]:
    if not ledger.flows.rows:
        return []
    return [
        Part(
            "Flows per asset, by kind",
            "flows",
            _flows(ledger.flows),
            ledger.flows,
            "what each kind of record moved over the range, signed as it moved the holdings; "
            "deposits and returned withdrawals on the day they were made",
        )
    ]


def _fees(fees: Table) -> go.Figure:
    """A plot per fee asset, maker and taker fees (each asset in its own unit: none is summed
    with or drawn against another), the assets of the most fills first."""
    shown = sorted(fees.rows, key=lambda row: (-int(row[1]), str(row[0])))[:TOP_TICKERS]  # type: ignore[call-overload]
    figure = grid([f"fees in {row[0]}" for row in shown], min(4, len(shown)), 200)
    for n, row in enumerate(shown):
        for index, role, color in ((2, "maker", MAKER), (3, "taker", TAKER)):
            figure.add_bar(x=[role], y=[float(row[index])], name=role, legendgroup=role,  # type: ignore[arg-type]
                           showlegend=n == 0, marker_color=color,
                           row=n // 4 + 1, col=n % 4 + 1)  # fmt: skip
    return figure


def _volume(volume: Table) -> go.Figure:
    shown = volume.rows[:TOP_VOLUME_MARKETS]
    markets = [str(row[0]) for row in shown]
    figure = go.Figure()
    for index, side, color in ((4, "buys", BUYS), (5, "sells", SELLS)):
        figure.add_bar(x=markets, y=[row[index] for row in shown], name=side, marker_color=color)
    figure.update_layout(barmode="stack", yaxis_title="fills")
    return figure


def _roles(roles: Table) -> go.Figure:
    """Fills per role, stacked by fee asset: fills are counted, so they add up across assets
    (their fees do not: those are the fees chart's, a plot per asset)."""
    figure = go.Figure()
    names = sorted({str(row[0]) for row in roles.rows})
    for asset in sorted({str(row[1]) for row in roles.rows}):
        rows = {str(row[0]): row for row in roles.rows if row[1] == asset}
        figure.add_bar(x=names, y=[rows[name][2] if name in rows else 0 for name in names],
                       name=f"fee in {asset}")  # fmt: skip
    figure.update_layout(barmode="stack", yaxis_title="fills", legend_title_text="fills whose")
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
    figure.update_layout(barmode="relative")
    return figure


def _flows(flows: Table) -> go.Figure:
    """One chart per asset (those with the most kinds of flow first), a bar per kind, the kinds
    on one axis per row: assets are in units of their own, so none shares an amount axis."""
    kinds = {kind: flows.columns.index(kind) for kind in FLOW_KINDS}
    busiest = sorted(flows.rows, key=lambda row: (-sum(row[i] != 0 for i in kinds.values()),
                                                  str(row[0])))[:TOP_TICKERS]  # fmt: skip
    columns = min(3, len(busiest))
    figure = grid([str(r[0]) for r in busiest], columns, 25 * len(kinds), shared_yaxes=True,
                  horizontal_spacing=0.04)  # fmt: skip
    for n, row in enumerate(busiest):
        amounts = [float(row[i]) for i in kinds.values()]  # type: ignore[arg-type]
        ins, outs = [a if a > 0 else None for a in amounts], [a if a < 0 else None for a in amounts]
        for name, color, moved in (("in", RECEIVED, ins), ("out", PAID, outs)):
            figure.add_bar(y=list(kinds), x=moved, orientation="h", name=name, legendgroup=name,
                           showlegend=n == 0, marker_color=color,
                           row=n // columns + 1, col=n % columns + 1)  # fmt: skip
    figure.update_layout(barmode="overlay")
    return figure


def reconciliation(ledger: Ledger) -> list[Part]:
    """The residuals when there are; else every interval checked, each reconciled."""
    checked = ledger.reconciliation
    if checked.residuals.rows:
        return [Part("Reconciliation", "reconciliation", None, checked.residuals,
                     f"{len(checked.residuals.rows)} residual(s) in {checked.checked} "
                     "interval(s) checked: holdings moved by other than the flows the records "
                     "tell (residual = closing - opening - flows)")]  # fmt: skip
    if not checked.intervals.rows:
        note = "no interval to check: fewer than two snapshots of the main balance in the range"
    else:
        first, last = checked.intervals.rows[0][0], checked.intervals.rows[-1][1]
        note = (
            f"every interval reconciles: {checked.checked} interval(s) between snapshots "
            f"from {display.text(first)} to {display.text(last)}, each asset's holdings moved "
            "by exactly the flows its records tell"
        )
    return [Part("Reconciliation", "reconciliation", None, checked.intervals, note)]
