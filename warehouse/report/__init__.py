"""The account report: one self-contained HTML page over the catalog's views, for people who
would rather look than query.

For each account (one, several, or every account in the warehouse) over a range of days: its
funding (cumulative and per day, paid and received, per market; the funding rate per market), its
balances per ticker across the snapshot history (main and trading side by side), its investments
(principal and interest paid per ticker, active against closed); with several accounts, a summary
across them first. A header names the accounts, the range, the rows, the rejected records, and
what only the Dagster instance knows (`RunFacts`: the last successful night, the fields the
exchange sent that the spec does not name).

Each chart has a table beside it with its figures exact, decimals as stored (`warehouse.display`);
the charts themselves plot floats. The page inlines one copy of plotly.js, taken from the plotly
wheel, and fetches nothing when it is viewed: it opens offline, from a mail attachment or a shared
drive. plotly was chosen because its wheel carries its JavaScript (no CDN, no Node build) and it
draws interactive charts (hover, zoom, legend toggles) with one small dependency (narwhals).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Final

import duckdb
import jinja2
from markupsafe import Markup

from warehouse import catalog, display
from warehouse.parquet import Root
from warehouse.settings import is_local, local_dir, location, warehouse_root
from warehouse.store import read_again

from . import _charts
from ._data import SNAPSHOT_TABLES, ZERO, AccountData, Reader, Table

#: The report's file name in this machine's directory of the warehouse (`default_path`), and in
#: a remote root (`publish`).
REPORT_FILE: Final = "report.html"
ALL_TABLES: Final = ("funding_history", *SNAPSHOT_TABLES)


class ReportError(ValueError):
    """A report that cannot be built as asked (an account the warehouse does not hold, a range
    that ends before it starts)."""


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the Dagster instance knows of each account's runs, which the warehouse does not."""

    #: End of the account's latest successful run of the nightly schedule.
    last_night: Mapping[str, datetime] = field(default_factory=dict)
    #: When one of the account's tables last landed, by any run (nightly, backfill, by hand).
    last_landed: Mapping[str, datetime] = field(default_factory=dict)
    #: The fields the exchange sent that the spec does not name, in each table's latest
    #: materialization: ``table: field (type)``.
    drift: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Headline:
    """The page's headline numbers, exact: what the asset's metadata and the page's header say."""

    accounts: tuple[str, ...]
    first_day: date | None
    last_day: date | None
    rows: int
    funding_payments: int
    funding_paid: Decimal
    funding_received: Decimal
    funding_net: Decimal
    rejected_records: int
    active_investments: int

    def items(self) -> list[tuple[str, str]]:
        """Name and text of each number, as the page marks them (``data-headline``)."""
        return [
            ("accounts", ", ".join(self.accounts)),
            ("first_day", display.text(self.first_day)),
            ("last_day", display.text(self.last_day)),
            ("rows", str(self.rows)),
            ("funding_payments", str(self.funding_payments)),
            ("funding_paid", display.text(self.funding_paid)),
            ("funding_received", display.text(self.funding_received)),
            ("funding_net", display.text(self.funding_net)),
            ("rejected_records", str(self.rejected_records)),
            ("active_investments", str(self.active_investments)),
        ]


@dataclass(frozen=True, slots=True)
class Report:
    html: str
    headline: Headline
    path: Path | None = None


def default_path(root: Root = None) -> Path:
    """Where the nightly report goes: ``report.html`` in this machine's directory of the
    warehouse (the root itself when it is local; beside the catalog for a remote root)."""
    return local_dir(root) / REPORT_FILE


def write(
    root: Root = None,
    *,
    out: str | os.PathLike[str] | None = None,
    accounts: Sequence[str] = (),
    declared: Sequence[str] = (),
    first: date | None = None,
    last: date | None = None,
    facts: RunFacts | None = None,
) -> Report:
    """Build the report from the root's catalog and write it to ``out`` (default:
    `default_path`), atomically: a reader never sees half a page."""
    base = warehouse_root(root)
    if not catalog.catalog_path(base).exists():
        catalog.refresh(base)  # a fresh warehouse: the catalog is views only, cheap to create

    @read_again
    def built() -> Report:
        with catalog.connect(base) as con:
            return build(
                con,
                accounts=accounts,
                declared=declared,
                first=first,
                last=last,
                facts=facts,
                root=location(base),
            )

    report = built()
    target = Path(os.path.abspath(out)) if out is not None else default_path(base)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        temp.write_text(report.html, encoding="utf-8")
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    return Report(report.html, report.headline, target)


