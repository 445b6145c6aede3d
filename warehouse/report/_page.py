"""The page's HTML: the template filled with the headline, a section per account (each chart with
its exact table), and the summary across accounts; plotly.js inlined once (`_charts`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Final

import jinja2
from markupsafe import Markup

from pipeline import spec
from warehouse import display

from . import _charts, _sections, _value, _value_charts
from ._data import ALL_TABLES, AccountData
from ._exact import ZERO, Table, exact_sum

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from . import Headline, RunFacts


#: A cell of more characters than this may wrap; a shorter one (a count, a name) stays whole.
LONG_CELL: Final = 16


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
        summary=_summary(data, facts) if sum(not d.empty for d in data) > 1 else None,
        sections=[_section(d, facts) for d in data if not d.empty],
        plotly_js=_charts.plotly_gzip_base64(),
        script=Markup(_charts.SCRIPT),  # noqa: S704 (our own script)
        cell=_cell,
        header=_header,
        partial=[
            (d.account, list(failed))
            for d in data
            if facts is not None and (failed := facts.failed.get(d.account))
        ],
        when=_when,
        generated=spec.WALL_CLOCK.moment(),
    )


def _when(moment: datetime | None) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if moment else "none yet"


def _cell(value: object) -> Markup:
    """A table cell: numbers right-aligned with every digit, anything else as text; a long one
    may wrap anywhere (an exact figure has up to 38 digits), a short one never."""
    shown = display.text(value)
    kind = ["num"] if isinstance(value, Decimal | int) and not isinstance(value, bool) else []
    if len(shown) > LONG_CELL:
        kind.append("long")
    if kind:
        return Markup('<td class="{}">{}</td>').format(" ".join(kind), shown)
    return Markup("<td>{}</td>").format(shown)


def _header(column: str) -> Markup:
    """A column's name, which may break after each underscore."""
    return Markup("_<wbr>").join(column.split("_"))


@dataclass(frozen=True, slots=True)
class _Chart:
    title: str
    #: The chart's markup; empty for a table alone.
    chart: Markup
    table: Table
    note: str = ""
    #: Why the figures are partial (the failed runs of the tables they are read from); the
    #: tables named in ``partial_tables``.
    partial: str = ""
    partial_tables: tuple[str, ...] = ()


def _section(data: AccountData, facts: RunFacts | None) -> dict[str, object]:
    """The account's parts (`_sections.PARTS`), each marked partial where a table it reads
    failed its latest run."""
    charts: list[_Chart] = []
    for drawn in _sections.PARTS:
        partial = _partial([data], drawn.reads, facts)
        for part in drawn.parts(data):
            chart = Markup("")
            if part.figure is not None:
                chart = _html(part.figure, data.account, part.name)
            charts.append(_Chart(part.title, chart, part.table, part.note, *partial))
    return {"account": data.account, "charts": charts, "data": data}


def _partial(
    data: Sequence[AccountData], reads: Sequence[str], facts: RunFacts | None
) -> tuple[str, tuple[str, ...]]:
    """What makes figures read from ``reads`` of these accounts partial: the tables whose latest
    run failed, said with each run's end; and those tables."""
    said, tables = [], set()
    for d in data:
        failed: Mapping[str, datetime] = facts.failed.get(d.account, {}) if facts else {}
        if missing := [table for table in reads if table in failed]:
            runs = ", ".join(f"{table} (ended {_when(failed[table])})" for table in missing)
            said.append(f"the latest run of {d.account}'s {runs} failed")
            tables.update(missing)
    if not said:
        return "", ()
    text = f"Partial: {'; '.join(said)}. These figures hold only what landed before it."
    return text, tuple(sorted(tables))


def _summary(data: Sequence[AccountData], facts: RunFacts | None) -> dict[str, object]:
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
    worths = [d.worth for d in data]
    team = _value.team(worths)
    charts = [
        _Chart(part.title, _html(part.figure, "summary", part.name) if part.figure else Markup(""),
               part.table, part.note, *_partial(data, reads, facts))
        for parts, reads in ((_value_charts.across(names, worths, team), _sections.HELD),
                             (_value_charts.earnings(team), tuple(ALL_TABLES)))
        for part in parts
    ]  # fmt: skip
    charts += [
        _Chart("Funding across accounts: received, paid, net", _html(_charts.across(
            names, [d.funding.net for d in data], [d.funding.paid for d in data],
            [d.funding.received for d in data]), "summary", "funding"), funding,
            "the other figures of each account beside its funding",
            *_partial(data, tuple(ALL_TABLES), facts)),
    ]  # fmt: skip
    if balances.rows:
        charts.append(
            _Chart("Balances across accounts: main and trading, per ticker", _html(
                _charts.balances_across(
                    [str(row[0]) for row in balances.rows],
                    [row[1] for row in balances.rows],  # type: ignore[misc]
                    [row[2] + row[3] for row in balances.rows]),  # type: ignore[operator]
                "summary", "balances"), balances,
                "each ticker summed over the accounts, each on its latest snapshot in the range",
                *_partial(data, ("main_balances", "trading_balances"), facts))
        )  # fmt: skip
    return {"charts": charts}


def _html(figure: go.Figure, section: str, name: str) -> Markup:
    # Our own markup: the figure's JSON, its text escaped for a <script> element.
    return Markup(_charts.html(figure, f"{section}-{name}"))  # noqa: S704


def _template() -> jinja2.Template:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("warehouse.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return environment.get_template("report.html.j2")
