"""The page's HTML: the template filled with the headline, a section per account (each chart with
its exact table), and the summary across accounts; plotly.js inlined once (`_charts`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

import jinja2
from markupsafe import Markup

from pipeline import spec
from warehouse import display

from . import _charts, _ledger_charts
from ._data import ALL_TABLES, AccountData
from ._exact import ZERO, Table, exact_sum

if TYPE_CHECKING:
    from . import Headline, RunFacts


def render(
    headline: Headline, data: Sequence[AccountData], *, root: str, facts: RunFacts | None
) -> str:
    """The whole page, from what `warehouse.report.build` read."""
    return _template().render(
        headline=headline,
        root=root,
        facts=facts,
        data=data,
        empty=all(d.empty for d in data),
        tables=ALL_TABLES,
        summary=_summary(data) if sum(not d.empty for d in data) > 1 else None,
        sections=[_section(d) for d in data if not d.empty],
        plotly_js=_charts.plotly_gzip_base64(),
        script=Markup(_charts.SCRIPT),  # noqa: S704 (our own script)
        cell=_cell,
        when=_when,
        generated=spec.WALL_CLOCK.moment(),
    )


def _when(moment: datetime | None) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if moment else "none yet"


def _cell(value: object) -> Markup:
    """A table cell: numbers right-aligned with every digit, anything else as text."""
    if isinstance(value, Decimal | int) and not isinstance(value, bool):
        return Markup('<td class="num">{}</td>').format(display.text(value))
    return Markup("<td>{}</td>").format(display.text(value))


@dataclass(frozen=True, slots=True)
class _Chart:
    title: str
    #: The chart's markup; empty for a table alone.
    chart: Markup
    table: Table
    note: str = ""


def _section(data: AccountData) -> dict[str, object]:
    name, funding = data.account, data.funding
    charts: list[_Chart] = []
    if funding.payments:
        markets = funding.markets
        amounts = Table(markets.columns[:5], [row[:5] for row in markets.rows])
        rates = Table(
            (markets.columns[0], *markets.columns[5:]),
            [(row[0], *row[5:]) for row in markets.rows],
        )
        per = "day" if funding.days.columns[0] == "day" else "month"
        charts += [
            _Chart(
                "Funding per market",
                _html(_charts.cumulative(funding), name, "cumulative"),
                amounts,
                "paid and received per market over the range; paid is the sum of "
                "the negative amounts",
            ),
            _Chart(
                "Funding per day",
                _html(_charts.daily(funding), name, "daily"),
                funding.days,
                f"per {per}",
            ),
            _Chart(
                "Funding rate",
                _html(_charts.rates(funding), name, "rates"),
                rates,
                "lowest, highest and latest rate per market",
            ),
        ]
    if data.balances.tickers:
        held = data.balances
        charts.append(
            _Chart("Balances", _html(_charts.balances(held), name, "balances",
                                     height=_charts.balances_height(held)),
                   held.latest, f"on the latest snapshot, {display.text(held.snapshot_date)}")
        )  # fmt: skip
    invested = data.investments
    if invested.principal.rows:
        charts.append(
            _Chart("Investments", _html(_charts.investments(invested), name, "investments"),
                   _joined(invested.principal, invested.interest),
                   f"on the snapshot of {display.text(invested.snapshot_date)}")
        )  # fmt: skip
    for part in _ledger_charts.parts(data.ledger):
        chart = Markup("")
        if part.figure is not None:
            chart = _html(part.figure, name, part.name, height=part.height)
        charts.append(_Chart(part.title, chart, part.table, part.note))
    return {"account": name, "charts": charts, "data": data}


def _joined(principal: Table, interest: Table) -> Table:
    """Principal and interest per ticker and state in one table (interest by its own ticker)."""
    paid = {(row[0], row[1]): row[2] for row in interest.rows}
    keys = sorted({(row[0], row[1]) for row in principal.rows} | set(paid), key=str)
    counted = {(row[0], row[1]): row[2:] for row in principal.rows}
    return Table(
        ("ticker", "state", "investments", "principal", "interest_paid"),
        [(t, s, *(counted.get((t, s)) or (0, None)), paid.get((t, s))) for t, s in keys],
    )


def _summary(data: Sequence[AccountData]) -> dict[str, object]:
    names = [d.account for d in data]
    funding = Table(
        ("account", "rows", "funding_payments", "paid", "received", "net", "rejected_records",
         "active_investments", "fills", "collateral_net", "intervals_checked", "residuals"),
        [(d.account, sum(d.rows.values()), d.funding.payments, d.funding.paid,
          d.funding.received, d.funding.net, d.rejects, d.investments.active,
          d.ledger.trading.fills, d.ledger.pnl.net, d.ledger.reconciliation.checked,
          len(d.ledger.reconciliation.residuals.rows)) for d in data],
    )  # fmt: skip
    totals: dict[str, list[Decimal | int]] = {}
    for d in data:
        for ticker, main, available, frozen in d.balances.latest.rows:
            sums = totals.setdefault(str(ticker), [ZERO, ZERO, ZERO, 0])
            for index, value in enumerate((main, available, frozen)):
                sums[index] = exact_sum(
                    [sums[index], value if isinstance(value, Decimal) else ZERO]
                )
            sums[3] += 1
    balances = Table(
        ("ticker", "main_balance", "trading_available", "trading_frozen", "accounts"),
        [(ticker, *sums) for ticker, sums in sorted(totals.items())],
    )
    charts = [
        _Chart("Funding across accounts", _html(_charts.across(
            names, [d.funding.net for d in data], [d.funding.paid for d in data],
            [d.funding.received for d in data]), "summary", "funding"), funding),
    ]  # fmt: skip
    if balances.rows:
        charts.append(
            _Chart("Balances across accounts", _html(_charts.balances_across(
                [str(row[0]) for row in balances.rows],
                [row[1] for row in balances.rows],  # type: ignore[misc]
                [row[2] + row[3] for row in balances.rows]),  # type: ignore[operator]
                "summary", "balances"), balances,
                "summed over the accounts, each on its latest snapshot in the range")
        )  # fmt: skip
    return {"charts": charts}


def _html(figure: object, section: str, name: str, *, height: int = _charts.HEIGHT) -> Markup:
    # Our own markup: the figure's JSON, its text escaped for a <script> element.
    return Markup(_charts.html(figure, f"{section}-{name}", height=height))  # noqa: S704


def _template() -> jinja2.Template:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("warehouse.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return environment.get_template("report.html.j2")
