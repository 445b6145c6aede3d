"""The report page of the backfill section's warehouse (1,052,100 funding rows): how long
``whitebit-etl report`` takes, whole command, and how much the page weighs, against the same page
with plotly.js inlined as it is (4.8 MB) instead of gzipped."""

from __future__ import annotations

import base64
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import plotly.offline

from bench import Figure

SECTION: Final = "backfill"
REPEATS: Final = 3
#: The issue's goals for the bench warehouse's page.
GOAL_S: Final = 10.0
GOAL_MB: Final = 5.0


def page(root: Path) -> list[Figure]:
    """The page of ``root`` (a warehouse the backfill filled), built by the command a user runs."""
    seconds = []
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "report.html"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WHITEBIT_", "DAGSTER_"))}
        env |= {"WAREHOUSE_ROOT": str(root), "DAGSTER_HOME": str(Path(scratch) / "dagster")}
        for _ in range(REPEATS):
            started = time.perf_counter()
            subprocess.run(  # noqa: S603 - our interpreter, our command, no shell
                [sys.executable, "-m", "assets.cli", "report", "--out", str(out)],
                env=env, check=True, capture_output=True,
            )  # fmt: skip
            seconds.append(time.perf_counter() - started)
        html = out.read_text(encoding="utf-8")
    size = len(html.encode())
    packed = html.split('<script id="plotly-js" type="application/gzip;base64">', 1)[1]
    packed = packed.split("</script>", 1)[0]
    assert base64.b64decode(packed)  # the script is where the page is measured as holding it
    plain = size - len(packed) + len(plotly.offline.get_plotlyjs().encode())
    built = statistics.median(seconds)
    return [
        Figure(SECTION, "report page of that warehouse: `whitebit-etl report`, whole command",
               built, "s", GOAL_S, "the goal", f"median of {REPEATS}; min {min(seconds):.2f} s, "
               f"max {max(seconds):.2f} s; lower is better"),
        Figure(SECTION, "  its weight, plotly.js gzipped on the page", size / 1e6, "MB",
               plain / 1e6, "plotly.js inlined as it is", f"goal under {GOAL_MB:.0f} MB; lower "
               "is better"),
    ]  # fmt: skip
