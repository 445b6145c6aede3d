"""Exact figures as the report holds them: sums of ``DECIMAL(38,18)`` amounts to the last digit,
and tables of rows as DuckDB returns them."""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import duckdb

ZERO: Final = Decimal(0)
#: Sums of DECIMAL(38,18) amounts: Python's default context holds 28 digits and would round
#: them; this one holds twice the digits any value of the warehouse has.
EXACT: Final = decimal.Context(prec=80)


def exact_sum(values: Iterable[Decimal | int]) -> Decimal:
    """The sum of exact amounts, to the last digit."""
    total = ZERO
    for value in values:
        total = EXACT.add(total, value)
    return total


Rows = list[tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class Table:
    """Exact rows, as DuckDB returns them (decimals as ``Decimal``)."""

    columns: tuple[str, ...]
    rows: Rows

    @classmethod
    def of(cls, result: duckdb.DuckDBPyConnection) -> Table:
        columns = tuple(d[0] for d in result.description or ())
        return cls(columns, result.fetchall())
