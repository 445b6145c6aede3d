"""`make bench`: run every section side by side, print one table, write it to docs/benchmarks.md.

Only the block between the two markers is rewritten, so the file's history of figures, written
by hand below it, stays.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench import Figure

#: Sections in the order they run; each is a module of this package with ``run()``.
SECTIONS = ("backfill", "histories", "cpu", "s3", "accounts", "workers", "client", "warehouse")
#: The page the table is written to.
BENCHMARKS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def _number(value: float | None) -> str:
    if value is None:
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.3g}"


def _rows(figures: Sequence[Figure]) -> list[list[str]]:
    return [
        [
            f.section,
            f.what,
            f"{_number(f.ours)} {f.unit}",
            f"{_number(f.baseline)} {f.unit}" if f.baseline is not None else "",
            f.baseline_name,
            f"{f.ratio:.2f}x" if f.ratio is not None else "",
            f.note,
        ]
        for f in figures
    ]


BEGIN = "<!-- make bench writes from here -->"
END = "<!-- make bench writes up to here -->"
HEADER = ["section", "what", "ours", "compared with", "which is", "ratio", "note"]


def markdown(figures: Sequence[Figure], elapsed_s: float) -> str:
    """The last run's table, between the markers."""
    lines = [
        BEGIN,
        f"Measured by `make bench` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.machine()}, Python {platform.python_version()}, in {elapsed_s:.0f} s. "
        "Every figure of a row comes from the same run; ratios are ours / compared with.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in _rows(figures)
    ]
    return "\n".join([*lines, END])


def updated(text: str, block: str) -> str:
    """``text`` with its marked block replaced by ``block``; a text without one gains it."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not (begin and end):
        return f"# Benchmarks\n\n{block}\n\n{text}".rstrip() + "\n"
    return head + block + tail


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make bench", description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"some of {', '.join(SECTIONS)} (default: all)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; sections: {', '.join(SECTIONS)}")
    console = Console(width=None if sys.stdout.isatty() else 220)
    started = time.perf_counter()
    figures: list[Figure] = []
    for name in args.sections or SECTIONS:
        console.print(f"[bold]bench[/bold] {name} ...")
        section = importlib.import_module(f"bench.{name}")
        figures += section.run()
    elapsed = time.perf_counter() - started
    table = Table(*HEADER, title="whitebit-etl benchmarks (one run, side by side)")
    for row in _rows(figures):
        table.add_row(*row)
    console.print(table)
    if not args.no_write:
        BENCHMARKS.parent.mkdir(exist_ok=True)
        old = BENCHMARKS.read_text(encoding="utf-8") if BENCHMARKS.exists() else ""
        BENCHMARKS.write_text(updated(old, markdown(figures, elapsed)), encoding="utf-8")
        console.print(f"written to {BENCHMARKS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
