"""`make bench` rewrites only its own block of docs/benchmarks.md: the history below it stays."""

from __future__ import annotations

from bench import Figure
from bench.__main__ import BEGIN, BENCHMARKS, END, markdown, updated


def test_a_new_table_replaces_the_old_one_and_keeps_the_history() -> None:
    old = f"# Benchmarks\n\n{BEGIN}\nold table\n{END}\n\n## History\n\n- 2026-11-22: 3.4x dlt\n"
    block = markdown([Figure("client", "pages", 1234.0, "pages/s", 1000.0, "budget")], 12.0)

    new = updated(old, block)

    assert "old table" not in new
    assert "| client | pages | 1,234 pages/s | 1,000 pages/s | budget | 1.23x |  |" in new
    assert new.startswith("# Benchmarks\n\n" + BEGIN)
    assert new.endswith(f"{END}\n\n## History\n\n- 2026-11-22: 3.4x dlt\n")


def test_a_page_without_the_markers_gains_the_block_and_loses_nothing() -> None:
    block = markdown([], 1.0)
    new = updated("some notes\n", block)
    assert new == f"# Benchmarks\n\n{block}\n\nsome notes\n"
    assert updated(new, block) == new


def test_the_committed_page_has_its_markers() -> None:
    text = BENCHMARKS.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1
    assert text.count(END) == 1
    assert text.index(BEGIN) < text.index(END)