def publish(
    root: Root = None, *, declared: Sequence[str] = (), facts: RunFacts | None = None
) -> tuple[Report, str]:
    """The page of every account, where every reader of the warehouse finds it: ``report.html``
    in the root (on a store, one PUT of the whole page: a reader gets the old page or the new),
    and in this machine's directory; the page and the shared location."""
    base = warehouse_root(root)
    written = write(base, declared=declared, facts=facts)
    if is_local(base):
        return written, str(written.path)
    shared = base / REPORT_FILE
    shared.fs.pipe_file(shared.path, written.html.encode())
    return written, location(shared)


def build(
    con: duckdb.DuckDBPyConnection,
    *,
    accounts: Sequence[str] = (),
    declared: Sequence[str] = (),
    first: date | None = None,
    last: date | None = None,
    facts: RunFacts | None = None,
    root: str = "",
) -> Report:
    """The page over a catalog connection: ``accounts`` (default: every account ``declared`` by
    the deployment, then any other the warehouse holds), days ``first .. last`` (default: the
    first and last day the warehouse holds of them). A declared account without rows yet is
    shown with none; an account neither declared nor held is refused."""
    if first is not None and last is not None and last < first:
        raise ReportError(f"the range ends ({last}) before it starts ({first})")
    known = tuple(dict.fromkeys([*declared, *_accounts(con)]))
    unknown = [name for name in accounts if name not in known]
    if unknown:
        raise ReportError(
            f"no account {', '.join(map(repr, unknown))} in the warehouse or the accounts file"
            + (f"; known: {', '.join(known)}" if known else "; it holds no account yet")
        )
    chosen = tuple(dict.fromkeys(accounts)) or known
    start, end = _range(con, chosen)
    first, last = first or start, last or end
    if first is not None and last is not None and last < first:
        raise ReportError(
            f"the range ends ({last}) before it starts ({first}): the warehouse holds these "
            f"accounts' days {start} .. {end}"
        )
    data: list[AccountData] = []
    if first is not None and last is not None:
        data = [Reader(con, name, first, last).read() for name in chosen]
    headline = Headline(
        accounts=chosen,
        first_day=first,
        last_day=last,
        rows=sum(sum(d.rows.values()) for d in data),
        funding_payments=sum(d.funding.payments for d in data),
        funding_paid=sum((d.funding.paid for d in data), ZERO),
        funding_received=sum((d.funding.received for d in data), ZERO),
        funding_net=sum((d.funding.net for d in data), ZERO),
        rejected_records=sum(d.rejects for d in data),
        active_investments=sum(d.investments.active for d in data),
    )
    page = _template().render(
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
        generated=datetime.now(UTC),
    )
    return Report(page, headline)


def _accounts(con: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
    union = " UNION ".join(f"SELECT DISTINCT account FROM {t}" for t in (*ALL_TABLES, "_rejects"))
    return tuple(
        row[0] for row in con.execute(f"SELECT account FROM ({union}) ORDER BY 1").fetchall()
    )


def _range(
    con: duckdb.DuckDBPyConnection, accounts: Sequence[str]
) -> tuple[date | None, date | None]:
    days = " UNION ALL ".join(
        [
            "SELECT min(funding_date) AS lo, max(funding_date) AS hi FROM funding_history "
            "WHERE list_contains($accounts, account)",
            *(
                f"SELECT min(snapshot_date), max(snapshot_date) FROM {t} "
                "WHERE list_contains($accounts, account)"
                for t in SNAPSHOT_TABLES
            ),
            # The day of a rejected record's partition: an account whose records were all
            # rejected still has a range, and its rejects are counted.
            'SELECT min(try_cast(left("partition", 10) AS DATE)), '
            'max(try_cast(left("partition", 10) AS DATE)) FROM _rejects '
            "WHERE list_contains($accounts, account)",
        ]
    )
    lo, hi = con.execute(
        f"SELECT min(lo), max(hi) FROM ({days})",
        {"accounts": list(accounts)},
    ).fetchone() or (None, None)
    return lo, hi


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
         "active_investments"),
        [(d.account, sum(d.rows.values()), d.funding.payments, d.funding.paid,
          d.funding.received, d.funding.net, d.rejects, d.investments.active) for d in data],
    )  # fmt: skip
    totals: dict[str, list[Decimal | int]] = {}
    for d in data:
        for ticker, main, available, frozen in d.balances.latest.rows:
            sums = totals.setdefault(str(ticker), [ZERO, ZERO, ZERO, 0])
            for index, value in enumerate((main, available, frozen)):
                sums[index] += value if isinstance(value, Decimal) else ZERO
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
