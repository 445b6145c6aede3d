"""The report's charts, drawn with plotly: interactive, and rendered offline by the one copy of
plotly.js the page inlines (the wheel ships it; nothing is fetched when the page is viewed)."""

from __future__ import annotations

import base64
import functools
import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import plotly.graph_objects as go
import plotly.io as pio
import plotly.offline
from plotly.subplots import make_subplots

from ._data import OTHER_MARKETS, Balances, Funding, Investments
from ._exact import Table

HEIGHT: Final = 380
#: Pixels above a plot for the toolbar, and for a subplot's title under it; between two rows of
#: plots, for the upper one's tick labels and the lower one's title.
#: Below the plots, for the tick labels of the last row.
TOP, SUBTITLE, GAP, BOTTOM = 30, 24, 90, 60
CONFIG: Final = {"displaylogo": False, "responsive": True}
PAID, RECEIVED, NET = "#c0392b", "#27ae60", "#2c3e50"
MAIN, TRADING = "#2980b9", "#e67e22"


@dataclass(frozen=True, slots=True)
class Part:
    """A heading, its chart and the exact table the chart is drawn from (or the table alone)."""

    title: str
    #: The chart's name in its element id; the figure, or None for a table alone.
    name: str
    figure: go.Figure | None
    table: Table
    note: str = ""


def html(figure: go.Figure, div_id: str) -> str:
    """The chart's ``<div>`` and its figure as JSON, which the page's one script draws once
    plotly.js is loaded (`script`), as tall as the figure says (`HEIGHT` unless a `grid`'s).

    The page's heading names the chart, so the figure has no title of its own; the plot toolbar
    (shown on hover, top right) sits in a top margin of its own, above any subplot's title. Every
    axis grows the margins to its tick labels (``automargin``: the template "none" leaves it off,
    and a rotated date was cut), and the legend stands at the right, where it pushes the margin
    too, away from the tick labels below the plot."""
    height = figure.layout.height or HEIGHT
    subtitled = any(a.yref == "paper" and a.yanchor == "bottom" for a in figure.layout.annotations)
    figure.update_layout(
        template="none",  # the default template adds ~8 kB of styling to every chart
        height=height,
        margin={"l": 10, "r": 10, "t": TOP + (SUBTITLE if subtitled else 0), "b": 10},
        font={"family": "system-ui, sans-serif", "size": 12},
        legend={"x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top"},
    )
    figure.update_xaxes(automargin=True)
    figure.update_yaxes(automargin=True)
    # JSON has "<" only inside strings, where \u003c means the same: no text of the exchange's
    # (a market's name) can end the <script> element or open a comment in it.
    data = pio.to_json(figure, validate=False).replace("<", "\\u003c")
    return (
        f'<div id="{div_id}" class="chart" style="height:{height}px"></div>'
        f'<script type="application/json" data-chart="{div_id}">{data}</script>'
    )


