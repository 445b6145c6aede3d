"""The account report (`warehouse.report`) in a real browser: the page of the demo's warehouse
(the embedded simulator's main account and its sub-account, filled by ``whitebit-etl demo``)
opened from a file in headless Chromium (Debian's) through Playwright, offline: plotly.js
inflated from the page itself, every chart drawn, the headline what SQL over the catalog says."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from tests.ui.test_dagster_ui import CHROMIUM_FLAGS, MAIN, SUB, UI_TIMEOUT_MS
from tests.warehouse.test_report import sql_headline
from warehouse import Warehouse, catalog, report, sources
from warehouse.report import RunFacts

pytestmark = pytest.mark.browser

#: What a page that fetches nothing asks for: itself, and what its script makes in memory.
OFFLINE_SCHEMES = ("file:", "data:", "blob:")
#: Each chart's traces and, per trace, its points (x and y both there), once plotly drew it. A
#: trace's numbers may be a typed array in base64 (``{dtype, bdata}``, as plotly.py writes a
#: numpy array), which ``data`` keeps as given.
#: What a reader would find hard to read, as the page lays itself out: the page wider than the
#: window; a table wider than its column; two of the page's blocks over each other; in a chart,
#: a text cut at its edge, two texts of different kinds over each other (a subplot's title and a
#: tick label, two axes' labels, the legend and a label), a text or the legend over a plot, and
#: the plot toolbar (shown on hover) over a text.
LAYOUT = r"""() => {
  const box = (e) => e.getBoundingClientRect();
  const apart = (a, b) => a.right <= b.left + 1 || b.right <= a.left + 1 ||
    a.bottom <= b.top + 1 || b.bottom <= a.top + 1;
  const said = (e) => {
    const where = e.closest("[id]");
    const text = (e.textContent || "").trim().replace(/\s+/g, " ").slice(0, 40);
    return `${e.tagName.toLowerCase()} "${text}" in #${where ? where.id : "page"}`;
  };
  const found = [];
  const page = document.documentElement;
  if (page.scrollWidth > window.innerWidth) {
    found.push(`the page is ${page.scrollWidth}px wide in a ${window.innerWidth}px window`);
  }
  for (const table of document.querySelectorAll("table")) {
    const column = table.parentElement;
    if (table.scrollWidth > column.clientWidth + 1 || box(table).right > box(column).right + 1) {
      found.push(`${said(table)} is ${table.scrollWidth}px wide, its column ${column.clientWidth}`);
    }
  }
  // A table that scrolls in its box is seen as its box; what a closed <details> holds, not at all.
  const blocks = [...document.querySelectorAll(
    "h1, h2, h3, p, dl.headline > div, table, div.chart, div.exact")]
    .filter((e) => box(e).width > 0 && box(e).height > 0 && !e.closest("details:not([open])")
      && !(e.tagName === "TABLE" && e.parentElement.matches("div.exact")));
  for (let i = 0; i < blocks.length; i++) {
    for (let j = i + 1; j < blocks.length; j++) {
      const [a, b] = [blocks[i], blocks[j]];
      if (!a.contains(b) && !b.contains(a) && !apart(box(a), box(b))) {
        found.push(`${said(a)} overlaps ${said(b)}`);
      }
    }
  }
  for (const chart of document.querySelectorAll("div.chart")) {
    const frame = box(chart);
    const texts = [...chart.querySelectorAll("svg text")].filter(
      (t) => t.textContent.trim() && box(t).width > 0 && !t.closest(".hoverlayer"));
    const kind = (t) => t.closest("g.legend") || t.closest("[class*='axislayer']") || t;
    for (const t of texts) {
      const b = box(t);
      if (b.left < frame.left - 1 || b.right > frame.right + 1 || b.top < frame.top - 1 ||
          b.bottom > frame.bottom + 1) {
        found.push(`${said(t)} is cut at the chart's edge`);
      }
    }
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const [a, b] = [texts[i], texts[j]];
        if (kind(a) !== kind(b) && !apart(box(a), box(b))) {
          found.push(`${said(a)} overlaps ${said(b)}`);
        }
      }
    }
    const areas = [...chart.querySelectorAll("rect.nsewdrag")];
    const legend = chart.querySelector("g.legend rect.bg");
    const toolbar = chart.querySelector(".modebar");
    for (const area of areas) {
      for (const t of texts) {
        if (!apart(box(area), box(t))) found.push(`${said(t)} is over a plot`);
      }
      if (legend && !apart(box(area), box(legend))) found.push(`#${chart.id}: legend over a plot`);
    }
    if (toolbar) {
      for (const t of texts) {
        if (!apart(box(toolbar), box(t))) found.push(`#${chart.id}: the toolbar over ${said(t)}`);
      }
    }
  }
  return found;
}"""
PLOTTED = """(id) => {
  const div = document.getElementById(id);
  const typed = {i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array,
                 i4: Int32Array, u4: Uint32Array, f4: Float32Array, f8: Float64Array};
  const values = (v) => {
    if (v === undefined || v === null) return [];
    if (v.bdata === undefined) return Array.from(v);
    const bytes = Uint8Array.from(atob(v.bdata), (c) => c.charCodeAt(0));
    return Array.from(new typed[v.dtype](bytes.buffer));
  };
  const there = (v) => v !== null && v !== undefined && !Number.isNaN(v);
  return {
    plot: div.classList.contains("js-plotly-plot"),
    points: (div.data || []).map((trace) => {
      const xs = values(trace.x), ys = values(trace.y);
      return xs.filter((x, i) => there(x) && there(ys[i])).length;
    }),
  };
}"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse ``whitebit-etl demo`` filled (two accounts, every history, through Dagster:
    about 80 s on a quiet machine), run as a newcomer runs it: with no setting, in a directory
    whose ``./data`` is a real account's warehouse. The demo fills its own, ``./data-demo``, and
    says so; the real one is left as it was."""
    base = tmp_path_factory.mktemp("report-demo")
    sources.record(
        Warehouse.open(base / "data"), "default", sources.Source.address("https://whitebit.com")
    )
    real = {p: p.read_bytes() for p in (base / "data").rglob("*") if p.is_file()}
    gone = ("WHITEBIT_", "DAGSTER_", "WAREHOUSE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(gone)}
    done = subprocess.run(
        [sys.executable, "-m", "assets.cli", "demo"],
        cwd=base, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"into the demo's own warehouse at {base / 'data-demo'}" in " ".join(done.stdout.split())
    assert {p: p.read_bytes() for p in (base / "data").rglob("*") if p.is_file()} == real
    return base / "data-demo"


@pytest.fixture(scope="module")
def partial(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, datetime]:
    """The demo's page as written after a night whose run of the main account's funding failed
    (its end, as the Dagster instance would tell it): the page the layout is read from."""
    with catalog.connect(Warehouse.open(demo)) as con:
        (last_day,) = con.execute("SELECT max(funding_date) FROM funding_history").fetchone() or (
            None,
        )
    assert last_day is not None
    ended = datetime.combine(last_day, time(0, 47), UTC)
    facts = RunFacts(failed={MAIN: {"funding_history": ended}})
    out = tmp_path_factory.mktemp("partial") / "report.html"
    report.write(Warehouse.open(demo), out=out, facts=facts)
    return out, ended


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    assert executable, "Debian's chromium is needed: scripts/ensure-chromium installs it"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@dataclass
class Seen:
    """What the page did: its console's errors and warnings, its uncaught errors, every URL it
    requested."""

    complaints: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.complaints.append(f"{message.type}: {message.text}")


@pytest.fixture
def page(browser: Browser, tmp_path: Path) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    p = context.new_page()
    p.set_default_timeout(UI_TIMEOUT_MS)
    expect.set_options(timeout=UI_TIMEOUT_MS)
    yield p
    p.screenshot(path=str(tmp_path / "last.png"), full_page=True)
    context.close()


def _open(page: Page, path: Path) -> Seen:
    """The page of ``path``, opened from the file, once its script has drawn its charts (or
    failed to)."""
    seen = Seen()
    page.on("console", seen.console)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    page.on("request", lambda request: seen.requests.append(request.url))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-charts]", state="attached")
    drawn = page.evaluate("document.body.dataset.charts")
    assert drawn == "drawn", (drawn, seen.complaints, seen.errors)
    return seen


def _quiet_and_offline(seen: Seen, path: Path) -> None:
    assert seen.requests[0] == path.as_uri()
    assert [url for url in seen.requests if not url.startswith(OFFLINE_SCHEMES)] == []
    assert seen.complaints == []
    assert seen.errors == []


def test_the_demos_page_draws_every_chart_offline_with_the_headline_of_sql(
    page: Page, demo: Path, tmp_path: Path
) -> None:
    written = report.write(Warehouse.open(demo), out=tmp_path / "report.html")
    assert written.path is not None
    seen = _open(page, written.path)
    _quiet_and_offline(seen, written.path)

    charts = page.locator("div.chart").evaluate_all("(divs) => divs.map((d) => d.id)")
    data = page.locator("script[data-chart]").evaluate_all(
        "(scripts) => scripts.map((s) => s.dataset.chart)"
    )
    assert sorted(charts) == sorted(data)
    # The summary across the two accounts, then each account's own charts; the value, the
    # earnings and the returns of both and of their total, and the fees valued.
    worth = [f"{whose}-{name}" for whose in ("summary", MAIN, SUB)
             for name in ("value", "earnings", "returns")]  # fmt: skip
    for expected in ("summary-funding", f"{MAIN}-cumulative", f"{MAIN}-investments",
                     f"{SUB}-daily", f"{SUB}-balances", *worth, f"{MAIN}-fee-value"):  # fmt: skip
        assert expected in charts
    for chart in charts:
        plotted = page.evaluate(PLOTTED, chart)
        assert plotted["plot"], chart
        assert plotted["points"], chart  # at least one trace ...
        assert max(plotted["points"]) >= 1, (chart, plotted)  # ... with at least one point
    for section in ("summary", f"account-{MAIN}", f"account-{SUB}"):
        expect(page.locator(f"section#{section}")).to_be_visible()

    shown = page.locator("[data-headline]").evaluate_all(
        "(dds) => Object.fromEntries(dds.map((d) => [d.dataset.headline, d.dataset.exact]))"
    )
    with catalog.connect(Warehouse.open(demo)) as con:
        held = [
            a
            for (a,) in con.execute(
                "SELECT DISTINCT account FROM main_balances ORDER BY 1"
            ).fetchall()
        ]
        expected_headline = sql_headline(con, held)
    assert held == [MAIN, SUB]
    assert shown == expected_headline
    assert int(shown["funding_payments"]) > 0
    assert int(shown["active_investments"]) > 0
    # A figure shown rounded is marked so, and the page says how it rounds.
    rounded = page.locator("dd.rounded").evaluate_all(
        "(dds) => dds.map((d) => [d.dataset.headline, d.textContent.trim(), d.dataset.exact])"
    )
    assert {name for name, _, _ in rounded} >= {"funding_paid", "funding_net"}
    assert all(glance != exact for _, glance, exact in rounded)
    expect(page.locator("#rounding")).to_contain_text("rounded")


def test_the_page_of_an_empty_warehouse_says_so_quietly(page: Page, tmp_path: Path) -> None:
    # A warehouse whose catalog has no rows to show (a first night that wrote nothing).
    wh = Warehouse.open(tmp_path / "warehouse")
    catalog.refresh(wh)
    written = report.write(wh, out=tmp_path / "report.html")
    assert written.path is not None
    seen = _open(page, written.path)
    _quiet_and_offline(seen, written.path)
    expect(page.locator("#empty")).to_be_visible()
    expect(page.locator("#empty")).to_contain_text("no data")
    expect(page.locator("div.chart")).to_have_count(0)


def test_the_demos_page_reads_on_a_laptop_and_on_wide_screens(
    browser: Browser, partial: tuple[Path, datetime]
) -> None:
    """At 1280 and 1920 px, and on a laptop's 1366x768: nothing overlaps, nothing is cut, every
    table fits its column (the header's last successful night in view)."""
    path, _ = partial
    for width, height in ((1280, 800), (1366, 768), (1920, 1080)):
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        _open(page, path)
        assert page.evaluate(LAYOUT) == [], width
        night = page.locator("#accounts th", has_text="last successful night")
        assert night.evaluate("(th) => th.getBoundingClientRect().right") <= width
        context.close()


def test_a_part_read_from_a_table_whose_run_failed_is_marked_partial_naming_it(
    page: Page, partial: tuple[Path, datetime]
) -> None:
    """The main account's funding run failed: its funding, P&L (net without that funding),
    flows, earnings, returns and reconciliation are marked, naming funding_history and the run's
    end; its value, balances, investments and trading are not, nor is any part of the
    sub-account."""
    path, ended = partial
    _open(page, path)
    marks = """(section) => [...section.querySelectorAll("h3")].map((h) => [h.textContent,
      h.nextElementSibling.matches("p.partial") ? h.nextElementSibling.textContent : ""])"""
    main = dict(page.locator(f"section#account-{MAIN}").evaluate(marks))
    when = f"{ended:%Y-%m-%d %H:%M} UTC"
    marked = {title for title, said in main.items() if said}
    assert marked == {title for title in main if title.startswith(
        ("Funding", "P&L", "Flows", "Reconciliation", "Earnings", "Returns"))}, main  # fmt: skip
    # funding: three parts; P&L, flows, reconciliation, earnings and returns
    assert len(marked) == 8, main
    for title in marked:
        assert f"{MAIN}'s funding_history (ended {when}) failed" in main[title], main[title]
    assert not any(dict(page.locator(f"section#account-{SUB}").evaluate(marks)).values())
    summary = dict(page.locator("section#summary").evaluate(marks))
    assert [t for t, said in summary.items() if said] == [
        "Earnings by source per month, in USDT", "Returns per month, and chained",
        "Funding across accounts: received, paid, net",
    ]  # fmt: skip
    expect(page.locator("#partial")).to_contain_text(
        f"{MAIN}: the latest run of funding_history failed"
    )
    row = page.locator(f'#accounts tr[data-account="{MAIN}"]')
    expect(row).to_contain_text(f"funding_history ({when})")
    expect(page.locator(f'#accounts tr[data-account="{SUB}"]')).not_to_contain_text(
        "funding_history"
    )
