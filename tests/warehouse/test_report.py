"""The account report (`warehouse.report`) over a small warehouse of two accounts, every value
pinned: its headline numbers against SQL over the catalog, the accounts and range it is limited
to, its exact tables, an empty warehouse, and the file it writes. No browser (see
tests/ui/test_report_browser.py for the page drawn)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, timedelta
from decimal import Decimal, localcontext
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pipeline import spec
from tests.support.records import D1, D2, D3, D4, EXTRACTED_AT, at, investment, plan
from warehouse import Warehouse, catalog, normalize, partitions, report, schemas
from warehouse.display import decimal_text
from warehouse.report import _value

ALPHA, BETA = "alpha", "beta"
#: A chart's data on the page (the page's script names the attribute too, in a selector).
CHART_DATA = re.compile(r"<script[^>]*\bdata-chart=")

#: Each account's funding payments (day, hour, market, amount, rate), both signs, 18 fraction
#: digits; alpha's last one has a rate that is not a number: it is rejected.
FUNDING = {
    ALPHA: [
        (D1, 8, "BTC_PERP", "-0.123456789012345678", "0.0001"),
        (D1, 16, "BTC_PERP", "0.000000000000000001", "-0.0002"),
        (D2, 8, "ETH_PERP", "1.987654321098765432", "0.00015"),
        (D3, 8, "ETH_PERP", "-0.5", "0.0003"),
        (D4, 8, "SOL_PERP", "0.333333333333333333", "0.000123456789012345"),
        (D4, 12, "BTC_PERP", "-1", "x"),
    ],
    BETA: [
        (D2, 8, "BTC_PERP", "-7.000000000000000001", "0.0001"),
        (D3, 16, "XRP_PERP", "2.5", "-0.0001"),
        (D4, 0, "ETH_PERP", "-0.000000000000000009", "0.0002"),
    ],
}
#: Each market's net over every day, worked out by hand.
MARKET_NETS = {
    ALPHA: {
        "BTC_PERP": "-0.123456789012345677",
        "ETH_PERP": "1.487654321098765432",
        "SOL_PERP": "0.333333333333333333",
    },
    BETA: {
        "BTC_PERP": "-7.000000000000000001",
        "XRP_PERP": "2.5",
        "ETH_PERP": "-0.000000000000000009",
    },
}


def _write_funding(root: Path, account: str) -> None:
    records = [
        at(day, hour, market, fundingAmount=amount, fundingRate=rate)
        for day, hour, market, amount, rate in FUNDING[account]
    ]
    # One batch per account: a batch replaces every day it touches.
    batch = normalize.normalize(spec.FUNDING, records, extracted_at=EXTRACTED_AT, day=D4)
    partitions.write_batch(Warehouse.open(root), batch, account=account)


def _write_snapshot(
    root: Path,
    account: str,
    day: date,
    *,
    main: dict[str, str],
    trading: dict[str, tuple[str, str]],
    investments: Sequence[dict[str, object]] = (),
    hedge_mode: object = None,
) -> None:
    answers: list[tuple[spec.History, object]] = [
        (spec.MAIN_BALANCES, {ticker: {"main_balance": amount} for ticker, amount in main.items()}),
        (
            spec.TRADING_BALANCES,
            {t: {"available": a, "freeze": f} for t, (a, f) in trading.items()},
        ),
        (spec.HEDGE, {"hedgeMode": False} if hedge_mode is None else hedge_mode),
    ]
    if investments:
        answers += [(spec.INVESTMENTS, list(investments)), (spec.FIXED_PLANS, list(investments))]
    for history, answer in answers:
        batch = normalize.normalize(history, answer, extracted_at=EXTRACTED_AT, day=day)
        partitions.write_batch(Warehouse.open(root), batch, account=account)


def fill(root: Path) -> None:
    """Alpha: funding of three markets over four days (one record rejected), snapshots on D3
    and D4, four investments active on D3 of which two are closed on D4. Beta: funding of three
    markets, a snapshot on D4 with one active investment and a hedge-mode status rejected."""
    btc_plan = plan(id="plan-2", ticker="BTC", interestTicker="BTC")
    for account in (ALPHA, BETA):
        _write_funding(root, account)
    _write_snapshot(
        root, ALPHA, D3,
        main={"USDT": "100.5", "BTC": "0.000000000000000001"},
        trading={"USDT": ("3", "0")},
        investments=[
            investment(id="inv-1"),
            investment(id="inv-2", amount="250.5"),
            investment(id="inv-3", plan=btc_plan, amount="0.000000000000000001"),
            investment(id="inv-4", amount="10"),
        ],
    )  # fmt: skip
    _write_snapshot(
        root, ALPHA, D4,
        main={"USDT": "120.25", "BTC": "0.5"},
        trading={"USDT": ("4.000000000000000001", "0.1"), "ETH": ("2", "0")},
        investments=[
            investment(id="inv-1"),
            investment(id="inv-2", status=2, amount="250.5", interestPaid="7.5"),
            investment(id="inv-3", plan=btc_plan, amount="0.000000000000000001"),
            investment(id="inv-4", status=2, amount="10", interestPaid="0.1"),
        ],
    )  # fmt: skip
    _write_snapshot(
        root, BETA, D4,
        main={"USDT": "5"},
        trading={"USDT": ("1", "0")},
        investments=[investment(id="inv-9", amount="42.000000000000000042")],
        hedge_mode=[],  # not an object: rejected
    )  # fmt: skip
    catalog.refresh(Warehouse.open(root))


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse of `fill`, shared: the tests only read it (each writes its page elsewhere)."""
    root = tmp_path_factory.mktemp("report") / "warehouse"
    fill(root)
    return root


