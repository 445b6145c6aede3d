"""``make screenshot``: the README's picture of the report (docs/report.png).

Runs the demo into a scratch warehouse, writes its report, and photographs the top of the page in
headless Chromium (Debian's, through Playwright) once its charts are drawn.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path(__file__).resolve().parent.parent / "docs" / "report.png"
WIDTH, HEIGHT = 1400, 2000


def main() -> int:
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Chromium is missing: `make browser` installs Debian's")
    with tempfile.TemporaryDirectory() as scratch:
        ours = ("WHITEBIT_", "DAGSTER_", "WAREHOUSE_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
        env |= {"WAREHOUSE_ROOT": scratch, "TZ": "UTC"}
        subprocess.run([sys.executable, "-m", "assets.cli", "demo"], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        page_file = Path(scratch) / "report.html"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.goto(page_file.as_uri())
            page.wait_for_selector('body[data-charts="drawn"]')
            page.screenshot(path=str(OUT))
            browser.close()
    print(f"written {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
