"""The value, earnings and returns parts of an account's section and of the summary (`_sections`,
`_page`), and the trade fees valued: every amount in the reference currency, so that the assets'
figures add up; an asset no price values is named beside its figures, never counted as zero.
Where the warehouse holds no prices, one line says so in place of the charts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import plotly.graph_objects as go

from ._charts import NET, PAID, RECEIVED, Part
from ._exact import Table
from ._value import NO_PRICES, RETURN_PLACES, SOURCES, Worth

#: Each source's name and colour in the earnings chart.
COLOURS: Final = dict(zip(SOURCES, ("#2980b9", "#8e44ad", RECEIVED, "#16a085", PAID, "#95a5a6"),
                          strict=True))  # fmt: skip
NAMES: Final = {"realized_pnl": "realized P&L"}
METHOD: Final = (
    "Modified Dietz: the gain (closing - opening - net contributions, exact) over the opening "
    "value plus each contribution weighted by the share of the month after it, in double "
    f"precision (about 15 significant digits), shown to {RETURN_PLACES} places of a percent; "
    "chained over the months shown, (1 + r1)(1 + r2)... - 1; none where the base is not "
    "positive"
)


def value(of: Worth) -> list[Part]:
    """Value per snapshot; one line where no price is held; nothing where there is no snapshot
    to value."""
    if not of.value.rows:
        return []
    if of.prices is None:
        return [Part("Value, earnings and returns", "worth", None, Table((), []), NO_PRICES)]
    return [
        Part(f"Value in {of.prices.reference}, per snapshot", "value", _value(of), of.value,
             f"each snapshot's holdings at the last daily close before it (value_date); "
             f"{_left(of)}"),
    ]  # fmt: skip


def earnings(of: Worth) -> list[Part]:
    """Earnings by source and returns per month (none without prices: `value` says so)."""
    if of.prices is None or not of.months.rows:
        return []
    return [
        Part(f"Earnings by source per month, in {of.prices.reference}", "earnings",
             _earnings(of), of.earnings, "opening value + net contributions + funding + "
             "interest + realized P&L + fees + market effect = closing value, exactly: each "
             "flow at its day's close; the market effect is the remainder (prices moving, "
             f"trades and conversions at other than the day's close); {_left(of)}"),
        Part("Returns per month, and chained", "returns", _returns(of), of.returns, METHOD),
    ]  # fmt: skip


def _left(of: Worth) -> str:
    """The assets left out of the figures, named."""
    if unpriced := of.unpriced:
        return f"not valued, no price: {', '.join(unpriced)} (held or moved, in no figure here)"
    return "every asset valued"


def across(names: Sequence[str], worths: Sequence[Worth], team: Worth) -> list[Part]:
    """The team's value: every account's stacked per value date."""
    if team.prices is None or not team.value.rows:
        return value(team)
    return [
        Part(f"Value across accounts in {team.prices.reference}, per value date", "value",
             _stacked(names, worths), team.value, "the accounts' snapshots valued at one day's "
             "close (value_date, the day before a snapshot's), summed; a day some account has "
             f"no snapshot valued at counts fewer accounts; {_left(team)}"),
    ]  # fmt: skip


def fees(of: Worth) -> list[Part]:
    """The trade fees per role, each fee asset valued at its days' closes: a bar per role,
    stacked by fee asset, in one currency (each asset's own amounts are the fees chart's)."""
    if of.prices is None or not of.fees.rows:
        return []
    ref = of.prices.reference
    unpriced = sorted({str(row[1]) for row in of.fees.rows if row[3] is None})
    return [
        Part(f"Trading: fees per role, valued in {ref}", "fee-value", _fees(of.fees), of.fees,
             "each day's fees of an asset at that day's close, cut at 18 places as the views "
             "cut a product" + (f"; not valued, a day without a price: {', '.join(unpriced)}"
                                 if unpriced else "")),
    ]  # fmt: skip


def _value(of: Worth) -> go.Figure:
    rows = of.value.rows
    figure = go.Figure()
    figure.add_scatter(x=[r[1] for r in rows], y=[float(r[2]) for r in rows], name="value",  # type: ignore[arg-type]
                       mode="lines+markers", line_color=NET)  # fmt: skip
    return figure


def _stacked(names: Sequence[str], worths: Sequence[Worth]) -> go.Figure:
    figure = go.Figure()
    for name, of in zip(names, worths, strict=True):
        if of.value.rows:
            figure.add_bar(x=[r[1] for r in of.value.rows],
                           y=[float(r[2]) for r in of.value.rows], name=name)  # type: ignore[arg-type]  # fmt: skip
    figure.update_layout(barmode="stack")
    return figure


def _earnings(of: Worth) -> go.Figure:
    """A bar per month, each source stacked (gains up, losses down), and the change in value
    they sum to."""
    table = of.earnings
    months = [str(r[0]) for r in table.rows]
    figure = go.Figure()
    for source in SOURCES:
        at = table.columns.index(source)
        name = NAMES.get(source, source.replace("_", " "))
        figure.add_bar(x=months, y=[float(r[at]) for r in table.rows],  # type: ignore[arg-type]
                       name=name, marker_color=COLOURS[source])  # fmt: skip
    opening, closing = table.columns.index("opening_value"), table.columns.index("closing_value")
    figure.add_scatter(x=months, y=[float(r[closing] - r[opening]) for r in table.rows],  # type: ignore[operator]
                       name="change in value", mode="markers",
                       marker={"size": 12, "color": NET})  # fmt: skip
    figure.update_layout(barmode="relative", xaxis_type="category")  # months, not instants
    return figure


def _returns(of: Worth) -> go.Figure:
    rows = of.returns.rows
    months = [str(r[0]) for r in rows]
    figure = go.Figure()
    figure.add_bar(x=months, y=[None if r[2] is None else float(r[2]) for r in rows],  # type: ignore[arg-type]
                   name="month", marker_color="#2980b9")  # fmt: skip
    figure.add_scatter(x=months, y=[None if r[3] is None else float(r[3]) for r in rows],  # type: ignore[arg-type]
                       name="chained", mode="lines+markers", line_color=NET)  # fmt: skip
    figure.update_layout(yaxis_ticksuffix=" %", xaxis_type="category")
    return figure


def _fees(table: Table) -> go.Figure:
    roles = sorted({str(r[0]) for r in table.rows})
    figure = go.Figure()
    for asset in sorted({str(r[1]) for r in table.rows}):
        valued = {str(r[0]): r[3] for r in table.rows if r[1] == asset}
        figure.add_bar(x=roles, y=[float(valued[role]) if valued.get(role) is not None else None  # type: ignore[arg-type]
                                   for role in roles], name=f"in {asset}")  # fmt: skip
    figure.update_layout(barmode="stack", legend_title_text="fees paid")
    return figure