# --- What SQL over the catalog says -------------------------------------------------------------

#: Every table, with the day column that places its rows in a range.
DAYS = {table.name: table.partition_column for table in schemas.DATA_TABLES}


def sql_headline(
    con: duckdb.DuckDBPyConnection,
    accounts: Sequence[str],
    first: date | None = None,
    last: date | None = None,
) -> dict[str, str]:
    """The report's headline numbers (``Headline.items``) worked out from the catalog's views:
    the range defaults to the first and last day any of the accounts' funding or snapshots hold;
    amounts are summed in Python, exactly."""
    chosen = {"accounts": list(accounts)}
    days = " UNION ALL ".join(
        f"SELECT account, {day} AS day FROM {t}"  # noqa: S608
        for t, day in DAYS.items()
    )
    lo, hi = con.execute(
        f"SELECT min(day), max(day) FROM ({days}) WHERE list_contains($accounts, account)",  # noqa: S608
        chosen,
    ).fetchone() or (None, None)
    first, last = first or lo, last or hi
    within = chosen | {"first": first, "last": last}
    amounts = [
        value
        for (value,) in con.execute(
            "SELECT funding_amount FROM funding_history WHERE list_contains($accounts, account) "
            "AND funding_date BETWEEN $first AND $last",
            within,
        ).fetchall()
    ]
    rows = 0
    for table, day in DAYS.items():
        (count,) = con.execute(
            f"SELECT count(*) FROM {table} WHERE list_contains($accounts, account) "  # noqa: S608
            f"AND {day} BETWEEN $first AND $last",
            within,
        ).fetchone() or (0,)
        rows += count
    (rejected,) = con.execute(
        "SELECT count(*) FROM _rejects WHERE list_contains($accounts, account) "
        'AND CAST(left("partition", 10) AS DATE) BETWEEN $first AND $last',
        within,
    ).fetchone() or (0,)
    (active,) = con.execute(
        """
        SELECT count(*) FROM investments AS i
        WHERE list_contains($accounts, account) AND status = 1 AND snapshot_date = (
            SELECT max(snapshot_date) FROM investments
            WHERE account = i.account AND snapshot_date BETWEEN $first AND $last)
        """,
        within,
    ).fetchone() or (0,)
    nets = [
        net
        for (net,) in con.execute(
            "SELECT net FROM realized_pnl WHERE list_contains($accounts, account) "
            "AND day BETWEEN $first AND $last",
            within,
        ).fetchall()
    ]
    (fills, intervals, residuals), *_ = con.execute(
        "SELECT (SELECT count(*) FROM trades WHERE list_contains($accounts, account) "
        "AND trade_date BETWEEN $first AND $last), "
        "(SELECT count(*) FROM reconciliation_intervals WHERE list_contains($accounts, account) "
        "AND closing_date BETWEEN $first AND $last), "
        "(SELECT count(*) FROM reconciliation WHERE list_contains($accounts, account) "
        "AND closing_date BETWEEN $first AND $last)",
        within,
    ).fetchall()
    with localcontext() as exact:
        exact.prec = 80  # never rounds: 38 digits at most, summed
        paid = -sum((a for a in amounts if a < 0), Decimal(0))
        received = sum((a for a in amounts if a > 0), Decimal(0))
        net = sum(amounts, Decimal(0))
        collateral = sum(nets, Decimal(0))
    return {
        "accounts": ", ".join(accounts),
        "first_day": first.isoformat() if first else "",
        "last_day": last.isoformat() if last else "",
        "rows": str(rows),
        "funding_payments": str(len(amounts)),
        "funding_paid": decimal_text(paid),
        "funding_received": decimal_text(received),
        "funding_net": decimal_text(net),
        "rejected_records": str(rejected),
        "active_investments": str(active),
        "fills": str(fills),
        "collateral_net": decimal_text(collateral),
        "intervals_checked": str(intervals),
        "residuals": str(residuals),
    }


