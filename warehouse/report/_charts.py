"""The report's charts, drawn with plotly: interactive, and rendered offline by the one copy of
plotly.js the page inlines (the wheel ships it; nothing is fetched when the page is viewed)."""

from __future__ import annotations

import base64
import functools
import gzip
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Final

import plotly.graph_objects as go
import plotly.io as pio
import plotly.offline
from plotly.subplots import make_subplots

from warehouse import display

from ._data import OTHER_MARKETS, Balances, Funding, Investments

HEIGHT: Final = 380
CONFIG: Final = {"displaylogo": False, "responsive": True}
PAID, RECEIVED, NET = "#c0392b", "#27ae60", "#2c3e50"
MAIN, TRADING = "#2980b9", "#e67e22"


def html(figure: go.Figure, div_id: str, *, height: int = HEIGHT) -> str:
    """The chart's ``<div>`` and its figure as JSON, which the page's one script draws once
    plotly.js is loaded (`script`)."""
    figure.update_layout(
        template="none",  # the default template adds ~8 kB of styling to every chart
        height=height,
        # A chart that names its bars on the left (the kinds of flow) keeps its wider margin.
        margin={"l": figure.layout.margin.l or 70, "r": 20, "t": 40, "b": 40},
        legend={"orientation": "h", "y": -0.15},
        font={"family": "system-ui, sans-serif", "size": 12},
    )
    # JSON has "<" only inside strings, where \u003c means the same: no text of the exchange's
    # (a market's name) can end the <script> element or open a comment in it.
    data = pio.to_json(figure, validate=False).replace("<", "\\u003c")
    return (
        f'<div id="{div_id}" class="chart" style="height:{height}px"></div>'
        f'<script type="application/json" data-chart="{div_id}">{data}</script>'
    )


@functools.cache
def plotly_gzip_base64() -> str:
    """plotly.js from the plotly wheel, gzipped and in base64: 1.8 MB on the page instead of 4.8.
    The browser inflates it with its own ``DecompressionStream``."""
    source = plotly.offline.get_plotlyjs().encode()
    return base64.b64encode(gzip.compress(source, compresslevel=9, mtime=0)).decode("ascii")


#: Inflates plotly.js, runs it, then draws every chart; marks the page when done (or failed).
SCRIPT: Final = """
(async () => {
  const packed = document.getElementById("plotly-js").textContent;
  const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
  const inflated = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const plotly = document.createElement("script");
  plotly.textContent = await new Response(inflated).text();
  document.head.appendChild(plotly);
  for (const figure of document.querySelectorAll("script[data-chart]")) {
    const { data, layout } = JSON.parse(figure.textContent);
    await Plotly.newPlot(figure.dataset.chart, data, layout, CONFIG);
  }
  document.body.dataset.charts = "drawn";
})().catch((error) => {
  document.body.dataset.charts = "failed";
  console.error("the charts could not be drawn:", error);
});
""".replace("CONFIG", json.dumps(CONFIG))


def cumulative(funding: Funding) -> go.Figure:
    figure = go.Figure()
    for series, points in funding.cumulative.groupby("series", sort=False):
        figure.add_scatter(
            x=points["step"],
            y=points["cumulative"],
            name=str(series),
            mode="lines",
            line={"dash": "dot"} if series == OTHER_MARKETS else None,
        )
    figure.update_layout(title=f"Cumulative funding per market (net, per {funding.step})")
    return figure


def daily(funding: Funding) -> go.Figure:
    days = funding.daily
    figure = go.Figure()
    figure.add_bar(x=days["day"], y=days["received"], name="received", marker_color=RECEIVED)
    figure.add_bar(x=days["day"], y=-days["paid"], name="paid", marker_color=PAID)
    figure.add_scatter(x=days["day"], y=days["net"], name="net", mode="lines", line_color=NET)
    figure.update_layout(title="Funding per day: received, paid, net", barmode="relative")
    return figure


