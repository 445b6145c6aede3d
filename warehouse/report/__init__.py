"""The account report: one self-contained HTML page over the catalog's views, for people who
would rather look than query.

For each account (one, several, or every account in the warehouse) over a range of days: its
value per snapshot, its earnings by source and its returns per month, in the reference currency
(and the team's, the page's accounts as one); its funding (cumulative and per day, paid and
received, per market; the funding rate per market), its balances per ticker across the snapshot
history (main and trading side by side), its investments (principal and interest paid per
ticker, active against closed), its trading (fees per asset, volume per market, maker against
taker, the fees per role valued), its collateral P&L per market, its flows per asset,
and the reconciliation of its holdings between snapshots (zero, or the residuals); with several
accounts, a summary across them first. A header names the accounts, the range, the rows, the
rejected records, and what only the Dagster instance knows (`RunFacts`: the last successful
night, the fields the exchange sent that the spec does not name, the tables whose latest run
failed). A part of the page read from a table whose latest run failed is marked partial, naming
the table and the run (`_sections`: each part with the tables it reads).

Each chart has a table beside it with its figures exact, decimals as stored (`warehouse.display`);
the charts themselves plot floats. The page inlines one copy of plotly.js, taken from the plotly
wheel, and fetches nothing when it is viewed: it opens offline, from a mail attachment or a shared
drive. plotly was chosen because its wheel carries its JavaScript (no CDN, no Node build) and it
draws interactive charts (hover, zoom, legend toggles) with one small dependency (narwhals).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Final

import duckdb

from warehouse import catalog, display, schemas
from warehouse.errors import WarehouseError
from warehouse.root import Warehouse
from warehouse.store import read_again, replace_text

from ._data import ALL_TABLES, AccountData, Reader
from ._exact import exact_sum
from ._ledger import read_reconciliations
from ._value import read_worth

#: The report's file name in this machine's directory of the warehouse (`default_path`), and in
#: a remote root (`publish`).
REPORT_FILE: Final = "report.html"


class ReportError(WarehouseError):
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
    #: The tables whose latest run failed (or was canceled) before it landed them, and when that
    #: run ended: the page marks partial every figure read from one.
    failed: Mapping[str, Mapping[str, datetime]] = field(default_factory=dict)


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
    fills: int
    #: Realized P&L less trade fees plus funding of the collateral markets, in their
    #: settlement ticker.
    collateral_net: Decimal
    #: Intervals between snapshots the reconciliation checked, and the residuals it found.
    intervals_checked: int
    residuals: int

    def items(self) -> list[tuple[str, str, str]]:
        """Name, glance and exact text of each number, as the page marks them: the glance shown
        (amounts rounded as `display.glance` says, which the page states), the exact text in
        ``data-exact``."""
        figures: list[tuple[str, object]] = [
            ("accounts", ", ".join(self.accounts)),
            ("first_day", self.first_day),
            ("last_day", self.last_day),
            ("rows", self.rows),
            ("funding_payments", self.funding_payments),
            ("funding_paid", self.funding_paid),
            ("funding_received", self.funding_received),
            ("funding_net", self.funding_net),
            ("rejected_records", self.rejected_records),
            ("active_investments", self.active_investments),
            ("fills", self.fills),
            ("collateral_net", self.collateral_net),
            ("intervals_checked", self.intervals_checked),
            ("residuals", self.residuals),
        ]
        return [(name, display.glance(v), display.text(v)) for name, v in figures]


@dataclass(frozen=True, slots=True)
class Report:
    html: str
    headline: Headline
    path: Path | None = None


def default_path(wh: Warehouse) -> Path:
    """Where the nightly report goes: ``report.html`` in this machine's directory of the
    warehouse (the root itself when it is local; beside the catalog for a remote root)."""
    return wh.local_dir / REPORT_FILE


def write(
    wh: Warehouse,
    *,
    out: str | os.PathLike[str] | None = None,
    accounts: Sequence[str] = (),
    declared: Sequence[str] = (),
    first: date | None = None,
    last: date | None = None,
    facts: RunFacts | None = None,
) -> Report:
    """Build the report from the warehouse's catalog and write it to ``out`` (default:
    `default_path`), atomically: a reader never sees half a page."""

    @read_again
    def built() -> Report:
        with catalog.connect(wh) as con:
            return build(
                con,
                accounts=accounts,
                declared=declared,
                first=first,
                last=last,
                facts=facts,
                root=wh.location,
            )

    report = built()
    target = Path(replace_text(out if out is not None else default_path(wh), report.html))
    return Report(report.html, report.headline, target)


def publish(
    wh: Warehouse, *, declared: Sequence[str] = (), facts: RunFacts | None = None
) -> tuple[Report, str]:
    """The page of every account, where every reader of the warehouse finds it: ``report.html``
    in the root (on a store, one PUT of the whole page: a reader gets the old page or the new),
    and in this machine's directory; the page and the shared location."""
    written = write(wh, declared=declared, facts=facts)
    shared = wh.store.url(REPORT_FILE)
    if shared != str(written.path):  # the root is elsewhere: the page goes there too
        wh.store.write_bytes(REPORT_FILE, written.html.encode())
    return written, shared


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
        reconciled = read_reconciliations(con, chosen, first, last)
        worth = read_worth(con, chosen, first, last)
        data = [
            Reader(con, name, first, last).read(reconciled[name], worth[name]) for name in chosen
        ]
    headline = Headline(
        accounts=chosen,
        first_day=first,
        last_day=last,
        rows=sum(sum(d.rows.values()) for d in data),
        funding_payments=sum(d.funding.payments for d in data),
        funding_paid=exact_sum(d.funding.paid for d in data),
        funding_received=exact_sum(d.funding.received for d in data),
        funding_net=exact_sum(d.funding.net for d in data),
        rejected_records=sum(d.rejects for d in data),
        active_investments=sum(d.investments.active for d in data),
        fills=sum(d.ledger.trading.fills for d in data),
        collateral_net=exact_sum(d.ledger.pnl.net for d in data),
        intervals_checked=sum(d.ledger.reconciliation.checked for d in data),
        residuals=sum(len(d.ledger.reconciliation.residuals.rows) for d in data),
    )
    from ._page import render  # plotly loads when a page is drawn, not with the package

    page = render(headline, data, root=root, facts=facts)
    return Report(page, headline)


def _accounts(con: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
    union = " UNION ".join(f"SELECT DISTINCT account FROM {t}" for t in (*ALL_TABLES, "_rejects"))
    # The exchange's rejected candles are no account's.
    return tuple(
        row[0]
        for row in con.execute(
            f"SELECT account FROM ({union}) WHERE account <> $exchange ORDER BY 1",
            {"exchange": schemas.EXCHANGE},
        ).fetchall()
    )


def _range(
    con: duckdb.DuckDBPyConnection, accounts: Sequence[str]
) -> tuple[date | None, date | None]:
    days = " UNION ALL ".join(
        [
            *(
                f"SELECT min({day}) AS lo, max({day}) AS hi FROM {t} "
                "WHERE list_contains($accounts, account)"
                for t, day in ALL_TABLES.items()
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