def sql_market_nets(con: duckdb.DuckDBPyConnection, account: str) -> dict[str, str]:
    return {
        market: decimal_text(net)
        for market, net in con.execute(
            "SELECT market, sum(funding_amount) FROM funding_history WHERE account = ? "
            "GROUP BY market",
            [account],
        ).fetchall()
    }


# --- What the page shows ------------------------------------------------------------------------


class Page(HTMLParser):
    """A report page read back: its headline (``data-headline`` -> its exact text, and the text
    shown at a glance), its element ids, its
    chart divs and chart data, and the tables of each section (rows of cell texts, the header
    first)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.headline: dict[str, str] = {}
        self.glance: dict[str, str] = {}
        self.ids: list[str] = []
        self.charts: list[str] = []
        self.chart_data: list[str] = []
        self.sections: dict[str, list[list[list[str]]]] = {}
        self._section: str | None = None
        self._table: list[list[str]] | None = None
        self._text: list[str] | None = None
        self._headline: str | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        if "id" in attr:
            self.ids.append(attr["id"])
        if tag == "section":
            self._section = attr["id"]
            self.sections[self._section] = []
        elif tag == "table" and self._section is not None:
            self._table = []
            self.sections[self._section].append(self._table)
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._text = []
        elif tag == "dd" and "data-headline" in attr:
            self._headline, self._text = attr["data-headline"], []
            self.headline[self._headline] = attr["data-exact"]
        elif tag == "div" and "chart" in attr.get("class", "").split():
            self.charts.append(attr["id"])
        elif tag == "script" and "data-chart" in attr:
            self.chart_data.append(attr["data-chart"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._section = None
        elif tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._table is not None and self._text is not None:
            self._table[-1].append("".join(self._text).strip())
            self._text = None
        elif tag == "dd" and self._headline is not None and self._text is not None:
            self.glance[self._headline] = "".join(self._text).strip()
            self._headline = self._text = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def table(self, section: str, *columns: str) -> list[dict[str, str]]:
        """The rows of the section's one table whose header starts with ``columns``."""
        found = [t for t in self.sections[section] if tuple(t[0][: len(columns)]) == columns]
        assert len(found) == 1, (section, columns, [t[0] for t in self.sections[section]])
        header, *rows = found[0]
        return [dict(zip(header, row, strict=True)) for row in rows]


def _write(root: Path, out: Path, **kwargs: Any) -> tuple[report.Report, Page]:
    written = report.write(Warehouse.open(root), out=out, **kwargs)
    return written, Page(written.html)


# --- Tests --------------------------------------------------------------------------------------


def _exact(headline: report.Headline) -> dict[str, str]:
    return {name: exact for name, _, exact in headline.items()}


def test_the_headline_is_what_sql_over_the_catalog_says(filled: Path, tmp_path: Path) -> None:
    written, page = _write(filled, tmp_path / "report.html")
    headline = _exact(written.headline)
    with catalog.connect(Warehouse.open(filled)) as con:
        expected = sql_headline(con, [ALPHA, BETA])
    assert headline == expected
    # The page marks the very same texts.
    assert page.headline == headline
    # The warehouse as `fill` made it, worked out by hand: not zeros that agree by chance.
    assert headline == {
        "accounts": "alpha, beta",
        "first_day": "2024-02-27",
        "last_day": "2024-03-01",
        # funding 5 + 3; investments 4 + 4 + 1, plans 2 + 2 + 1; main balances 2 + 2 + 1,
        # trading 1 + 2 + 1; hedge modes 1 + 1 (beta's rejected).
        "rows": "33",
        "funding_payments": "8",
        "funding_paid": "7.623456789012345688",
        "funding_received": "4.820987654432098766",
        "funding_net": "-2.802469134580246922",
        "rejected_records": "2",
        "active_investments": "3",
        "fills": "0",
        # Funding is the only collateral flow `fill` writes.
        "collateral_net": "-2.802469134580246922",
        # Alpha's two snapshots, D3 and D4, whose balances and investments moved with no record
        # telling why: USDT, BTC and ETH off.
        "intervals_checked": "1",
        "residuals": "3",
    }
    # Read at a glance, the amounts are rounded to cents; the exact text is in the tooltip.
    assert page.glance["funding_paid"] == "7.62"
    assert page.glance["funding_net"] == "-2.80"
    assert page.glance["rows"] == "33"