def rates(funding: Funding) -> go.Figure:
    figure = go.Figure()
    for series, points in funding.rates.groupby("series", sort=False):
        figure.add_scatter(x=points["step"], y=points["rate"], name=str(series), mode="lines")
    figure.update_layout(
        title=f"Funding rate per market (mean per {funding.step})", yaxis_tickformat=".4%"
    )
    return figure


def balances(held: Balances) -> go.Figure:
    """One chart per ticker of the history, main and trading; one snapshot day is drawn as bars
    (a line of one point says nothing), on a log scale: amounts differ by orders of magnitude."""
    history = held.history[held.history["ticker"].isin(held.tickers)]
    if history["snapshot_date"].nunique() <= 1:
        return balances_across(
            list(history["ticker"]), list(history["main"].fillna(0)),
            list(history["trading"].fillna(0)),
            title=f"Balances per ticker on {display.text(held.snapshot_date)}: main and trading",
        )  # fmt: skip
    tickers = held.tickers
    columns = min(3, len(tickers))
    figure = make_subplots(rows=-(-len(tickers) // columns), cols=columns,
                           subplot_titles=tickers)  # fmt: skip
    for index, ticker in enumerate(tickers):
        points = history[history["ticker"] == ticker]
        row, col = divmod(index, columns)
        for side, color in (("main", MAIN), ("trading", TRADING)):
            figure.add_scatter(
                x=points["snapshot_date"],
                y=points[side],
                name=side,
                legendgroup=side,
                showlegend=index == 0,
                mode="lines+markers",
                line_color=color,
                row=row + 1,
                col=col + 1,
            )
    figure.update_layout(title="Balances per ticker: main and trading, per snapshot day")
    return figure


def balances_height(held: Balances) -> int:
    if held.history["snapshot_date"].nunique() <= 1:
        return HEIGHT
    return 120 + 220 * -(-len(held.tickers) // min(3, len(held.tickers)))


def investments(invested: Investments) -> go.Figure:
    figure = make_subplots(
        rows=1, cols=2, subplot_titles=("principal per ticker", "interest paid per ticker")
    )
    for col, table, amount in ((1, invested.principal, 3), (2, invested.interest, 2)):
        for state, color in (("active", "#27ae60"), ("closed", "#95a5a6")):
            rows = [row for row in table.rows if row[1] == state]
            figure.add_bar(
                x=[row[0] for row in rows],
                y=[float(row[amount]) for row in rows],  # type: ignore[arg-type]
                name=state,
                legendgroup=state,
                showlegend=col == 1,
                marker_color=color,
                row=1,
                col=col,
            )
    figure.update_layout(title="Investments: active against closed", barmode="group")
    return figure


def across(accounts: Sequence[str], nets: Sequence[Decimal], paid: Sequence[Decimal],
           received: Sequence[Decimal]) -> go.Figure:  # fmt: skip
    figure = go.Figure()
    figure.add_bar(x=list(accounts), y=[float(v) for v in received], name="received",
                   marker_color=RECEIVED)  # fmt: skip
    figure.add_bar(x=list(accounts), y=[-float(v) for v in paid], name="paid",
                   marker_color=PAID)  # fmt: skip
    figure.add_scatter(x=list(accounts), y=[float(v) for v in nets], name="net",
                       mode="markers", marker={"size": 12, "color": NET})  # fmt: skip
    figure.update_layout(title="Funding per account: received, paid, net", barmode="relative")
    return figure


def balances_across(
    tickers: Sequence[str],
    main: Sequence[Decimal | float],
    trading: Sequence[Decimal | float],
    *,
    title: str = "Balances across accounts (each on its latest snapshot): main and trading",
) -> go.Figure:
    figure = go.Figure()
    for side, values, color in (("main", main, MAIN), ("trading", trading, TRADING)):
        # A log axis cannot draw a zero: a zero balance is left out of the chart (not the table).
        figure.add_bar(x=list(tickers), y=[float(v) or None for v in values], name=side,
                       marker_color=color)  # fmt: skip
    figure.update_layout(title=title, barmode="group", yaxis_type="log")
    return figure
