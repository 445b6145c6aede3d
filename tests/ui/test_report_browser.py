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
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from tests.ui.test_dagster_ui import CHROMIUM_FLAGS, MAIN, SUB, UI_TIMEOUT_MS
from tests.warehouse.test_report import sql_headline
from warehouse import Warehouse, catalog, report, sources

pytestmark = pytest.mark.browser

#: What a page that fetches nothing asks for: itself, and what its script makes in memory.
OFFLINE_SCHEMES = ("file:", "data:", "blob:")
#: Each chart's traces and, per trace, its points (x and y both there), once plotly drew it. A
#: trace's numbers may be a typed array in base64 (``{dtype, bdata}``, as plotly.py writes a
#: numpy array), which ``data`` keeps as given.
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
    # The summary across the two accounts, then each account's own charts.
    for expected in ("summary-funding", f"{MAIN}-cumulative", f"{MAIN}-investments",
                     f"{SUB}-daily", f"{SUB}-balances"):  # fmt: skip
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