def test_headline_amounts_at_a_glance_and_exact() -> None:
    """A headline rounds for the eye (thousands separated, cents; 8 places below one) and keeps
    the exact text, 20 integer and 18 decimal digits included."""
    from decimal import Decimal

    from warehouse import display

    big = Decimal("12345678901234567890.123456789012345678")
    assert display.glance(big) == "12,345,678,901,234,567,890.12"
    assert display.text(big) == "12345678901234567890.123456789012345678"
    assert display.glance(Decimal("0.000000123456789")) == "0.00000012"
    assert display.glance(Decimal("-0.0000000001")) == "0"
    assert display.glance(Decimal("2067063.579465700473296687")) == "2,067,063.58"


def test_one_account_of_two(filled: Path, tmp_path: Path) -> None:
    written, page = _write(filled, tmp_path / "report.html", accounts=(ALPHA,))
    with catalog.connect(Warehouse.open(filled)) as con:
        expected = sql_headline(con, [ALPHA])
    assert _exact(written.headline) == expected
    assert written.headline.accounts == (ALPHA,)
    assert expected["funding_net"] == "1.697530865419753088"
    assert expected["rejected_records"] == "1"
    assert "account-alpha" in page.ids
    assert "account-beta" not in page.ids
    assert "summary" not in page.ids  # one account: no summary across accounts
    assert page.charts
    assert all(chart.startswith(f"{ALPHA}-") for chart in page.charts), page.charts


def test_several_accounts_have_a_summary_then_a_section_each(filled: Path, tmp_path: Path) -> None:
    """... and, the warehouse holding no prices, the summary's and each account's value,
    earnings and returns are one line saying so, with no chart and no zero."""
    written, page = _write(filled, tmp_path / "report.html", accounts=(BETA, ALPHA))
    sections = list(page.sections)
    assert sections == ["summary", "account-beta", "account-alpha"]
    assert written.html.count(f'<p class="note">{_value.NO_PRICES}</p>') == 3
    assert not [c for c in page.charts if c.endswith(("-value", "-earnings", "-returns"))]
    assert all(table[0][0] not in ("value_date", "snapshot_date", "month")
               for tables in page.sections.values() for table in tables)  # fmt: skip
    summary = page.table("summary", "account", "rows", "funding_payments")
    with catalog.connect(Warehouse.open(filled)) as con:
        for row in summary:
            expected = sql_headline(con, [row["account"]])
            assert row["net"] == expected["funding_net"], row
            assert row["funding_payments"] == expected["funding_payments"], row
    assert [row["account"] for row in summary] == [BETA, ALPHA]


