"""`make bench`: every figure measured side by side in one run, printed as one table.

Each section is a module with ``run() -> list[Figure]``; `bench.__main__` runs them in order,
prints the table and writes it as Markdown to ``docs/benchmarks.md``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured line: ours against what it is compared with, in the same unit."""

    section: str
    what: str
    ours: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """ours / baseline (higher is better for rates; the note says when lower is better)."""
        if self.baseline is None or self.baseline == 0:
            return None
        return self.ours / self.baseline