def grid(titles: Sequence[str], columns: int, row_height: int, **options: object) -> go.Figure:
    """Small multiples: a plot per title, ``columns`` to a row, as tall as its rows, with room
    between two rows for the upper one's tick labels and the lower one's title (plotly takes
    the spacing as a share of the plots' height: it is set from pixels here)."""
    rows = -(-len(titles) // columns)
    plots = rows * row_height + (rows - 1) * GAP
    spacing = GAP / plots if rows > 1 else 0.0
    figure = make_subplots(rows=rows, cols=columns, subplot_titles=list(titles),
                           vertical_spacing=spacing, **options)  # fmt: skip
    figure.update_layout(height=TOP + SUBTITLE + plots + BOTTOM)
    return figure


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
    return figure


def daily(funding: Funding) -> go.Figure:
    days = funding.daily
    figure = go.Figure()
    figure.add_bar(x=days["day"], y=days["received"], name="received", marker_color=RECEIVED)
    figure.add_bar(x=days["day"], y=-days["paid"], name="paid", marker_color=PAID)
    figure.add_scatter(x=days["day"], y=days["net"], name="net", mode="lines", line_color=NET)
    figure.update_layout(barmode="relative")
    return figure


def rates(funding: Funding) -> go.Figure:
    figure = go.Figure()
    for series, points in funding.rates.groupby("series", sort=False):
        figure.add_scatter(x=points["step"], y=points["rate"], name=str(series), mode="lines")
    figure.update_layout(yaxis_tickformat=".4%")
    return figure


def balances(held: Balances) -> go.Figure:
    """One chart per ticker of the history, main and trading, each on its own axis (a ticker's
    amounts are in its own unit); one snapshot day is drawn as bars (a line of one point says
    nothing), on a log scale: amounts differ by orders of magnitude."""
    history = held.history[held.history["ticker"].isin(held.tickers)]
    if history["snapshot_date"].nunique() <= 1:
        return balances_across(
            list(history["ticker"]), list(history["main"].fillna(0)),
            list(history["trading"].fillna(0)),
        )  # fmt: skip
    tickers = held.tickers
    columns = min(3, len(tickers))
    figure = grid(tickers, columns, 170)
    # A few days, each named: on a date axis plotly would mark the hours between them, and the
    # first day's name would run into the amounts' axis.
    few = history["snapshot_date"].nunique() <= 7
    days = history["snapshot_date"].dt.strftime("%Y-%m-%d") if few else history["snapshot_date"]
    for index, ticker in enumerate(tickers):
        points = history[history["ticker"] == ticker]
        row, col = divmod(index, columns)
        for side, color in (("main", MAIN), ("trading", TRADING)):
            figure.add_scatter(
                x=days.loc[points.index],
                y=points[side],
                name=side,
                legendgroup=side,
                showlegend=index == 0,
                mode="lines+markers",
                line_color=color,
                row=row + 1,
                col=col + 1,
            )
    if few:  # half a day's room at each end, as bars have
        days = history["snapshot_date"].nunique()
        figure.update_xaxes(type="category", range=[-0.5, days - 0.5])
    return figure


def investments(invested: Investments) -> go.Figure:
    """Principal and interest paid per ticker, active against closed: a plot per ticker (each in
    its own unit), principal and interest side by side on a log scale (interest is a small part
    of the principal)."""
    tickers = sorted({str(row[0]) for row in invested.principal.rows}
                     | {str(row[0]) for row in invested.interest.rows})  # fmt: skip
    columns = min(4, len(tickers))
    figure = grid(tickers, columns, 200)
    for index, ticker in enumerate(tickers):
        row, col = divmod(index, columns)
        for state, color in (("active", "#27ae60"), ("closed", "#95a5a6")):
            amounts = [
                next((r[amount] for r in table.rows if r[0] == ticker and r[1] == state), None)
                for table, amount in ((invested.principal, 3), (invested.interest, 2))
            ]
            figure.add_bar(
                x=["principal", "interest paid"],
                y=[float(a) or None if a is not None else None for a in amounts],  # type: ignore[arg-type]
                name=state,
                legendgroup=state,
                showlegend=index == 0,
                marker_color=color,
                row=row + 1,
                col=col + 1,
            )
    figure.update_layout(barmode="group")
    figure.update_yaxes(type="log")
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
    figure.update_layout(barmode="relative")
    return figure


def balances_across(
    tickers: Sequence[str],
    main: Sequence[Decimal | float],
    trading: Sequence[Decimal | float],
) -> go.Figure:
    """Each ticker's bars on one log axis: compared, never summed (the summary sums a ticker
    across accounts, never two tickers)."""
    figure = go.Figure()
    for side, values, color in (("main", main, MAIN), ("trading", trading, TRADING)):
        # A log axis cannot draw a zero: a zero balance is left out of the chart (not the table).
        figure.add_bar(x=list(tickers), y=[float(v) or None for v in values], name=side,
                       marker_color=color)  # fmt: skip
    figure.update_layout(barmode="group", yaxis_type="log")
    return figure