def test_an_account_the_warehouse_does_not_hold_is_refused_naming_those_it_holds(
    filled: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    with pytest.raises(report.ReportError) as refused:
        report.write(Warehouse.open(filled), out=out, accounts=(ALPHA, "nobody"))
    message = str(refused.value)
    assert "'nobody'" in message
    assert "alpha, beta" in message.split("nobody", 1)[1]
    assert not out.exists()


def test_the_range_limits_funding_by_its_day_and_snapshots_by_theirs(
    filled: Path, tmp_path: Path
) -> None:
    written, page = _write(filled, tmp_path / "report.html", first=D2, last=D3)
    with catalog.connect(Warehouse.open(filled)) as con:
        expected = sql_headline(con, [ALPHA, BETA], D2, D3)
    assert _exact(written.headline) == expected
    assert page.headline == expected
    # D2 and D3: alpha's ETH_PERP both ways, beta's BTC_PERP and XRP_PERP; alpha's D3 snapshot.
    assert expected["funding_payments"] == "4"
    assert expected["funding_net"] == "-3.012345678901234569"
    assert expected["active_investments"] == "4"  # every one of alpha's, as on D3
    assert expected["rejected_records"] == "0"  # both rejects are of D4
    markets = page.table(f"account-{ALPHA}", "market", "payments", "paid", "received", "net")
    assert {row["market"]: row["net"] for row in markets} == {"ETH_PERP": "1.487654321098765432"}


def test_a_range_that_ends_before_it_starts_is_refused(filled: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    with pytest.raises(report.ReportError, match="before it starts"):
        report.write(Warehouse.open(filled), out=out, first=D3, last=D2)
    assert not out.exists()
    # A one-day range is a range.
    assert (
        report.write(Warehouse.open(filled), out=out, first=D3, last=D3).headline.funding_payments
        == 2
    )
    # A start after the last day held, with no end given, says which days are held.
    with pytest.raises(report.ReportError, match=f"holds these accounts' days {D1} .. "):
        report.write(Warehouse.open(filled), out=out, first=D4 + timedelta(days=30))


def test_the_tables_hold_each_markets_net_exactly(filled: Path, tmp_path: Path) -> None:
    _, page = _write(filled, tmp_path / "report.html")
    with catalog.connect(Warehouse.open(filled)) as con:
        for account in (ALPHA, BETA):
            nets = sql_market_nets(con, account)
            assert nets == MARKET_NETS[account]
            columns = ("market", "payments", "paid", "received", "net")
            shown = page.table(f"account-{account}", *columns)
            assert {row["market"]: row["net"] for row in shown} == nets


def test_rejected_records_are_counted(filled: Path, tmp_path: Path) -> None:
    with catalog.connect(Warehouse.open(filled)) as con:
        rejected = con.execute(
            'SELECT account, "table", "partition" FROM _rejects ORDER BY ALL'
        ).fetchall()
    assert rejected == [
        (ALPHA, "funding_history", D4.isoformat()),
        (BETA, "hedge_mode", D4.isoformat()),
    ]
    for accounts, count in (((ALPHA,), 1), ((BETA,), 1), ((ALPHA, BETA), 2)):
        written, page = _write(filled, tmp_path / "report.html", accounts=accounts)
        assert written.headline.rejected_records == count, accounts
        assert page.headline["rejected_records"] == str(count)
    # The header's table of accounts marks each account's rejects.
    assert '<td class="num warn">1</td>' in written.html


def test_an_empty_warehouse_says_so_and_draws_nothing(root: Path, tmp_path: Path) -> None:
    catalog.refresh(Warehouse.open(root))  # a warehouse made, nothing written to it yet
    written, page = _write(root, tmp_path / "report.html")
    assert 'id="empty"' in written.html
    assert "empty" in page.ids
    assert not CHART_DATA.search(written.html)
    assert page.charts == page.chart_data == []
    assert written.headline.rows == written.headline.funding_payments == 0
    assert written.headline.accounts == ()


def test_a_range_without_data_of_one_account_says_so(filled: Path, tmp_path: Path) -> None:
    before = (D1 - timedelta(days=10), D1 - timedelta(days=1))
    written, page = _write(
        filled, tmp_path / "report.html", accounts=(ALPHA,), first=before[0], last=before[1]
    )
    assert "empty" in page.ids
    assert not CHART_DATA.search(written.html)
    assert written.headline.rows == 0
    # The full range has charts: the page above is empty for its range, not by accident.
    _, full = _write(filled, tmp_path / "full.html", accounts=(ALPHA,))
    assert "empty" not in full.ids
    assert full.chart_data
    assert sorted(full.charts) == sorted(full.chart_data)


def test_a_range_without_data_of_two_accounts_draws_nothing(filled: Path, tmp_path: Path) -> None:
    before = (D1 - timedelta(days=10), D1 - timedelta(days=1))
    _, page = _write(filled, tmp_path / "report.html", first=before[0], last=before[1])
    assert "empty" in page.ids
    assert page.chart_data == []


def test_an_account_whose_every_record_was_rejected_has_its_rejects_counted(
    root: Path, tmp_path: Path
) -> None:
    wh = Warehouse.open(root)
    batch = normalize.normalize(spec.HEDGE, [], extracted_at=EXTRACTED_AT, day=D4)
    partitions.write_batch(wh, batch, account=BETA)
    catalog.refresh(wh)
    written, page = _write(root, tmp_path / "report.html")
    assert written.headline.accounts == (BETA,)
    assert written.headline.rejected_records == 1
    assert "empty" not in page.ids


def test_the_page_is_written_whole_to_the_path_returned(filled: Path, tmp_path: Path) -> None:
    out = tmp_path / "pages" / "report.html"
    out.parent.mkdir()
    out.write_text("an older page")
    written = report.write(Warehouse.open(filled), out=out)
    assert written.path == out
    assert out.read_text(encoding="utf-8") == written.html
    assert written.html.startswith("<!DOCTYPE html>")
    assert written.html.rstrip().endswith("</html>")
    # Nothing left beside it: no temp file of the atomic write.
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]
    # By default: report.html in the (local) root.
    before = {p.name for p in filled.iterdir()}
    default = report.write(Warehouse.open(filled))
    try:
        assert default.path == filled / report.REPORT_FILE
        assert default.path.read_text(encoding="utf-8") == default.html
        assert {p.name for p in filled.iterdir()} - before <= {report.REPORT_FILE}
    finally:
        (filled / report.REPORT_FILE).unlink()
